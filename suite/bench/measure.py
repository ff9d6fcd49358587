"""Interleaved A/B timing of training steps, behind ``suite bench`` and the CI gate: each round visits the arms in a
seeded order, then in reverse, so a machine slowing down slows both arms of a ratio (docs/benchmark.md)."""

from __future__ import annotations

import contextlib
import gc
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from suite.bench.arms import BenchShape
from suite.config import TrainConfig
from suite.engine.optim import build_optimizer
from suite.models import count_params


@dataclass
class ArmResult:
    """What one arm measured. Times are seconds per step, shape (rounds, visits per round)."""

    train_s: np.ndarray
    forward_s: np.ndarray | None
    params: int
    saved_bytes: int  # activations autograd keeps for backward (parameters excluded)
    peak_bytes: int | None  # CUDA: peak of one training step plus the arm's weights/grads/AdamW state


def _state_bytes(model: nn.Module, opt: torch.optim.Optimizer) -> int:
    tensors = list(model.parameters()) + list(model.buffers())
    tensors += [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v)]
    return sum(t.numel() * t.element_size() for t in tensors)


def saved_activation_bytes(model: nn.Module, x: torch.Tensor, y: torch.Tensor, autocast) -> int:
    """Bytes autograd saves for backward in one forward, parameters excluded: a proxy for activation memory."""
    param_ptrs = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in param_ptrs:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast():
        loss = F.cross_entropy(model(x), y)
    del loss
    return sum(seen.values())


class Timer:
    """Seconds per call of a block of calls: CUDA events on GPU, ``perf_counter`` on CPU."""

    def __init__(self, device: str | torch.device = "cpu") -> None:
        self.cuda = torch.device(device).type == "cuda"

    def __call__(self, fn: Callable[[], None], calls: int) -> float:
        if self.cuda:
            torch.cuda.synchronize()  # nothing queued before the block is counted in it
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3 / calls
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - t0) / calls


def interleave(fns: dict[str, Callable[[], None]], rounds: int, *, steps: int = 1, timer: Timer | None = None,
               seed: int = 0, log: Callable[[str], None] | None = None) -> dict[str, np.ndarray]:
    """Time each function in palindromic rounds: arm name -> (R, 2) seconds per call, one column per visit."""
    if rounds < 1 or steps < 1:
        raise ValueError("rounds and steps must be at least 1")
    timer = timer or Timer()
    rng = np.random.default_rng(seed)
    names = list(fns)
    times = {n: np.zeros((rounds, 2)) for n in names}
    gc_was_enabled = gc.isenabled()
    gc.disable()  # a collection inside a timed block would land on one arm only
    gc.collect()
    try:
        for r in range(rounds):
            t0 = time.perf_counter()
            first = [names[i] for i in rng.permutation(len(names))]
            visits = dict.fromkeys(names, 0)
            for name in first + first[::-1]:
                times[name][r, visits[name]] = timer(fns[name], steps)
                visits[name] += 1
            gc.collect(1)  # the round's garbage, not the oldest generation (torch's objects: 0.1 s a scan)
            if log:
                log(f"round {r + 1}/{rounds} ({time.perf_counter() - t0:.1f} s)")
    finally:
        if gc_was_enabled:
            gc.enable()
    return times


def make_train_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor, autocast: Callable,
                    compile: bool = False) -> tuple[Callable[[], None], torch.optim.Optimizer]:
    """One training step of ``model`` on ``(x, y)`` and its optimizer; ``compile``: blocks compiled as training does."""
    opt = build_optimizer(model, TrainConfig())
    if compile:
        for block in model.blocks:
            block.forward = torch.compile(block.forward)

    def train_step() -> None:
        with autocast():
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return train_step, opt


def autocast_for(device: torch.device, dtype: str) -> Callable:
    """A context factory: bf16 autocast on ``device`` for ``dtype`` ``bf16``, nothing for ``fp32``."""
    if dtype not in ("fp32", "bf16"):
        raise ValueError(f"dtype must be fp32 or bf16, got {dtype!r}")
    if dtype == "bf16":
        return lambda: torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext


GEMM = "gemm"  # the reference arm: one n x n x n matmul, timed in the same rounds as the models


def gemm_flops(n: int) -> int:
    return 2 * n ** 3


def measure(factories: dict[str, Callable[[], nn.Module]], shape: BenchShape, *, device: str = "cpu",
            dtype: str = "fp32", compile: bool = False, rounds: int = 10, warmup: int = 2, steps: int = 1,
            forward: bool = True, seed: int = 0, log: Callable[[str], None] | None = None,
            gemm: int = 0) -> dict[str, ArmResult]:
    """Time every arm's training step, then (``forward``) its no-grad forward, in interleaved rounds. ``gemm`` > 0:
    also a ``gemm``-cubed matmul as the arm :data:`GEMM`, what the same cores reach at their best."""
    dev = torch.device(device)
    autocast = autocast_for(dev, dtype)
    if compile:
        raise_recompile_limit()
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape.batch, 3, shape.img_size, shape.img_size, generator=gen).to(dev)
    y = torch.randint(0, shape.num_classes, (shape.batch,), generator=gen).to(dev)
    train_fns, fwd_fns, info = {}, {}, {}
    for name, factory in factories.items():
        torch.manual_seed(seed)
        eager = factory().to(dev).train()
        saved = saved_activation_bytes(eager, x, y, autocast)  # counted before any block is compiled
        train_step, opt = make_train_step(eager, x, y, autocast, compile)

        def fwd_step(model=eager) -> None:
            with torch.no_grad(), autocast():
                model(x)

        t0 = time.perf_counter()
        for _ in range(warmup):
            train_step()
            if forward:
                fwd_step()
        peak = None
        if dev.type == "cuda":
            torch.cuda.synchronize()
            before = torch.cuda.memory_allocated(dev)
            torch.cuda.reset_peak_memory_stats(dev)
            train_step()
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated(dev) - before + _state_bytes(eager, opt)
        info[name] = dict(params=count_params(eager), saved_bytes=saved, peak_bytes=peak)
        opt.zero_grad(set_to_none=True)
        train_fns[name], fwd_fns[name] = train_step, fwd_step
        if log:
            log(f"built and warmed up {name} ({time.perf_counter() - t0:.1f} s)")

    if gemm > 0:
        dt = torch.bfloat16 if dtype == "bf16" else torch.float32
        a, b = (torch.randn(gemm, gemm, generator=gen).to(dev, dt) for _ in range(2))
        product = torch.empty(gemm, gemm, device=dev, dtype=dt)
        train_fns[GEMM] = lambda: torch.mm(a, b, out=product)
        train_fns[GEMM]()
        info[GEMM] = dict(params=0, saved_bytes=0, peak_bytes=None)

    timer = Timer(dev)

    def tagged(what: str) -> Callable[[str], None] | None:
        return (lambda line: log(f"{what}: {line}")) if log else None

    train = interleave(train_fns, rounds, steps=steps, timer=timer, seed=seed, log=tagged("train"))
    fwd = interleave(fwd_fns, rounds, steps=steps, timer=timer, seed=seed + 1, log=tagged("forward")) if forward else {}
    return {n: ArmResult(train_s=train[n], forward_s=fwd.get(n), **info[n]) for n in train_fns}


def raise_recompile_limit() -> None:
    # Every arm compiles the same code objects again: past dynamo's recompile limit (8) the rest would run eager.
    from torch import _dynamo

    for attr in ("recompile_limit", "cache_size_limit"):
        if hasattr(_dynamo.config, attr):
            setattr(_dynamo.config, attr, max(64, getattr(_dynamo.config, attr)))
