"""Statistics of interleaved A/B step-time rounds: pure functions of arrays.

One *round* times every arm (model) at least twice in a palindromic order (A B B A, or
A B C C B A for more arms), so a linear drift of the machine's speed within the round affects
every arm equally. The unit of analysis is the round: its ratio ``mean(B) / mean(A)`` cancels
what the two arms share (a slow minute, a busy neighbour), and the rounds' ratios are summarised
by their median with a distribution-free interval for that median (order statistics of the
binomial, no resampling, no random draws). Conventions follow ``suite/analysis/stats.py``: a level is
given as ``alpha`` (0.05 -> 95%), and a bound that cannot be computed is ``nan``, never a
zero-width interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps


def round_means(times: np.ndarray) -> np.ndarray:
    """Mean time per round.

    Args:
        times: (R, V) seconds per step, V timed visits of one arm in each of R rounds.

    Returns:
        (R,) the mean of each round's visits.
    """
    times = np.asarray(times, dtype=float)
    if times.ndim != 2 or times.shape[1] == 0:
        raise ValueError(f"times must be (rounds, visits) with at least one visit, got shape {times.shape}")
    return times.mean(axis=1)


def round_ratios(candidate: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    """Per-round ratio ``mean(candidate) / mean(baseline)``: > 1 means the candidate is slower.

    Args:
        candidate: (R, V) seconds per step of the candidate arm.
        baseline: (R, V') seconds per step of the baseline arm, timed in the same R rounds.

    Returns:
        (R,) ratios.
    """
    c, b = round_means(candidate), round_means(baseline)
    if c.shape != b.shape:
        raise ValueError(f"candidate and baseline need the same rounds, got {c.shape[0]} and {b.shape[0]}")
    return c / b


def median_interval_ranks(n: int, alpha: float = 0.05) -> tuple[int, int] | None:
    """1-based ranks (k, n+1-k) of the order statistics that bound a median interval.

    The interval ``[x_(k), x_(n+1-k)]`` covers the true median with probability
    ``1 - 2 * P(Binomial(n, 1/2) <= k - 1)`` whatever the distribution (continuous data); ``k`` is
    the largest rank whose coverage is still at least ``1 - alpha``.

    Returns:
        ``(k, n + 1 - k)``, or ``None`` when even ``[min, max]`` falls short of ``1 - alpha``
        (n < 6 at 95%).
    """
    if n < 1:
        return None
    k = 0
    while 2.0 * sps.binom.cdf(k, n, 0.5) <= alpha:  # cdf(k) = P(Bin <= k), the tail below rank k+1
        k += 1
    return None if k == 0 else (k, n + 1 - k)


def median_interval(x: np.ndarray, alpha: float = 0.05) -> tuple[float, float]:
    """Distribution-free ``1 - alpha`` interval for the median of ``x`` (order statistics).

    Args:
        x: (n,) observations, e.g. per-round ratios.
        alpha: 1 - confidence level.

    Returns:
        (low, high); (nan, nan) when n is too small for the level (see :func:`median_interval_ranks`).
    """
    x = np.sort(np.asarray(x, dtype=float))
    ranks = median_interval_ranks(x.size, alpha)
    if ranks is None:
        return (math.nan, math.nan)
    lo, hi = ranks
    return (float(x[lo - 1]), float(x[hi - 1]))


@dataclass(frozen=True)
class RatioSummary:
    """Median of per-round ratios with its interval; ``n`` is the number of rounds."""

    median: float
    low: float
    high: float
    n: int

    @property
    def overhead(self) -> float:
        """The median as a relative overhead (0.02 = 2% slower than the baseline)."""
        return self.median - 1.0

    def excludes(self, value: float) -> bool:
        """True if the whole interval lies above or below ``value`` (nan bounds exclude nothing)."""
        return (self.low > value) or (self.high < value)

    def format(self) -> str:
        """E.g. ``+1.8% [+0.4, +3.1]`` (overhead in percent, interval bounds in percent)."""
        def pct(v: float) -> str:
            return "nan" if math.isnan(v) else f"{100 * (v - 1):+.1f}"

        return f"{pct(self.median)}% [{pct(self.low)}, {pct(self.high)}]"


def summarize(ratios: np.ndarray, alpha: float = 0.05) -> RatioSummary:
    """Median and distribution-free interval of per-round ratios, shape (R,)."""
    ratios = np.asarray(ratios, dtype=float)
    if ratios.size == 0:
        return RatioSummary(math.nan, math.nan, math.nan, 0)
    low, high = median_interval(ratios, alpha)
    return RatioSummary(float(np.median(ratios)), low, high, int(ratios.size))
