"""Experiment trackers as optional sinks (``train.log_to``): ``tensorboard_sink.py``, ``wandb_sink.py``,
``mlflow_sink.py``. A sink that fails or hangs is dropped with a warning: a tracker outage never stops a run."""

from __future__ import annotations

import importlib
import importlib.util
import re
import threading
import warnings
from pathlib import Path
from typing import Any, Protocol

from suite import store

# name -> (module:class of the sink, built as cls(run_dir, summary); the package it needs, from the `trackers` extra)
SINKS: dict[str, tuple[str, str]] = {
    "tensorboard": ("suite.engine.trackers.tensorboard_sink:TensorBoardSink", "tensorboard"),
    "wandb": ("suite.engine.trackers.wandb_sink:WandbSink", "wandb"),
    "mlflow": ("suite.engine.trackers.mlflow_sink:MlflowSink", "mlflow"),
}
EXTRA = "pip install -e '.[trackers]'"
# Deeper models log their probes' mean and max over blocks, not per block (depth 1000 would send 5,000 series).
PER_BLOCK_UP_TO = 64
# The longest a tracker call may take before its sink is dropped: a backstop (sinks set shorter library timeouts).
CALL_TIMEOUT_S = 60.0
BLOCK_KEYS = ("scale_mean", "scale_max", "attn_ratio", "mlp_ratio", "out_rms", "attn_logit_max", "attn_entropy_min")


class TrackerError(Exception):
    """A tracker cannot be used (its package is missing); one line naming the fix."""


class Sink(Protocol):
    def log(self, step: int, values: dict[str, float]) -> None: ...

    def finish(self, summary: dict[str, Any]) -> None: ...

    def abort(self) -> None: ...


def missing(names: tuple[str, ...] | list[str]) -> str | None:
    """The problem, in one line, when a tracker in ``names`` lacks its package; else None."""
    for name in names:
        package = SINKS[name][1]
        if importlib.util.find_spec(package) is None:
            return f"train.log_to: {name} needs the {package} package: {EXTRA} (or pip install {package})"
    return None


def scalars(record: dict[str, Any]) -> tuple[int, dict[str, float]]:
    """The step and scalars of one ``metrics.jsonl`` record, as every sink names them (docs/trackers.md)."""
    step, kind = int(record.get("step") or 0), record.get("kind")
    out: dict[str, float] = {}
    if kind == "train":
        for key in ("loss", "lr", "grad_norm", "logit_rms", "update_ratio"):  # the last two: diagnostics
            out[f"train/{key}"] = record.get(key)
        blocks = record.get("blocks") or []
        for key in BLOCK_KEYS:
            values = [b.get(key) for b in blocks]
            if len(blocks) <= PER_BLOCK_UP_TO:
                out.update({f"blocks/{key}/{b.get('block', i):03d}": v for i, (b, v) in enumerate(zip(blocks, values))})
            else:
                present = [v for v in values if v is not None]
                if present:
                    out[f"blocks/{key}/mean"] = sum(present) / len(present)
                    out[f"blocks/{key}/max"] = max(present)
    elif kind == "eval":
        for split in ("val", "test"):
            for key in ("loss", "acc"):
                out[f"{split}/{key}"] = record.get(f"{split}_{key}")
    elif kind == "diverged":
        out["run/diverged"] = 1.0
    return step, {k: float(v) for k, v in out.items() if v is not None}


def experiment_folder(run_dir: Path) -> Path:
    """Where sweep-wide tracker files go: a sweep run's results folder (``runs/`` beside an ``ablation.yaml``), else
    the run folder itself (a `suite train --out x/runs/r` is not a sweep's)."""
    from suite.results import ABLATION_FILE

    run_dir = Path(run_dir).resolve()
    sweep = run_dir.parent.name == "runs" and (run_dir.parent.parent / ABLATION_FILE).is_file()
    return run_dir.parent.parent if sweep else run_dir


