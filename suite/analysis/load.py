"""Reading a folder of finished runs back: their summaries, and their training curves."""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from suite import store


class AnalysisError(ValueError):
    """A user error (bad folder, mixed ablations, missing baseline): one line, with the fix."""


class AnalysisWarning(store.SuiteWarning):
    """Something the user should know that does not stop the analysis (e.g. runs that errored)."""


# ----------------------------------------------------------------------------- loading


def load_runs(run_dir: str | Path) -> list[dict[str, Any]]:
    """Read every ``summary.json`` under ``run_dir`` (recursively).

    Args:
        run_dir: a folder of runs, e.g. ``results/<ablation>``.

    Returns:
        One dict per run: the summary's fields plus ``run_dir`` (the run folder relative to
        ``run_dir``, POSIX style). ``variant`` falls back to ``model.residual`` for runs made
        outside a sweep.

    A summary that cannot be trusted (not a JSON object, not UTF-8, an unknown status, no
    ``seed`` or ``model.depth``, a result that is not a number) is skipped with an
    :class:`AnalysisWarning` naming the file.

    Raises:
        AnalysisError: missing folder, no usable runs, duplicate run ids, or runs of more than one
            ablation.
    """
    root = Path(run_dir)
    if not root.is_dir():
        raise AnalysisError(f"{root}: no such folder; pass a folder of runs, e.g. results/<ablation>")
    runs = []
    for path in sorted(root.rglob(store.SUMMARY)):
        summary, problem = _read_summary(path)
        if problem:
            warnings.warn(f"{path}: skipped: {problem}; delete its run folder and `suite run` runs it again",
                          AnalysisWarning)
            continue
        if summary.get("variant") is None:
            summary["variant"] = summary.get("model.residual")
        summary["run_dir"] = path.parent.relative_to(root).as_posix()
        runs.append(summary)
    if not runs:
        raise AnalysisError(f"{root}: no usable summary.json found; point at a folder of finished runs "
                            f"(results/<ablation>)")
    _check_one_ablation(runs, root)
    seen: dict[str, str] = {}
    for r in runs:
        rid = r.get("run_id")
        if rid is not None and rid in seen:
            raise AnalysisError(
                f"run_id {rid} appears twice ({seen[rid]} and {r['run_dir']}); "
                f"remove one copy so that it is not counted twice"
            )
        seen[rid] = r["run_dir"]
    if any(r.get("schema", 1) != 1 for r in runs):
        warnings.warn("some summaries are not schema 1; fields may be missing", AnalysisWarning)
    return runs


# Result fields that must be numbers (or null) for the statistics to mean anything.
NUMERIC = ("val_acc", "best_val_acc", "test_acc", "best_test_acc", "final_train_loss", "step_time_ms", "throughput", "peak_mem_mb",
           "diverged_step", "steps_done", "wall_s", "num_params")


def _read_summary(path: Path) -> tuple[dict[str, Any], str | None]:
    """A summary and ``None``, or ``{}`` and why it cannot be used."""
    try:
        summary = store.read_json(path)
    except (OSError, ValueError) as err:  # a folder, unreadable, bad UTF-8, bad JSON
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err).splitlines()[0]
        return {}, f"cannot read it ({reason})"
    if not isinstance(summary, dict):
        return {}, f"expected a JSON object, got a {type(summary).__name__}"
    if summary.get("status") not in store.STATUSES:
        return {}, f"status {summary.get('status')!r} is not one of {', '.join(store.STATUSES)}"
    if summary.get("variant") is None and summary.get("model.residual") is None:
        return {}, "neither 'variant' nor 'model.residual' is set, so the scheme is unknown"
    for key in ("seed", "model.depth"):
        if not _is_int(summary.get(key)):
            return {}, f"'{key}' is {summary.get(key)!r}, not an integer"
    for key in NUMERIC:
        value = summary.get(key)
        if value is not None and not (isinstance(value, (int, float)) and not isinstance(value, bool)):
            return {}, f"'{key}' is {value!r}, not a number"
    problem = store.summary_problem(summary)
    return ({}, problem) if problem else (summary, None)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_one_ablation(runs: list[dict[str, Any]], root: Path) -> None:
    folders: dict[str, list[str]] = {}
    for r in runs:
        name = "(no ablation)" if r.get("ablation") is None else str(r["ablation"])
        folders.setdefault(name, []).append(r["run_dir"])
    if len(folders) > 1:
        listed = ", ".join(f"{k}: {len(v)} runs" for k, v in sorted(folders.items()))
        where = sorted({(root / _ablation_folder(v)).as_posix() for v in folders.values()})
        raise AnalysisError(
            f"{root} mixes runs of {len(folders)} ablations ({listed}); they are not pooled: "
            f"analyze one ablation at a time, e.g. suite analyze {where[0]}"
        )


def _ablation_folder(run_dirs: list[str]) -> str:
    """The folder that holds these runs: the part before ``runs/`` in the layout, if present."""
    parts = Path(os.path.commonpath(run_dirs)).parts
    if "runs" in parts:
        parts = parts[: len(parts) - 1 - parts[::-1].index("runs")]
    return Path(*parts).as_posix() if parts else "."


def read_curves(run_path: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Training curves of one run from its ``metrics.jsonl`` (read by :func:`suite.store.read_metrics`).

    Args:
        run_path: the run folder.

    Returns:
        ``(train, blocks)``: ``train`` has columns step, loss (one row per ``train`` record);
        ``blocks`` has columns step, block, scale_mean (one row per block per record, only
        where ``scale_mean`` is not null). Both are empty if the file is missing. A cut-off last
        line (a run killed mid-write) is skipped with an :class:`AnalysisWarning`.

    Raises:
        AnalysisError: a damaged line before the last one (names the file and the line).
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            records = store.read_metrics(Path(run_path))
        except store.CorruptFile as err:
            raise AnalysisError(str(err)) from None
    for w in caught:
        warnings.warn(str(w.message), AnalysisWarning)
    train, blocks = [], []
    for rec in records:
        if rec.get("kind") != "train":
            continue
        loss = rec.get("loss")
        train.append((rec.get("step"), math.nan if loss is None else loss))
        for b in rec.get("blocks") or []:
            if b.get("scale_mean") is not None:
                blocks.append((rec.get("step"), b.get("block"), b["scale_mean"]))
    return (
        pd.DataFrame(train, columns=["step", "loss"], dtype=float),
        pd.DataFrame(blocks, columns=["step", "block", "scale_mean"], dtype=float),
    )
