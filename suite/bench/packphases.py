"""``suite bench --pack-phases N``: where a run's host time goes, phase by phase, solo against one member of an eager
pack of N: a CPU proxy of what caps packs on a GPU."""

from __future__ import annotations

import contextlib
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

from suite.bench.counts import Counting, StepCount

# phase -> the methods whose calls it times (owner module, class and method name)
PHASES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "setup": (("suite.engine.lifecycle", "RunFolder", "start"), ("suite.engine.loop", "Training", "setup"),
              ("suite.engine.pack", "Pack", "__init__")),
    "steps": (("suite.engine.loop", "Training", "step"), ("suite.engine.pack", "Pack", "step")),
    "probes": (("suite.engine.loop", "Training", "probes"), ("suite.engine.pack", "Pack", "_probes")),
    "evaluation": (("suite.engine.loop", "Training", "evaluate"),),
    "writes": (("suite.engine.loop", "Training", "log"), ("suite.engine.loop", "Training", "save"),
               ("suite.engine.loop", "Training", "finish"), ("suite.engine.lifecycle", "RunFolder", "close")),
}
ORDER = (*PHASES, "other")
COUNTED_STEP = 3  # the step whose operators are counted (after the first steps' one-off work)


@contextlib.contextmanager
def timed_phases() -> Iterator[dict[str, Any]]:
    """Within the block, each :data:`PHASES` call adds its exclusive seconds to ``totals[phase]``."""
    import importlib

    totals: dict[str, Any] = {p: 0.0 for p in PHASES}
    totals["ops"] = {}
    stack: list[list] = []  # [phase, started]
    originals = []

    def wrap(phase: str, kind: str, fn):
        calls = [0]

        def timed(self, *args, **kwargs):
            now = time.perf_counter()
            if stack:
                totals[stack[-1][0]] += now - stack[-1][1]
            stack.append([phase, now])
            calls[0] += 1
            counting = phase == "steps" and calls[0] == COUNTED_STEP and kind not in totals["ops"]
            try:
                if counting:
                    count = StepCount()
                    with Counting(count):
                        return fn(self, *args, **kwargs)
                return fn(self, *args, **kwargs)
            finally:
                if counting:
                    totals["ops"][kind] = count.calls
                end = time.perf_counter()
                totals[phase] += end - stack.pop()[1]
                if stack:
                    stack[-1][1] = end
        return timed

    for phase, methods in PHASES.items():
        for module, cls_name, name in methods:
            cls = getattr(importlib.import_module(module), cls_name)
            originals.append((cls, name, cls.__dict__[name]))
            setattr(cls, name, wrap(phase, cls_name, cls.__dict__[name]))
    try:
        yield totals
    finally:
        for cls, name, fn in originals:
            setattr(cls, name, fn)


def measure(n: int, steps: int, log=None) -> dict[str, Any]:
    """One solo run and one eager pack of ``n`` on the CPU: ``{"solo": ..., "pack": ...}``, seconds per run by phase."""
    from suite.bench.throughput import DEFAULT_BASE
    from suite.config import flatten, load_config
    from suite.data import load_dataset
    from suite.engine import train
    from suite.engine.pack import train_pack

    flat = {**flatten(DEFAULT_BASE), "train.steps": steps, "train.eval_every": max(steps // 2, 1), "device": "cpu"}

    def cfg(seed: int):
        return load_config(None, [f"{k}={v}" for k, v in {**flat, "seed": seed}.items()])

    out = {}
    with tempfile.TemporaryDirectory(prefix="suite-pack-phases-") as tmp:
        # untimed: the dataset's first load, the first model built and stepped (one-off work of a process)
        warm = load_config(None, [f"{k}={v}" for k, v in {**flat, "train.steps": 2, "train.eval_every": 1}.items()])
        load_dataset(warm.data)
        train(warm, Path(tmp) / "warm-up", progress=False)
        for arm, runs in (("solo", 1), ("pack", n)):
            with timed_phases() as totals:
                started = time.perf_counter()
                if arm == "solo":
                    train(cfg(0), Path(tmp) / "solo", progress=False)
                else:
                    train_pack([cfg(s) for s in range(n)], [Path(tmp) / "pack" / str(s) for s in range(n)])
                wall = time.perf_counter() - started
            phases = {p: totals[p] / runs for p in PHASES}
            phases["other"] = wall / runs - sum(phases.values())
            out[arm] = {"runs": runs, "wall_per_run_s": wall / runs, "phases_per_run_s": phases,
                        "step_ops": totals["ops"].get("Pack" if arm == "pack" else "Training")}
            if log:
                log(f"{arm}: {runs} run(s), {wall:.1f} s")
    return out


def markdown(result: dict[str, Any], header: str) -> str:
    solo, pack = result["solo"], result["pack"]
    n = pack["runs"]
    lines = [header, "",
             f"Host seconds per run, by phase: one solo run against one member of an eager pack of {n} (the pack's "
             f"time over its members), on the CPU, at the default ablation's shape at depth 12 "
             f"(suite/bench/packphases.py). On a GPU the steps shrink and the other phases do not.", "",
             f"| phase | solo s/run | pack of {n}, s/member | pack / solo |", "|---|---:|---:|---:|"]
    for phase in ORDER:
        a, b = solo["phases_per_run_s"][phase], pack["phases_per_run_s"][phase]
        lines.append(f"| {phase} | {a:.3f} | {b:.3f} | {_ratio(b, a)} |")
    lines.append(f"| **run** | {solo['wall_per_run_s']:.3f} | {pack['wall_per_run_s']:.3f} | "
                 f"{_ratio(pack['wall_per_run_s'], solo['wall_per_run_s'])} |")
    so, po = solo["step_ops"], pack["step_ops"]
    lines += ["", f"Operators one training step dispatches (step {COUNTED_STEP}, counted): solo {so}, the pack of {n} "
              f"{po} ({_ratio(po, so) if so and po else 'n/a'} of solo for {n} runs: {po / n:.0f} per member)."
              if so and po else "", ""]
    return "\n".join(lines)


def _ratio(a: float, b: float) -> str:
    return f"x{a / b:.2f}" if b else "n/a"
