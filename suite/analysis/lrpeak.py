"""Where a validation curve peaks, how that peak moves with depth, and the jackknife interval of it.

Pure functions of arrays. A *curve* is one depth's validation scores: ``rates`` ascending, shape (R,),
and ``val``, shape (R, S), one column per seed scored at every rate, with ``seeds`` naming the columns.

Why not the grid's best rate: on a grid of rates 2x apart over three doublings of depth, the slope
of log(best rate) on log(depth) moves in steps of 0.5, and a percentile bootstrap of an argmax over
few seeds under-covers (with 2 seeds a depth has three distinct resamples). Here the peak is the
vertex of a quadratic in log(rate) fitted by least squares to the mean curve around its best rate
(the best rate and up to 2 tested rates on each side, as many on each side, so a curve symmetric
about a tested rate peaks exactly there), kept within that window; the slope is the least-squares
slope of log(peak) on log(depth), a smooth function of the seeds' means, and its interval is the
delete-one-seed jackknife with a Student-t quantile on n - 1 degrees of freedom, n the seeds. A seed
left out is left out at every depth (and, for a contrast, in both schemes).

Its error rates, simulated in tests/analysis/test_transfer.py, are in docs/statistics.md
(#learning-rate-transfer-across-depth).
"""

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
    """log(rate) at the peak of a mean validation curve (``rates`` ascending and ``means``, both (R,); see
    the module docstring): the vertex of the quadratic fitted around the best rate, within its window, or
    the best rate itself at the grid's edge, with a one-point window, or when the fit is not concave."""
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
    """How far the slope moves when one depth's best rate moves by one grid step: the widest log
    spacing next to a depth's best rate, times ``max |x_c| / sum x_c^2`` (x_c the centred log depths).
    0.5 for rates 2x apart over three doublings of depth; 1 for two depths a doubling apart."""
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
    """Delete-one jackknife interval of ``statistic``, ``estimate +/- t(1 - alpha/2, n - 1) * se``.

    ``statistic`` is called with None (all seeds) or one of the n ``seeds`` to leave out. Returns
    (estimate, low, high); low and high are nan with fewer than 2 seeds or no spread across the
    leave-one-out values.
    """
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
