"""Statistics for comparing residual schemes: pure functions of counts and arrays.

Nothing here reads files or knows about runs. Every random draw comes from a
``numpy.random.Generator`` built from an explicit seed, so two calls with the same inputs return
the same numbers. Library implementations (scipy, statsmodels) are preferred; each is pinned by
hand-computed cases in ``tests/test_stats.py``.

Conventions: a confidence level is given as ``alpha`` (0.05 -> 95% interval); a statistic that
cannot be computed (no data, a single observation for an interval) is ``nan``, never a
zero-width interval.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats as sps
from scipy.special import gammaln
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

BOOTSTRAP_SEED = 0  # fixed so that reruns of the analysis write identical tables
BOOTSTRAP_RESAMPLES = 10_000
FISHER_TIE_TOL = 1e-7  # relative tolerance for "as or less likely" tables (R uses the same)


def wilson_interval(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion k/n.

    Unlike a bootstrap or Wald interval it does not collapse to zero width at 0/n or n/n
    (Wilson 95% at 0/10 is [0, 0.2775]).

    Args:
        k: number of successes (here: diverged or failed runs), 0 <= k <= n.
        n: number of trials (non-error runs).
        alpha: 1 - confidence level.

    Returns:
        (low, high) in [0, 1]; (nan, nan) when n == 0.
    """
    if n == 0:
        return (math.nan, math.nan)
    if not 0 <= k <= n:
        raise ValueError(f"wilson_interval needs 0 <= k <= n, got k={k}, n={n}")
    low, high = proportion_confint(k, n, alpha=alpha, method="wilson")
    return (max(0.0, float(low)), min(1.0, float(high)))


