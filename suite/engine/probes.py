"""Per-block probes: how big the scales are, how far each branch moves the residual stream. Forward hooks attach from
outside (timm's blocks too), without gradients and in eval mode, eagerly (dynamo does not guard hooks)."""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, vmap

from suite.models.residual import DeepNormBlock, PostLNBlock, PreLNBlock, ReZeroBlock, SandwichBlock

KEYS = ("attn_ratio", "mlp_ratio", "out_rms", "attn_logit_max", "attn_entropy_min")  # what the hooks record, besides
# the scales; attention diagnostics (Wortsman et al. 2023) are recomputed from its input, keeping the fused attention.


@dataclass(frozen=True)
class Tap:
    """Where one residual branch can be read: ``branch``'s output (unscaled), added as ``scale(block, it)`` to the
    stream that is ``stream``'s input (None: the block's)."""

    name: str
    branch: str
    stream: str | None
    scale: Callable[[nn.Module, torch.Tensor], torch.Tensor]


def _unscaled(block: nn.Module, out: torch.Tensor) -> torch.Tensor:
    return out


def _module(attr: str) -> Callable[[nn.Module, torch.Tensor], torch.Tensor]:
    def scale(block: nn.Module, out: torch.Tensor) -> torch.Tensor:
        return getattr(block, attr)(out)  # LayerScale (ours or timm's) or nn.Identity

    return scale


def _alpha(block: nn.Module, out: torch.Tensor) -> torch.Tensor:
    return block.alpha.to(out.dtype) * out


_PRE_LN = (Tap("attn", "attn", None, _module("ls1")), Tap("mlp", "mlp", "norm2", _module("ls2")))
_POST_LN = (Tap("attn", "attn", None, _unscaled), Tap("mlp", "mlp", "mlp", _unscaled))
TAPS: dict[type, tuple[Tap, ...]] = {
    PreLNBlock: _PRE_LN,  # x + ls1(attn(LN(x))); the MLP branch reads x after the first add
    PostLNBlock: _POST_LN,  # LN(x + F(x)): the MLP branch reads the normalised stream
    DeepNormBlock: _POST_LN,  # LN(α·x + F(x)): the branch is unscaled, the ratio is to x
    ReZeroBlock: (Tap("attn", "attn", None, _alpha), Tap("mlp", "mlp", "mlp", _alpha)),
    SandwichBlock: (Tap("attn", "post_norm1", None, _unscaled), Tap("mlp", "post_norm2", "norm2", _unscaled)),
}
_TIMM_STYLE = ("norm1", "attn", "ls1", "norm2", "mlp", "ls2")  # timm's ViT Block: the pre-LN layout


def taps_for(block: nn.Module) -> tuple[Tap, ...]:
    """The taps of a block: ours by class, timm's pre-LN ``Block`` by its layout; else none."""
    for cls in type(block).__mro__:
        if cls in TAPS:
            return TAPS[cls]
    if all(isinstance(getattr(block, a, None), nn.Module) for a in _TIMM_STYLE):
        return _PRE_LN
    return ()


def block_scales(block: nn.Module) -> list[torch.Tensor]:
    """A block's residual scales: ours via ``scales()``, timm's via its ``ls1``/``ls2`` gammas."""
    if hasattr(block, "scales"):
        return block.scales()
    return [m.gamma for m in (getattr(block, "ls1", None), getattr(block, "ls2", None)) if hasattr(m, "gamma")]


def _ratio(delta: torch.Tensor, stream: torch.Tensor) -> torch.Tensor:
    # ‖Δ‖/‖x‖ over the whole batch: how far this branch moves the residual stream.
    return delta.float().norm() / stream.float().norm().clamp_min(1e-30)


def _attach(block: nn.Module, got: dict[str, torch.Tensor], attention: bool = True) -> list[Any]:
    """Hooks that fill ``got`` with one block's ratios and output RMS during a forward."""
    streams: dict[str, torch.Tensor] = {}
    handles = [block.register_forward_pre_hook(lambda mod, args: streams.__setitem__("block", args[0]))]
    for tap in taps_for(block):
        key = tap.stream or "block"
        if tap.stream is not None:
            def keep(mod, args, key=key):
                streams[key] = args[0]
            handles.append(getattr(block, tap.stream).register_forward_pre_hook(keep))

        def note(mod, args, out, tap=tap, key=key):
            got[f"{tap.name}_ratio"] = _ratio(tap.scale(block, out), streams[key])
        handles.append(getattr(block, tap.branch).register_forward_hook(note))

    def note_out(mod, args, out):
        got["out_rms"] = out.float().pow(2).mean().sqrt()
    handles.append(block.register_forward_hook(note_out))
    attn = getattr(block, "attn", None)
    if attention and isinstance(attn, nn.Module) and isinstance(getattr(attn, "qkv", None), nn.Linear):
        def note_attn(mod, args):
            got["attn_logit_max"], got["attn_entropy_min"] = attention_stats(mod, args[0])
        handles.append(attn.register_forward_pre_hook(note_attn))
    return handles


