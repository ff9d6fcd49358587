"""Depth-scaled residuals (Depth-muP, CompleteP) against the formulas in docs/schemes.md, and QK-norm."""

from __future__ import annotations

import math

import pytest
import torch

from suite.config import ConfigError, ModelConfig, RunConfig, TrainConfig, load_config
from suite.engine.optim import ADAM_EPS, build_optimizer, set_lr
from suite.models import build_model
from suite.models.depth_scaled import BranchMultiplier


def cfg(residual: str, depth: int, base_depth: int = 12, **kw) -> ModelConfig:
    shape = dict(img_size=16, patch_size=4, in_chans=3, num_classes=5, dim=16, heads=2, mlp_ratio=1.0)
    return ModelConfig(residual=residual, depth=depth, base_depth=base_depth, **{**shape, **kw})


# (scheme, alpha) -> the published settings; depth_scaled takes model.depth_alpha
@pytest.mark.parametrize("residual,depth_alpha,alpha", [
    ("depth-mup", 0.25, 0.5), ("completep", 0.25, 1.0), ("depth_scaled", 0.25, 0.25), ("depth_scaled", 0.75, 0.75),
])
@pytest.mark.parametrize("depth,base", [(48, 12), (12, 12), (6, 24)])
def test_multiplier_lr_and_eps_follow_the_table(residual, depth_alpha, alpha, depth, base):
    m = cfg(residual, depth, base, depth_alpha=depth_alpha)
    model = build_model(m)
    m_l = depth / base
    for block in model.blocks:  # both branches of every block: m_L^-alpha
        assert isinstance(block.ls1, BranchMultiplier) and isinstance(block.ls2, BranchMultiplier)
        assert block.ls1.value == pytest.approx(m_l ** -alpha) and block.ls2.value == pytest.approx(m_l ** -alpha)
    opt = build_optimizer(model, TrainConfig(lr=1e-3, weight_decay=0.05), m)
    set_lr(opt, 1e-3)
    by_param = {id(p): g for g in opt.param_groups for p in g["params"]}
    for name, p in model.named_parameters():
        g = by_param[id(p)]
        hidden = name.startswith("blocks.")
        assert g["lr"] == pytest.approx(1e-3 * (m_l ** (alpha - 1) if hidden else 1.0)), name
        assert g["eps"] == pytest.approx(ADAM_EPS * m_l ** -alpha), name
        assert g["weight_decay"] == (0.05 if p.ndim >= 2 and name not in ("pos_embed", "cls_token") else 0.0), name


def test_depth_scaled_block_computes_the_branch_times_the_multiplier():
    torch.manual_seed(0)
    model = build_model(cfg("completep", 24))
    block = model.blocks[3]
    x = torch.randn(2, 5, 16)
    a = x + 0.5 * block.attn(block.norm1(x))  # m_L = 2, alpha 1
    expected = a + 0.5 * block.mlp(block.norm2(a))
    assert torch.allclose(block(x), expected, atol=1e-6)


def test_other_schemes_keep_one_lr_and_torchs_eps():
    m = cfg("layerscale", 48)
    opt = build_optimizer(build_model(m), TrainConfig(lr=2e-3), m)
    set_lr(opt, 2e-3)
    assert {g["lr"] for g in opt.param_groups} == {2e-3}
    assert {g["eps"] for g in opt.param_groups} == {ADAM_EPS}
    assert [g["weight_decay"] for g in opt.param_groups] == [0.05, 0.0]  # decay group first, as before


@pytest.mark.parametrize("residual", ["depth-mup", "completep"])
def test_depth_192_trains_on_cpu(residual):
    """Smoke: a few AdamW steps at depth 192 stay finite and lower the loss on a fixed batch."""
    torch.manual_seed(0)
    m = cfg(residual, 192, dim=8, heads=1)
    model = build_model(m)
    tc = TrainConfig(lr=3e-3)
    opt = build_optimizer(model, tc, m)
    set_lr(opt, tc.lr)
    x, y = torch.randn(8, 3, 16, 16), torch.arange(8) % 5
    losses = []
    for _ in range(8):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < losses[0]


def test_rsqrt_depth_init_is_depth_to_the_minus_half_and_freezes():
    c = load_config(None, ["model.residual=layerscale", "model.depth=49", "model.layerscale.init=rsqrt_depth",
                           "model.layerscale.learnable=false"])
    c.model.img_size, c.model.in_chans, c.model.num_classes = 28, 1, 10
    frozen = build_model(c.model)
    g = frozen.blocks[5].ls2.gamma
    assert torch.equal(g, torch.full_like(g, 1 / 7)) and not g.requires_grad


@pytest.mark.parametrize("override,key", [
    ("model.depth_alpha=1.5", "model.depth_alpha"), ("model.base_depth=0", "model.base_depth"),
    ("model.backend=timm model.residual=completep", "model.residual"),
])
def test_bad_values_are_refused_naming_the_key(override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(None, override.split())


def test_qk_norm_equals_timms_block_step_for_step():
    """Our ViT with qk_norm against timm's with qk_norm=True: same weights, same logits, and the same
    weights after three AdamW steps on the same batches."""
    from suite.models.timm_bridge import build_timm_vit, timm_to_suite

    m = ModelConfig(residual="layerscale", img_size=32, patch_size=8, in_chans=3, num_classes=10, dim=48, depth=3,
                    heads=3, qk_norm=True)
    m.layerscale.init = 0.3
    torch.manual_seed(1)
    theirs = build_timm_vit(m)
    with torch.no_grad():  # make the norms' affine parameters non-trivial, so a mix-up would show
        for name, p in theirs.named_parameters():
            if "q_norm" in name or "k_norm" in name:
                p.uniform_(0.5, 1.5)
    ours = build_model(m)
    ours.load_state_dict(timm_to_suite(theirs.state_dict()), strict=True)
    tc = TrainConfig(lr=1e-3)
    opts = [build_optimizer(model, tc, m) for model in (ours, theirs)]
    for o in opts:
        set_lr(o, tc.lr)
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        x, y = torch.randn(4, 3, 32, 32, generator=gen), torch.randint(0, 10, (4,), generator=gen)
        outs = []
        for model, opt in zip((ours, theirs), opts):
            out = model(x)
            loss = torch.nn.functional.cross_entropy(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            outs.append(out.detach())
        assert torch.allclose(outs[0], outs[1], atol=1e-5)
    mine, ref = ours.state_dict(), theirs.state_dict()
    for k in ref:
        assert torch.allclose(mine[k], ref[k], atol=1e-5), k
    assert "blocks.0.attn.q_norm.weight" in mine


def test_the_run_config_carries_the_new_keys_with_visible_defaults():
    m = RunConfig().model
    assert (m.qk_norm, m.depth_alpha, m.base_depth) == (False, 0.5, 12)
