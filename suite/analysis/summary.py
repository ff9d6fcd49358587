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
from suite.analysis.grouping import group_of, sections, sort_value, variant_order
from suite.store import STATUSES


def _finite(values: list[Any]) -> np.ndarray:
    x = np.array([v for v in values if v is not None], dtype=float)
    return x[np.isfinite(x)]


def recipe_accuracy(run: dict[str, Any]) -> float | None:
    """A run's accuracy as the recipe delivers it: what a user of the scheme would get.

    ``ok`` and ``failed`` runs count at their measured test accuracy; a ``diverged`` run at chance,
    ``1 / model.num_classes`` (its weights are not finite, or about to be); an ``error`` run does not
    count (``None``): it says nothing about the scheme.
    """
    if run["status"] == "error":
        return None
    if run["status"] == "diverged":
        classes = run.get("model.num_classes")
        return 1.0 / classes if isinstance(classes, int) and classes > 0 else None
    return run.get("test_acc")


RATES = ("diverged", "failed", "not_ok")  # not ok = diverged or failed


def _group_stats(runs: list[dict[str, Any]]) -> dict[str, Any]:
    live = [r for r in runs if r["status"] != "error"]
    n = len(live)
    count = {s: sum(r["status"] == s for r in runs) for s in STATUSES}
    count["not_ok"] = count["diverged"] + count["failed"]
    out: dict[str, Any] = {"n": n, "n_ok": count["ok"], "n_error": count["error"]}
    for rate in RATES:
        low, high = stats.wilson_interval(count[rate], n)
        out.update({f"n_{rate}": count[rate], f"{rate}_rate": count[rate] / n if n else math.nan,
                    f"{rate}_ci_low": low, f"{rate}_ci_high": high})
    div_steps = _finite([r.get("diverged_step") for r in live if r["status"] == "diverged"])
    out["diverged_step_median"] = float(np.median(div_steps)) if div_steps.size else math.nan
    scored = [(r.get("seed"), recipe_accuracy(r)) for r in live]
    scored = [(seed, a) for seed, a in scored if a is not None and math.isfinite(a)]
    for prefix, acc in (("acc", _finite([a for _, a in scored])),
                        ("ok_acc", _finite([r.get("test_acc") for r in live if r["status"] == "ok"]))):
        low, high = stats.t_interval(acc)
        if acc.size > 1:  # an accuracy lies in [0, 1]: clipping the interval there loses no coverage
            low, high = max(low, 0.0), min(high, 1.0)
        out.update({f"{prefix}_n": int(acc.size), f"{prefix}_mean": float(acc.mean()) if acc.size else math.nan,
                    f"{prefix}_std": float(acc.std(ddof=1)) if acc.size > 1 else math.nan,
                    f"{prefix}_ci_low": low, f"{prefix}_ci_high": high})
    out["acc_median"] = float(np.median([a for _, a in scored])) if scored else math.nan
    timed = [r for r in live if r.get("step_time_ms") is not None]
    steps = _finite([r["step_time_ms"] for r in timed])
    out.update({"step_time_ms": float(np.median(steps)) if steps.size else math.nan, "n_timed": len(timed),
                "n_contended": sum(r.get("timing_contended") is True for r in timed), "_acc": scored})
    return out


def compare_accuracy(scheme: list[tuple[Any, float]], baseline: list[tuple[Any, float]]) -> tuple[stats.Difference, float]:
    """Recipe accuracy of a scheme against the baseline in one cell.

    Args:
        scheme: (seed, recipe accuracy) of the scheme's runs in the cell.
        baseline: the same for the baseline.

    Returns:
        (difference, sd of the seed-matched differences). Runs with the same seed share initial
        weights and batch order, so when each seed appears once per side and at least 2 seeds are
        shared, the test is the paired t-test on the shared seeds; otherwise Welch's t-test on all
        runs (and the sd is nan).
    """
    a_by, b_by = dict(scheme), dict(baseline)
    common = sorted(set(a_by) & set(b_by), key=sort_value)
    if len(a_by) == len(scheme) and len(b_by) == len(baseline) and len(common) >= 2:
        a = np.array([a_by[s] for s in common])
        b = np.array([b_by[s] for s in common])
        return stats.paired_difference(a, b), float(np.std(a - b, ddof=1))
    return stats.welch_difference([x for _, x in scheme], [x for _, x in baseline]), math.nan


