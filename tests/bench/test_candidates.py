"""The candidate LayerScale implementations compute our model's function and gradients exactly.

A candidate is only worth timing if it does the same work: each one is built from the same weights
as the real ``layerscale`` model (γ drawn at random, so that a mix-up between branches or blocks
shows), and must give the same loss and, for every parameter, the same gradient (float64).
"""

from __future__ import annotations

import pytest
import torch

from suite.bench.arms import CANDIDATES, BenchShape, build_arm
from suite.bench.candidates import flatten_layerscale, stacked_fold, use_function
from suite.models import count_params

SHAPE = BenchShape(depth=3, dim=16, heads=2, tokens=5, batch=3)


def _gammas(model) -> dict[str, torch.Tensor]:
    """Block scales of the real model by (block, branch), drawn at random."""
    out = {}
    for i, block in enumerate(model.blocks):
        for branch in ("ls1", "ls2"):
            gamma = getattr(block, branch).gamma
            with torch.no_grad():
                gamma.normal_()
            out[f"{i}.{branch}"] = gamma
    return out


def _candidate_grad(model, name: str, key: str) -> torch.Tensor:
    """The gradient the candidate holds for the real model's γ ``key`` ("block.ls1|ls2")."""
    i, branch = key.split(".")
    i = int(i)
    if name == "layerscale:stacked-fold":
        return model.layer_scales.grad[0 if branch == "ls1" else 1, i]
    if name == "layerscale:flat":
        return model.layer_scales.grad[2 * i + (branch == "ls2")]
    if name == "layerscale:folded":
        lin = model.blocks[i].attn.proj if branch == "ls1" else model.blocks[i].mlp.fc2
        return lin.gamma.grad
    return getattr(model.blocks[i], branch).gamma.grad


@pytest.mark.parametrize("name", sorted(CANDIDATES))
def test_candidate_computes_the_same_function_and_gradients(name):
    torch.manual_seed(0)
    ours = build_arm("layerscale", SHAPE).double()
    gammas = _gammas(ours)
    state = {k: v.clone() for k, v in ours.state_dict().items()}
    torch.manual_seed(0)
    cand = build_arm("layerscale", SHAPE).double()
    cand.load_state_dict(state)
    cand = CANDIDATES[name](cand)
    x = torch.randn(SHAPE.batch, 3, SHAPE.img_size, SHAPE.img_size, dtype=torch.float64)

    loss_a = ours(x).square().sum()
    loss_b = cand(x).square().sum()
    torch.testing.assert_close(loss_a, loss_b)
    loss_a.backward()
    loss_b.backward()
    for key, gamma in gammas.items():
        torch.testing.assert_close(_candidate_grad(cand, name, key), gamma.grad, msg=f"{name}: γ {key}")
    # every other parameter, matched by its (unwrapped) name
    cand_params = {n.replace(".linear.", "."): p for n, p in cand.named_parameters()}
    for n, p in ours.named_parameters():
        if n.endswith("gamma"):
            continue
        torch.testing.assert_close(cand_params[n].grad, p.grad, msg=f"{name}: {n}")
    assert count_params(cand) == count_params(ours)

    # a second step's forward sees the updated γ (views and folds are taken at every forward)
    with torch.no_grad():
        for p in list(ours.parameters()) + list(cand.parameters()):
            if p.grad is not None:
                p.add_(p.grad, alpha=-1e-2)
    torch.testing.assert_close(ours(x), cand(x))


def test_candidates_refuse_models_they_cannot_rewrite():
    preln = build_arm("preln", SHAPE)
    for transform in (use_function, flatten_layerscale):
        with pytest.raises(ValueError, match="no per-channel LayerScale"):
            transform(build_arm("preln", SHAPE))
    with pytest.raises(ValueError, match="both branches"):
        stacked_fold(preln)


def test_function_candidate_leaves_frozen_scales_without_gradient():
    torch.manual_seed(0)
    model = use_function(build_arm("layerscale", SHAPE))
    for m in model.modules():
        if hasattr(m, "gamma") and isinstance(m.gamma, torch.nn.Parameter):
            m.gamma.requires_grad_(False)
    x = torch.randn(SHAPE.batch, 3, SHAPE.img_size, SHAPE.img_size)
    model(x).sum().backward()
    assert model.blocks[0].ls1.gamma.grad is None
    assert model.blocks[0].mlp.fc1.weight.grad is not None
