"""One run of a sweep, as every backend executes it, and the record of a run whose process died."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from suite import store
from suite.sweep.folder import run_dir
from suite.sweep.spec import Run

# Test hook, read by workers only: `SUITE_TEST_CRASH_RUN=<run_id>` makes the worker that picks up
# that run die with os._exit(3), the only way to test worker death across processes.
CRASH_ENV = "SUITE_TEST_CRASH_RUN"
RESULT_KEYS = ("status", "test_acc", "diverged_step", "diverged_reason", "error", "wall_s", "stream_growth",
               "grad_ratio")


def execute(cfg, out_dir: str, extra: dict[str, Any], on_step: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Train one run into ``out_dir`` (or measure its signal propagation, when ``extra["kind"]`` is
    ``propagation``); always writes its summary; returns the headline results.

    A full disk is not the run's result: the run is left without a summary (so it runs again) and
    ``{"disk_full": path}`` is returned for :func:`check_result` to stop the sweep with.

    ``on_step`` is passed to the trainer (a Slurm worker stops a run there when it is preempted).
    """
    if os.environ.get(CRASH_ENV) == store.run_id(cfg):
        os._exit(3)
    try:
        if extra.get("kind") == "propagation":
            from suite.engine.propagation import propagate

            summary = propagate(cfg, out_dir, extra=extra)
        else:
            from suite.engine import train

            summary = train(cfg, out_dir, progress=False, extra=extra, on_step=on_step)
    except store.DiskFull as err:
        return {"disk_full": err.path}
    return {k: summary.get(k) for k in RESULT_KEYS}


def execute_pack(items: list[tuple[Any, str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Train ``items`` (``(cfg, out_dir, extra)`` each) as one pack (:mod:`suite.engine.pack`); the
    headline results of each, in order. A pack of one is a solo run."""
    if len(items) == 1:
        return [execute(*items[0])]
    if any(os.environ.get(CRASH_ENV) == store.run_id(cfg) for cfg, _, _ in items):
        os._exit(3)
    from suite.engine.pack import train_pack

    cfgs, dirs, extras = zip(*items)
    try:
        summaries = train_pack(list(cfgs), list(dirs), list(extras))
    except store.DiskFull as err:
        return [{"disk_full": err.path} for _ in items]
    return [{k: s.get(k) for k in RESULT_KEYS} for s in summaries]


def check_result(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` as it is, unless it says the disk is full.

    Raises:
        DiskFull: the run found no space left; the whole sweep stops, finished runs stay intact.
    """
    if result.get("disk_full"):
        raise store.DiskFull(result["disk_full"])
    return result


def record_lost(run: Run, out: Path, message: str, wall_s: float, device: str) -> dict[str, Any]:
    """Write an ``error`` summary for a run whose process died before it could write one.

    Same shape as :func:`suite.engine.train`'s summary. If the run did write its summary before
    dying, that one is kept.
    """
    folder = run_dir(out, run)
    existing = store.read_summary(folder)
    if existing is not None:
        return {k: existing.get(k) for k in RESULT_KEYS}
    try:
        trains = [m for m in store.read_metrics(folder) if m.get("kind") == "train"]
    except store.CorruptFile:  # the run is lost either way; its error summary must still be written
        trains = []
    summary = store.empty_summary(run.cfg, {**run.extra, "seed": run.seed})
    summary.update(error=message, steps_done=trains[-1]["step"] if trains else 0,
                   **store.provenance(device, name=device), wall_s=round(wall_s, 3))
    store.write_json(folder / store.SUMMARY, summary)
    return {k: summary.get(k) for k in RESULT_KEYS}
