"""Signal propagation (suite.engine.propagation, `suite propagate`, its analysis)."""

from __future__ import annotations

import dataclasses
import json
import math
import textwrap
from pathlib import Path

import pytest
import torch

from suite import store
from suite.analysis.analyze import analyze
from suite.results import AnalysisError
from suite.cli import main
from suite.config import load_config
from suite.engine.propagation import RECORDS, backward_records, cls_cosine, mean_cosine, propagate
from suite.models import build_model

TINY = ["data.name=synthetic", "data.synthetic_train=64", "data.synthetic_test=16", "data.synthetic_img_size=8",
        "data.synthetic_classes=4", "model.patch_size=4", "model.dim=16", "model.heads=2", "model.depth=3",
        "train.steps=2", "train.batch_size=8", "train.warmup_steps=0", "train.lr=1e-3", "device=cpu"]


def tiny(*more: str):
    """TINY with ``more`` overriding its keys (a key may be given once on a command line)."""
    return load_config(None, [f"{k}={v}" for k, v in dict(o.split("=", 1) for o in TINY + list(more)).items()])


def records(folder: Path, kind: str) -> list[dict]:
    return [r for r in store.read_metrics(folder, RECORDS) if r["kind"] == kind]


def test_cls_cosine_is_one_for_identical_images_and_zero_for_orthogonal_ones():
    same = torch.ones(4, 5, 3)
    assert cls_cosine(same) == pytest.approx(1.0)
    eye = torch.zeros(3, 2, 3)
    eye[:, 0] = torch.eye(3)
    assert cls_cosine(eye) == pytest.approx(0.0)
    assert math.isnan(cls_cosine(torch.ones(1, 2, 3)))
    # Same class token, different patches: the class tokens agree, the token averages do not.
    tokens = torch.zeros(2, 3, 2)
    tokens[:, 0] = 1.0
    tokens[0, 1:, 0], tokens[1, 1:, 1] = 5.0, 5.0
    assert cls_cosine(tokens) == pytest.approx(1.0) and mean_cosine(tokens) < 0.5


def test_a_run_writes_block_records_and_scalar_summaries(tmp_path):
    s = propagate(tiny("model.residual=preln"), tmp_path)
    assert (s["kind"], s["status"], s["steps_done"]) == ("propagation", "ok", 2)
    fwd, bwd, steps = records(tmp_path, "forward"), records(tmp_path, "backward"), records(tmp_path, "step")
    assert [r["block"] for r in fwd] == [0, 1, 2] == [r["block"] for r in bwd] and [r["step"] for r in steps] == [1, 2]
    assert s["stream_growth"] == pytest.approx(fwd[-1]["stream_rms"] / fwd[0]["stream_rms"])
    assert s["grad_ratio"] == pytest.approx(bwd[0]["grad_stream"] / bwd[-1]["grad_stream"])
    assert s["cls_cos_last"] == fwd[-1]["cls_cos"] and -1 <= s["cls_cos_last"] <= 1
    assert s["rank_collapse"] == fwd[-1]["mean_cos"] and -1 <= s["rank_collapse"] <= 1
    assert len(steps[0]["update_ratio"]) == 3 and s["update_ratio_max"] == max(max(r["update_ratio"]) for r in steps)
    assert json.loads((tmp_path / "summary.json").read_text())["run_id"] == s["run_id"]


def test_gradient_norms_match_autograd_written_out(tmp_path):
    cfg = tiny("model.residual=layerscale")
    cfg.model.img_size, cfg.model.in_chans, cfg.model.num_classes = 8, 3, 4
    torch.manual_seed(0)
    model = build_model(cfg.model)
    x, y = torch.randn(8, 3, 8, 8), torch.randint(0, 4, (8,))
    got, _ = backward_records(model, x, y)
    outs = []

    def keep(module, args, out):  # returns None: the output is left as it is
        out.retain_grad()
        outs.append(out)

    handles = [b.register_forward_hook(keep) for b in model.blocks]
    model.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    for h in handles:
        h.remove()
    for rec, out, block in zip(got, outs, model.blocks):
        assert rec["grad_stream"] == pytest.approx(float(out.grad.norm()), rel=1e-5)
        assert block.ls1.gamma.grad is not None and block.ls2.gamma.grad is not None  # γ counts for its block
        norm = math.sqrt(sum(float(p.grad.pow(2).sum()) for p in block.parameters()))
        assert rec["grad_params"] == pytest.approx(norm, rel=1e-5)


def test_layerscale_at_zero_starts_as_the_identity_and_lr_zero_moves_nothing(tmp_path):
    s = propagate(tiny("model.residual=layerscale", "model.layerscale.init=0.0", "train.lr=0.0", "train.min_lr=0.0"),
                  tmp_path)
    fwd = records(tmp_path, "forward")
    assert {r["stream_rms"] for r in fwd} == {fwd[0]["stream_rms"]}  # every block adds exactly nothing
    assert all(r["attn_ratio"] == 0 and r["mlp_ratio"] == 0 for r in fwd)
    assert s["stream_growth"] == 1.0 and s["update_ratio_max"] == 0.0 and s["logit_change_last"] == 0.0


def test_propagation_is_measured_in_fp32_everywhere(tmp_path):
    s = propagate(tiny(), tmp_path / "auto")
    assert s["train.precision"] == "fp32" and s["status"] == "ok"
    s = propagate(tiny("train.precision=bf16"), tmp_path / "bf16")
    assert s["status"] == "error" and "measured in fp32" in s["error"]