def fisher_exact_p(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided Fisher exact test of equal proportions k1/n1 vs k2/n2.

    Args:
        k1, n1: events and trials of the first group (e.g. a variant's diverged runs / runs).
        k2, n2: the same for the second group (the baseline).

    Returns:
        The p-value of the 2x2 table [[k1, n1-k1], [k2, n2-k2]]; nan if either group is empty.
    """
    if n1 == 0 or n2 == 0:
        return math.nan
    return float(sps.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]], alternative="two-sided").pvalue)


def welch_t_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Welch t-test (unequal variances) of equal means.

    Args:
        a: observations of the first group, shape (n_a,).
        b: observations of the second group, shape (n_b,).

    Returns:
        The p-value; nan when a group has fewer than 2 observations or both have zero variance
        (the t statistic is undefined there, and no test is better than a fake one).
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.size < 2 or b.size < 2 or (np.ptp(a) == 0 and np.ptp(b) == 0):
        return math.nan
    return float(sps.ttest_ind(a, b, equal_var=False).pvalue)


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjustment of one family of p-values (controls the family-wise error).

    Sorted ascending, the i-th smallest of m p-values becomes ``(m - i) * p`` (i from 0), then a
    running maximum makes the adjusted values monotone, capped at 1. ``nan`` entries (comparisons
    that could not be made) are left out of the family and stay ``nan``.

    Args:
        pvalues: raw p-values of one family, shape (m,).

    Returns:
        Adjusted p-values in the input order, shape (m,). Example: [0.01, 0.04, 0.03] ->
        [0.03, 0.06, 0.06] (0.04 * 1 = 0.04 is raised to 0.06 by the monotonicity step).
    """
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        out[ok] = multipletests(p[ok], method="holm")[1]
    return out


def bootstrap_ci(
    x: Sequence[float],
    statistic: Callable[..., np.ndarray] = np.mean,
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    alpha: float = 0.05,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` over the observations.

    Args:
        x: observations (e.g. the test accuracies of a group's ok runs), shape (n,).
        statistic: reduces an (n_resamples, n) array along ``axis=1`` (np.mean, np.median).
        n_resamples: number of resamples with replacement.
        alpha: 1 - confidence level.
        seed: seed of the ``numpy.random.Generator`` used for the resamples.

    Returns:
        (low, high); (nan, nan) when n < 2, since one observation has no spread to resample.
    """
    x = np.asarray(x, dtype=float)
    if x.size < 2:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(n_resamples, x.size))
    stats = statistic(x[idx], axis=1)  # (n_resamples,)
    low, high = np.quantile(stats, [alpha / 2, 1 - alpha / 2])
    return (float(low), float(high))


def ratio_of_medians(
    a: Sequence[float],
    b: Sequence[float],
    n_resamples: int = BOOTSTRAP_RESAMPLES,
    alpha: float = 0.05,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float, float]:
    """median(a) / median(b) with a percentile bootstrap interval (groups resampled independently).

    Used for step-time overhead: ``a`` are a variant's per-run median step times, ``b`` the
    baseline's.

    Args:
        a: numerator observations, shape (n_a,).
        b: denominator observations, shape (n_b,).
        n_resamples: bootstrap resamples.
        alpha: 1 - confidence level.
        seed: seed of the ``numpy.random.Generator``.

    Returns:
        (ratio, low, high); ratio is nan if a group is empty, the interval is nan unless both
        groups have at least 2 observations.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.size == 0 or b.size == 0:
        return (math.nan, math.nan, math.nan)
    ratio = float(np.median(a) / np.median(b))
    if a.size < 2 or b.size < 2:
        return (ratio, math.nan, math.nan)
    rng = np.random.default_rng(seed)
    ra = np.median(a[rng.integers(0, a.size, size=(n_resamples, a.size))], axis=1)
    rb = np.median(b[rng.integers(0, b.size, size=(n_resamples, b.size))], axis=1)
    low, high = np.quantile(ra / rb, [alpha / 2, 1 - alpha / 2])
    return (ratio, float(low), float(high))


# ----------------------------------------------------------------------------- power


def _log_choose(n: int, k: np.ndarray) -> np.ndarray:
    return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)


def fisher_power(p1: float, p2: float, n1: int, n2: int, alpha: float = 0.05) -> float:
    """Exact power of the two-sided Fisher test to tell rates p1 and p2 apart.

    Exact enumeration, no simulation: for every total t of events, the hypergeometric
    distribution of the first group's count given t defines the rejection region
    {k1 : p-value(k1) <= alpha} (p-value = probability of tables at most as likely, with a
    relative tie tolerance of 1e-7); the power is the binomial probability of that region,
    summed over t. Costs O((n1 + n2) * n1 log n1).

    Args:
        p1: true event rate of group 1, in [0, 1].
        p2: true event rate of group 2, in [0, 1].
        n1: runs in group 1.
        n2: runs in group 2.
        alpha: significance level.

    Returns:
        The probability of p <= alpha, in [0, 1].
    """
    k1 = np.arange(n1 + 1)
    k2 = np.arange(n2 + 1)
    pmf1 = sps.binom.pmf(k1, n1, p1)  # (n1 + 1,)
    pmf2 = sps.binom.pmf(k2, n2, p2)  # (n2 + 1,)
    m = n1 + n2
    power = 0.0
    for t in range(m + 1):
        ks = np.arange(max(0, t - n2), min(t, n1) + 1)  # first group's possible counts
        log_h = _log_choose(n1, ks) + _log_choose(n2, t - ks) - _log_choose(m, np.array(t))
        h = np.exp(log_h)
        order = np.sort(h)
        csum = np.cumsum(order)
        pval = csum[np.searchsorted(order, h * (1 + FISHER_TIE_TOL), side="right") - 1]
        reject = ks[pval <= alpha]
        power += float(np.sum(pmf1[reject] * pmf2[t - reject]))
    return min(power, 1.0)


@functools.lru_cache(maxsize=1024)  # pure, and tables repeat the same observed rates
def fisher_seeds_needed(
    p1: float, p2: float, power: float = 0.8, alpha: float = 0.05, max_n: int = 2000
) -> float:
    """Seeds per group for the two-sided Fisher test to reach ``power`` at true rates p1, p2.

    Doubling finds an n with enough power, then bisection finds the boundary. The exact power of a
    discrete test is slightly saw-toothed in n, so this is the smallest n under a monotone
    reading, not a guarantee that every larger n also has the power.

    Args:
        p1: rate of group 1 (e.g. a variant's observed divergence rate), in [0, 1].
        p2: rate of group 2 (the baseline's).
        power: target power.
        alpha: significance level.
        max_n: give up above this many seeds per group.

    Returns:
        n per group (an integer value); inf if p1 == p2 (nothing to detect) or n > max_n.
    """
    if p1 == p2 or math.isnan(p1) or math.isnan(p2):
        return math.inf

    def enough(n: int) -> bool:
        return fisher_power(p1, p2, n, n, alpha) >= power

    lo, hi = 1, 2  # invariant once found: not enough(lo), enough(hi)
    while not enough(hi):
        if hi >= max_n:
            return math.inf
        lo, hi = hi, min(2 * hi, max_n)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if enough(mid):
            hi = mid
        else:
            lo = mid
    return float(hi)
