"""The ViT and every residual scheme: shapes, finiteness, parameter counts, identity at init."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from suite.config import LayerScaleConfig, ModelConfig
from suite.models import build_model, count_params
from suite.models.layerscale import HeadScale, LayerScale, cait_init
from suite.models.residual import DeepNormBlock, build_block
from suite.registry import SCHEMES

DIM, HEADS, DEPTH, MLP = 32, 4, 3, 2.0


def small(residual: str = "preln", **kw) -> ModelConfig:
    base = dict(residual=residual, img_size=16, patch_size=4, in_chans=3, num_classes=7,
                dim=DIM, depth=DEPTH, heads=HEADS, mlp_ratio=MLP)
    base.update(kw)
    return ModelConfig(**base)


def block_params(dim: int = DIM, hidden: int = int(DIM * MLP)) -> int:
    """Attention + MLP weights of one block, without norms or scales."""
    attn = dim * 3 * dim + 3 * dim + dim * dim + dim
    mlp = dim * hidden + hidden + hidden * dim + dim
    return attn + mlp


LN = 2 * DIM  # one LayerNorm's weight + bias
# Expected parameters per block, by scheme: counted by hand from the definitions.
PER_BLOCK = {
    "preln": block_params() + 2 * LN,
    "postln": block_params() + 2 * LN,
    "layerscale": block_params() + 2 * LN + 2 * DIM,
    "layerscale-depth": block_params() + 2 * LN + 2 * DIM,  # layerscale; only gamma's learning rate differs
    "rezero": block_params() + 1,
    "deepnorm": block_params() + 2 * LN,
    "sandwich": block_params() + 4 * LN,
    "depth_scaled": block_params() + 2 * LN,  # a fixed multiplier: no parameter
    "depth-mup": block_params() + 2 * LN,
    "completep": block_params() + 2 * LN,
}


def test_registry_lists_every_scheme():
    assert SCHEMES.names() == sorted(PER_BLOCK)


def test_unknown_scheme_lists_valid_names():
    with pytest.raises(ValueError, match="valid: completep, deepnorm, depth-mup, depth_scaled, layerscale, layerscale-depth, postln"):
        build_block(small("layerscal"), 0.0)


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_forward_backward_shapes_finite_and_param_count(scheme):
    torch.manual_seed(0)
    model = build_model(small(scheme))
    x = torch.randn(5, 3, 16, 16)
    logits = model(x)
    assert logits.shape == (5, 7)
    assert torch.isfinite(logits).all()
    logits.logsumexp(-1).mean().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    embed = 3 * DIM * 16 + DIM + DIM + 17 * DIM  # patch conv, cls token, pos embed (16 patches + cls)
    head = LN + DIM * 7 + 7
    assert count_params(model) == embed + DEPTH * PER_BLOCK[scheme] + head


# head: one scale per head and a channel scale on the MLP branch, less the output projection's bias
@pytest.mark.parametrize("granularity,expected", [("channel", 2 * DIM), ("scalar", 2), ("head", HEADS + DIM - DIM)])
def test_layerscale_granularity_param_counts(granularity, expected):
    cfg = small("layerscale", layerscale=LayerScaleConfig(granularity=granularity, init=0.5))
    base = count_params(build_model(small("preln")))
    assert count_params(build_model(cfg)) - base == DEPTH * expected


def test_zero_head_scales_add_exactly_nothing_at_every_step():
    """With per-head scales frozen at 0 the attention branch adds 0 after training too, not a learnt bias."""
    torch.manual_seed(0)
    cfg = small("layerscale", layerscale=LayerScaleConfig(granularity="head", init=0.0, learnable=False))
    model = build_model(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 7, (4,))
    for _ in range(3):
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    tokens = model.embed(x)
    for block in model.blocks:
        assert torch.equal(block.attn(block.norm1(tokens)), torch.zeros_like(tokens))
        tokens = block(tokens)


@pytest.mark.parametrize("placement,attn,mlp", [("attn", True, False), ("mlp", False, True), ("both", True, True)])
def test_layerscale_placement(placement, attn, mlp):
    model = build_model(small("layerscale", layerscale=LayerScaleConfig(placement=placement, init=0.5)))
    blk = model.blocks[0]
    assert isinstance(blk.ls1, LayerScale) is attn
    assert isinstance(blk.ls2, LayerScale) is mlp
    assert isinstance(blk.ls1 if attn else blk.ls2, (LayerScale,))


def test_frozen_layerscale_is_a_buffer_with_no_grad():
    model = build_model(small("layerscale", layerscale=LayerScaleConfig(learnable=False, init=0.3)))
    names = [n for n, _ in model.named_parameters()]
    assert not any("gamma" in n for n in names)
    assert torch.equal(model.blocks[1].ls2.gamma, torch.full((DIM,), 0.3))


def _block_identity(scheme: str, ls: LayerScaleConfig) -> None:
    torch.manual_seed(0)
    model = build_model(small(scheme, layerscale=ls))
    x = model.embed(torch.randn(4, 3, 16, 16))
    for block in model.blocks:
        out = block(x)
        assert torch.equal(out, x)  # exactly, not approximately
        x = out


@pytest.mark.parametrize("granularity", ["channel", "scalar", "head"])
def test_layerscale_init_zero_is_exact_identity(granularity):
    _block_identity("layerscale", LayerScaleConfig(init=0.0, granularity=granularity))


def test_rezero_is_exact_identity_at_init():
    _block_identity("rezero", LayerScaleConfig())


def test_preln_is_not_identity():
    """Guards the identity tests: without a zero scale, blocks do change their input."""
    model = build_model(small("preln"))
    x = model.embed(torch.randn(4, 3, 16, 16))
    assert not torch.equal(model.blocks[0](x), x)


def test_init_zero_differs_from_off():
    """init 0 is LayerScale with zero scales (parameters exist, learn); 'off' is preln."""
    ls0 = build_model(small("layerscale", layerscale=LayerScaleConfig(init=0.0)))
    off = build_model(small("preln"))
    assert count_params(ls0) > count_params(off)
    assert ls0.blocks[0].ls1.gamma.requires_grad and "blocks.0.ls1.gamma" in dict(ls0.named_parameters())


def test_layerscale_is_a_diagonal_on_the_channels_and_headscale_on_the_heads():
    torch.manual_seed(0)
    ls, hs = LayerScale(4, 0.1), HeadScale(2, 0.1)
    with torch.no_grad():
        ls.gamma.copy_(torch.tensor([1.0, 2.0, 3.0, 4.0]))
        hs.gamma.copy_(torch.tensor([2.0, -1.0]))
    x = torch.randn(2, 3, 4)
    torch.testing.assert_close(ls(x), torch.stack([x[..., c] * (c + 1) for c in range(4)], dim=-1))
    h = torch.randn(2, 2, 3, 5)  # (B, H, N, hd)
    torch.testing.assert_close(hs(h), torch.stack([2.0 * h[:, 0], -1.0 * h[:, 1]], dim=1))
    assert LayerScale(4, 0.5, scalar=True).gamma.shape == (1,)


def test_layerscale_gamma_is_an_ordinary_parameter_of_its_block_or_a_buffer_when_frozen():
    model = build_model(small("layerscale", layerscale=LayerScaleConfig(init=0.25)))
    state = model.state_dict()
    assert torch.equal(state["blocks.2.ls2.gamma"], torch.full((DIM,), 0.25))
    assert "blocks.2.ls2.gamma" in dict(model.blocks[2].named_parameters(prefix="blocks.2"))
    frozen = build_model(small("layerscale", layerscale=LayerScaleConfig(learnable=False)))
    assert not any(n.endswith("gamma") for n, _ in frozen.named_parameters())
    assert "blocks.0.ls1.gamma" in frozen.state_dict()  # a buffer: saved, never trained
    ls = model.blocks[0].ls1
    with torch.no_grad():
        ls.gamma.fill_(3.0)
    ls.reset_parameters()
    assert torch.equal(ls.gamma, torch.full((DIM,), 0.25))  # the configured init, not 1 (timm's old bug)


def test_a_copied_or_pickled_model_keeps_its_own_gamma():
    import pickle

    model = build_model(small("layerscale"))
    twin, unpickled = copy.deepcopy(model), pickle.loads(pickle.dumps(model))
    with torch.no_grad():
        model.blocks[0].ls1.gamma.fill_(7.0)
    for other in (twin, unpickled):
        assert other.blocks[0].ls1.gamma.data_ptr() != model.blocks[0].ls1.gamma.data_ptr()
        assert torch.equal(other.blocks[0].ls1.gamma, torch.full((DIM,), cait_init(DEPTH)))
    x = torch.randn(2, 3, 16, 16)
    torch.testing.assert_close(twin.double()(x.double()).float(), unpickled(x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("depth,eps", [(12, 0.1), (18, 0.1), (19, 1e-5), (24, 1e-5), (25, 1e-6), (36, 1e-6)])
def test_cait_rule(depth, eps):
    assert cait_init(depth) == eps


@pytest.mark.parametrize("depth,eps", [(12, 0.1), (24, 1e-5), (36, 1e-6)])
def test_scales_at_step0_equal_configured_init(depth, eps):
    """Guards the re-init bug class (timm once reset gamma to 1 in reset_parameters)."""
    model = build_model(small("layerscale", depth=depth, layerscale=LayerScaleConfig(init="cait")))
    for block in model.blocks:
        for gamma in block.scales():
            assert torch.equal(gamma.detach(), torch.full_like(gamma, eps))
    model.init_weights()  # a later re-init must not reset them either
    assert torch.equal(model.blocks[-1].ls2.gamma.detach(), torch.full((DIM,), eps))


def test_head_scale_has_one_param_per_head_and_scales_heads_independently():
    cfg = small("layerscale", layerscale=LayerScaleConfig(granularity="head", placement="attn", init=1.0))
    model = build_model(cfg)
    attn = model.blocks[0].attn
    assert isinstance(attn.head_scale, HeadScale) and attn.head_scale.gamma.shape == (HEADS,)
    x = torch.randn(2, 5, DIM)
    # Zero head 1's scale: only the input columns of proj that belong to head 1 should stop mattering.
    with torch.no_grad():
        attn.head_scale.gamma.copy_(torch.tensor([1.0, 0.0, 1.0, 1.0]))
        out = attn(x)
        hd = DIM // HEADS
        proj_w = attn.proj.weight.clone()
        attn.proj.weight[:, hd:2 * hd] = 0  # remove head 1 by hand
        attn.head_scale.gamma.fill_(1.0)
        by_hand = attn(x)
        attn.proj.weight.copy_(proj_w)
        full = attn(x)
    assert torch.allclose(out, by_hand, atol=1e-6)
    assert not torch.allclose(out, full, atol=1e-4)


def test_deepnorm_alpha_beta_and_xavier_init():
    """DeepNet's init: Xavier-normal q, k (gain 1) and v, out, fc1, fc2 (gain β), not timm's std 0.02 x β."""
    depth = 8
    torch.manual_seed(0)
    dn = build_model(small("deepnorm", depth=depth))
    beta = (8 * depth) ** -0.25
    blk = dn.blocks[0]
    assert blk.alpha == pytest.approx((2 * depth) ** 0.25) and blk.beta == pytest.approx(beta)

    def pooled_std(pick) -> float:  # over all blocks: 8 x the entries, a tight estimate
        return torch.cat([pick(b).flatten() for b in dn.blocks]).std().item()

    hidden = int(DIM * MLP)
    expected = {  # Xavier: gain * sqrt(2 / (fan_in + fan_out))
        "q": (lambda b: b.attn.qkv.weight[:DIM], (2 / (2 * DIM)) ** 0.5),
        "k": (lambda b: b.attn.qkv.weight[DIM:2 * DIM], (2 / (2 * DIM)) ** 0.5),
        "v": (lambda b: b.attn.qkv.weight[2 * DIM:], beta * (2 / (2 * DIM)) ** 0.5),
        "out": (lambda b: b.attn.proj.weight, beta * (2 / (2 * DIM)) ** 0.5),
        "fc1": (lambda b: b.mlp.fc1.weight, beta * (2 / (DIM + hidden)) ** 0.5),
        "fc2": (lambda b: b.mlp.fc2.weight, beta * (2 / (DIM + hidden)) ** 0.5),
    }
    for name, (pick, std) in expected.items():
        assert pooled_std(pick) == pytest.approx(std, rel=0.08), name
    assert pooled_std(expected["fc1"][0]) > 3 * 0.02 * beta  # the old init was std 0.02 x β


def _deepnorm_reference(blk, x: torch.Tensor) -> torch.Tensor:
    """DeepNet's update, written out: h = LN(α·x + attn(x)), out = LN(α·h + mlp(h))."""
    h = blk.norm1(blk.alpha * x + blk.attn(x))
    return blk.norm2(blk.alpha * h + blk.mlp(h))


