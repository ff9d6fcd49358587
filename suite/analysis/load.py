"""Reading a folder of finished runs back: their summaries, and their training curves."""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from suite import store


class AnalysisError(ValueError):
    """A user error (bad folder, mixed ablations, missing baseline): one line, with the fix."""


class AnalysisWarning(UserWarning):
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

    Raises:
        AnalysisError: missing folder, no runs, unreadable summary, unknown status, duplicate
            run ids, or runs of more than one ablation.
    """
    root = Path(run_dir)
    if not root.is_dir():
        raise AnalysisError(f"{root}: no such folder; pass a folder of runs, e.g. results/<ablation>")
    runs = []
    for path in sorted(root.rglob(store.SUMMARY)):
        try:
            summary = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise AnalysisError(f"{path}: cannot read it ({err}); delete the file to rerun that run") from None
        if not isinstance(summary, dict):
            raise AnalysisError(f"{path}: expected a JSON object; delete the file to rerun that run")
        if summary.get("status") not in store.STATUSES:
            raise AnalysisError(f"{path}: status {summary.get('status')!r} is not one of {', '.join(store.STATUSES)}")
        if summary.get("variant") is None:
            summary["variant"] = summary.get("model.residual")
        if summary["variant"] is None:
            raise AnalysisError(f"{path}: neither 'variant' nor 'model.residual' is set; cannot name the scheme")
        summary["run_dir"] = path.parent.relative_to(root).as_posix()
        runs.append(summary)
    if not runs:
        raise AnalysisError(f"{root}: no summary.json found; point at a folder of finished runs (results/<ablation>)")
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
