"""Statistics for comparing residual schemes: pure functions of counts and arrays, seeded where random, pinned by
hand-computed cases in ``tests/analysis/test_stats.py``; a statistic that cannot be computed is ``nan``."""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps
from scipy.special import gammaln

from suite.grouping import sections

BOOTSTRAP_SEED = 0  # fixed so that reruns of the analysis write identical tables
BOOTSTRAP_RESAMPLES = 10_000
FISHER_TIE_TOL = 1e-7  # relative tolerance for "as or less likely" tables (R uses the same)


@functools.lru_cache(maxsize=4096)
def t_quantile(alpha: float, df: float) -> float:
    """The two-sided Student-t quantile ``t(1 - alpha/2, df)``, cached (simulations ask for the same ones)."""
    return float(sps.t.isf(alpha / 2, df))


def wilson_interval(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson score interval for k/n; unlike a Wald interval it keeps a width at 0/n and n/n. (nan, nan) when n == 0."""
    from statsmodels.stats.proportion import proportion_confint

    if n == 0:
        return (math.nan, math.nan)
    if not 0 <= k <= n:
        raise ValueError(f"wilson_interval needs 0 <= k <= n, got k={k}, n={n}")
    low, high = proportion_confint(k, n, alpha=alpha, method="wilson")
    return (max(0.0, float(low)), min(1.0, float(high)))


def fisher_exact_p(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided Fisher exact test of k1/n1 against k2/n2 (the baseline's); nan if either group is empty."""
    if n1 == 0 or n2 == 0:
        return math.nan
    return float(sps.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]], alternative="two-sided").pvalue)


@dataclass(frozen=True)
class Difference:
    """A difference of means with its interval and test: ``estimate`` [``low``, ``high``], ``p``."""

    estimate: float
    low: float
    high: float
    p: float
    test: str  # "paired t", "Welch t", "Welch-Satterthwaite", or "" when no test could be made
    n_pairs: int = 0
    se: float = math.nan  # standard error of the estimate
    df: float = math.nan  # degrees of freedom of its t distribution

    def at(self, alpha: float) -> "Difference":
        """The same estimate and test with the interval at level ``1 - alpha``; unchanged when there is no interval."""
        if not (math.isfinite(self.se) and math.isfinite(self.df)):
            return self
        half = float(sps.t.isf(alpha / 2, self.df)) * self.se
        return Difference(self.estimate, self.estimate - half, self.estimate + half, self.p, self.test,
                          self.n_pairs, self.se, self.df)


NO_DIFFERENCE = Difference(math.nan, math.nan, math.nan, math.nan, "")


def is_constant(x: np.ndarray) -> bool:
    """No spread beyond rounding (0.9 - 0.8 and 0.8 - 0.7 differ in the 17th digit: a t statistic would explode)."""
    return bool(np.ptp(x) <= 1e-9 * max(1.0, float(np.abs(x).max())))


def t_interval(x: Sequence[float], alpha: float = 0.05) -> tuple[float, float]:
    """Student-t interval of the mean; (nan, nan) when n < 2."""
    x = np.asarray(x, dtype=float)
    if x.size < 2:
        return (math.nan, math.nan)
    half = t_quantile(alpha, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return (float(x.mean() - half), float(x.mean() + half))


def paired_difference(a: Sequence[float], b: Sequence[float], alpha: float = 0.05) -> Difference:
    """Paired t-test of seed-matched ``a - b``; interval and p nan below 2 pairs or with constant differences."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if d.size == 0:
        return NO_DIFFERENCE
    if d.size < 2 or is_constant(d):
        return Difference(float(d.mean()), math.nan, math.nan, math.nan, "paired t", int(d.size))
    low, high = t_interval(d, alpha)
    p = float(sps.ttest_1samp(d, 0.0).pvalue)
    return Difference(float(d.mean()), low, high, p, "paired t", int(d.size), float(d.std(ddof=1) / math.sqrt(d.size)),
                      float(d.size - 1))


def welch_difference(a: Sequence[float], b: Sequence[float], alpha: float = 0.05) -> Difference:
    """Welch's t-test: ``mean(a) - mean(b)`` with its interval; nan with under 2 in a group or no spread in both."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.size == 0 or b.size == 0:
        return NO_DIFFERENCE
    diff = float(a.mean() - b.mean())
    if a.size < 2 or b.size < 2 or (is_constant(a) and is_constant(b)):
        return Difference(diff, math.nan, math.nan, math.nan, "Welch t")
    with warnings.catch_warnings():  # one group at a single value (all at chance) is exact here, not a precision loss
        warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
        res = sps.ttest_ind(a, b, equal_var=False)
    ci = res.confidence_interval(1 - alpha)
    se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    return Difference(diff, float(ci.low), float(ci.high), float(res.pvalue), "Welch t", 0, se, float(res.df))


def _log_choose(n: int, k: np.ndarray) -> np.ndarray:
    return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)


