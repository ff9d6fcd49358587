"""The line a sweep says as it starts its workers (how many, for how many runs, about how long by ``suite cost``), and
the time left once runs finish (:func:`remaining_seconds`: each run timed by its FLOPs, fitted to finished runs)."""

from __future__ import annotations

import dataclasses
import heapq

from suite.config import approx_params
from suite.sweep.spec import Ablation, Run

ASSUMED_TFLOPS = 100.0  # `suite cost`'s default
MEASURE_PARAMS = 20e6  # a larger model is not timed here: its few steps on the CPU would hold up the start


def starting_line(ablation: Ablation, todo: list[Run], n: int, threads: int, device: str) -> str:
    """E.g. ``starting 2 workers; 63 runs, about 12 min of training steps by suite cost's estimate (...)``."""
    line = f"starting {n} worker{'s' if n != 1 else ''}; {len(todo)} run{'s' if len(todo) != 1 else ''}"
    how_long = estimate_text(ablation, todo, n, threads, device)
    return f"{line}, {how_long}" if how_long else line


def estimate_text(ablation: Ablation, todo: list[Run], n: int, threads: int, device: str) -> str | None:
    """``about 12 min of training steps by suite cost's estimate (how; ...)``, or None where there is none."""
    from suite.models.flops import train_step_flops
    from suite.sweep.cost import CostError, cost_shape, estimate

    if not todo or any(r.kind != "train" for r in todo):
        return None
    try:
        cost = estimate(dataclasses.replace(ablation, runs=todo))
        cfg, _ = cost_shape(todo[0].cfg)
    except CostError:
        return None
    if device == "cpu":
        ms = None if approx_params(cfg.model) > MEASURE_PARAMS else _measure(cfg, threads)
        if ms is None:
            return None
        tflops = train_step_flops(cfg.model, cfg.train.batch_size) / (ms / 1e3) / 1e12
        how = f"{ms:.1f} ms per step of the first run's shape, measured here"
    else:
        tflops, how = ASSUMED_TFLOPS, f"at an assumed {ASSUMED_TFLOPS:g} TFLOP/s"
    rate = tflops * 1e12  # FLOP/s; each run's steps queued over the workers in the order they take them
    flops = [run_flops(r) for r in todo]
    wall = (cost.hours(tflops) * 3600 / min(n, len(todo)) if any(f is None for f in flops)
            else queue_seconds([f / rate for f in flops], min(n, len(todo))))
    return f"{about(wall)} of training steps by suite cost's estimate ({how}; start-up and evaluation not counted)"


def run_flops(run: Run) -> float | None:
    """A run's training FLOPs (:func:`suite.sweep.cost.estimate`'s model of one run), None where unknown."""
    from suite.models.flops import train_step_flops
    from suite.sweep.cost import CostError, cost_shape, run_steps

    try:
        cfg, train = cost_shape(run.cfg)
        return float(run_steps(cfg, train) * train_step_flops(cfg.model, cfg.train.batch_size))
    except (CostError, ValueError, AttributeError):
        return None


def fit_seconds(done: list[tuple[float, float]]) -> tuple[float, float] | None:
    """Seconds a run takes as ``a + b * flops`` (``a`` >= 0: start-up and evaluation), fitted on finished runs
    ``(flops, wall seconds)``; through the origin where they span one shape. None without a finished run."""
    import numpy as np

    pts = [(f, w) for f, w in done if f and f > 0 and w and w > 0]
    if not pts:
        return None
    x, y = np.array([p[0] for p in pts]), np.array([p[1] for p in pts])
    if np.ptp(x) > 0.05 * x.max():
        b, a = np.polyfit(x, y, 1)
        if a >= 0 and b > 0:
            return float(a), float(b)
    return 0.0, float(y.sum() / x.sum())


def queue_seconds(costs: list[float], workers: int, busy: list[float] | None = None) -> float:
    """When the last of ``costs`` (seconds per run, in order) ends over ``workers``, each still ``busy`` for seconds."""
    free = sorted((busy or [])[:workers]) + [0.0] * max(0, workers - len(busy or []))
    heapq.heapify(free)
    end = max(free, default=0.0)
    for cost in costs:
        start = heapq.heappop(free)
        heapq.heappush(free, start + cost)
        end = max(end, start + cost)
    return end


def remaining_seconds(done: list[tuple[float, float]], left: list[float], running: list[tuple[float, float]],
                      workers: int) -> float | None:
    """Seconds until a sweep ends: the runs ``left`` (FLOPs) queued after those ``running`` (``(flops, fraction
    done)``), each timed by :func:`fit_seconds`. None before a run has finished."""
    fit = fit_seconds(done)
    if fit is None:
        return None
    a, b = fit
    busy = [(a + b * f) * (1.0 - min(max(frac, 0.0), 1.0)) for f, frac in running]
    return queue_seconds([a + b * f for f in left], max(1, workers), busy)


def about(seconds: float) -> str:
    """A rough duration, as precise as an estimate is: ``under a minute``, ``about 12 min``, ``about 3.5 h``."""
    if seconds < 60:
        return "under a minute"
    if seconds < 90 * 60:
        return f"about {round(seconds / 60)} min"
    return f"about {seconds / 3600:.1f} h"


def _measure(cfg, threads: int) -> float | None:
    """Milliseconds per step, leaving the caller's random state as it was; None when the step fails."""
    import torch

    from suite.sweep.cost import measure_step_ms

    with torch.random.fork_rng(devices=[]):
        try:
            return measure_step_ms(cfg, threads, steps=3, warmup=1)
        except (RuntimeError, ValueError):  # an estimate must not stop the sweep
            return None