COLUMNS = [
    "is_baseline", "has_baseline", "n", "n_ok", "n_error",
    "acc_n", "acc_mean", "acc_std", "acc_ci_low", "acc_ci_high", "acc_median",
    "acc_test", "acc_pairs", "acc_diff", "acc_diff_ci_low", "acc_diff_ci_high", "acc_diff_sd", "acc_p", "acc_p_holm",
    "n_not_ok", "not_ok_rate", "not_ok_ci_low", "not_ok_ci_high", "not_ok_p", "not_ok_p_holm",
    "n_diverged", "diverged_rate", "diverged_ci_low", "diverged_ci_high", "diverged_step_median", "diverged_p",
    "diverged_p_holm",
    "n_failed", "failed_rate", "failed_ci_low", "failed_ci_high", "failed_p", "failed_p_holm",
    "ok_acc_n", "ok_acc_mean", "ok_acc_std", "ok_acc_ci_low", "ok_acc_ci_high",
    "step_time_ms", "n_timed", "n_contended",
]


def summarize(runs: list[dict[str, Any]], keys: list[str], baseline: str) -> pd.DataFrame:
    """One row per group: recipe accuracy with its t interval and test, rates with Wilson intervals
    and Fisher tests, survivor-only accuracy, step time.

    Args:
        runs: as returned by :func:`suite.analysis.load.load_runs`.
        keys: group keys, ``variant`` first (:func:`suite.analysis.grouping.group_keys`).
        baseline: the baseline variant.

    Returns:
        DataFrame sorted by variant (baseline first) then the other keys; columns: the keys, then
        :data:`COLUMNS` (documented in docs/statistics.md). Accuracies are fractions; ``acc_*`` is
        recipe accuracy (every run that did not error), ``ok_acc_*`` the survivors only.
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
        tests: dict[str, Any] = {f"{rate}_p": math.nan for rate in RATES}
        diff, sd = stats.NO_DIFFERENCE, math.nan
        if not is_base and base is not None:
            diff, sd = compare_accuracy(row["_acc"], base["_acc"])
            for rate in RATES:
                tests[f"{rate}_p"] = stats.fisher_exact_p(row[f"n_{rate}"], row["n"], base[f"n_{rate}"], base["n"])
        tests.update(acc_test=diff.test, acc_pairs=diff.n_pairs, acc_diff=diff.estimate, acc_diff_ci_low=diff.low,
                     acc_diff_ci_high=diff.high, acc_diff_sd=sd, acc_p=diff.p)
        out.append({**dict(zip(keys, g)), "is_baseline": is_base, "has_baseline": base is not None,
                    **{k: v for k, v in row.items() if not k.startswith("_")}, **tests})
    frame = pd.DataFrame(out)
    for column in ("acc_p", *(f"{rate}_p" for rate in RATES)):
        frame[f"{column}_holm"] = _holm_by_section(frame, keys, column)
    return frame[keys + COLUMNS]


def _holm_by_section(frame: pd.DataFrame, keys: list[str], column: str) -> pd.Series:
    adjusted = pd.Series(math.nan, index=frame.index)
    for _, part in sections(frame, keys):
        adjusted[part.index] = stats.holm(part[column].to_numpy(dtype=float))
    return adjusted


# ----------------------------------------------------------------------------- extra tables


def power_table(summary: pd.DataFrame, keys: list[str], difference: float = 0.05,
                rates: tuple[float, float] = (0.1, 0.5), target: float = 0.8, alpha: float = 0.05) -> pd.DataFrame:
    """Seeds per cell needed to detect differences you choose (planning, not observed power).

    Args:
        summary: from :func:`summarize`.
        keys: its group keys.
        difference: a recipe-accuracy difference to detect (a fraction: 0.05 = 5 points), by the
            paired t-test, given the standard deviation of seed-matched differences observed in
            the cell (``acc_diff_sd``).
        rates: not-ok rates (scheme, baseline) to tell apart with Fisher's exact test.
        target: power wanted. alpha: significance level (each test on its own; Holm needs more).

    Returns:
        One row per non-baseline group with a baseline: the keys, acc_pairs, acc_diff_sd,
        seeds_for_difference (nan without an observed sd: fewer than 2 seed pairs),
        difference, seeds_for_rates, rate_scheme, rate_baseline.
    """
    rows = []
    rate_seeds = stats.fisher_seeds_needed(rates[0], rates[1], target, alpha)
    for _, row in summary.iterrows():
        if row["is_baseline"] or not row["has_baseline"]:
            continue
        rows.append({
            **{k: row[k] for k in keys}, "acc_pairs": row["acc_pairs"], "acc_diff_sd": row["acc_diff_sd"],
            "difference": difference,
            "seeds_for_difference": stats.paired_seeds_needed(difference, row["acc_diff_sd"], target, alpha),
            "rate_scheme": rates[0], "rate_baseline": rates[1], "seeds_for_rates": rate_seeds,
        })
    columns = keys + ["acc_pairs", "acc_diff_sd", "difference", "seeds_for_difference", "rate_scheme",
                      "rate_baseline", "seeds_for_rates"]
    return pd.DataFrame(rows, columns=columns)


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
