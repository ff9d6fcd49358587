"""Comparisons with few seeds: below :data:`MIN_SEEDS` pairs a pooled SD (``score ~ arm + seed``), intervals kept
inside what a score can be, verdict words only from enough seeds (docs/statistics.md, "Few seeds")."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np
from scipy import stats as sps

from suite.analysis import stats

MIN_SEEDS = 4  # seeds per arm below which no verdict word is given (the interval is still printed)


def pooled_sd(strata: Sequence[dict[Hashable, dict[Hashable, float]]]) -> tuple[float, float]:
    """(sd, df): the residual SD of ``score ~ arm + seed`` within each ``{arm: {seed: score}}`` stratum, pooled."""
    rss, dof = 0.0, 0
    for arms in strata:
        cells = [(a, s, float(x)) for a, by_seed in arms.items() for s, x in by_seed.items()]
        if not cells:
            continue
        arm_ix = {a: i for i, a in enumerate(dict.fromkeys(a for a, _, _ in cells))}
        seed_ix = {s: i for i, s in enumerate(dict.fromkeys(s for _, s, _ in cells))}
        x = np.zeros((len(cells), len(arm_ix) + len(seed_ix)))  # (N, arms + seeds)
        for row, (a, s, _) in enumerate(cells):
            x[row, arm_ix[a]] = x[row, len(arm_ix) + seed_ix[s]] = 1.0
        y = np.array([v for _, _, v in cells])
        beta, *_ = np.linalg.lstsq(x, y, rcond=None)
        rank = int(np.linalg.matrix_rank(x))
        rss += float(((y - x @ beta) ** 2).sum())
        dof += len(cells) - rank
    if not dof:
        return (math.nan, 0)
    return (math.sqrt(rss / dof), float(dof))


def fitted_arms(arms: dict[Hashable, dict[Hashable, float]],
                baseline: Hashable) -> dict[Hashable, dict[Hashable, float]]:
    """The arms of one stratum that carry noise: not all scores equal, nor all differences from ``baseline``."""
    base = arms.get(baseline, {})
    keep = {}
    for a, by_seed in arms.items():
        values = np.array(list(by_seed.values()), dtype=float)
        if values.size < 1 or (values.size > 1 and stats.is_constant(values)):
            continue
        if a != baseline:
            common = [s for s in by_seed if s in base]
            if len(common) >= 2 and stats.is_constant(np.array([by_seed[s] - base[s] for s in common])):
                continue
        keep[a] = by_seed
    return keep


def pooled_difference(d: Sequence[float], sd: float, df: float, alpha: float = 0.05) -> stats.Difference:
    """The mean of seed-matched ``d`` with a t interval from the pooled ``sd`` on ``df``; none if it cannot."""
    d = np.asarray(d, dtype=float)
    if d.size == 0:
        return stats.NO_DIFFERENCE
    test = f"paired t, pooled SD ({df:g} df)"
    if stats.is_constant(d) or not (math.isfinite(sd) and sd > 0 and df >= 1):
        return stats.Difference(float(d.mean()), math.nan, math.nan, math.nan, test, int(d.size))
    se = sd * math.sqrt(2.0 / d.size)
    est = float(d.mean())
    half = stats.t_quantile(alpha, df) * se
    p = float(2 * sps.t.sf(abs(est) / se, df))
    return stats.Difference(est, est - half, est + half, p, test, int(d.size), se, df)


def clip(low: float, high: float, bound: float) -> tuple[float, float, bool]:
    """``(low, high, clipped)``: the interval kept within ``[-bound, +bound]``, the most two scores can differ."""
    if math.isnan(low) or math.isnan(high):
        return (low, high, False)
    new = (max(low, -bound), min(high, bound))
    return (new[0], new[1], new != (low, high))


def verdict(estimate: float, p_adjusted: float, seeds: int, alpha: float = 0.05) -> str:
    """An exploratory comparison's word: "", "too few seeds", "higher", "lower" or "not significant" (never "same")."""
    if math.isnan(p_adjusted):
        return ""
    if seeds < MIN_SEEDS:
        return "too few seeds"
    if p_adjusted < alpha:
        return "higher" if estimate > 0 else "lower"
    return "not significant"
