"""Every LayerScale implementation computes the same function and gradients as the plain one.

The reference is the implementation before the scale bank (``layerscale:per-block``: one γ per
block, ``addcmul``), itself checked against timm elsewhere. The model's own (the bank, folding or
not) and every benchmark candidate are built from the same weights, with γ drawn at random so that
a mix-up between branches or blocks shows, and must give the same loss and, for every parameter,
the same gradient (float64), then the same output after an update.
"""

from __future__ import annotations

import pytest
import torch

from suite.bench import kernel
from suite.bench.arms import CANDIDATES, OPT_IN, BenchShape, build_arm
from suite.bench.candidates import always_fold, never_fold, per_block, use_function
from suite.models import count_params

SHAPE = BenchShape(depth=3, dim=16, heads=2, tokens=5, batch=3)
ARMS = ["layerscale"] + sorted(set(CANDIDATES) - {"layerscale:per-block"}) + list(OPT_IN)


def _gamma_grads(model) -> dict[str, torch.Tensor]:
    """γ gradients by "block.ls1|ls2", wherever the implementation keeps them."""
    bank = getattr(model, "scale_bank", None)
    if bank is not None:
        return {n.removeprefix("blocks."): g for n, g in zip(bank.names, model.layer_scales.grad.unbind(0))}
    out = {}
    for i, block in enumerate(model.blocks):
        for branch, lin in (("ls1", block.attn.proj), ("ls2", block.mlp.fc2)):
            holder = lin if hasattr(lin, "gamma") else getattr(block, branch)  # :folded keeps γ in the linear
            out[f"{i}.{branch}"] = holder.gamma.grad
    return out


def _other_grads(model) -> dict[str, torch.Tensor]:
    return {n.replace(".linear.", "."): p.grad for n, p in model.named_parameters()
            if not n.endswith("gamma") and n != "layer_scales"}


@pytest.mark.parametrize("name", ARMS)
def test_implementation_computes_the_same_function_and_gradients(name):
    if name == kernel.ARM:
        try:
            kernel.build()  # about 30 s the first time on a machine; cached after
        except kernel.KernelBuildError as err:
            pytest.skip(str(err))
    torch.manual_seed(0)
    ref = per_block(build_arm("layerscale", SHAPE)).double()
    with torch.no_grad():
        for block in ref.blocks:
            block.ls1.gamma.normal_()
            block.ls2.gamma.normal_()
    cand = build_arm("layerscale", SHAPE).double()
    cand.load_state_dict(ref.state_dict())  # the bank reads the per-block keys of the plain model
    convert = {**CANDIDATES, **OPT_IN}
    cand = convert[name](cand) if name in convert else cand
    x = torch.randn(SHAPE.batch, 3, SHAPE.img_size, SHAPE.img_size, dtype=torch.float64)

    loss_ref, loss = ref(x).square().sum(), cand(x).square().sum()
    torch.testing.assert_close(loss, loss_ref)
    loss_ref.backward()
    loss.backward()
    want, got = _gamma_grads(ref), _gamma_grads(cand)
    for key in want:
        torch.testing.assert_close(got[key], want[key], msg=f"{name}: γ {key}")
    want, got = _other_grads(ref), _other_grads(cand)
    for key in want:
        torch.testing.assert_close(got[key], want[key], msg=f"{name}: {key}")
    assert count_params(cand) == count_params(ref)

    with torch.no_grad():  # one SGD step each: the next forward must see the new γ
        for p in list(ref.parameters()) + list(cand.parameters()):
            p.add_(p.grad, alpha=-1e-2)
    torch.testing.assert_close(cand(x), ref(x))


