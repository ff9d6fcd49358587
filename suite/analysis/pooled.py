"""Comparisons with few seeds: a pooled SD instead of one from a single degree of freedom, intervals
kept inside what a score can be, and verdict words only from enough seeds.

A paired t interval on 2 seeds has 1 degree of freedom; with Bonferroni over 18 comparisons its t
quantile is 229 and the interval of a 3-point difference runs past +/-300 points. Where a comparison
has fewer than :data:`MIN_SEEDS` seed pairs, its SD comes from the whole family (one table section)
instead: within each stratum (one cell of the baseline, e.g. one depth, and every scheme compared with
it there), the scores follow ``score = arm effect + seed effect + error``, cell fixed effects plus a
seed effect that the runs with one seed share (they share initial weights and batch order), fitted by
least squares; the residual variance, pooled over strata, has ``sum (N - rank)`` degrees of freedom
(``(arms - 1) (seeds - 1)`` per stratum when every arm ran every seed). A paired difference of two
arms over n seeds then has standard error ``s * sqrt(2 / n)``. This is the randomised-block analysis
behind Dunnett's comparisons with a control; unlike pooling the variances of the paired differences,
it counts the degrees of freedom right when several schemes share one baseline's runs (pooling the
differences of 6 schemes x 3 depths at 2 seeds and counting 18 df rejected a true null 6.5% of the
time; this, with its 18 df, 5%: tests/analysis/test_pooled.py).

Only arms whose runs all ended ok are fitted, and only comparisons between two such arms use the pooled
SD: a cell with a run at chance is a mixture, whose spread (tens of points between a failed and an ok
run) is not the spread of ok runs, and pooling it either way would make one side's interval wrong (a
scheme with one failed run of 3 got p < 0.001 from the quiet cells' SD). Such a comparison keeps its
own paired t. Arms whose scores are all equal or whose differences from the baseline are all equal (the
same model twice) carry no noise and are left out of the fit (:func:`fitted_arms`). The pooled SD
assumes one error spread for the family's ok runs; where a comparison has :data:`MIN_SEEDS` pairs or
more it keeps its own paired t-test, and below that :func:`verdict` gives no word.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np
from scipy import stats as sps

from suite.analysis import stats

MIN_SEEDS = 4  # seeds per arm below which no verdict word is given (the interval is still printed)


def pooled_sd(strata: Sequence[dict[Hashable, dict[Hashable, float]]]) -> tuple[float, float]:
    """The residual SD of ``score ~ arm + seed`` fitted within each stratum, pooled, and its degrees of freedom.

    Args:
        strata: per stratum, ``{arm: {seed: score}}`` for the arms to fit (the baseline and the schemes
            compared with it there; each seed at most once per arm).

    Returns:
        (sd, df): ``sqrt(sum RSS / sum (N - rank))`` over strata, N the scores fitted and rank that of
        the arm + seed design; (nan, 0) when no stratum has a residual degree of freedom.
    """
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
    """The arms of one stratum that carry noise: without arms whose scores are all equal (e.g. every run
    at chance) or whose seed-matched differences from ``baseline`` are all equal (the same model twice)."""
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
    """The mean of seed-matched differences ``d`` with a t interval from the pooled residual ``sd`` on
    ``df`` degrees of freedom (:func:`pooled_sd`): standard error ``sd * sqrt(2 / n)``.

    Returns:
        The :class:`~suite.analysis.stats.Difference` (``test`` says the SD was pooled and on how many
        degrees of freedom); no interval or p when ``d`` is empty, its values are all equal, or there is
        no pooled SD.
    """
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
    """``(low, high, clipped)``: the interval kept within ``[-bound, +bound]``, the most two scores can differ
    (a wider one says nothing the range does not); ``clipped`` is True when an end moved."""
    if math.isnan(low) or math.isnan(high):
        return (low, high, False)
    new = (max(low, -bound), min(high, bound))
    return (new[0], new[1], new != (low, high))


def verdict(estimate: float, p_adjusted: float, seeds: int, alpha: float = 0.05) -> str:
    """The word for one exploratory comparison: ``""`` without a test (``p_adjusted`` nan), ``"too few
    seeds"`` when ``seeds`` (the smaller arm's, or the pairs) is below :data:`MIN_SEEDS`, else ``"higher"``
    / ``"lower"`` when the adjusted p is below ``alpha``, ``"not significant"`` otherwise (never "same")."""
    if math.isnan(p_adjusted):
        return ""
    if seeds < MIN_SEEDS:
        return "too few seeds"
    if p_adjusted < alpha:
        return "higher" if estimate > 0 else "lower"
    return "not significant"
