"""Statistics of interleaved A/B step-time rounds: per-round ratios (an A B B A round cancels a linear drift), their
median and its distribution-free interval (nan where it cannot be computed)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps


def round_means(times: np.ndarray) -> np.ndarray:
    """(R,) mean time of each round, from ``times`` (R, V): seconds per step of V visits of one arm in R rounds."""
    times = np.asarray(times, dtype=float)
    if times.ndim != 2 or times.shape[1] == 0:
        raise ValueError(f"times must be (rounds, visits) with at least one visit, got shape {times.shape}")
    return times.mean(axis=1)


def round_ratios(candidate: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    """(R,) per-round ratios ``mean(candidate) / mean(baseline)`` (> 1: the candidate is slower)."""
    c, b = round_means(candidate), round_means(baseline)
    if c.shape != b.shape:
        raise ValueError(f"candidate and baseline need the same rounds, got {c.shape[0]} and {b.shape[0]}")
    return c / b


@dataclass(frozen=True)
class RatioSummary:
    """Median of per-round ratios with its interval; ``n`` is the number of rounds."""

    median: float
    low: float
    high: float
    n: int

    def format(self) -> str:
        """E.g. ``+1.8% [+0.4, +3.1]`` (overhead in percent, interval bounds in percent)."""
        def pct(v: float) -> str:
            return "nan" if math.isnan(v) else f"{100 * (v - 1):+.1f}"

        return f"{pct(self.median)}% [{pct(self.low)}, {pct(self.high)}]"


def summarize(ratios: np.ndarray, alpha: float = 0.05) -> RatioSummary:
    """Median of per-round ratios with its distribution-free ``1 - alpha`` interval; nan when R < :func:`min_rounds`."""
    ratios = np.asarray(ratios, dtype=float)
    if ratios.size < min_rounds(alpha):
        return RatioSummary(float(np.median(ratios)) if ratios.size else math.nan, math.nan, math.nan, ratios.size)
    ci = sps.quantile_test(ratios, p=0.5).confidence_interval(1 - alpha)
    return RatioSummary(float(np.median(ratios)), float(ci.low), float(ci.high), int(ratios.size))


def min_rounds(alpha: float = 0.05) -> int:
    """The fewest rounds whose median has a distribution-free ``1 - alpha`` interval (6 at 95%)."""
    return math.ceil(math.log2(2 / alpha))