class _BranchScaledDeepNorm(DeepNormBlock):
    """The trap of one public implementation: LN(x + α·F(x)), α on the branch."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x + self.alpha * self.attn(x))
        return self.norm2(h + self.alpha * self.mlp(h))


def _computes_deepnorm(blk) -> bool:
    x = torch.randn(2, 5, DIM, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return torch.allclose(blk(x), _deepnorm_reference(blk, x), atol=1e-5)


def test_deepnorm_block_scales_the_residual_not_the_branch():
    """The block itself computes LN(α·x + F(x)), and this check tells it from LN(x + α·F(x))."""
    torch.manual_seed(0)
    blk = build_model(small("deepnorm", depth=4)).blocks[0].eval()
    assert blk.alpha == pytest.approx(8 ** 0.25) and blk.alpha > 1.5  # far enough from 1 to tell apart
    assert _computes_deepnorm(blk)
    broken = copy.deepcopy(blk)
    broken.__class__ = _BranchScaledDeepNorm
    assert not _computes_deepnorm(broken)


def test_drop_path_schedules():
    from suite.models.layers import drop_path_rates
    assert drop_path_rates(0.2, 5, "linear") == pytest.approx([0.0, 0.05, 0.1, 0.15, 0.2])
    assert drop_path_rates(0.2, 3, "uniform") == [0.2, 0.2, 0.2]
    assert drop_path_rates(0.2, 1, "linear") == [0.0]  # as timm's linspace; it was [0.2], so a one-block model differed
    model = build_model(small(drop_path=0.1, drop_path_schedule="uniform"))
    assert all(b.drop_path.p == 0.1 for b in model.blocks)


def test_depth_200_forward_backward_on_cpu():
    cfg = small("layerscale", depth=200, dim=16, heads=2, mlp_ratio=1.0)
    model = build_model(cfg)
    loss = model(torch.randn(2, 3, 16, 16)).sum()
    loss.backward()
    assert torch.isfinite(loss)
    assert model.blocks[199].ls1.gamma.grad.abs().sum() > 0


def test_depth_1000_builds_and_runs_one_forward():
    cfg = small("preln", depth=1000, dim=8, heads=1, mlp_ratio=1.0, img_size=8, patch_size=4)
    model = build_model(cfg)
    assert len(model.blocks) == 1000
    with torch.no_grad():
        out = model(torch.randn(1, 3, 8, 8))
    assert out.shape == (1, 7) and torch.isfinite(out).all()


def test_model_config_is_not_mutated_and_needs_data_shape():
    cfg = small()
    build_model(cfg)
    assert cfg == small()
    with pytest.raises(ValueError, match="img_size"):
        build_model(dataclasses.replace(cfg, img_size=None))


def test_xavier_weight_init_gives_linears_xavier_scale_and_leaves_the_rest():
    torch.manual_seed(0)
    timm_init = build_model(small("postln", depth=6))
    torch.manual_seed(0)
    xavier = build_model(small("postln", depth=6, weight_init="xavier"))
    fc1 = torch.cat([b.mlp.fc1.weight.flatten() for b in xavier.blocks])
    hidden = int(DIM * MLP)
    assert fc1.std().item() == pytest.approx((2 / (DIM + hidden)) ** 0.5, rel=0.05)  # Xavier uniform's std
    assert torch.cat([b.mlp.fc1.weight.flatten() for b in timm_init.blocks]).std().item() == pytest.approx(0.02, rel=0.1)
    assert torch.equal(xavier.pos_embed, timm_init.pos_embed)  # embeddings as timm's either way
    assert all(torch.equal(b.norm1.weight, torch.ones(DIM)) for b in xavier.blocks)


def test_run_id_of_the_default_config_is_pinned_and_every_key_counts():
    """A run id changes only on purpose (it names every finished run's folder): pinned here."""
    from suite import store
    from suite.config import RunConfig

    cfg = RunConfig()
    assert store.run_id(cfg) == "130b2b54d744"
    cfg.model.weight_init = "xavier"
    assert store.run_id(cfg) != "130b2b54d744"


@pytest.mark.parametrize("residual, layerscale", [
    ("layerscale", {}), ("layerscale", {"granularity": "head"}), ("layerscale", {"granularity": "scalar"}),
    ("postln", {}), ("sandwich", {}), ("rezero", {})])
def test_every_scheme_starts_from_pre_lns_weights_at_the_same_seed(residual, layerscale):
    """Runs of one seed share their initial weights (docs/statistics.md: the pairing): a scheme adds or drops
    parameters (a per-head scale's projection has no bias) without drawing a different stream of random numbers."""
    def weights(residual: str, **ls) -> dict[str, torch.Tensor]:
        torch.manual_seed(0)
        return build_model(small(residual, layerscale=LayerScaleConfig(**ls))).state_dict()

    base, other = weights("preln"), weights(residual, **layerscale)
    shared = [k for k in base if k in other and base[k].shape == other[k].shape]
    drawn = [k for k in base if k.endswith("weight") and ("attn" in k or "mlp" in k) or k in ("cls_token", "pos_embed")]
    assert set(drawn) <= set(shared) and len(drawn) == 4 * DEPTH + 2  # qkv, proj, fc1, fc2 per block
    assert [k for k in shared if not torch.equal(base[k], other[k])] == []
