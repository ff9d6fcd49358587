"""Group-sequential testing of one comparison: look after each round of seeds, stop once decided.

Pure functions. The design is a two-sided test at overall level ``alpha`` with ``K`` planned looks at
information fractions ``t_1 < ... < t_K = 1`` (here: seeds so far / the most seeds allowed). Alpha is
spent by the Lan-DeMets O'Brien-Fleming-type function (Lan & DeMets 1983; :func:`obf_spent`): almost nothing at the first looks, nearly all of it at the last, so stopping
early takes a large effect and a study that runs to the end loses little power.

The boundaries ``c_k`` on the z scale solve ``P(no crossing before k, |Z_k| >= c_k) = a(t_k) - a(t_{k-1})``
under the null. With ``Z_k = B(t_k) / sqrt(t_k)`` for a Brownian motion B, the increments are
independent normals, so the probabilities come from the density of B carried from look to look on
a grid (Armitage, McPherson & Rowe 1969; Jennison & Turnbull 2000, ch. 19). A paired t statistic on
few seeds enters through its p-value (the z with the same two-sided p, :func:`t_to_z`), which keeps
each look's level exact; tests/analysis/test_sequential.py checks the whole procedure's type I
error by simulation.

After stopping, the p-value uses the stage-wise ordering (an earlier exit is more extreme than any
later one) and the interval is the repeated confidence interval at the stopping look (Jennison &
Turnbull 1989): both account for the looks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy import stats as sps

GRID = 801  # points of the grid that carries the continuation density (odd: Simpson's rule)


def obf_spent(t: float, alpha: float = 0.05) -> float:
    """Two-sided alpha spent by information fraction ``t``: ``alpha / 2`` per side, each spent by the
    Lan-DeMets O'Brien-Fleming-type function ``2 - 2 Phi(z_{1 - alpha/4} / sqrt(t))``, the convention of
    R's gsDesign (``sfLDOF``) and ldbounds, whose published boundaries the tests reproduce."""
    if t <= 0:
        return 0.0
    return float(min(alpha, 2 * (2 - 2 * sps.norm.cdf(sps.norm.isf(alpha / 4) / math.sqrt(t)))))


def _simpson(n: int) -> np.ndarray:
    w = np.ones(n)
    w[1:-1:2], w[2:-1:2] = 4, 2
    return w / 3


@dataclass(frozen=True)
class Design:
    """A planned group-sequential test: information fractions, alpha, and the z boundaries."""

    fractions: tuple[float, ...]
    alpha: float
    bounds: tuple[float, ...]


def _carry(density: np.ndarray, grid: np.ndarray, step: float, t_prev: float, t: float):
    """Tail function of B(t) given the continuation sub-density of B(t_prev) on ``grid``."""
    sd = math.sqrt(t - t_prev)
    weights = density * _simpson(grid.size) * step

    def tail(x: float) -> float:  # P(continued so far and |B(t)| >= x)
        return float(np.sum(weights * (sps.norm.sf((x - grid) / sd) + sps.norm.cdf((-x - grid) / sd))))

    def at(points: np.ndarray) -> np.ndarray:  # sub-density of B(t) at points
        return (weights[None, :] * sps.norm.pdf((points[:, None] - grid[None, :]) / sd) / sd).sum(axis=1)

    return tail, at


def design(fractions: Sequence[float], alpha: float = 0.05) -> Design:
    """Boundaries of a two-sided group-sequential test with O'Brien-Fleming-type alpha spending.

    Args:
        fractions: information fraction at each look, increasing, the last 1.
        alpha: overall two-sided level.

    Returns:
        The :class:`Design`; ``bounds[k]`` is the |z| that stops at look k. One look gives the
        fixed-sample 1.96 (alpha 0.05); two equal looks (2.963, 1.969); five,
        (4.877, 3.357, 2.680, 2.290, 2.031) as in gsDesign.
    """
    t = [float(f) for f in fractions]
    if not t or any(b <= a for a, b in zip(t, t[1:])) or t[0] <= 0 or abs(t[-1] - 1) > 1e-12:
        raise ValueError(f"fractions must increase from above 0 to 1, got {list(fractions)}")
    bounds = [float(sps.norm.isf(obf_spent(t[0], alpha) / 2))]
    if len(t) == 1:
        return Design(tuple(t), alpha, tuple(bounds))
    half = bounds[0] * math.sqrt(t[0])
    grid = np.linspace(-half, half, GRID)
    density = sps.norm.pdf(grid / math.sqrt(t[0])) / math.sqrt(t[0])
    for k in range(1, len(t)):
        tail, at = _carry(density, grid, grid[1] - grid[0], t[k - 1], t[k])
        spend = obf_spent(t[k], alpha) - obf_spent(t[k - 1], alpha)
        x = optimize.brentq(lambda x: tail(x) - spend, 1e-6, 40.0, xtol=1e-10)
        bounds.append(x / math.sqrt(t[k]))
        grid = np.linspace(-x, x, GRID)
        density = at(grid)
    return Design(tuple(t), alpha, tuple(bounds))


def stagewise_p(plan: Design, look: int, z: float) -> float:
    """Two-sided p-value after stopping at ``look`` (0-based) with statistic ``z``, stage-wise ordering.

    ``P(exit before look) + P(no exit before look, |Z_look| >= |z|)`` under the null: the alpha
    spent before ``look`` plus the tail at this look. Below ``alpha`` exactly when ``|z|`` crossed
    the boundary at ``look``.
    """
    t = plan.fractions
    z = abs(z)
    if look == 0:
        return float(2 * sps.norm.sf(z))
    half = plan.bounds[0] * math.sqrt(t[0])
    grid = np.linspace(-half, half, GRID)
    density = sps.norm.pdf(grid / math.sqrt(t[0])) / math.sqrt(t[0])
    for k in range(1, look + 1):
        tail, at = _carry(density, grid, grid[1] - grid[0], t[k - 1], t[k])
        if k == look:
            return float(obf_spent(t[k - 1], plan.alpha) + tail(z * math.sqrt(t[k])))
        x = plan.bounds[k] * math.sqrt(t[k])
        grid = np.linspace(-x, x, GRID)
        density = at(grid)
    raise AssertionError("unreachable")


def t_to_z(t_stat: float, df: float) -> float:
    """The z with the same two-sided p-value as a t statistic with ``df`` degrees of freedom (sign kept)."""
    p = 2 * sps.t.sf(abs(t_stat), df)
    return float(math.copysign(sps.norm.isf(p / 2), t_stat))


def repeated_interval(estimate: float, se: float, df: float, bound: float) -> tuple[float, float]:
    """Repeated confidence interval at a look with z boundary ``bound``: ``estimate +/- q * se``, where
    ``q`` is the t quantile (``df``) with the same two-sided tail as ``bound`` on the z scale. It
    excludes 0 exactly when the look's test crosses its boundary."""
    q = sps.t.isf(sps.norm.sf(bound), df)
    return (estimate - q * se, estimate + q * se)