class Trackers:
    """The sinks of one run; every call is passed on to each, and a sink that raises is dropped."""

    def __init__(self, names: tuple[str, ...], run_dir: Path, summary: dict[str, Any]) -> None:
        """Open a sink for each name; :class:`TrackerError` when a tracker's package is not installed."""
        problem = missing(names)
        if problem:
            raise TrackerError(problem)
        self.sinks: dict[str, Sink] = {}
        for name in names:
            module, cls = SINKS[name][0].split(":")
            sink = getattr(importlib.import_module(module), cls)
            opened: list[Sink] = []  # a sink that opens only after its time is up stays out
            self._call(name, lambda sink=sink, opened=opened: opened.append(sink(Path(run_dir), summary)))
            if opened:
                self.sinks[name] = opened[0]

    def log(self, record: dict[str, Any]) -> None:
        if not self.sinks:
            return
        step, values = scalars(record)
        if values:
            for name, sink in list(self.sinks.items()):
                self._call(name, lambda sink=sink: sink.log(step, values))

    def finish(self, summary: dict[str, Any]) -> None:
        for name, sink in list(self.sinks.items()):
            self._call(name, lambda sink=sink: sink.finish(summary))
        self.sinks = {}

    def abort(self) -> None:
        """The run stops unfinished (killed, preempted): close what is open, mark nothing as done."""
        for name, sink in list(self.sinks.items()):
            self._call(name, sink.abort)
        self.sinks = {}

    def _call(self, name: str, fn) -> None:
        """``fn()``, given at most ``CALL_TIMEOUT_S``; a sink that raises or takes longer is dropped."""
        err = _bounded(fn, CALL_TIMEOUT_S)
        if err is None:
            return
        sink = self.sinks.pop(name, None)
        if sink is not None and not isinstance(err, TimeoutError):
            # close what it holds open (a writer, a W&B run) in a long-lived worker, without waiting long
            _bounded(sink.abort, min(5.0, CALL_TIMEOUT_S))
        why = f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"
        warnings.warn(f"train.log_to: {name} failed and is off for this run ({why}); metrics.jsonl has everything",
                      store.SuiteWarning, stacklevel=3)


def _bounded(fn, timeout_s: float) -> BaseException | None:
    """Run ``fn()`` in a daemon thread for at most ``timeout_s``: None, or its exception (``TimeoutError``)."""
    result: list[BaseException | None] = []

    def target() -> None:
        try:
            fn()
            result.append(None)
        except Exception as err:  # noqa: BLE001  (a tracker outage must not stop the run)
            result.append(err)

    thread = threading.Thread(target=target, name="suite-tracker", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if not result:
        return TimeoutError(f"no answer in {timeout_s:g} s")
    return result[0]


def run_name(summary: dict[str, Any], run_dir: Path | None = None) -> str:
    """A run's name in every tracker, e.g. ``layerscale-depth=24-lr=0.001-seed1-3f2a9c1b0d4e``."""
    parts = [str(summary[k]) for k in ("variant",) if summary.get(k)]
    axes = grid_axes(run_dir) if run_dir is not None else []
    short = [k.rsplit(".", 1)[-1] for k in axes]  # model.depth -> depth, unless two axes share it
    parts += [f"{s if short.count(s) == 1 else k}={summary.get(k)}" for k, s in zip(axes, short) if k in summary]
    parts.append(f"seed{summary.get('seed')}")
    parts.append(str(summary.get("run_id")))
    return re.sub(r"[^A-Za-z0-9._=+-]", "_", "-".join(parts))[:200]


def grid_axes(run_dir: Path) -> list[str]:
    """The grid's dotted keys of the sweep that ``run_dir`` belongs to ([] for ``suite train``)."""
    from suite.results import recorded_ablation

    folder = experiment_folder(run_dir)
    if folder == Path(run_dir).resolve():
        return []
    try:
        grid = recorded_ablation(folder).get("grid") or {}
    except ValueError:  # unreadable: the run is tracked without its grid axes
        return []
    return [str(k) for k in grid] if isinstance(grid, dict) else []


def config_of(summary: dict[str, Any]) -> dict[str, Any]:
    """The run's resolved config (the dotted keys of the summary) and its place in the ablation."""
    keys = {k: v for k, v in summary.items() if k.partition(".")[0] in ("model", "data", "train")}
    meta = {k: summary.get(k) for k in ("run_id", "ablation", "variant", "seed", "device")}
    return {**meta, **keys}
