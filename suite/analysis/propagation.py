"""The analysis of ``suite propagate`` runs: scalar summaries vs depth with intervals over seeds, and the per-block
profiles behind them (docs/propagation.md)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from suite import store
from suite.analysis import stats
from suite.grouping import group_of, ordered_groups
from suite.results import run_folder

KIND = "propagation"
RECORDS = "propagation.jsonl"  # as suite.engine.propagation writes it (that module imports torch)
# summary key -> (what it is, in a table's words); the order of the tables
QUANTITIES = {
    "stream_growth": "stream RMS after the last block / after the first",
    "grad_ratio": "gradient norm w.r.t. the stream, first block / last block",
    "rank_collapse": "cosine similarity between images' token-averaged representations after the last block (1 = collapse)",
    "cls_cos_last": "cosine similarity between images' class tokens after the last block",
    "update_ratio_max": "largest per-block update-to-weight ratio over the first steps",
    "logit_change_last": "relative change of the logits after the first steps",
}
BOUNDED = ("rank_collapse", "cls_cos_last")  # cosines
FP32_LEAST = float(np.finfo(np.float32).smallest_subnormal)  # 1.4e-45: where a ratio of 0 is counted
LOG_SCALE = ("stream_growth", "grad_ratio", "update_ratio_max", "logit_change_last")  # summarised in log10


def is_propagation(runs: list[dict[str, Any]]) -> bool:
    return bool(runs) and all(r.get("kind") == KIND for r in runs)


def summary_frame(runs: list[dict[str, Any]], keys: list[str], baseline: str) -> pd.DataFrame:
    """One row per group: per quantity the ok runs' mean with a 95% t interval (geometric for :data:`LOG_SCALE`)."""
    rows = []
    for g, members in ordered_groups(runs, keys, baseline).items():
        ok = [r for r in members if r["status"] == "ok"]
        row: dict[str, Any] = {**dict(zip(keys, g)), "n": len(ok),
                               "n_diverged": sum(r["status"] == "diverged" for r in members),
                               "n_error": sum(r["status"] == "error" for r in members)}
        for q in QUANTITIES:
            x = np.array([r[q] for r in ok if isinstance(r.get(q), (int, float)) and math.isfinite(r[q])
                          and (q not in LOG_SCALE or r[q] >= 0)], dtype=float)
            if q in LOG_SCALE:  # a gradient that underflowed to 0 counts at fp32's least value: it does not drop out
                x = np.log10(np.maximum(x, FP32_LEAST))
            low, high = stats.t_interval(x)
            if q in BOUNDED and x.size > 1:  # a cosine lies in [-1, 1]: clipping there loses no coverage
                low, high = max(low, -1.0), min(high, 1.0)
            mean = float(x.mean()) if x.size else math.nan
            if q in LOG_SCALE:
                mean, low, high = (10 ** v if not math.isnan(v) else math.nan for v in (mean, low, high))
            row.update({f"{q}_mean": mean, f"{q}_ci_low": low, f"{q}_ci_high": high})
        rows.append(row)
    columns = keys + ["n", "n_diverged", "n_error"] + [f"{q}_{s}" for q in QUANTITIES for s in ("mean", "ci_low", "ci_high")]
    return pd.DataFrame(rows, columns=columns)


def profiles(root: Path, runs: list[dict[str, Any]], keys: list[str]) -> pd.DataFrame:
    """Per group and block, the mean over seeds of the records: geometric for the norms, arithmetic for the cosines."""
    frames = []
    for r in runs:
        folder = run_folder(root, r)
        if r["status"] != "ok" or folder is None:
            continue
        try:
            records = store.read_metrics(folder, RECORDS)
        except (OSError, store.CorruptFile):
            continue
        whole = [x for x in records if isinstance(x.get("block"), int) and not isinstance(x.get("block"), bool)]
        fwd = {x["block"]: x for x in whole if x.get("kind") == "forward"}  # a record without an integer
        bwd = {x["block"]: x for x in whole if x.get("kind") == "backward"}  # block is damage: left out
        rows = [{**dict(zip(keys, group_of(r, keys))), "block": b, "stream_rms": fwd[b].get("stream_rms"),
                 "cls_cos": fwd[b].get("cls_cos"), "mean_cos": fwd[b].get("mean_cos"),
                 "grad_stream": bwd.get(b, {}).get("grad_stream"),
                 "grad_params": bwd.get(b, {}).get("grad_params")} for b in sorted(fwd)]
        if rows:  # none: its records are not here (a folder shared as runs.csv) or hold no block
            frames.append(pd.DataFrame(rows))
    if not frames:
        return pd.DataFrame(columns=keys + ["block", "stream_rms", "cls_cos", "mean_cos", "grad_stream", "grad_params"])
    frame = pd.concat(frames, ignore_index=True)
    norms, cosines = ["stream_rms", "grad_stream", "grad_params"], ["cls_cos", "mean_cos"]
    frame[norms + cosines] = frame[norms + cosines].apply(pd.to_numeric, errors="coerce")  # damage: NaN, left out
    frame[norms] = np.log(frame[norms].where(frame[norms] > 0))  # a zero norm has no logarithm: left out
    out = frame.groupby(keys + ["block"], dropna=False)[norms + cosines].mean().reset_index()
    out[norms] = np.exp(out[norms])
    return out[keys + ["block", "stream_rms", "cls_cos", "mean_cos", "grad_stream", "grad_params"]]