def test_a_propagation_run_that_fails_is_an_error_run_like_a_training_run(tmp_path):
    """One lifecycle (RunFolder): the message in the summary, the traceback in log.txt, the schema kept."""
    cfg = tiny()  # 8 px images are not divisible into 3 px patches: validation refuses it, so set it after
    s = propagate(dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, patch_size=3)), tmp_path)
    assert s["status"] == "error" and "divisible" in s["error"] and s["kind"] == "propagation"
    assert json.loads((tmp_path / "summary.json").read_text()) == json.loads(json.dumps(s))
    assert "Traceback" in (tmp_path / "log.txt").read_text()


def test_suite_propagate_sweeps_and_analyze_draws_it(tmp_path, capsys):
    ablation = tmp_path / "p.yaml"
    ablation.write_text(textwrap.dedent("""
        name: p
        base:
          data: {name: synthetic, synthetic_train: 64, synthetic_test: 16, synthetic_img_size: 8, synthetic_classes: 4}
          model: {patch_size: 4, dim: 16, heads: 2}
          train: {steps: 2, batch_size: 8, warmup_steps: 0}
        grid: {model.depth: [2, 4]}
        variants: {preln: {model.residual: preln}, layerscale: {model.residual: layerscale}}
        seeds: 2
    """))
    out = tmp_path / "out"
    assert main(["propagate", str(ablation), "--out", str(out), "--workers", "2", "--device", "cpu"]) == 0
    assert "8 runs: 8 ok" in capsys.readouterr().out
    summaries = [json.loads(p.read_text()) for p in out.glob("runs/*/summary.json")]
    assert len(summaries) == 8 and {s["kind"] for s in summaries} == {"propagation"}
    frame = analyze(out)
    assert set(frame["variant"]) == {"preln", "layerscale"} and (frame["n"] == 2).all()
    md = (out / "tables" / "propagation.md").read_text()
    assert "### stream_growth" in md and "### rank_collapse" in md
    names = {p.name for p in (out / "figures").iterdir()}
    assert {"stream_rms_vs_block.png", "grad_norm_vs_block.png", "rank_collapse_vs_depth.png"} <= names
    # The same folder is not a training sweep's: `suite run` refuses it in one line.
    assert main(["run", str(ablation), "--out", str(out), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds propagation runs" in err
    # Nor are training and propagation runs analysed together.
    train_run = out / "runs" / "trained"
    train_run.mkdir()
    (train_run / "summary.json").write_text(json.dumps({**summaries[0], "kind": None, "run_id": "trained"}))
    with pytest.raises(AnalysisError, match="mixes `suite propagate` runs with training runs"):
        analyze(out, figures=False)


def test_the_steps_use_the_runs_label_smoothing_and_gradient_clipping(tmp_path):
    """Both were recorded in the summary and ignored: the records were the same with and without them."""
    plain = records(propagate(tiny(), tmp_path / "plain") and tmp_path / "plain", "step")
    smooth = records(propagate(tiny("train.label_smoothing=0.5"), tmp_path / "smooth") and tmp_path / "smooth", "step")
    clipped = records(propagate(tiny("train.grad_clip=1e-4"), tmp_path / "clip") and tmp_path / "clip", "step")
    assert plain[0]["loss"] != smooth[0]["loss"]
    assert max(clipped[0]["update_ratio"]) < max(plain[0]["update_ratio"])  # the first AdamW step is sign-like
    assert plain[1]["update_ratio"] != clipped[1]["update_ratio"]


def test_drop_path_and_low_precision_are_refused_before_any_run_starts(tmp_path, capsys):
    """Drop-path made the steps and the backward records of another network than the forward records (eval mode),
    at random; bf16 was refused inside each run, which all ended in error (exit 1)."""
    ablation = tmp_path / "p.yaml"
    for model, train in (("drop_path: 0.1", ""), ("", "precision: bf16")):
        ablation.write_text(textwrap.dedent(f"""
            name: p
            base:
              data: {{name: synthetic, synthetic_train: 64, synthetic_test: 16, synthetic_img_size: 8}}
              model: {{patch_size: 4, dim: 16, heads: 2, {model}}}
              train: {{batch_size: 8, {train}}}
            grid: {{model.depth: [2]}}
            variants: {{preln: {{model.residual: preln}}}}
            seeds: 1
        """))
        assert main(["propagate", str(ablation), "--out", str(tmp_path / "out"), "--device", "cpu"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and ("model.drop_path 0.1: propagation measures" in err or "measured in fp32" in err)
        assert not (tmp_path / "out").exists()


def test_a_gradient_that_vanished_to_zero_counts_in_the_mean_instead_of_dropping_out():
    from suite.analysis.propagation import FP32_LEAST, summary_frame
    from suite.engine.propagation import summarize

    forward = [{"stream_rms": 1.0, "cls_cos": 0.5, "mean_cos": 0.5}] * 2
    s = summarize(forward, [{"grad_stream": 0.0}, {"grad_stream": 0.5}], [])
    assert s["grad_ratio"] == 0.0  # it was None, as if not measured
    runs = [{"variant": "postln", "model.depth": 12, "status": "ok", "grad_ratio": r} for r in (0.0, 1.0, 1.0)]
    row = summary_frame(runs, ["variant", "model.depth"], "postln").iloc[0]
    assert row["n"] == 3 and row["grad_ratio_mean"] == pytest.approx(FP32_LEAST ** (1 / 3))
