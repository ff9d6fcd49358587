"""Why a run broke (issue 49): the instability diagnostics a run records at each log step, their peaks in
the summary, and which of them crossed their bounds, judged from recorded histories."""

import math

import torch

from suite.config import ModelConfig
from suite.engine.diagnostics import ATTN_LOGIT_BOUND, STREAM_RMS_BOUND, crossed, peaks
from suite.engine.probes import attention_stats, probe
from suite.models import build_model


def record(step, logit, entropy=2.0, rms=1.0, logit_rms=0.5, ratio=1e-3):
    return {"kind": "train", "step": step, "logit_rms": logit_rms, "update_ratio": ratio,
            "blocks": [{"block": 0, "attn_logit_max": logit / 2, "attn_entropy_min": entropy + 1, "out_rms": rms},
                       {"block": 1, "attn_logit_max": logit, "attn_entropy_min": entropy, "out_rms": rms / 2}]}


def test_peaks_are_each_diagnostics_extreme_and_the_first_step_it_was_reached():
    history = [record(0, 0.1), record(10, 5.0, entropy=0.5, rms=9.0), record(20, 250.0, logit_rms=7.0),
               record(30, 250.0, entropy=0.5, ratio=None), {"kind": "eval", "step": 30, "val_acc": 0.1},
               record(40, float("nan"))]
    found = peaks(history)
    assert (found["attn_logit_peak"], found["attn_logit_peak_step"]) == (250.0, 20)
    assert (found["attn_entropy_low"], found["attn_entropy_low_step"]) == (0.5, 10)
    assert (found["stream_rms_peak"], found["stream_rms_peak_step"]) == (9.0, 10)
    assert (found["logit_rms_peak"], found["logit_rms_peak_step"]) == (7.0, 20)
    assert found["update_ratio_peak"] == 1e-3 and crossed(found) == "attn_logit_peak"
    healthy = peaks([record(10, 3.0), record(20, 2.5)])
    assert healthy["attn_logit_peak"] == 3.0 and crossed(healthy) == ""
    assert crossed(peaks([record(10, ATTN_LOGIT_BOUND)])) == ""  # at the bound is not past it
    assert crossed(peaks([record(10, ATTN_LOGIT_BOUND + 1, rms=STREAM_RMS_BOUND + 1)])) == "stream_rms_peak,attn_logit_peak"
    assert peaks([])["attn_logit_peak"] is None and crossed(peaks([])) == ""


def test_stream_growth_is_each_blocks_output_rms_over_its_own_at_step_0_the_largest_kept():
    """Block 1's stream starts at half block 0's, so the same RMS later is twice the growth."""
    history = [record(0, 0.1, rms=2.0), record(10, 1.0, rms=4.0), record(20, 1.0, rms=3.0),
               {"kind": "train", "step": 30, "blocks": [{"out_rms": 2.0}, {"out_rms": 5.0}]},
               {"kind": "train", "step": 40, "blocks": [{"out_rms": float("nan")}, {"out_rms": None}]}]
    found = peaks(history)
    assert (found["stream_growth_peak"], found["stream_growth_peak_step"]) == (5.0, 30)  # 5.0 / (2.0 / 2)
    assert (found["stream_rms_peak"], found["stream_rms_peak_step"]) == (5.0, 30)
    assert peaks([record(0, 0.1)])["stream_growth_peak"] is None  # only the init: no growth yet
    assert peaks([record(0, 0.1, rms=0.0), record(10, 1.0)])["stream_growth_peak"] is None  # no size at init


def test_attention_stats_are_the_logits_and_entropy_of_the_module_computed_by_hand():
    torch.manual_seed(0)
    model = build_model(ModelConfig(depth=1, dim=16, heads=2, patch_size=7, img_size=28, in_chans=1, num_classes=10))
    attn = model.blocks[0].attn
    x = torch.randn(3, 5, 16) * 4
    logit_max, entropy_min = attention_stats(attn, x)
    q, k, _ = attn.qkv(x).reshape(3, 5, 3, 2, 8).permute(2, 0, 3, 1, 4)
    logits = q @ k.transpose(-2, -1) / math.sqrt(8)
    p = logits.softmax(-1)
    per_head = (-(p * p.log()).sum(-1)).mean(dim=(0, 2))
    assert torch.allclose(logit_max, logits.abs().max()) and torch.allclose(entropy_min, per_head.min())
    # the probe records them per block, and the model-level logits' RMS, without changing the output
    before = model(torch.randn(2, 1, 28, 28)).sum()
    level = {}
    records = probe(model, torch.randn(2, 1, 28, 28), model_level=level)
    assert records[0]["attn_logit_max"] > 0 and 0 < records[0]["attn_entropy_min"] <= math.log(17) + 1e-5
    assert level["logit_rms"] > 0 and torch.isfinite(before)