def test_the_bank_folds_only_when_training_on_many_rows():
    big = BenchShape(depth=2, dim=16, heads=2, tokens=17, batch=8)  # 136 rows > 16 + 64 inputs
    small = BenchShape(depth=2, dim=16, heads=2, tokens=5, batch=2)  # 10 rows
    seen = []

    def spy(model):
        lin = model.blocks[0].mlp.fc2
        lin.register_forward_hook(lambda mod, args, out: seen.append(mod.folded is not None))
        return model

    for shape, grad, train, want in [(big, True, True, True), (small, True, True, False),
                                     (big, False, True, False), (big, True, False, False)]:
        model = spy(build_arm("layerscale", shape)).train(train)
        x = torch.randn(shape.batch, 3, shape.img_size, shape.img_size)
        with torch.set_grad_enabled(grad):
            model(x)
        assert seen.pop() is want, (shape, grad, train)
        assert model.blocks[0].mlp.fc2.folded is None and not model.blocks[0].ls2.folded  # reset after
    model = spy(never_fold(build_arm("layerscale", big)))
    model(torch.randn(big.batch, 3, big.img_size, big.img_size))
    assert seen.pop() is False
    model = spy(always_fold(build_arm("layerscale", small)))
    model(torch.randn(small.batch, 3, small.img_size, small.img_size))
    assert seen.pop() is True


def test_the_gates_shapes_take_the_paths_they_were_measured_on():
    """The CI gate's ablation-step threshold assumes the fold at the default ablation's shape; the
    ViT-Ti check (batch 4), the plain addcmul path."""
    from suite.bench import gate

    for shape, want in ((gate.ABLATION_SHAPE, True), (gate.GATE_SHAPE, False)):
        model = build_arm("layerscale", shape).train()
        x = model.embed(torch.randn(shape.batch, 3, shape.img_size, shape.img_size))
        assert model.scale_bank.worth_folding(model, x) is want, shape


def test_the_bank_is_one_parameter_with_per_block_state_dict_keys():
    model = build_arm("layerscale", SHAPE)
    names = [n for n, _ in model.named_parameters()]
    assert "layer_scales" in names and not any(n.endswith("gamma") for n in names)
    assert model.layer_scales.shape == (2 * SHAPE.depth, SHAPE.dim)
    keys = set(model.state_dict())
    assert "layer_scales" not in keys
    assert {f"blocks.{i}.ls{j}.gamma" for i in range(SHAPE.depth) for j in (1, 2)} <= keys
    # the views follow the parameter: in place, after .to(), in a deep copy
    with torch.no_grad():
        model.layer_scales[SHAPE.depth + 1].fill_(3.0)  # block 1's MLP branch
    assert torch.all(model.blocks[1].ls2.gamma == 3.0)
    import copy
    twin = copy.deepcopy(model).double()
    row = twin.blocks[1].ls2.gamma
    assert row.dtype == torch.float64
    assert row.untyped_storage().data_ptr() == twin.layer_scales.untyped_storage().data_ptr()
    copied = copy.deepcopy(model)  # before any forward or .to(): its views must be of its own bank
    with torch.no_grad():
        copied.layer_scales.fill_(5.0)
    assert torch.all(copied.blocks[0].ls1.gamma == 5.0) and torch.all(model.blocks[0].ls1.gamma != 5.0)


def test_the_bank_loads_partial_state_dicts_like_per_block_parameters():
    model = build_arm("layerscale", SHAPE)
    state = {k: torch.full_like(v, 2.0) if k.endswith("gamma") else v for k, v in model.state_dict().items()}
    del state["blocks.1.ls2.gamma"]
    with pytest.raises(RuntimeError, match=r"Missing key\(s\).*blocks\.1\.ls2\.gamma"):
        model.load_state_dict(dict(state))
    before = model.blocks[1].ls2.gamma.clone()
    result = model.load_state_dict(dict(state), strict=False)
    assert result.missing_keys == ["blocks.1.ls2.gamma"] and not result.unexpected_keys
    assert torch.all(model.blocks[0].ls1.gamma == 2.0) and torch.equal(model.blocks[1].ls2.gamma, before)
    fresh = {k: v.clone() for k, v in state.items()}
    fresh["blocks.1.ls2.gamma"] = torch.full((SHAPE.dim,), 7.0)
    model.load_state_dict(fresh, assign=True)  # the bank is replaced: the views must follow
    assert torch.all(model.blocks[1].ls2.gamma == 7.0)


def test_candidates_refuse_models_they_cannot_rewrite():
    for transform in (use_function, per_block, never_fold):
        with pytest.raises(ValueError, match="LayerScale"):
            transform(build_arm("preln", SHAPE))
    with pytest.raises(ValueError, match="both branches"):
        always_fold(build_arm("preln", SHAPE))
