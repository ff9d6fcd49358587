"""Across depths: each scheme's score trend and its interaction with the baseline (no test at a floor or ceiling),
and aggregates pooling its cells (docs/statistics.md, "Intervals and tests")."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from suite.analysis import pooled, regression, robust, stats
from suite.grouping import DEPTH, group_of, section_keys, sort_value, variant_order
from suite.analysis.stats import adjust_family
from suite.results import chance, score

MIN_PAIRS = 10  # P(improvement) from fewer seed pairs moves in steps too coarse to report


def _cells(runs: list[dict[str, Any]], keys: list[str], baseline: str):
    """section label -> variant -> depth -> [(score, not ok, seed, chance)], non-error runs only."""
    skeys = section_keys(keys)
    out: dict[tuple, dict[str, dict[float, list[tuple[float, int, Any, float]]]]] = {}
    for r in runs:
        acc = score(r)
        if r["status"] == "error" or acc is None:
            continue
        depth = float(r[DEPTH])
        cell = out.setdefault(group_of(r, skeys), {}).setdefault(r["variant"], {}).setdefault(depth, [])
        cell.append((acc, int(r["status"] in ("diverged", "failed")), r.get("seed"), chance(r) or 0.0))
    ordered = {}
    for label in sorted(out, key=lambda t: [sort_value(v) for v in t]):
        variants = out[label]
        ordered[label] = {v: variants[v] for v in variant_order(list(variants), baseline)}
    return ordered, skeys


def _by_seed(rows: list[tuple], side: str) -> dict:
    """A cell's scores by seed; when a seed repeats (``--by`` pooling a key that varies), by position on ``side``, so
    that nothing pairs and every run counts (a dict by seed kept one run per seed)."""
    seeds = [r[2] for r in rows]
    return {r[2]: r[0] for r in rows} if len(set(seeds)) == len(seeds) else {(side, i): r[0] for i, r in enumerate(rows)}


def _xy(depths: dict[float, list[tuple]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = np.array([math.log2(d) for d, rs in depths.items() for _ in rs])
    y = np.array([r[0] for rs in depths.values() for r in rs])
    k = np.array([r[1] for rs in depths.values() for r in rs])
    return x, y, k


def _bound(depths: dict[float, list[tuple]]) -> str:
    """``floor`` / ``ceiling`` when every run of some depth scores chance / 100%, else ``""``."""
    for rs in depths.values():
        if rs and all(abs(r[0] - r[3]) < 1e-12 for r in rs):
            return "floor"
        if rs and all(r[0] >= 1.0 - 1e-12 for r in rs):
            return "ceiling"
    return ""


def interaction(scheme: dict[float, list[tuple]], base: dict[float, list[tuple]]
                ) -> tuple[stats.Difference, str, float]:
    """The scheme x depth interaction against the baseline, its kind (``depth A->B`` or ``per doubling``) and the
    most it can be: sum |w| over its depths times the most two scores differ by, 1 - chance."""
    shared = sorted(d for d in scheme if d in base)
    if len(shared) < 2:
        return stats.NO_DIFFERENCE, "", math.inf
    cells = [(_by_seed(scheme[d], "scheme"), _by_seed(base[d], "base")) for d in shared]
    if len(shared) == 2:
        weights, kind = [-1.0, 1.0], f"depth {shared[0]:g}->{shared[1]:g}"
    else:
        x = np.log2(shared)
        weights, kind = list((x - x.mean()) / ((x - x.mean()) ** 2).sum()), "per doubling"
    span = 1.0 - min(r[3] for side in (scheme, base) for d in shared for r in side[d])
    return stats.contrast(cells, weights), kind, float(np.abs(weights).sum()) * span


def most_slope(x: np.ndarray, span: float = 1.0) -> float:
    """The largest |OLS slope| on ``x`` of scores that lie within ``span`` of each other (1 - chance):
    span * sum |x - mean| / (2 sum (x - mean)^2), reached with every score above the mean x at the top and every
    other at the bottom; inf without two values of x."""
    dx = x - x.mean()
    ss = float((dx ** 2).sum())
    return span * float(np.abs(dx).sum()) / (2 * ss) if ss > 0 else math.inf


TREND_COLUMNS = ["n", "n_depths", "acc_slope", "acc_slope_ci_low", "acc_slope_ci_high",
                 "acc_interaction_kind", "acc_interaction", "acc_interaction_ci_low", "acc_interaction_ci_high",
                 "acc_interaction_test", "acc_interaction_p", "acc_interaction_p_adj", "acc_interaction_p_m",
                 "bound", "not_ok_slope_diff", "not_ok_slope_diff_ci_low", "not_ok_slope_diff_ci_high",
                 "not_ok_slope_diff_p", "not_ok_slope_diff_p_adj", "not_ok_slope_diff_p_m"]


def depth_trends(runs: list[dict[str, Any]], keys: list[str], baseline: str) -> pd.DataFrame | None:
    """One row per scheme and section (:data:`TREND_COLUMNS`), per doubling of depth; None below two depths."""
    if DEPTH not in keys or len({r.get(DEPTH) for r in runs}) < 2:
        return None
    cells, skeys = _cells(runs, keys, baseline)
    rows, diffs, most = [], [], []  # most: each row's (slope, interaction) bounds, past which no interval goes
    for label, variants in cells.items():
        base_depths = variants.get(baseline)
        base = _xy(base_depths) if base_depths else None
        for variant, depths in variants.items():
            x, y, k = _xy(depths)
            slope = regression.linear_slope(x, y)
            diff, kind, bound, not_ok, most_diff = stats.NO_DIFFERENCE, "", "", regression.NO_SLOPE, math.inf
            if variant != baseline and base is not None:
                diff, kind, most_diff = interaction(depths, base_depths)
                shared = [d for d in depths if d in base_depths]  # the depths the interaction compares
                bound = _bound({d: depths[d] for d in shared}) or _bound({d: base_depths[d] for d in shared})
                not_ok = regression.logistic_slope_difference(x, k, base[0], base[2])
            p = math.nan if bound else diff.p  # at a floor or ceiling: an estimate, no test
            rows.append({**dict(zip(skeys, label)), "variant": variant, "n": int(x.size), "n_depths": len(depths),
                         "acc_slope": slope.estimate, "acc_slope_ci_low": slope.low, "acc_slope_ci_high": slope.high,
                         "acc_interaction_kind": kind, "acc_interaction": diff.estimate,
                         "acc_interaction_ci_low": diff.low, "acc_interaction_ci_high": diff.high,
                         "acc_interaction_test": diff.test, "acc_interaction_p": p, "bound": bound,
                         "not_ok_slope_diff": not_ok.estimate, "not_ok_slope_diff_ci_low": not_ok.low,
                         "not_ok_slope_diff_ci_high": not_ok.high, "not_ok_slope_diff_p": not_ok.p})
            diffs.append(diff if diff.test and not bound else None)
            most.append((most_slope(x, 1.0 - min(r[3] for rs in depths.values() for r in rs)), most_diff))
    frame = pd.DataFrame(rows, columns=skeys + ["variant"] + TREND_COLUMNS[:-2])
    family = skeys + ["variant"]  # sections as in the other tables: every key but variant (and depth)
    adjust_family(frame, family, "acc_interaction_p", diffs, "acc_interaction")
    adjust_family(frame, family, "not_ok_slope_diff_p")
    # No interval past what the estimate can be, row by row, scores lying in [chance, 1] as in the summary's clip: a
    # slope of scores on its runs' log2 depths; an interaction of score differences (at two depths a difference of
    # differences, up to 2 (1 - chance), not per doubling).
    for i, col in enumerate(("acc_slope", "acc_interaction")):
        ends = [pooled.clip(lo, hi, m[i]) for lo, hi, m in zip(frame[f"{col}_ci_low"], frame[f"{col}_ci_high"], most)]
        frame[f"{col}_ci_low"], frame[f"{col}_ci_high"] = [e[0] for e in ends], [e[1] for e in ends]
    return frame[skeys + ["variant"] + TREND_COLUMNS]


AGGREGATE_COLUMNS = ["n", "n_depths", "iqm", "iqm_ci_low", "iqm_ci_high", "poi_pairs", "poi", "poi_ci_low",
                     "poi_ci_high"]


def aggregates(runs: list[dict[str, Any]], keys: list[str], baseline: str) -> pd.DataFrame | None:
    """One row per scheme and section: the score's IQM and P(improvement on the baseline); None below two depths."""
    if DEPTH not in keys or len({r.get(DEPTH) for r in runs}) < 2:
        return None
    cells, skeys = _cells(runs, keys, baseline)
    rows = []
    for label, variants in cells.items():
        base = variants.get(baseline)
        for variant, depths in variants.items():
            strata = [np.array([r[0] for r in rs]) for rs in depths.values()]
            iqm_ci = robust.stratified_bootstrap([strata], lambda group: robust.iqm(np.concatenate(group, axis=-1)))
            pairs, poi, poi_ci = 0, math.nan, (math.nan, math.nan)
            if variant != baseline and base is not None:
                diffs = []  # per depth: the seed-matched differences
                for d in (d for d in depths if d in base):
                    a, b = _by_seed(depths[d], "scheme"), _by_seed(base[d], "base")
                    diffs.append(np.array([a[s] - b[s] for s in sorted(set(a) & set(b), key=sort_value)]))
                pairs = int(sum(x.size for x in diffs))
                if pairs >= MIN_PAIRS:
                    zeros = [np.zeros(1)] * len(diffs)
                    poi = robust.probability_of_improvement(diffs, zeros)
                    poi_ci = robust.stratified_bootstrap([diffs], lambda g: robust.probability_of_improvement(g, zeros))
            rows.append({**dict(zip(skeys, label)), "variant": variant, "n": int(sum(s.size for s in strata)),
                         "n_depths": len(strata), "iqm": robust.iqm(np.concatenate(strata)), "iqm_ci_low": iqm_ci[0],
                         "iqm_ci_high": iqm_ci[1], "poi_pairs": pairs, "poi": poi, "poi_ci_low": poi_ci[0],
                         "poi_ci_high": poi_ci[1]})
    return pd.DataFrame(rows, columns=skeys + ["variant"] + AGGREGATE_COLUMNS)