def attention_stats(attn: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The largest |attention logit| and the lowest head's mean attention entropy (nats) of ``attn`` on ``x`` (B, N,
    C), as 0-d device tensors."""
    B, N, C = x.shape
    heads = getattr(attn, "heads", None) or attn.num_heads
    hd = C // heads
    qkv = attn.qkv(x).reshape(B, N, 3, heads, hd).permute(2, 0, 3, 1, 4)  # (3, B, H, N, hd)
    q, k = qkv[0], qkv[1]
    q = getattr(attn, "q_norm", nn.Identity())(q)
    k = getattr(attn, "k_norm", nn.Identity())(k)
    logits = (q.float() @ k.float().transpose(-2, -1)) * hd ** -0.5  # (B, H, N, N)
    logp = torch.log_softmax(logits, dim=-1)
    entropy = -(logp.exp() * logp).sum(-1)  # (B, H, N)
    return logits.abs().amax(), entropy.mean(dim=(0, 2)).amin()


def finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


@contextlib.contextmanager
def _hooked(model: nn.Module, on_output: Callable[[int, torch.Tensor], None] | None = None,
            attention: bool = True) -> Iterator[list[dict]]:
    """Eval mode with the probe hooks on (compiled blocks forced eager); yields one dict per block to fill."""
    blocks = list(getattr(model, "blocks", []))
    got: list[dict[str, torch.Tensor]] = [{} for _ in blocks]
    handles = [h for b, g in zip(blocks, got) for h in _attach(b, g, attention)]
    if on_output is not None:
        handles += [b.register_forward_hook(lambda mod, args, out, i=i: on_output(i, out))
                    for i, b in enumerate(blocks)]
    was_training = model.training
    model.eval()
    try:
        # Without dynamo loaded nothing can be compiled, and the stance would import it (seconds).
        with torch.compiler.set_stance("force_eager") if "torch._dynamo" in sys.modules else contextlib.nullcontext():
            yield got
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)


def _values(got: list[dict[str, torch.Tensor]], scales: list[list[torch.Tensor]]) -> tuple[list[tuple[int, str]], list[torch.Tensor]]:
    """Which (block, key) each value is, and the values as 0-d tensors (still on the device)."""
    slots: list[tuple[int, str]] = []
    tensors: list[torch.Tensor] = []
    for i, (values, block_scale) in enumerate(zip(got, scales)):
        if block_scale:
            flat = torch.cat([s.detach().float().abs().flatten() for s in block_scale])
            slots += [(i, "scale_mean"), (i, "scale_max")]
            tensors += [flat.mean(), flat.max()]
        for key in KEYS:
            if key in values:
                slots.append((i, key))
                tensors.append(values[key].detach().float().reshape(()))
    return slots, tensors


def _records(depth: int, slots: list[tuple[int, str]], numbers: list[float]) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = [{"block": i, "scale_mean": None, "scale_max": None, **dict.fromkeys(KEYS)}
                                     for i in range(depth)]
    for (i, key), value in zip(slots, numbers):
        records[i][key] = finite_or_none(value)
    return records


@torch.no_grad()
def probe(model: nn.Module, x: torch.Tensor,
          on_output: Callable[[int, torch.Tensor], None] | None = None,
          model_level: dict[str, Any] | None = None, attention: bool = True) -> list[dict[str, Any]]:
    """One record per block (None where not applicable or not finite); ``on_output(block index, output)`` is called in
    the same forward, and ``model_level`` gets ``logit_rms``."""
    blocks = list(getattr(model, "blocks", []))
    with _hooked(model, on_output, attention) as got:
        logits = model(x)
    slots, tensors = _values(got, [block_scales(b) for b in blocks])
    if model_level is not None and isinstance(logits, torch.Tensor):
        slots.append((-1, "logit_rms"))
        tensors.append(logits.detach().float().pow(2).mean().sqrt())
    # Every block's values in one transfer: on a GPU each .item() would wait for the device.
    numbers = torch.stack([t.to(tensors[0].device) for t in tensors]).tolist() if tensors else []
    if model_level is not None and slots and slots[-1] == (-1, "logit_rms"):
        model_level["logit_rms"] = finite_or_none(numbers[-1])
        slots, numbers = slots[:-1], numbers[:-1]
    return _records(len(blocks), slots, numbers)


@torch.no_grad()
def probe_stacked(model: nn.Module, params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor],
                  x: torch.Tensor, attention: bool = True) -> list[tuple[list[dict[str, Any]], float | None]]:
    """:func:`probe` of N models of ``model``'s code from stacked ``[N, ...]`` tensors and batches, in one forward:
    each model's records and its logits' RMS (None if not finite)."""
    blocks = list(getattr(model, "blocks", []))
    name_of = {id(t): n for n, t in [*model.named_parameters(), *model.named_buffers()]}
    scale_names = [[name_of[id(s)] for s in block_scales(b)] for b in blocks]
    slots: list[tuple[int, str]] = []

    def one(p: dict, b: dict, xi: torch.Tensor) -> torch.Tensor:
        with _hooked(model, attention=attention) as got:
            logits = functional_call(model, (p, b), (xi,))
        tensors = {**p, **b}
        found, values = _values(got, [[tensors[n] for n in names] for names in scale_names])
        slots[:] = found
        return torch.stack([*values, logits.detach().float().pow(2).mean().sqrt()])

    rows = vmap(one, randomness="error")(params, buffers, x).tolist()
    return [(_records(len(blocks), slots, row[:-1]), finite_or_none(row[-1])) for row in rows]
