"""Aggregates across cells that stay honest with few seeds (Agarwal et al. 2021, rliable), with a bootstrap that
resamples within each stratum (e.g. a depth). Pure functions of arrays."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats as sps

from suite.analysis.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED

MIN_RUNS = 10  # per scheme: fewer and a bootstrap interval claims more than the data holds
MIN_PER_STRATUM = 2  # a stratum of one run cannot be resampled


def iqm(x: Sequence[float] | np.ndarray) -> float | np.ndarray:
    """Interquartile mean over the last axis, the mean of the middle 50%; nan for none."""
    x = np.asarray(x, dtype=float)
    if not x.size:
        return math.nan
    out = sps.trim_mean(x, 0.25, axis=-1)
    return float(out) if x.ndim == 1 else out


def probability_of_improvement(xs: Sequence[np.ndarray], ys: Sequence[np.ndarray]) -> float | np.ndarray:
    """P(X > Y) + P(X = Y) / 2 per stratum (observations on the last axis), averaged over strata; nan without any."""
    scores = []
    for x, y in zip(xs, ys):
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        if x.shape[-1] and y.shape[-1]:
            u = sps.mannwhitneyu(x, np.broadcast_to(y, x.shape[:-1] + y.shape[-1:]), axis=-1).statistic
            scores.append(u / (x.shape[-1] * y.shape[-1]))
    if not scores:
        return math.nan
    mean = np.mean(scores, axis=0)
    return float(mean) if np.ndim(mean) == 0 else mean


def stratified_bootstrap(strata: Sequence[Sequence[Sequence[float]]], statistic: Callable[..., float],
                         n_resamples: int = BOOTSTRAP_RESAMPLES, alpha: float = 0.05,
                         seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Percentile interval of ``statistic`` (called once, each stratum of each group as (n_resamples, size)); nan
    unless every group has :data:`MIN_RUNS` runs and every stratum :data:`MIN_PER_STRATUM`."""
    groups = [[np.asarray(s, dtype=float) for s in group] for group in strata]
    for group in groups:
        if sum(s.size for s in group) < MIN_RUNS or any(s.size < MIN_PER_STRATUM for s in group):
            return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    draws = [[[] for _ in group] for group in groups]  # drawn resample by resample: the stream of a plain loop
    for _ in range(n_resamples):
        for group, drawn in zip(groups, draws):
            for s, d in zip(group, drawn):
                d.append(rng.integers(0, s.size, s.size))
    values = statistic(*[[s[np.array(d)] for s, d in zip(group, drawn)] for group, drawn in zip(groups, draws)])
    low, high = np.quantile(values, [alpha / 2, 1 - alpha / 2])
    return (float(low), float(high))
