"""The cast LayerScale (``model.layerscale.cast``): dtypes through a block under CPU bf16 autocast, bit-identical
to the plain one in fp32, and its operators and bytes counted (suite/bench/counts.py), not timed."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from suite.bench.arms import BenchShape, build_arm
from suite.bench.counts import count_step, per_element
from suite.models.layerscale import LayerScale

SHAPE = BenchShape(depth=2, dim=48, heads=3, tokens=17, batch=4)
SCALES = 2 * SHAPE.depth  # one LayerScale per branch
ELEMENTS = SHAPE.batch * SHAPE.tokens * SHAPE.dim  # one branch output


def batch():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(SHAPE.batch, 3, SHAPE.img_size, SHAPE.img_size, generator=g),
            torch.randint(0, SHAPE.num_classes, (SHAPE.batch,), generator=g))


def model(arm: str):
    torch.manual_seed(0)
    return build_arm(arm, SHAPE)


@pytest.mark.parametrize("arm, product", [("layerscale", torch.float32), ("layerscale:cast", torch.bfloat16)])
def test_under_bf16_autocast_the_plain_product_is_fp32_and_the_cast_one_bf16_while_gamma_stays_fp32(arm, product):
    m, (x, y) = model(arm), batch()
    seen, streams = {}, []

    def record(name):
        def hook(mod, args, out) -> None:
            seen[name] = (args[0].dtype, out.dtype)
        return hook

    for name, mod in m.named_modules():
        if isinstance(mod, LayerScale):
            mod.register_forward_hook(record(name))
    m.blocks[-1].register_forward_hook(lambda mod, args, out: streams.append(out.dtype) and None)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(m(x), y)
    loss.backward()
    assert len(seen) == SCALES
    assert set(seen.values()) == {(torch.bfloat16, product)}  # the branch output is bf16 in both
    assert streams == [torch.float32]  # the residual stream is fp32 in both (fp32 class token and positions)
    gammas = [p for n, p in m.named_parameters() if n.endswith(".gamma")]
    assert len(gammas) == SCALES and all(p.dtype == p.grad.dtype == torch.float32 for p in gammas)


def test_in_fp32_the_cast_layerscale_is_the_plain_one_bit_for_bit_with_the_same_operators():
    x, y = batch()
    plain, cast = model("layerscale"), model("layerscale:cast")
    counts = [count_step(m, x, y) for m in (plain, cast)]
    assert counts[0].ops == counts[1].ops and counts[0].bytes == counts[1].bytes
    with torch.no_grad():
        assert torch.equal(plain(x), cast(x))
    for (n, a), (_, b) in zip(plain.named_parameters(), cast.named_parameters()):
        assert torch.equal(a.grad, b.grad), n


def signed(a: dict, b: dict) -> dict:
    """Operator counts of ``a`` minus ``b``, negative ones kept; zeros left out."""
    return {k: a.get(k, 0) - b.get(k, 0) for k in {*a, *b} if a.get(k, 0) != b.get(k, 0)}


def test_signed_keeps_what_an_arm_has_fewer_of():
    assert signed({"add": 1}, {"add": 3, "mul": 1}) == {"add": -2, "mul": -1}


def test_counted_bytes_per_element_the_cast_halves_what_the_plain_layerscale_adds_in_bf16_and_timm_is_ours():
    x, y = batch()
    c = {arm: count_step(model(arm), x, y, "bf16")
         for arm in ("preln", "layerscale", "layerscale:cast", "timm-preln", "timm-layerscale")}
    plain, cast = (per_element(c[a], c["preln"], SCALES, ELEMENTS) for a in ("layerscale", "layerscale:cast"))
    # plain: the fp32 product written and read back, its backward in fp32 (issue 62's count: 30 bytes);
    # cast: the same passes over bf16 (16 bytes)
    assert plain == pytest.approx(30, abs=0.5) and cast == pytest.approx(16, abs=0.5)
    added = signed(c["layerscale"].ops, c["preln"].ops)  # Counter's `-` would drop an operator the arm has fewer of
    assert added["aten.mul.Tensor"] == 3 * SCALES and added["aten.sum.dim_IntList"] == SCALES
    assert min(added.values()) > 0  # nothing Pre-LN does is left out
    assert signed(c["layerscale:cast"].ops, c["layerscale"].ops) == {"aten._to_copy.default": 2 * SCALES}  # γ down, its gradient up
    # timm's LayerScale is the same stream as ours: no operator and no byte of difference
    assert signed(c["timm-layerscale"].ops, c["timm-preln"].ops) == added
    assert c["timm-layerscale"].bytes - c["timm-preln"].bytes == c["layerscale"].bytes - c["preln"].bytes


def test_count_step_refuses_another_dtype():
    with pytest.raises(ValueError, match="fp32 or bf16"):
        count_step(model("preln"), *batch(), "fp16")
