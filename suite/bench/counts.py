"""Operators and bytes of a training step, counted under a ``TorchDispatchMode`` rather than timed, so independent of
the machine's load; bytes proxy an eager step's memory traffic (docs/benchmark.md, "The cast LayerScale")."""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from suite.bench.measure import autocast_for


@dataclass
class StepCount:
    """Operators dispatched by one forward and backward, and the bytes they read and wrote."""

    ops: collections.Counter = field(default_factory=collections.Counter)  # "aten.mul.Tensor" -> calls
    bytes: int = 0

    @property
    def calls(self) -> int:
        return sum(self.ops.values())


# Operators that return their input's storage without saying so in their schema (not ``is_view``): no data moves.
ALIASING = (torch.ops.aten._unsafe_view,)


class Counting(TorchDispatchMode):
    """Counts every operator dispatched within the block into a :class:`StepCount`."""

    def __init__(self, count: StepCount) -> None:
        super().__init__()
        self.count = count

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.count.ops[str(func)] += 1
        if not func.is_view and func.overloadpacket not in ALIASING:
            self.count.bytes += sum(t.numel() * t.element_size() for t in tree_leaves((args, kwargs, out))
                                    if isinstance(t, torch.Tensor))
        return out


def count_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor, dtype: str = "fp32") -> StepCount:
    """The operators and bytes of one forward, cross-entropy and backward on ``(x, y)``; gradients are left set."""
    cast = autocast_for(x.device, dtype)  # raises for another dtype
    count = StepCount()
    with Counting(count):
        with cast():
            loss = F.cross_entropy(model(x), y)
        loss.backward()
    return count


def per_element(arm: StepCount, baseline: StepCount, scales: int, elements: int) -> float:
    """Bytes ``arm`` moves beyond ``baseline`` per element of a scaled branch output (``scales`` × ``elements``)."""
    return (arm.bytes - baseline.bytes) / (scales * elements)


def count_arms(names: list[str], shape, dtypes: tuple[str, ...] = ("fp32", "bf16"), seed: int = 0) -> list[dict]:
    """One row per arm and dtype: operators and bytes of a step at ``shape`` (CPU), and the difference from Pre-LN's."""
    from suite.bench.arms import BASELINE, build_arm

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape.batch, 3, shape.img_size, shape.img_size, generator=g)
    y = torch.randint(0, shape.num_classes, (shape.batch,), generator=g)
    branch = 2 * shape.depth * shape.batch * shape.tokens * shape.dim
    rows = []
    for dtype in dtypes:
        counted = {}
        for name in dict.fromkeys([BASELINE, *names]):
            torch.manual_seed(seed)
            counted[name] = count_step(build_arm(name, shape), x, y, dtype)
        base = counted[BASELINE]
        rows += [{"arm": n, "dtype": dtype, "operators": c.calls, "bytes": c.bytes,
                  "delta_operators": c.calls - base.calls, "delta_bytes_per_element": (c.bytes - base.bytes) / branch}
                 for n, c in counted.items() if n in names]
    return rows


def table(rows: list[dict]) -> str:
    """The rows of :func:`count_arms` as Markdown."""
    lines = ["Counted, not timed (suite/bench/counts.py): the aten operators one forward and backward dispatch, and "
             "the bytes they read and write (views excluded), against Pre-LN's per element of a branch output.\n",
             "| arm | dtype | operators | MB moved | Δ operators | Δ bytes per branch element |",
             "|---|---|---:|---:|---:|---:|"]
    lines += [f"| {r['arm']} | {r['dtype']} | {r['operators']} | {r['bytes'] / 1e6:.1f} | {r['delta_operators']:+d} "
              f"| {r['delta_bytes_per_element']:+.1f} |" for r in rows]
    return "\n".join(lines) + "\n"
