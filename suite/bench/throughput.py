"""Runs per hour: how many short training runs of one shape a machine finishes through the sweep, solo, co-located or
packed: how long an ablation takes (docs/benchmark.md, "Runs per hour")."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from suite.bench.report import provenance_line, write_results

# The default ablation's model shape at depth 12, batch 64 (the reference table's).
DEFAULT_BASE: dict[str, Any] = {
    "data": {"name": "mnist5k"},
    "model": {"patch_size": 7, "dim": 32, "heads": 2, "mlp_ratio": 4.0, "depth": 12, "residual": "layerscale"},
    "train": {"steps": 100, "batch_size": 64, "warmup_steps": 20, "log_every": 10, "eval_every": 0, "lr": 3.2e-3},
}


@dataclass(frozen=True)
class Arm:
    name: str
    workers: int
    threads: int
    pack: int = 1
    compile: bool = False


def default_arms(device: str, co_located: list[int], packed: list[int] = (), cores: int | None = None,
                 compiled: bool = False) -> list[Arm]:
    """``solo``, ``co-located K`` for each K and ``packed N`` for each N, then (``compiled``) each again compiled."""
    cores = cores or os.cpu_count() or 1
    if device == "cpu":
        arms = [Arm("solo", 1, cores)] + [Arm(f"co-located {k}", k, max(1, cores // k)) for k in co_located]
        arms += [Arm(f"packed {n}", 1, cores, n) for n in packed]
    else:
        arms = ([Arm("solo", 1, 1)] + [Arm(f"co-located {k}", k, 1) for k in co_located]
                + [Arm(f"packed {n}", 1, 1, n) for n in packed])
    return arms + [dataclasses.replace(a, name=f"{a.name} compiled", compile=True) for a in arms if compiled]


def bench_gpu(device: str) -> str | None:
    """The GPU id every arm runs on (the first visible), so arms compare runs per GPU; None on a CPU or without one."""
    if device == "cpu":
        return None
    from suite.sweep.plan import visible_gpus

    return next(iter(visible_gpus()), None)


@contextlib.contextmanager
def _environ(key: str, value: str | None) -> Iterator[None]:
    """``os.environ[key]`` = ``value`` inside (unchanged where ``value`` is None), then as before."""
    before = os.environ.get(key)
    if value is not None:
        os.environ[key] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before


def _only_gpu(gpu: str | None) -> contextlib.AbstractContextManager[None]:
    """``CUDA_VISIBLE_DEVICES`` = ``gpu`` inside (the sweep hands its workers the GPUs it lists), then as before."""
    return _environ("CUDA_VISIBLE_DEVICES", gpu)


def median_step_ms(folder: Path) -> float | None:
    """The median ``step_time_ms`` of the runs under ``folder/runs``; None where no run timed a step."""
    from suite import store

    times = [float(v) for run_dir in sorted(folder.glob("runs/*"))
             if (v := (store.read_summary(run_dir) or {}).get("step_time_ms")) is not None]
    return round(statistics.median(times), 2) if times else None


def measure_throughput(arms: list[Arm], *, runs: int, device: str, base: dict[str, Any] | None = None,
                       steps: int | None = None, log: Callable[[str], None] = lambda line: None) -> list[dict[str, Any]]:
    """Train ``runs`` runs per arm; one row per arm. Raises RuntimeError when a run ended in ``error``."""
    from suite.sweep.sweep import SweepOptions, run_sweep

    base = {k: dict(v) for k, v in (base or DEFAULT_BASE).items()}
    if steps is not None:
        base["train"]["steps"] = steps
    rows: list[dict[str, Any]] = []
    gpu = bench_gpu(device)
    # Inductor's on-disk caches in a fresh folder, so the workers compile from nothing.
    with tempfile.TemporaryDirectory(prefix="suite-throughput-") as tmp, _only_gpu(gpu), \
            _environ("TORCHINDUCTOR_CACHE_DIR", str(Path(tmp) / "compile-cache")):
        # Untimed: so that no arm pays for a cold file cache, the first data load or starting the fork server.
        warm = {"name": "throughput", "base": {**base, "train": {**base["train"], "steps": 2, "compile": False}},
                "variants": {"run": {}}}
        run_sweep(warm, Path(tmp) / "warm-up", SweepOptions(device=device, workers=1,
                                                              threads=arms[0].threads if arms else 1))
        for arm in arms:
            spec = {"name": "throughput", "base": {**base, "train": {**base["train"], "compile": arm.compile}},
                    "seeds": runs, "variants": {"run": {}}}
            log(f"{arm.name}: {runs} runs, {arm.workers} worker(s) x {arm.threads} thread(s)")
            folder = Path(tmp) / arm.name.replace(" ", "-")
            t0 = time.perf_counter()
            sweep = run_sweep(spec, folder, SweepOptions(device=device, workers=arm.workers, threads=arm.threads,
                                                         pack=arm.pack))
            wall = time.perf_counter() - t0
            errors = [r["error"] for r in sweep.results.values() if r["status"] == "error"]
            if errors or sweep.stopped:
                raise RuntimeError(f"throughput arm {arm.name}: a run ended in error ({(errors or [sweep.stopped])[0]})")
            statuses = {str(r["status"]) for r in sweep.results.values()}
            rows.append({"arm": arm.name, "workers": arm.workers, "threads_per_run": arm.threads, "pack": arm.pack,
                         "compile": arm.compile, "gpu": gpu, "runs": runs, "steps": base["train"]["steps"],
                         "wall_s": round(wall, 2), "runs_per_hour": round(runs / wall * 3600, 1),
                         "step_ms": median_step_ms(folder), "statuses": ",".join(sorted(statuses))})
    for row in rows:
        row["speedup"] = round(row["runs_per_hour"] / rows[0]["runs_per_hour"], 3)
    return rows


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    compiled = any(r.get("compile") for r in rows)
    lines = [
        "# Runs per hour: solo, co-located and packed" + (", eager and compiled" if compiled else "") + "\n",
        f"`{meta['command']}`\n",
        f"{provenance_line(meta['provenance'])}. Each arm "
        f"trains the same runs (the default ablation's shape at depth 12: "
        f"{meta['shape']}) through the local backend's workers, their start-up included (not their fork "
        f"server's, started by an untimed warm-up); "
        f"speed-up is against `{rows[0]['arm']}` measured in the same command. The median step is over the "
        f"arm's runs (a packed run's step is its pack's, for all its members at once).\n",
    ]
    if compiled:
        lines.append("The compiled arms (`train.compile: true`) start from empty compile caches, so their wall "
                     "time includes compiling from nothing, as on a fresh machine: a solo run compiles its blocks "
                     "(every run, from the on-disk cache after the first), a pack its whole step once per worker "
                     "and shape.\n")
    lines += ["| arm | workers x threads | runs per worker at once | runs | steps | wall (s) | median step (ms) | "
              "runs / hour | speed-up |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        step = "-" if r.get("step_ms") is None else f"{r['step_ms']:.1f}"
        lines.append(f"| {r['arm']} | {r['workers']} x {r['threads_per_run']} | {r['pack']} | {r['runs']} | {r['steps']} | "
                     f"{r['wall_s']:.1f} | {step} | {r['runs_per_hour']:.0f} | {r['speedup']:.2f}x |")
    return "\n".join(lines) + "\n"


def write_outputs(out: Path, rows: list[dict[str, Any]], meta: dict[str, Any]) -> list[Path]:
    """``throughput.{csv,md,json}`` under ``out``."""
    return write_results(out, "throughput", rows, markdown(rows, meta), {**meta, "rows": rows})
