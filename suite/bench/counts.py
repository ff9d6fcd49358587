"""Operators and bytes of a training step, counted rather than timed: what ``suite bench`` prints beside its
ratios, and what the tests assert about LayerScale's cost (a count does not depend on the machine's load).

Every aten operator that forward and backward dispatch is seen under a ``TorchDispatchMode``
(below autograd and autocast, so autocast's casts and the backward's kernels count). ``bytes`` adds
the size of every tensor an operator reads or writes, views excluded (they move nothing): a proxy for
the memory traffic of an unfused (eager) step, in which each operator reads its inputs from memory and
writes its outputs back. On a GPU an eager step of a small elementwise operator is bound by that
traffic, so bytes predict what LayerScale's multiply costs there (docs/benchmark.md, The cast LayerScale).
"""

from __future__ import annotations

import collections
import contextlib
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


@dataclass
class StepCount:
    """Operators dispatched by one forward and backward, and the bytes they read and wrote."""

    ops: collections.Counter = field(default_factory=collections.Counter)  # "aten.mul.Tensor" -> calls
    bytes: int = 0

    @property
    def calls(self) -> int:
        return sum(self.ops.values())


class _Counting(TorchDispatchMode):
    def __init__(self, count: StepCount) -> None:
        super().__init__()
        self.count = count

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.count.ops[str(func)] += 1
        if not func.is_view:
            self.count.bytes += sum(t.numel() * t.element_size() for t in tree_leaves((args, kwargs, out))
                                    if isinstance(t, torch.Tensor))
        return out


def count_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor, dtype: str = "fp32") -> StepCount:
    """The operators and bytes of ``model``'s forward, cross-entropy and backward on ``(x, y)`` (``dtype``:
    ``fp32``, or ``bf16`` autocast on ``x``'s device). The step runs once; gradients are left set."""
    if dtype not in ("fp32", "bf16"):
        raise ValueError(f"dtype must be fp32 or bf16, got {dtype!r}")
    cast = (torch.autocast(device_type=x.device.type, dtype=torch.bfloat16) if dtype == "bf16"
            else contextlib.nullcontext())
    count = StepCount()
    with _Counting(count):
        with cast:
            loss = F.cross_entropy(model(x), y)
        loss.backward()
    return count


def per_element(arm: StepCount, baseline: StepCount, scales: int, elements: int) -> float:
    """Bytes ``arm`` moves beyond ``baseline`` per element of a scaled branch output: the difference over
    ``scales`` (LayerScales in the model) × ``elements`` (B × N × C of one branch output)."""
    return (arm.bytes - baseline.bytes) / (scales * elements)
