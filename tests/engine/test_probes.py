"""Per-block probes attached with forward hooks: the same values as the block's own arithmetic,
on our blocks and on timm's, leaving nothing attached afterwards."""

from __future__ import annotations

import pytest
import torch

from suite import store
from suite.config import LayerScaleConfig, ModelConfig, load_config
from suite.engine import train
from suite.engine.probes import probe, taps_for
from suite.models import build_model
from suite.models.residual import PreLNBlock, ReZeroBlock, SandwichBlock
from suite.models.timm_bridge import build_timm_vit, timm_to_suite


def model_cfg(residual: str, **ls) -> ModelConfig:
    return ModelConfig(residual=residual, img_size=16, patch_size=4, in_chans=3, num_classes=5, dim=24, depth=3,
                       heads=3, layerscale=LayerScaleConfig(**ls))


def _ratio(delta, stream):
    return (delta.float().norm() / stream.float().norm().clamp_min(1e-30)).item()


def by_hand(block, x):
    """attn_ratio, mlp_ratio, out_rms of one block in eval mode, from its update rule written out."""
    if isinstance(block, PreLNBlock):
        a = block.attn(block.norm1(x))
        r_attn, x1 = _ratio(block.ls1(a), x), x + block.ls1(a)
        m = block.mlp(block.norm2(x1))
        r_mlp, out = _ratio(block.ls2(m), x1), x1 + block.ls2(m)
    elif isinstance(block, ReZeroBlock):
        a = block.attn(x)
        r_attn, x1 = _ratio(block.alpha * a, x), x + block.alpha * a
        m = block.mlp(x1)
        r_mlp, out = _ratio(block.alpha * m, x1), x1 + block.alpha * m
    elif isinstance(block, SandwichBlock):
        a = block.post_norm1(block.attn(block.norm1(x)))
        r_attn, x1 = _ratio(a, x), x + a
        m = block.post_norm2(block.mlp(block.norm2(x1)))
        r_mlp, out = _ratio(m, x1), x1 + m
    else:  # post-LN and DeepNorm: the branch reads the stream as it is, the ratio is to it
        a = block.attn(x)
        r_attn, x1 = _ratio(a, x), block.norm1(x + a) if block.__class__.__name__ == "PostLNBlock" else \
            block.norm1(block.alpha * x + a)
        m = block.mlp(x1)
        r_mlp, out = _ratio(m, x1), block.norm2(x1 + m) if block.__class__.__name__ == "PostLNBlock" else \
            block.norm2(block.alpha * x1 + m)
    return r_attn, r_mlp, out.float().pow(2).mean().sqrt().item(), out


@pytest.mark.parametrize("residual,ls", [
    ("preln", {}), ("layerscale", {"init": 0.3}), ("layerscale", {"granularity": "head", "init": 0.3}),
    ("layerscale", {"placement": "mlp", "init": 1e-6}), ("postln", {}), ("rezero", {}), ("deepnorm", {}),
    ("sandwich", {}),
])
@torch.no_grad()
def test_hooks_record_what_the_block_computes(residual, ls):
    torch.manual_seed(0)
    model = build_model(model_cfg(residual, **ls)).eval()
    for b in model.blocks:  # ReZero starts at α = 0 (ratio 0): move it so the check has teeth
        if isinstance(b, ReZeroBlock):
            b.alpha.fill_(0.7)
    img = torch.randn(4, 3, 16, 16)
    records = probe(model, img)
    x = model.embed(img)
    for block, rec in zip(model.blocks, records):
        r_attn, r_mlp, rms, x = by_hand(block, x)
        assert (rec["attn_ratio"], rec["mlp_ratio"], rec["out_rms"]) == pytest.approx((r_attn, r_mlp, rms), rel=1e-6)
        assert rec["attn_ratio"] > 0 and rec["mlp_ratio"] > 0
    assert all(not b._forward_hooks and not b._forward_pre_hooks for b in model.modules())  # nothing left attached


@pytest.mark.parametrize("residual", ["preln", "layerscale"])
@torch.no_grad()
def test_timm_blocks_get_the_same_records_as_ours(residual):
    cfg = model_cfg(residual, init=0.2)
    torch.manual_seed(1)
    theirs = build_timm_vit(cfg)
    ours = build_model(cfg)
    ours.load_state_dict(timm_to_suite(theirs.state_dict()))
    assert taps_for(theirs.blocks[0]) == taps_for(ours.blocks[0])
    img = torch.randn(4, 3, 16, 16)
    for a, b in zip(probe(theirs, img), probe(ours, img)):
        assert a.keys() == b.keys()
        for key, value in a.items():
            assert value == (pytest.approx(b[key], rel=1e-5) if value is not None else None), key
    assert theirs.training  # the probe restores train mode


def test_a_timm_run_logs_block_probes(tmp_path):
    cfg = load_config(None, [
        "model.backend=timm", "model.residual=layerscale", "model.layerscale.init=0.1", "data.name=synthetic",
        "data.synthetic_train=64", "data.synthetic_test=32", "data.synthetic_img_size=16", "model.patch_size=4",
        "model.dim=24", "model.heads=3", "model.depth=2", "train.steps=4", "train.batch_size=16",
        "train.log_every=2", "train.eval_every=0", "device=cpu",
    ])
    assert train(cfg, tmp_path)["status"] in ("ok", "failed")
    logged = [m for m in store.read_metrics(tmp_path) if m["kind"] == "train"]
    assert [m["step"] for m in logged] == [0, 2, 4]
    for m in logged:
        for b in m["blocks"]:
            assert b["scale_mean"] is not None and b["attn_ratio"] > 0 and b["mlp_ratio"] > 0 and b["out_rms"] > 0


def test_a_compiled_run_logs_probes_at_every_log_step(tmp_path):
    """Dynamo does not guard module hooks: without forcing the probes' forward eager, a compiled
    block reuses a graph traced without them and the later records come back empty."""
    cfg = load_config(None, [
        "model.residual=layerscale", "data.name=synthetic", "data.synthetic_train=64", "data.synthetic_test=32",
        "data.synthetic_img_size=8", "model.patch_size=4", "model.dim=16", "model.heads=2", "model.depth=2",
        "train.steps=8", "train.batch_size=16", "train.log_every=2", "train.eval_every=4", "device=cpu",
        "train.compile=default",
    ])
    assert train(cfg, tmp_path)["error"] is None
    logged = [m for m in store.read_metrics(tmp_path) if m["kind"] == "train"]
    assert [m["step"] for m in logged] == [0, 2, 4, 6, 8]
    for m in logged:
        for b in m["blocks"]:
            assert None not in (b["attn_ratio"], b["mlp_ratio"], b["out_rms"]), (m["step"], b)
