"""Where a validation curve peaks (a quadratic's vertex in log rate), how the peak moves with depth, and its
delete-one-seed jackknife interval (docs/statistics.md#learning-rate-transfer-across-depth). Pure functions."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from suite.analysis import stats

WINDOW = 2  # tested rates on each side of the best one that the quadratic is fitted to


@dataclass(frozen=True)
class Curve:
    """One depth's validation curve: ``val[i, j]`` is seed ``seeds[j]``'s score at ``rates[i]``."""

    depth: float
    rates: np.ndarray  # (R,), ascending
    val: np.ndarray  # (R, S)
    seeds: tuple

    def without(self, seed: Hashable | None) -> "Curve":
        """The curve with one seed's column left out (unchanged if it has no such seed)."""
        if seed is None or seed not in self.seeds:
            return self
        keep = [j for j, s in enumerate(self.seeds) if s != seed]
        return Curve(self.depth, self.rates, self.val[:, keep], tuple(self.seeds[j] for j in keep))


def best_index(means: np.ndarray) -> int:
    """The highest mean; ties go to the smaller rate (the first)."""
    return int(np.argmax(means))


def peak(rates: np.ndarray, means: np.ndarray) -> float:
    """log(rate) at the peak of a mean curve: the quadratic's vertex within the window (as many rates each side, so a
    symmetric curve peaks at its tested rate), or the best rate at the grid's edge or where the fit is not concave."""
    x = np.log(np.asarray(rates, dtype=float))
    i = best_index(means)
    w = min(WINDOW, i, len(x) - 1 - i)
    if w == 0:
        return float(x[i])
    xs, ys = x[i - w:i + w + 1], np.asarray(means, dtype=float)[i - w:i + w + 1]
    c2, c1, _ = np.polyfit(xs - x[i], ys, 2)
    if not c2 < 0:
        return float(x[i])
    return float(np.clip(x[i] - c1 / (2 * c2), xs[0], xs[-1]))


def slope(curves: Sequence[Curve], without: Hashable | None = None) -> float:
    """Least-squares slope of log(peak rate) on log(depth) over ``curves``, with one seed left out."""
    used = [c.without(without) for c in curves]
    x = np.log([c.depth for c in used])
    y = np.array([peak(c.rates, c.val.mean(axis=1)) for c in used])
    x = x - x.mean()
    return float(((y - y.mean()) * x).sum() / (x * x).sum())


def grid_step(curves: Sequence[Curve]) -> float:
    """How far the slope moves when one depth's best rate moves a grid step (docs/statistics.md, ``slope_step``)."""
    x = np.log([c.depth for c in curves])
    x = x - x.mean()
    widest = 0.0
    for c in curves:
        lx = np.log(c.rates)
        i = best_index(c.val.mean(axis=1))
        gaps = [lx[j + 1] - lx[j] for j in (i - 1, i) if 0 <= j < len(lx) - 1]
        widest = max([widest, *gaps])
    return float(widest * np.abs(x).max() / (x * x).sum())


def jackknife(statistic: Callable[[Hashable | None], float], seeds: Sequence[Hashable],
              alpha: float = 0.05) -> tuple[float, float, float]:
    """(estimate, low, high) of the delete-one jackknife; no interval below 2 seeds or without spread."""
    estimate = statistic(None)
    n = len(seeds)
    if n < 2:
        return (estimate, math.nan, math.nan)
    loo = np.array([statistic(s) for s in seeds])
    se = math.sqrt((n - 1) / n * float(((loo - loo.mean()) ** 2).sum()))
    if not se > 1e-12:
        return (estimate, math.nan, math.nan)
    half = stats.t_quantile(alpha, n - 1) * se
    return (estimate, estimate - half, estimate + half)
