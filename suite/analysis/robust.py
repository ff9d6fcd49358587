"""Aggregates across cells that stay honest with few seeds (Agarwal et al. 2021, rliable).

Pure functions of arrays. A scheme's runs come in *strata* (its grouping cells, e.g. one per
depth); the interquartile mean pools them, the probability of improvement compares a scheme with
the baseline stratum by stratum, and the stratified bootstrap resamples runs within each stratum,
so every resample keeps the design (the same cells, the same number of runs in each).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from suite.analysis.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED

MIN_RUNS = 10  # per scheme: fewer and a bootstrap interval claims more than the data holds
MIN_PER_STRATUM = 2  # a stratum of one run cannot be resampled


def iqm(x: Sequence[float]) -> float:
    """Interquartile mean: the mean of the middle 50% of the values (25% trimmed from each end).

    Args:
        x: observations, shape (n,).

    Returns:
        The IQM; nan for no observations. E.g. ``iqm([1, 2, 3, 4, 100, 6, 7, 8]) == 5.0`` (the mean of 3, 4, 6, 7).
        ``scipy.stats.trim_mean(x, 0.25)`` computes the same (int(n / 4) cut from each end; the test
        checks it), at about a hundredth of the cost, which the 10,000 resamples of
        :func:`stratified_bootstrap` pay (one analysis spent 200 s there).
    """
    x = np.sort(np.asarray(x, dtype=float))
    if not x.size:
        return math.nan
    cut = int(0.25 * x.size)
    return float(x[cut:x.size - cut].mean())


def probability_of_improvement(xs: Sequence[Sequence[float]], ys: Sequence[Sequence[float]]) -> float:
    """P(X > Y) + P(X = Y) / 2 within each stratum, averaged over the strata.

    Args:
        xs: per stratum, the scheme's observations (higher is better).
        ys: per stratum, the baseline's observations, in the same stratum order.

    Returns:
        A probability in [0, 1]; 0.5 means no tendency either way; nan without comparable strata.
        E.g. one stratum, x = [1, 3], y = [2]: (0 + 1) / 2 = 0.5.
    """
    scores = []
    for x, y in zip(xs, ys):
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        if x.size and y.size:
            greater = (x[:, None] > y[None, :]).mean()
            ties = (x[:, None] == y[None, :]).mean()
            scores.append(greater + 0.5 * ties)
    return float(np.mean(scores)) if scores else math.nan


def stratified_bootstrap(
    strata: Sequence[Sequence[Sequence[float]]],
    statistic: Callable[..., float],
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    alpha: float = 0.05,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """Percentile interval of ``statistic`` with runs resampled within each stratum.

    Args:
        strata: one entry per group of runs being compared (e.g. [scheme, baseline]); each is a
            list of strata, each stratum an array of observations. Every group must have at least
            :data:`MIN_RUNS` runs and every stratum :data:`MIN_PER_STRATUM`.
        statistic: called as ``statistic(*resampled_groups)``, each group a list of strata.
        n_resamples: bootstrap resamples.
        alpha: 1 - confidence level.
        seed: seed of the ``numpy.random.Generator``.

    Returns:
        (low, high); (nan, nan) when a group or a stratum is too small to resample soundly.
    """
    groups = [[np.asarray(s, dtype=float) for s in group] for group in strata]
    for group in groups:
        if sum(s.size for s in group) < MIN_RUNS or any(s.size < MIN_PER_STRATUM for s in group):
            return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    values = np.empty(n_resamples)
    for i in range(n_resamples):
        values[i] = statistic(*[[s[rng.integers(0, s.size, s.size)] for s in group] for group in groups])
    low, high = np.quantile(values, [alpha / 2, 1 - alpha / 2])
    return (float(low), float(high))
