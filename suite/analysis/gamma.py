"""LayerScale's γ over training (``tables/gamma.csv``): each block's mean |γ| at log-spaced steps, averaged over a
group's seeds; groups whose run folders are absent keep the rows they were analysed with."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from suite.grouping import group_of
from suite.results import read_curves, run_folder

COLUMNS = ["step", "block", "scale_mean", "n_runs"]
PER_DECADE = 4  # log-spaced steps kept per decade


def log_steps(steps: list[int], per_decade: int = PER_DECADE) -> list[int]:
    """The logged ``steps`` nearest (in log) to 10^(k/per_decade), the last, and 0 if logged: once each, in order."""
    have = sorted({int(s) for s in steps})
    if not have:
        return []
    positive = [s for s in have if s > 0]
    keep = {have[0]} if have[0] == 0 else set()
    if positive:
        logs = np.log10(positive)
        for k in range(int(math.ceil(logs[-1] * per_decade)) + 1):
            keep.add(positive[int(np.argmin(np.abs(logs - k / per_decade)))])
        keep.add(positive[-1])
    return sorted(keep)


def gamma_table(root: Path, runs: list[dict[str, Any]], keys: list[str]) -> pd.DataFrame | None:
    """Per group, step and block: the block's mean |γ| over the group's runs, and their count; None without γ."""
    parts = []
    for r in runs:
        folder = run_folder(root, r)
        if r["status"] == "error" or folder is None:
            continue
        blocks = read_curves(folder)[1]
        if blocks.empty:
            continue
        blocks = blocks[blocks["step"].isin(log_steps(blocks["step"].astype(int).tolist()))]
        blocks = blocks.assign(**{k: [v] * len(blocks) for k, v in zip(keys, group_of(r, keys))})  # a tuple too
        parts.append(blocks)
    if not parts:
        return None
    frame = pd.concat(parts, ignore_index=True)
    frame["step"], frame["block"] = frame["step"].astype(int), frame["block"].astype(int)
    out = (frame.groupby([*keys, "step", "block"], sort=True, dropna=False)["scale_mean"]
           .agg(scale_mean="mean", n_runs="count").reset_index())
    return out[[*keys, *COLUMNS]]


def gamma_frame(root: Path, runs: list[dict[str, Any]], keys: list[str]) -> pd.DataFrame | None:
    """:func:`gamma_table` for groups with every run folder here, :func:`read_back`'s rows for the others."""
    absent = {group_of(r, keys) for r in runs
              if (folder := run_folder(root, r)) is None or not (folder / "metrics.jsonl").is_file()}
    fresh = gamma_table(root, [r for r in runs if group_of(r, keys) not in absent], keys)
    old = read_back(root) if absent else None
    old = (old[[group_of(row, keys) in absent for row in old.to_dict("records")]][[*keys, *COLUMNS]]
           if old is not None and set(keys) <= set(old.columns) else None)
    parts = [f for f in (fresh, old) if f is not None and not f.empty]
    return pd.concat(parts, ignore_index=True) if parts else None


def read_back(root: Path) -> pd.DataFrame | None:
    """``tables/gamma.csv`` as a previous analysis wrote it; None when absent or unreadable."""
    from io import StringIO

    from suite import files

    try:
        frame = pd.read_csv(StringIO(files.read_text(root / "tables" / "gamma.csv")))
    except (OSError, ValueError, pd.errors.ParserError):
        return None
    return frame if set(COLUMNS) <= set(frame.columns) else None


SETTLED = ["step", "gamma", "block_min", "block_max", "n_runs"]


def settled_frame(frame: pd.DataFrame | None, keys: list[str]) -> pd.DataFrame | None:
    """Per group at its last logged step: the mean |γ| over blocks, the smallest and largest; None without γ."""
    if frame is None or frame.empty:
        return None
    rows = []
    for group, part in frame.groupby(keys, sort=True, dropna=False):
        last = part[part["step"] == part["step"].max()]
        rows.append({**dict(zip(keys, group if isinstance(group, tuple) else (group,))), "step": int(last["step"].iloc[0]),
                     "gamma": float(last["scale_mean"].mean()), "block_min": float(last["scale_mean"].min()),
                     "block_max": float(last["scale_mean"].max()), "n_runs": int(last["n_runs"].max())})
    return pd.DataFrame(rows, columns=[*keys, *SETTLED])
