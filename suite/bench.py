"""``suite bench``: step-time overhead of every residual scheme against Pre-LN, in one process.

Every *arm* (a model and its AdamW, see ``suite/bench_arms.py``) is built once and kept alive.
After warm-up, each round visits the arms in a seeded random order and then in reverse (A B B A for
two arms), timing a block of training steps (forward, cross-entropy, backward, ``AdamW.step``,
``zero_grad(set_to_none=True)``) per visit; then the same for no-grad forwards. Ratios are taken
within a round (``suite/bench_stats.py``), so a machine that slows down for a minute slows both
arms of a ratio. On CUDA a block is timed with CUDA events after a synchronize; on CPU with
``time.perf_counter``. Tables and files: ``suite/bench_report.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from suite.bench_arms import BASELINE, TIMM_ARMS, BenchShape, arm_names, build_arm, check_arm
from suite.config import TrainConfig
from suite.models import count_params
from suite.optim import build_optimizer

__all__ = ["BASELINE", "TIMM_ARMS", "ArmResult", "BenchShape", "interleave", "measure"]


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
    """Bytes of the tensors autograd saves for backward in one forward, parameters excluded.

    A device-independent proxy for activation memory (the CPU has no peak-memory counter); each
    storage is counted once, however many views of it are saved.
    """
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


def interleave(
    fns: dict[str, Callable[[], None]],
    rounds: int,
    *,
    steps: int = 1,
    timer: Timer | None = None,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> dict[str, np.ndarray]:
    """Time each function in palindromic rounds: a seeded random order, then its reverse (A B B A).

    Args:
        fns: arm name -> one step (already warmed up).
        rounds: R, the number of rounds. steps: calls per timed visit.
        timer: how a block is timed (default: ``perf_counter`` on CPU).
        seed: seeds the visiting order. log: called with one progress line per round.

    Returns:
        Arm name -> (R, 2) seconds per call; column v is the arm's v-th visit in the round.
    """
    if rounds < 1 or steps < 1:
        raise ValueError("rounds and steps must be at least 1")
    timer = timer or Timer()
    rng = np.random.default_rng(seed)
    names = list(fns)
    times = {n: np.zeros((rounds, 2)) for n in names}
    gc_was_enabled = gc.isenabled()
    gc.disable()  # a collection inside a timed block would land on one arm only
    try:
        for r in range(rounds):
            t0 = time.perf_counter()
            first = [names[i] for i in rng.permutation(len(names))]
            visits = dict.fromkeys(names, 0)
            for name in first + first[::-1]:
                times[name][r, visits[name]] = timer(fns[name], steps)
                visits[name] += 1
            gc.collect()
            if log:
                log(f"round {r + 1}/{rounds} ({time.perf_counter() - t0:.1f} s)")
    finally:
        if gc_was_enabled:
            gc.enable()
    return times


def measure(
    factories: dict[str, Callable[[], nn.Module]],
    shape: BenchShape,
    *,
    device: str = "cpu",
    dtype: str = "fp32",
    compile: bool = False,
    rounds: int = 10,
    warmup: int = 2,
    steps: int = 1,
    forward: bool = True,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> dict[str, ArmResult]:
    """Time every arm's training step, then its no-grad forward, in interleaved rounds.

    Args:
        factories: arm name -> a function building its model (on CPU, fp32); each gets the same seed.
        shape: batch and model shape (the input is ``(batch, 3, img, img)`` random images).
        device: ``cpu`` or ``cuda``. dtype: ``fp32``, or ``bf16`` autocast.
        compile: ``torch.compile`` each model (compilation happens during warm-up).
        rounds: timed rounds R. warmup: untimed steps per arm first. steps: steps per timed visit.
        forward: also time no-grad forwards (a second series of rounds).
        seed: seeds the weights, the input and the visiting order.
        log: called with progress lines.

    Returns:
        Arm name -> :class:`ArmResult` with (R, 2) times.
    """
    dev = torch.device(device)
    if dtype not in ("fp32", "bf16"):
        raise ValueError(f"dtype must be fp32 or bf16, got {dtype!r}")

    def autocast():
        if dtype == "bf16":
            return torch.autocast(device_type=dev.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    if compile:
        _raise_recompile_limit()
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(shape.batch, 3, shape.img_size, shape.img_size, generator=gen).to(dev)
    y = torch.randint(0, shape.num_classes, (shape.batch,), generator=gen).to(dev)
    train_fns, fwd_fns, info = {}, {}, {}
    for name, factory in factories.items():
        torch.manual_seed(seed)
        eager = factory().to(dev).train()
        opt = build_optimizer(eager, TrainConfig())
        model = torch.compile(eager) if compile else eager

        def train_step(model=model, opt=opt) -> None:
            with autocast():
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        def fwd_step(model=model) -> None:
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
        info[name] = dict(params=count_params(eager), saved_bytes=saved_activation_bytes(eager, x, y, autocast),
                          peak_bytes=peak)
        opt.zero_grad(set_to_none=True)
        train_fns[name], fwd_fns[name] = train_step, fwd_step
        if log:
            log(f"built and warmed up {name} ({time.perf_counter() - t0:.1f} s)")

    timer = Timer(dev)
    def tagged(what: str) -> Callable[[str], None] | None:
        return (lambda line: log(f"{what}: {line}")) if log else None

    train = interleave(train_fns, rounds, steps=steps, timer=timer, seed=seed, log=tagged("train"))
    fwd = interleave(fwd_fns, rounds, steps=steps, timer=timer, seed=seed + 1, log=tagged("forward")) if forward else {}
    return {n: ArmResult(train_s=train[n], forward_s=fwd.get(n), **info[n]) for n in factories}


# ----------------------------------------------------------------------------- command line

# Per-device defaults. CPU: about a minute on 2 cores (the README (Performance)), single-threaded because
# on a shared machine a second thread stalls at every op's barrier whenever a neighbour holds its
# core, which adds noise in proportion to the op count (up to 100x per step, measured), not cost.
# CUDA: the ViT-S/16 target batch, and enough steps per visit to dwarf the event overhead.
DEVICE_DEFAULTS = {
    "cpu": {"batch": 4, "rounds": 16, "steps": 1, "warmup": 2, "dtype": "fp32", "threads": 1},
    "cuda": {"batch": 128, "rounds": 20, "steps": 5, "warmup": 5, "dtype": "bf16", "threads": None},
}


def add_arguments(parser) -> None:
    d = BenchShape()
    parser.add_argument("--schemes", nargs="+", metavar="ARM",
                        help=f"arms to measure (preln is always added); default: {' '.join(arm_names())}")
    parser.add_argument("--variants", action="store_true",
                        help="add layerscale:scalar, :head, :frozen, :unfused (timm-style multiply + add) and :folded "
                             "(γ folded into the branch's last linear)")
    parser.add_argument("--no-timm", dest="timm", action="store_false", help="leave out timm's ViT arms")
    parser.add_argument("--depth", type=int, default=d.depth, help="blocks (default: %(default)s, ViT-Ti)")
    parser.add_argument("--dim", type=int, default=d.dim, help="width (default: %(default)s; ViT-S: 384)")
    parser.add_argument("--heads", type=int, default=d.heads, help="attention heads (default: %(default)s; ViT-S: 6)")
    parser.add_argument("--tokens", type=int, default=d.tokens,
                        help="sequence length incl. the class token, n*n+1 with patch 16 (default: 65 = 128 px; 197 = 224 px)")
    parser.add_argument("--batch", type=int, help="default: 4 on cpu, 128 on cuda")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--compile", action="store_true", help="torch.compile every model")
    parser.add_argument("--dtype", choices=["fp32", "bf16"], help="default: fp32 on cpu, bf16 autocast on cuda")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default: 16 on cpu, 20 on cuda)")
    parser.add_argument("--steps", type=int, help="steps per timed visit (default: 1 on cpu, 5 on cuda)")
    parser.add_argument("--warmup", type=int, help="untimed steps per arm first (default: 2 on cpu, 5 on cuda)")
    parser.add_argument("--no-forward", dest="forward", action="store_false", help="time training steps only")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: 1 on cpu, torch's on cuda)")
    parser.add_argument("--seed", type=int, default=0, help="weights, input and visiting order")
    parser.add_argument("--out", default="results/bench", help="folder for overhead.{csv,md,json}")


def resolved_command(settings: dict) -> str:
    """The ``suite bench`` command line that repeats this measurement, every default spelled out."""
    s = settings
    parts = ["suite bench", "--schemes", *s["arms"][1:]] if len(s["arms"]) > 1 else ["suite bench"]
    for key in ("depth", "dim", "heads", "tokens", "batch", "device", "dtype", "rounds", "steps", "warmup",
                "threads", "seed"):
        parts += [f"--{key}", str(s[key])]
    parts += ["--compile"] if s["compile"] else []
    parts += [] if s["forward"] else ["--no-forward"]
    return " ".join(parts)


def _raise_recompile_limit() -> None:
    # Every arm compiles the same forward code objects again (other modules, other blocks); past
    # dynamo's per-code recompile limit (8) it would silently run the rest eager.
    import torch._dynamo

    for attr in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, attr):
            setattr(torch._dynamo.config, attr, max(64, getattr(torch._dynamo.config, attr)))


def run(args) -> int:
    import sys
    from pathlib import Path

    from suite import bench_report, store

    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but torch sees no CUDA device", file=sys.stderr)
        return 2
    defaults = DEVICE_DEFAULTS[args.device]
    opt = {k: getattr(args, k) if getattr(args, k) is not None else v for k, v in defaults.items()}
    if opt["threads"]:
        torch.set_num_threads(opt["threads"])
    names = arm_names(args.variants, args.timm) if not args.schemes else list(dict.fromkeys([BASELINE] + args.schemes))
    try:
        shape = BenchShape(depth=args.depth, dim=args.dim, heads=args.heads, tokens=args.tokens, batch=opt["batch"])
        shape.img_size  # noqa: B018  (validates tokens before anything is built)
        for name in names:
            check_arm(name)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    settings = {**dataclasses.asdict(shape), "device": args.device, "dtype": opt["dtype"], "compile": args.compile,
                "rounds": opt["rounds"], "steps": opt["steps"], "warmup": opt["warmup"], "forward": args.forward,
                "seed": args.seed, "threads": torch.get_num_threads(), "arms": names,
                "interval": "distribution-free 95% interval of the median of per-round ratios (order statistics)"}
    prov = store.provenance(args.device)
    t0 = time.perf_counter()
    results = measure(
        {n: (lambda n=n: build_arm(n, shape)) for n in names}, shape, device=args.device, dtype=opt["dtype"],
        compile=args.compile, rounds=opt["rounds"], warmup=opt["warmup"], steps=opt["steps"],
        forward=args.forward, seed=args.seed, log=lambda line: print(line, file=sys.stderr, flush=True),
    )
    rows = bench_report.build_rows(results)
    meta = {"command": resolved_command(settings), "settings": settings, "provenance": prov,
            "wall_s": round(time.perf_counter() - t0, 1)}
    paths = bench_report.write_outputs(Path(args.out), results, rows, meta)
    print(bench_report.markdown_table(rows))
    print(f"wrote {', '.join(str(p) for p in paths)} ({meta['wall_s']:.0f} s)")
    return 0
