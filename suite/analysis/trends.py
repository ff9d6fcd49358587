"""Across depths: one trend test per scheme, and aggregates that pool a scheme's cells.

* :func:`depth_trends`: recipe accuracy ~ log2(depth) per scheme (slope per doubling of depth),
  the difference of slopes against the baseline (OLS interaction), and the difference of not-ok
  log-odds slopes (binomial GLM interaction); Holm over the schemes of a section.
* :func:`aggregates`: per scheme, the interquartile mean of recipe accuracy over all its runs and
  the probability of improvement over the baseline, each with a stratified bootstrap interval
  (strata = depths; runs resampled within their depth).

Both work per table section (every key but ``variant`` and ``model.depth``) and need
``model.depth`` among the group keys with at least two depths.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from suite.analysis import regression, robust, stats
from suite.analysis.grouping import DEPTH, group_of, section_keys, sort_value, variant_order
from suite.analysis.summary import recipe_accuracy


def _cells(runs: list[dict[str, Any]], keys: list[str], baseline: str):
    """section label -> variant -> depth -> [(recipe accuracy, not ok)], non-error runs only."""
    skeys = section_keys(keys)
    out: dict[tuple, dict[str, dict[float, list[tuple[float, int]]]]] = {}
    for r in runs:
        acc = recipe_accuracy(r)
        if r["status"] == "error" or acc is None or not math.isfinite(acc):
            continue
        depth = float(r[DEPTH])
        cell = out.setdefault(group_of(r, skeys), {}).setdefault(r["variant"], {}).setdefault(depth, [])
        cell.append((acc, int(r["status"] in ("diverged", "failed"))))
    ordered = {}
    for label in sorted(out, key=lambda t: [sort_value(v) for v in t]):
        variants = out[label]
        ordered[label] = {v: variants[v] for v in variant_order(list(variants), baseline)}
    return ordered, skeys


def _xy(depths: dict[float, list[tuple[float, int]]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = np.array([math.log2(d) for d, rs in depths.items() for _ in rs])
    y = np.array([a for rs in depths.values() for a, _ in rs])
    k = np.array([bad for rs in depths.values() for _, bad in rs])
    return x, y, k


TREND_COLUMNS = ["n", "n_depths", "acc_slope", "acc_slope_ci_low", "acc_slope_ci_high", "acc_slope_diff",
                 "acc_slope_diff_ci_low", "acc_slope_diff_ci_high", "acc_slope_diff_p", "acc_slope_diff_p_holm",
                 "not_ok_slope_diff", "not_ok_slope_diff_ci_low", "not_ok_slope_diff_ci_high", "not_ok_slope_diff_p",
                 "not_ok_slope_diff_p_holm"]


def depth_trends(runs: list[dict[str, Any]], keys: list[str], baseline: str) -> pd.DataFrame | None:
    """One row per scheme and section: accuracy and not-ok trends with depth against the baseline.

    Slopes are per doubling of depth: accuracy as a fraction (0.05 = 5 points), not ok as log-odds.

    Returns:
        None unless ``model.depth`` is a group key with at least 2 depths; else the section keys,
        ``variant`` and :data:`TREND_COLUMNS` (nan where a model cannot be estimated).
    """
    if DEPTH not in keys or len({r.get(DEPTH) for r in runs}) < 2:
        return None
    cells, skeys = _cells(runs, keys, baseline)
    rows = []
    for label, variants in cells.items():
        base = _xy(variants[baseline]) if baseline in variants else None
        part = []
        for variant, depths in variants.items():
            x, y, k = _xy(depths)
            slope = regression.linear_slope(x, y)
            diff = not_ok = regression.NO_SLOPE
            if variant != baseline and base is not None:
                diff = regression.slope_difference(x, y, base[0], base[1])
                not_ok = regression.logistic_slope_difference(x, k, base[0], base[2])
            part.append({**dict(zip(skeys, label)), "variant": variant, "n": int(x.size), "n_depths": len(depths),
                         "acc_slope": slope.estimate, "acc_slope_ci_low": slope.low, "acc_slope_ci_high": slope.high,
                         "acc_slope_diff": diff.estimate, "acc_slope_diff_ci_low": diff.low,
                         "acc_slope_diff_ci_high": diff.high, "acc_slope_diff_p": diff.p,
                         "not_ok_slope_diff": not_ok.estimate, "not_ok_slope_diff_ci_low": not_ok.low,
                         "not_ok_slope_diff_ci_high": not_ok.high, "not_ok_slope_diff_p": not_ok.p})
        for column in ("acc_slope_diff_p", "not_ok_slope_diff_p"):  # Holm over the schemes of this section
            adjusted = stats.holm([row[column] for row in part])
            for row, p in zip(part, adjusted):
                row[f"{column}_holm"] = p
        rows += part
    return pd.DataFrame(rows, columns=skeys + ["variant"] + TREND_COLUMNS)


AGGREGATE_COLUMNS = ["n", "n_depths", "iqm", "iqm_ci_low", "iqm_ci_high", "poi", "poi_ci_low", "poi_ci_high"]


def aggregates(runs: list[dict[str, Any]], keys: list[str], baseline: str) -> pd.DataFrame | None:
    """One row per scheme and section: IQM of recipe accuracy and P(improvement over the baseline).

    Returns:
        None unless ``model.depth`` is a group key with at least 2 depths; else the section keys,
        ``variant`` and :data:`AGGREGATE_COLUMNS`. Intervals are nan where the stratified bootstrap
        refuses (fewer than :data:`suite.analysis.robust.MIN_RUNS` runs of a scheme, or fewer than
        :data:`suite.analysis.robust.MIN_PER_STRATUM` in one of its depths).
    """
    if DEPTH not in keys or len({r.get(DEPTH) for r in runs}) < 2:
        return None
    cells, skeys = _cells(runs, keys, baseline)
    rows = []
    for label, variants in cells.items():
        base = variants.get(baseline)
        for variant, depths in variants.items():
            strata = [np.array([a for a, _ in rs]) for rs in depths.values()]
            pooled = lambda group: robust.iqm(np.concatenate(group))  # noqa: E731
            iqm_ci = robust.stratified_bootstrap([strata], pooled)
            poi, poi_ci = math.nan, (math.nan, math.nan)
            if variant != baseline and base is not None:
                shared = [d for d in depths if d in base]
                xs = [np.array([a for a, _ in depths[d]]) for d in shared]
                ys = [np.array([a for a, _ in base[d]]) for d in shared]
                poi = robust.probability_of_improvement(xs, ys)
                poi_ci = robust.stratified_bootstrap([xs, ys], robust.probability_of_improvement)
            rows.append({**dict(zip(skeys, label)), "variant": variant, "n": int(sum(s.size for s in strata)),
                         "n_depths": len(strata), "iqm": robust.iqm(np.concatenate(strata)), "iqm_ci_low": iqm_ci[0],
                         "iqm_ci_high": iqm_ci[1], "poi": poi, "poi_ci_low": poi_ci[0], "poi_ci_high": poi_ci[1]})
    return pd.DataFrame(rows, columns=skeys + ["variant"] + AGGREGATE_COLUMNS)
