"""The depth-aware LayerScale (``layerscale-depth``): CaiT's LayerScale whose γ learns at η · L_base / L.

The rule is checked three ways: every parameter's learning rate in the optimiser, one AdamW step (whose
first move is the learning rate times the sign of the gradient, so γ moves by exactly η · L_base / L),
and the identity with ``layerscale`` at the base depth."""

from __future__ import annotations

import pytest
import torch

from suite.config import ModelConfig, TrainConfig
from suite.engine.optim import build_optimizer, set_lr
from suite.models import build_model


def config(residual: str, depth: int, base_depth: int = 12) -> ModelConfig:
    return ModelConfig(residual=residual, img_size=8, patch_size=4, in_chans=1, num_classes=3, dim=16, heads=2,
                       depth=depth, base_depth=base_depth)


@pytest.mark.parametrize("depth, base_depth", [(48, 12), (192, 12), (12, 12), (6, 24)])
def test_gamma_learns_at_lr_times_base_depth_over_depth_and_every_other_parameter_at_lr(depth, base_depth):
    torch.manual_seed(0)
    m = config("layerscale-depth", depth, base_depth)
    model = build_model(m)
    lr = 1e-2
    opt = build_optimizer(model, TrainConfig(lr=lr), m)
    set_lr(opt, lr)
    rate = {id(p): g["lr"] for g in opt.param_groups for p in g["params"]}
    gammas = [n for n, _ in model.named_parameters() if n.endswith(".gamma")]
    assert len(gammas) == 2 * depth  # ls1 and ls2 of every block
    for name, p in model.named_parameters():
        want = lr * base_depth / depth if name.endswith(".gamma") else lr
        assert rate[id(p)] == pytest.approx(want, rel=1e-12), name


def test_one_adamw_step_moves_gamma_by_its_scaled_rate_and_the_rest_as_layerscale():
    """Adam's first step is lr x sign(grad) (bias-corrected, eps aside): γ of layerscale-depth at depth 48
    moves a quarter as far as CaiT's, every other weight exactly as far."""
    moved = {}
    for residual in ("layerscale", "layerscale-depth"):
        torch.manual_seed(0)
        m = config(residual, 48)
        model = build_model(m)
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        opt = build_optimizer(model, TrainConfig(lr=1e-3, weight_decay=0.0), m)
        set_lr(opt, 1e-3)
        x = torch.randn(4, 1, 8, 8, generator=torch.Generator().manual_seed(1))
        model(x).square().mean().backward()
        opt.step()
        moved[residual] = {n: (p.detach() - before[n]).abs() for n, p in model.named_parameters()}
    for name, step in moved["layerscale"].items():
        if name.endswith(".gamma"):
            assert torch.allclose(moved["layerscale-depth"][name], step / 4, rtol=1e-4, atol=1e-12), name
        else:
            assert torch.equal(moved["layerscale-depth"][name], step), name
    assert any(s.max() > 0 for n, s in moved["layerscale"].items() if n.endswith(".gamma"))


def test_at_its_base_depth_it_is_layerscale():
    states = []
    for residual in ("layerscale", "layerscale-depth"):
        torch.manual_seed(0)
        m = config(residual, 12)
        model = build_model(m)
        opt = build_optimizer(model, TrainConfig(lr=1e-3), m)
        set_lr(opt, 1e-3)
        for _ in range(3):
            x = torch.randn(4, 1, 8, 8, generator=torch.Generator().manual_seed(1))
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
        states.append(model.state_dict())
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])