def fisher_power(p1: float, p2: float, n1: int, n2: int, alpha: float = 0.05) -> float:
    """Exact power (enumeration, no simulation) of the two-sided Fisher test to tell true rates p1 and p2 apart."""
    pmf1, pmf2 = sps.binom.pmf(np.arange(n1 + 1), n1, p1), sps.binom.pmf(np.arange(n2 + 1), n2, p2)
    m = n1 + n2
    power = 0.0
    for t in range(m + 1):
        ks = np.arange(max(0, t - n2), min(t, n1) + 1)  # first group's possible counts
        h = np.exp(_log_choose(n1, ks) + _log_choose(n2, t - ks) - _log_choose(m, np.array(t)))
        order = np.sort(h)
        pval = np.cumsum(order)[np.searchsorted(order, h * (1 + FISHER_TIE_TOL), side="right") - 1]
        reject = ks[pval <= alpha]
        power += float(np.sum(pmf1[reject] * pmf2[t - reject]))
    return min(power, 1.0)


@functools.lru_cache(maxsize=1024)  # pure, and tables repeat the same observed rates
def fisher_seeds_needed(p1: float, p2: float, power: float = 0.8, alpha: float = 0.05, max_n: int = 2000) -> float:
    """Seeds per group for Fisher's test to reach ``power`` at true rates p1, p2; inf if equal or above ``max_n``."""
    if p1 == p2 or math.isnan(p1) or math.isnan(p2):
        return math.inf
    return _smallest_n(lambda n: fisher_power(p1, p2, n, n, alpha) >= power, max_n)


def _smallest_n(enough, max_n: int) -> float:
    """The smallest n in [2, max_n] with ``enough(n)`` under a monotone reading (exact power saw-tooths), else inf."""
    lo, hi = 1, 2
    while not enough(hi):
        if hi >= max_n:
            return math.inf
        lo, hi = hi, min(2 * hi, max_n)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return float(hi)


def t_power(difference: float, sd: float, n: int, alpha: float = 0.05) -> float:
    """Power of the two-sided paired t-test with ``n`` pairs (noncentral t); nan when ``n < 2`` or ``sd`` is not > 0."""
    if n < 2 or not (math.isfinite(sd) and sd > 0) or not math.isfinite(difference):
        return math.nan
    df, nc = n - 1, abs(difference) / sd * math.sqrt(n)
    crit = sps.t.isf(alpha / 2, df)
    return float(min(1.0, sps.nct.sf(crit, df, nc) + sps.nct.sf(crit, df, -nc)))


def sd_upper(sd: float, df: int, level: float = 0.8) -> float:
    """One-sided upper confidence limit of an SD, nan if df < 1 (Browne 1995; docs/statistics.md, "Planning seeds")."""
    if df < 1 or not math.isfinite(sd):
        return math.nan
    return float(sd * math.sqrt(df / sps.chi2.ppf(1 - level, df)))


def paired_seeds_needed(difference: float, sd: float, power: float = 0.8, alpha: float = 0.05,
                        max_n: int = 10_000) -> float:
    """The fewest seed pairs (>= 2) whose paired t reaches ``power``; nan if ``sd`` is unknown, inf if none to max_n."""
    if not (math.isfinite(sd) and sd > 0 and math.isfinite(difference)):
        return math.nan
    if difference == 0:
        return math.inf
    return _smallest_n(lambda n: t_power(difference, sd, n, alpha) >= power, max_n)


def fisher_min_p(n1: int, n2: int) -> float:
    """The smallest two-sided p Fisher's exact test can give with ``n1`` vs ``n2`` runs (3 vs 3: 0.10, never < 0.05)."""
    if n1 < 1 or n2 < 1:
        return math.nan
    return min(fisher_exact_p(n1, n1, 0, n2), fisher_exact_p(0, n1, n2, n2))


