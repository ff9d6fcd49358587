"""Per-group statistics: counts, rates with intervals, the score, and exploratory tests against the baseline's group
at the same other keys (Bonferroni per section; few seeds: :mod:`suite.analysis.pooled`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from suite.analysis import pooled, stats
from suite.analysis.stats import adjust_family
from suite.grouping import group_of, ordered_groups, section_keys, sort_value, variant_order
from suite.results import chance, score
from suite.store import STATUSES


def _finite(values: list[Any]) -> np.ndarray:
    x = np.array([v for v in values if v is not None], dtype=float)
    return x[np.isfinite(x)]


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
    scored = [(r.get("seed"), score(r), r["status"] == "ok") for r in live]
    scored = [(seed, x, ok) for seed, x, ok in scored if x is not None]
    x = np.array([v for _, v, _ in scored], dtype=float)
    floor = next((c for c in map(chance, live) if c is not None), 0.0)
    low, high = stats.score_interval(x, [ok for _, _, ok in scored], floor)
    out.update(acc_n=int(x.size), acc_mean=float(x.mean()) if x.size else math.nan,
               acc_std=float(x.std(ddof=1)) if x.size > 1 else math.nan, acc_ci_low=low, acc_ci_high=high,
               acc_median=float(np.median(x)) if x.size else math.nan)
    ok_acc = _finite([r.get("test_acc") for r in live if r["status"] == "ok"])
    low, high = stats.t_interval(ok_acc)
    if ok_acc.size > 1:  # an accuracy lies in [0, 1]: clipping the interval there loses no coverage
        low, high = max(low, 0.0), min(high, 1.0)
    out.update(ok_acc_n=int(ok_acc.size), ok_acc_mean=float(ok_acc.mean()) if ok_acc.size else math.nan,
               ok_acc_std=float(ok_acc.std(ddof=1)) if ok_acc.size > 1 else math.nan,
               ok_acc_ci_low=low, ok_acc_ci_high=high)
    timed = [r for r in live if r.get("step_time_ms") is not None]
    steps = _finite([r["step_time_ms"] for r in timed])
    out.update({"step_time_ms": float(np.median(steps)) if steps.size else math.nan, "n_timed": len(timed),
                "n_contended": sum(r.get("timing_contended") is True for r in timed),
                "_acc": [(seed, v) for seed, v, _ in scored], "_chance": floor,
                "_all_ok": bool(scored) and all(ok for *_, ok in scored)})
    return out


def paired_differences(scheme: list[tuple[Any, float]], baseline: list[tuple[Any, float]]) -> np.ndarray | None:
    """Seed-matched ``scheme - baseline`` by seed when each seed is once a side and 2 are shared; else None."""
    a_by, b_by = dict(scheme), dict(baseline)
    common = sorted(set(a_by) & set(b_by), key=sort_value)
    if len(a_by) == len(scheme) and len(b_by) == len(baseline) and len(common) >= 2:
        return np.array([a_by[s] - b_by[s] for s in common], dtype=float)
    return None


def compare_accuracy(scheme: list[tuple[Any, float]], baseline: list[tuple[Any, float]],
                     pool: tuple[float, float] = (math.nan, 0)) -> tuple[stats.Difference, float]:
    """(difference, SD of the seed-matched differences or nan): paired t (``pool``'s SD below MIN_SEEDS), else Welch."""
    d = paired_differences(scheme, baseline)
    if d is None:
        return stats.welch_difference([x for _, x in scheme], [x for _, x in baseline]), math.nan
    own_sd = float(np.std(d, ddof=1))
    if d.size < pooled.MIN_SEEDS and math.isfinite(pool[0]):
        return pooled.pooled_difference(d, *pool), own_sd
    return stats.paired_difference(d, np.zeros(d.size)), own_sd


COLUMNS = [
    "is_baseline", "has_baseline", "n", "n_ok", "n_error",
    "acc_n", "acc_mean", "acc_std", "acc_ci_low", "acc_ci_high", "acc_median",
    "acc_test", "acc_pairs", "acc_diff", "acc_diff_ci_low", "acc_diff_ci_high", "acc_diff_sd", "acc_p", "acc_p_adj",
    "acc_p_m", "acc_diff_df", "acc_diff_ci_clipped", "acc_verdict",
    "n_not_ok", "not_ok_rate", "not_ok_ci_low", "not_ok_ci_high", "not_ok_p", "not_ok_p_adj", "not_ok_p_m",
    "n_diverged", "diverged_rate", "diverged_ci_low", "diverged_ci_high", "diverged_step_median", "diverged_p",
    "diverged_p_adj",
    "n_failed", "failed_rate", "failed_ci_low", "failed_ci_high", "failed_p", "failed_p_adj",
    "ok_acc_n", "ok_acc_mean", "ok_acc_std", "ok_acc_ci_low", "ok_acc_ci_high",
    "step_time_ms", "n_timed", "n_contended",
]


def summarize(runs: list[dict[str, Any]], keys: list[str], baseline: str) -> pd.DataFrame:
    """One row per group, baseline first: score, rates, survivors' accuracy and step time, with intervals and tests."""
    groups = ordered_groups(runs, keys, baseline)
    ordered = list(groups)
    rows = {g: _group_stats(groups[g]) for g in ordered}
    skeys = [i for i, k in enumerate(keys) if k in section_keys(keys)]
    strata: dict[tuple, dict[tuple, dict[str, dict]]] = {}  # section -> stratum -> arm -> {seed: score}
    for g in ordered:
        base = rows.get((baseline,) + g[1:])
        if base is None or not rows[g]["_all_ok"]:  # a mixture's spread is not the spread of ok runs
            continue
        if g[0] == baseline or paired_differences(rows[g]["_acc"], base["_acc"]) is not None:
            strata.setdefault(tuple(g[i] for i in skeys), {}).setdefault(g[1:], {})[g[0]] = dict(rows[g]["_acc"])
    pools = {label: pooled.pooled_sd([pooled.fitted_arms(arms, baseline) for arms in by_stratum.values()])
             for label, by_stratum in strata.items()}
    out, diffs = [], []
    for g in ordered:
        row, base = rows[g], rows.get((baseline,) + g[1:])
        is_base = g[0] == baseline
        tests: dict[str, Any] = {f"{rate}_p": math.nan for rate in RATES}
        diff, sd, seeds = stats.NO_DIFFERENCE, math.nan, 0
        if not is_base and base is not None:
            pool = pools.get(tuple(g[i] for i in skeys), (math.nan, 0)) if row["_all_ok"] and base["_all_ok"] \
                else (math.nan, 0)
            diff, sd = compare_accuracy(row["_acc"], base["_acc"], pool)
            seeds = diff.n_pairs or min(len(row["_acc"]), len(base["_acc"]))
            for rate in RATES:
                tests[f"{rate}_p"] = stats.fisher_exact_p(row[f"n_{rate}"], row["n"], base[f"n_{rate}"], base["n"])
        tests.update(acc_test=diff.test, acc_pairs=diff.n_pairs, acc_diff=diff.estimate, acc_diff_ci_low=diff.low,
                     acc_diff_ci_high=diff.high, acc_diff_sd=sd, acc_p=diff.p, acc_diff_df=diff.df,
                     _seeds=seeds, _bound=1.0 - row["_chance"])
        out.append({**dict(zip(keys, g)), "is_baseline": is_base, "has_baseline": base is not None,
                    **{k: v for k, v in row.items() if not k.startswith("_")}, **tests})
        diffs.append(diff if diff.test else None)
    frame = pd.DataFrame(out)
    adjust_family(frame, keys, "acc_p", diffs, "acc_diff")
    clipped = [pooled.clip(lo, hi, bound) for lo, hi, bound in
               zip(frame["acc_diff_ci_low"], frame["acc_diff_ci_high"], frame["_bound"])]
    for i, column in enumerate(("acc_diff_ci_low", "acc_diff_ci_high", "acc_diff_ci_clipped")):
        frame[column] = [c[i] for c in clipped]
    frame["acc_verdict"] = [pooled.verdict(e, p, n)
                            for e, p, n in zip(frame["acc_diff"], frame["acc_p_adj"], frame["_seeds"])]
    for rate in RATES:
        adjust_family(frame, keys, f"{rate}_p")
    return frame[keys + COLUMNS]


def runs_frame(runs: list[dict[str, Any]], keys: list[str], baseline: str) -> pd.DataFrame:
    """``runs.csv``: one row per run, its ``score`` and ``val_score`` and every summary field, sorted."""
    order = {v: i for i, v in enumerate(variant_order([r["variant"] for r in runs], baseline))}

    def sort_key(r: dict[str, Any]) -> tuple:
        g = group_of(r, keys)
        return (order[g[0]], [sort_value(v) for v in g[1:]], sort_value(r.get("seed")), str(r.get("run_id")))

    ordered = [{**r, "score": score(r), "val_score": score(r, "val")} for r in sorted(runs, key=sort_key)]
    lead = ["run_id", "ablation", "variant", "seed", "status", "score", "val_score", "run_dir"]
    rest = sorted({k for r in runs for k in r} - set(lead))
    return pd.DataFrame(ordered, columns=lead + rest)
