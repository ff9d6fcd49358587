"""Per-group statistics: counts, rates with intervals, accuracy, tests against the baseline.

Each group is tested against the baseline variant's group at the same values of all other keys;
where that group does not exist the tests are ``nan`` and the tables say so. Runs of status
``error`` are left out of every rate (``n`` counts the other runs) and counted in ``n_error``;
accuracy statistics use the ``ok`` runs only.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from suite.analysis import stats
from suite.analysis.grouping import LR, group_of, hashable, sections, sort_value, variant_order
from suite.store import STATUSES


def _finite(values: list[Any]) -> np.ndarray:
    x = np.array([v for v in values if v is not None], dtype=float)
    return x[np.isfinite(x)]


def _group_stats(runs: list[dict[str, Any]]) -> dict[str, Any]:
    live = [r for r in runs if r["status"] != "error"]
    n = len(live)
    count = {s: sum(r["status"] == s for r in runs) for s in STATUSES}
    acc = _finite([r.get("test_acc") for r in live if r["status"] == "ok"])
    div_lo, div_hi = stats.wilson_interval(count["diverged"], n)
    fail_lo, fail_hi = stats.wilson_interval(count["failed"], n)
    acc_lo, acc_hi = stats.bootstrap_ci(acc)
    steps = _finite([r.get("step_time_ms") for r in live])
    div_steps = _finite([r.get("diverged_step") for r in live if r["status"] == "diverged"])
    rate = (lambda k: k / n) if n else (lambda k: math.nan)
    return {
        "n": n, "n_ok": count["ok"], "n_error": count["error"],
        "n_diverged": count["diverged"], "diverged_rate": rate(count["diverged"]),
        "diverged_ci_low": div_lo, "diverged_ci_high": div_hi,
        "diverged_step_median": float(np.median(div_steps)) if div_steps.size else math.nan,
        "n_failed": count["failed"], "failed_rate": rate(count["failed"]),
        "failed_ci_low": fail_lo, "failed_ci_high": fail_hi,
        "acc_mean": float(acc.mean()) if acc.size else math.nan,
        "acc_std": float(acc.std(ddof=1)) if acc.size > 1 else math.nan,
        "acc_ci_low": acc_lo, "acc_ci_high": acc_hi,
        "acc_median": float(np.median(acc)) if acc.size else math.nan,
        "step_time_ms": float(np.median(steps)) if steps.size else math.nan,
        "_acc": acc, "_steps": steps,
    }


def summarize(runs: list[dict[str, Any]], keys: list[str], baseline: str) -> pd.DataFrame:
    """One row per group: counts, rates with Wilson intervals, accuracy, tests, overhead.

    Args:
        runs: as returned by :func:`load_runs`.
        keys: group keys, ``variant`` first (:func:`group_keys`).
        baseline: the baseline variant (:func:`choose_baseline`).

    Returns:
        DataFrame sorted by variant (baseline first) then the other keys; columns: the keys,
        ``is_baseline``, ``has_baseline``, n, n_ok, n_error, n_diverged, diverged_rate,
        diverged_ci_low/high, diverged_step_median, n_failed, failed_rate, failed_ci_low/high,
        acc_mean, acc_std, acc_ci_low/high, acc_median, acc_p, acc_p_holm, diverged_p,
        diverged_p_holm, step_time_ms, overhead, overhead_ci_low/high. Accuracies are fractions.
    """
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault(group_of(r, keys), []).append(r)
    order = {v: i for i, v in enumerate(variant_order([g[0] for g in groups], baseline))}
    ordered = sorted(groups, key=lambda g: (order[g[0]], [sort_value(v) for v in g[1:]]))
    rows = {g: _group_stats(groups[g]) for g in ordered}
    out = []
    for g in ordered:
        row, base = rows[g], rows.get((baseline,) + g[1:])
        is_base = g[0] == baseline
        tests = {"acc_p": math.nan, "diverged_p": math.nan, "overhead": math.nan,
                 "overhead_ci_low": math.nan, "overhead_ci_high": math.nan}
        if is_base:
            tests["overhead"] = 1.0
        elif base is not None:
            tests["acc_p"] = stats.welch_t_p(row["_acc"], base["_acc"])
            tests["diverged_p"] = stats.fisher_exact_p(row["n_diverged"], row["n"], base["n_diverged"], base["n"])
            ratio, lo, hi = stats.ratio_of_medians(row["_steps"], base["_steps"])
            tests.update(overhead=ratio, overhead_ci_low=lo, overhead_ci_high=hi)
        out.append({**dict(zip(keys, g)), "is_baseline": is_base, "has_baseline": base is not None,
                    **{k: v for k, v in row.items() if not k.startswith("_")}, **tests})
    frame = pd.DataFrame(out)
    frame["acc_p_holm"] = _holm_by_section(frame, keys, "acc_p")
    frame["diverged_p_holm"] = _holm_by_section(frame, keys, "diverged_p")
    first = keys + ["is_baseline", "has_baseline", "n", "n_ok", "n_error", "n_diverged", "diverged_rate",
                    "diverged_ci_low", "diverged_ci_high", "diverged_step_median", "n_failed", "failed_rate",
                    "failed_ci_low", "failed_ci_high", "acc_mean", "acc_std", "acc_ci_low", "acc_ci_high",
                    "acc_median", "acc_p", "acc_p_holm", "diverged_p", "diverged_p_holm", "step_time_ms",
                    "overhead", "overhead_ci_low", "overhead_ci_high"]
    return frame[first]


def _holm_by_section(frame: pd.DataFrame, keys: list[str], column: str) -> pd.Series:
    adjusted = pd.Series(math.nan, index=frame.index)
    for _, part in sections(frame, keys):
        adjusted[part.index] = stats.holm(part[column].to_numpy(dtype=float))
    return adjusted


# ----------------------------------------------------------------------------- extra tables


def power_table(summary: pd.DataFrame, keys: list[str], target: float = 0.8, alpha: float = 0.05) -> pd.DataFrame:
    """Seeds per group needed to detect each observed divergence-rate difference (Fisher).

    The observed rates of a variant and its baseline are taken as the true rates; ``power_now``
    is the exact power at the current counts, ``seeds_needed`` the seeds per group (equal sizes)
    for ``target`` power at ``alpha`` (:func:`suite.analysis.stats.fisher_seeds_needed`; inf where the
    rates are equal or more than 2000 seeds would be needed). Not adjusted for multiplicity.

    Args:
        summary: from :func:`summarize`.
        keys: its group keys.
        target: power wanted.
        alpha: significance level.

    Returns:
        One row per non-baseline group that has a baseline: the keys, n, n_diverged,
        diverged_rate, baseline_n, baseline_n_diverged, baseline_diverged_rate, diverged_p,
        power_now, seeds_needed.
    """
    index = {tuple(hashable(v) for v in row[keys]): row for _, row in summary.iterrows()}
    base_name = summary.loc[summary["is_baseline"], "variant"]
    rows = []
    for _, row in summary.iterrows():
        if row["is_baseline"] or not row["has_baseline"] or base_name.empty:
            continue
        base = index[(base_name.iloc[0],) + tuple(hashable(v) for v in row[keys[1:]])]
        p1, p2 = row["diverged_rate"], base["diverged_rate"]
        ok = row["n"] > 0 and base["n"] > 0
        rows.append({
            **{k: row[k] for k in keys},
            "n": row["n"], "n_diverged": row["n_diverged"], "diverged_rate": p1,
            "baseline_n": base["n"], "baseline_n_diverged": base["n_diverged"], "baseline_diverged_rate": p2,
            "diverged_p": row["diverged_p"],
            "power_now": stats.fisher_power(p1, p2, int(row["n"]), int(base["n"]), alpha) if ok else math.nan,
            "seeds_needed": stats.fisher_seeds_needed(p1, p2, target, alpha) if ok else math.nan,
        })
    columns = keys + ["n", "n_diverged", "diverged_rate", "baseline_n", "baseline_n_diverged",
                      "baseline_diverged_rate", "diverged_p", "power_now", "seeds_needed"]
    return pd.DataFrame(rows, columns=columns)


def stability_frontier(summary: pd.DataFrame, keys: list[str]) -> pd.DataFrame | None:
    """Per scheme (and other keys): the largest ``train.lr`` at which >= half the seeds end ``ok``.

    Args:
        summary: from :func:`summarize`.
        keys: its group keys; nothing is computed unless ``train.lr`` is one of them.

    Returns:
        None without a learning-rate key; else one row per group of the other keys with
        lr_stable_max (nan if no rate was stable), lr_tested_min, lr_tested_max, n_lr and
        censored (True when the largest rate tested was stable, so the frontier may lie higher).
    """
    if LR not in keys:
        return None
    rest = [k for k in keys if k != LR]
    rows = []
    labels = [tuple(hashable(v) for v in r) for r in summary[rest].itertuples(index=False)]
    for label in dict.fromkeys(labels):  # first-seen order = summary order
        part = summary[[lab == label for lab in labels]]
        part = part[part["n"] > 0]
        if part.empty:
            continue
        lrs = part[LR].astype(float)
        stable = lrs[part["n_ok"] >= 0.5 * part["n"]]
        best = float(stable.max()) if not stable.empty else math.nan
        rows.append({**dict(zip(rest, label)), "lr_stable_max": best, "lr_tested_min": float(lrs.min()),
                     "lr_tested_max": float(lrs.max()), "n_lr": int(lrs.nunique()),
                     "censored": bool(best == float(lrs.max()))})
    return pd.DataFrame(rows, columns=rest + ["lr_stable_max", "lr_tested_min", "lr_tested_max", "n_lr", "censored"])


def runs_frame(runs: list[dict[str, Any]], keys: list[str], baseline: str) -> pd.DataFrame:
    """``runs.csv``: one row per run, every summary field; sorted by group, then seed, then run id."""
    order = {v: i for i, v in enumerate(variant_order([r["variant"] for r in runs], baseline))}

    def sort_key(r: dict[str, Any]) -> tuple:
        g = group_of(r, keys)
        return (order[g[0]], [sort_value(v) for v in g[1:]], sort_value(r.get("seed")), str(r.get("run_id")))

    ordered = sorted(runs, key=sort_key)
    lead = ["run_id", "ablation", "variant", "seed", "status", "run_dir"]
    rest = sorted({k for r in runs for k in r} - set(lead))
    return pd.DataFrame(ordered, columns=lead + rest)