def score_interval(scores: Sequence[float], ok: Sequence[bool], chance: float,
                   alpha: float = 0.05) -> tuple[float, float]:
    """Mean-score interval, not-ok runs at ``chance``; nan below 2 runs (docs/statistics.md, "Intervals and tests")."""
    x, ok = np.asarray(scores, dtype=float), np.asarray(ok, dtype=bool)
    if x.size < 2:  # like the t interval: a single run has none
        return (math.nan, math.nan)
    good = x[ok]
    if good.size >= 2:
        low, high = t_interval(good, alpha) if not is_constant(good) else (good[0], good[0])
        low, high = max(low, chance), min(high, 1.0)
    else:
        low, high = chance, 1.0
    if good.size == x.size:
        return (float(low), float(high))
    p_low, p_high = wilson_interval(int(good.size), int(x.size), alpha)
    return (float(chance + p_low * (low - chance)), float(chance + p_high * (high - chance)))


def bonferroni(pvalues: Sequence[float]) -> np.ndarray:
    """Bonferroni over the non-nan p-values (not Holm: the simultaneous interval then agrees with the adjusted p)."""
    p = np.asarray(pvalues, dtype=float)
    m = int((~np.isnan(p)).sum())
    return np.minimum(1.0, p * m) if m else p.copy()


def contrast(cells: Sequence[tuple[dict, dict]], weights: Sequence[float], alpha: float = 0.05) -> Difference:
    """``sum_j w_j (mean a_j - mean b_j)`` over ``cells`` ((scheme, baseline) scores by seed) with its t interval:
    paired over seeds when every seed is in every cell on both sides, else Welch-Satterthwaite."""
    seeds = [set(a) & set(b) for a, b in cells]
    common = set.intersection(*seeds) if seeds else set()
    if common and all(set(a) == common == set(b) for a, b in cells) and len(common) >= 2:
        order = sorted(common, key=str)
        values = [sum(w * (a[s] - b[s]) for w, (a, b) in zip(weights, cells)) for s in order]
        return paired_difference(values, np.zeros(len(values)), alpha)  # n_pairs: the seeds
    estimate, var, dof_terms = 0.0, 0.0, 0.0
    for w, (a, b) in zip(weights, cells):
        for side, sign in ((np.array(list(a.values()), float), 1), (np.array(list(b.values()), float), -1)):
            if side.size < 2:
                return Difference(math.nan, math.nan, math.nan, math.nan, "Welch-Satterthwaite")
            estimate += sign * w * side.mean()
            v = w * w * side.var(ddof=1) / side.size
            var += v
            dof_terms += v * v / (side.size - 1)
    if var <= 0:
        return Difference(estimate, math.nan, math.nan, math.nan, "Welch-Satterthwaite")
    df = var * var / dof_terms
    se = math.sqrt(var)
    half = sps.t.ppf(1 - alpha / 2, df) * se
    p = float(2 * sps.t.sf(abs(estimate) / se, df))
    return Difference(estimate, estimate - half, estimate + half, p, "Welch-Satterthwaite", 0, se, df)


def tost_p(d: Sequence[float], margin: float) -> float:
    """TOST (Schuirmann 1987) of ``|mean d| < margin`` on paired differences; nan below 2 values or no spread."""
    from statsmodels.stats.weightstats import ttost_paired

    d = np.asarray(d, dtype=float)
    if d.size < 2 or is_constant(d) or not margin > 0:
        return math.nan
    return float(ttost_paired(d, np.zeros_like(d), -margin, margin)[0])


def adjust_family(frame: pd.DataFrame, keys: list[str], column: str, diffs: list | None = None,
                  interval: str = "", alpha: float = 0.05) -> pd.DataFrame:
    """Bonferroni within each section: ``<column>_adj``, ``<column>_m`` and, given ``diffs`` (a :class:`Difference`
    or None per row), the simultaneous interval ``<interval>_ci_low/high``."""
    frame[f"{column}_adj"] = math.nan
    frame[f"{column}_m"] = 0
    for _, part in sections(frame, keys):
        p = part[column].to_numpy(dtype=float)
        m = int((~np.isnan(p)).sum())
        frame.loc[part.index, f"{column}_adj"] = bonferroni(p)
        frame.loc[part.index, f"{column}_m"] = m
        if diffs is not None:
            for i in part.index:
                d = diffs[i]
                if d is not None:
                    d = d.at(alpha / max(m, 1))
                    frame.loc[i, [f"{interval}_ci_low", f"{interval}_ci_high"]] = [d.low, d.high]
    return frame
