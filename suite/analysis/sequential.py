"""Group-sequential testing of one comparison: look after each round of seeds, stop once decided.

Pure functions. The design is a two-sided test at overall level ``alpha``. Each look is placed at the information it
actually reached, ``t_k`` = seed pairs at look k / the most pairs the study allows (its last round of
seeds), not at the fraction it was planned for: a run that errored leaves a look with fewer pairs, and
its boundary is computed for the pairs it has (Lan & DeMets 1983). Alpha is spent by the Lan-DeMets
O'Brien-Fleming-type function (:func:`obf_spent`) evaluated at ``t_k``: almost nothing at the first
looks, nearly all of it at the last, so stopping early takes a large effect and a study that runs to
the end loses little power. The last planned look spends whatever alpha is left, even when errors kept
it below ``t = 1``. There is no fixed-level fallback: every look, planned or not, is tested at its
own boundary (:class:`Looks` places it).

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
from functools import lru_cache

import numpy as np
from scipy import optimize, special
from scipy import stats as sps

GRID = 201  # points of the grid that carries the continuation density (odd: Simpson's rule); bounds agree with
# 801 points to 1e-8 (a simulation asks for hundreds of designs)
EDGE = 12.0  # |B(t)| beyond this (t <= 1: 12 SD) carries no probability worth a grid point
_ROOT2PI = math.sqrt(2 * math.pi)


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
    """A group-sequential test: information fractions, alpha, the z boundaries, and the alpha spent
    by each look (cumulative)."""

    fractions: tuple[float, ...]
    alpha: float
    bounds: tuple[float, ...]
    spent: tuple[float, ...]


def _carry(density: np.ndarray, grid: np.ndarray, step: float, t_prev: float, t: float):
    """Tail function of B(t) given the continuation sub-density of B(t_prev) on ``grid``."""
    sd = math.sqrt(t - t_prev)
    weights = density * _simpson(grid.size) * step

    def tail(x: float) -> float:  # P(continued so far and |B(t)| >= x)
        return float(np.sum(weights * (special.ndtr((grid - x) / sd) + special.ndtr((-x - grid) / sd))))

    def at(points: np.ndarray) -> np.ndarray:  # sub-density of B(t) at points
        u = (points[:, None] - grid[None, :]) / sd
        return (np.exp(-0.5 * u * u) @ weights) / (sd * _ROOT2PI)

    return tail, at


def _spent(t: Sequence[float], alpha: float, final: bool) -> list[float]:
    """Cumulative alpha spent by each look; the final look spends what is left."""
    spent = [obf_spent(x, alpha) for x in t]
    if final:
        spent[-1] = alpha
    return spent


def _start(bound: float, t0: float) -> tuple[np.ndarray, np.ndarray]:
    """Grid and continuation density of B(t0) after the first look."""
    half = min(bound * math.sqrt(t0), EDGE)
    grid = np.linspace(-half, half, GRID)
    return grid, np.exp(-0.5 * grid * grid / t0) / math.sqrt(t0) / _ROOT2PI


def design(fractions: Sequence[float], alpha: float = 0.05, final: bool = True) -> Design:
    """Boundaries of a two-sided group-sequential test with O'Brien-Fleming-type alpha spending.

    Args:
        fractions: information fraction at each look (information reached / the most planned),
            increasing, in (0, 1].
        alpha: overall two-sided level.
        final: the last look is the study's last: it spends all the alpha left, whatever its fraction
            (a final look short of 1 because runs errored still tests at level alpha overall). False
            for a look with more to come: it spends ``obf_spent(t)``.

    Returns:
        The :class:`Design`; ``bounds[k]`` is the |z| that stops at look k. One look gives the
        fixed-sample 1.96 (alpha 0.05); two equal looks (2.963, 1.969); five,
        (4.877, 3.357, 2.680, 2.290, 2.031) as in gsDesign.
    """
    t = [float(f) for f in fractions]
    if not t or any(b <= a for a, b in zip(t, t[1:])) or t[0] <= 0 or t[-1] > 1 + 1e-12:
        raise ValueError(f"fractions must increase from above 0 to at most 1, got {list(fractions)}")
    spent = _spent(t, alpha, final)
    bounds = [float(sps.norm.isf(spent[0] / 2))]
    if len(t) > 1:
        grid, density = _start(bounds[0], t[0])
        for k in range(1, len(t)):
            tail, at = _carry(density, grid, grid[1] - grid[0], t[k - 1], t[k])
            spend = spent[k] - spent[k - 1]
            if spend <= 0 or tail(40.0) >= spend:  # nothing left to spend at this look
                x = math.inf
            else:
                x = optimize.brentq(lambda x: tail(x) - spend, 1e-6, 40.0, xtol=1e-10)
            bounds.append(x / math.sqrt(t[k]))
            grid = np.linspace(-min(x, EDGE), min(x, EDGE), GRID)
            density = at(grid)
    return Design(tuple(t), alpha, tuple(bounds), tuple(spent))


@lru_cache(maxsize=8192)
def _cached(fractions: tuple[float, ...], alpha: float, final: bool) -> Design:
    return design(fractions, alpha, final)


def at_information(pairs: Sequence[int], maximum: int, final: bool, alpha: float = 0.05) -> Design:
    """The :class:`Design` of the looks so far, each at the information it reached: ``pairs`` (seed pairs at
    each look that added some, the last this look's) over ``maximum``. ``final``: this look spends the alpha
    left. Cached: simulations ask for the same few designs thousands of times."""
    return _cached(tuple(min(p / maximum, 1.0) for p in pairs), float(alpha), bool(final))


@dataclass(frozen=True)
class Placed:
    """Where an analysis falls in a study: ``look`` (0-based), the pairs of every look that added
    information up to it (``information``, the last this one's), and whether it is the last planned."""

    look: int
    information: tuple[int, ...]
    final: bool


@dataclass(frozen=True)
class Looks:
    """A study's planned rounds of seeds and the looks taken so far (``sequential.json``).

    ``rounds``: the seeds planned at each look, increasing; the last is the cap, and the most pairs the
    study allows. ``taken``: (seeds, pairs) at each look already taken, in order.
    """

    rounds: tuple[int, ...]
    taken: tuple[tuple[int, int], ...] = ()

    def place(self, pairs: int, seeds: int) -> Placed | str:
        """Place an analysis of ``pairs`` seed pairs from ``seeds`` seeds run (errored runs included).

        The same pairs as the last look taken: that look again (nothing new to test; a round whose runs
        all errored adds no look, and when it is the cap's, the alpha left stays unspent). More: a new
        look, the last planned one when ``seeds`` reached the cap. Fewer: no look at all (a string saying
        why): runs were removed after a look, and its data are gone.
        """
        info: list[tuple[int, int, int]] = []  # (look, seeds, pairs) of the looks that added pairs
        for k, (s, p) in enumerate(self.taken):
            if p < 1 or info and p == info[-1][2]:
                continue
            if info and p < info[-1][2]:
                return f"look {k + 1} recorded {p} seed pairs, fewer than look {info[-1][0] + 1}'s {info[-1][2]}"
            info.append((k, s, p))
        if pairs < 1:
            return "no seed pairs to test yet"
        if info and pairs < info[-1][2]:
            return (f"{pairs} seed pairs, fewer than the {info[-1][2]} of look {info[-1][0] + 1}: runs were removed "
                    f"after that look; restore them, or start a new study with --out")
        if info and pairs == info[-1][2]:  # that look again
            return Placed(info[-1][0], tuple(x[2] for x in info), info[-1][1] >= self.rounds[-1])
        return Placed(len(self.taken), tuple(x[2] for x in info) + (pairs,), seeds >= self.rounds[-1])


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
    grid, density = _start(plan.bounds[0], t[0])
    for k in range(1, look + 1):
        tail, at = _carry(density, grid, grid[1] - grid[0], t[k - 1], t[k])
        if k == look:
            return float(min(1.0, plan.spent[k - 1] + tail(z * math.sqrt(t[k]))))
        x = min(plan.bounds[k] * math.sqrt(t[k]), EDGE)
        grid = np.linspace(-x, x, GRID)
        density = at(grid)
    raise AssertionError("unreachable")


def t_to_z(t_stat, df):
    """The z with the same two-sided p-value as a t statistic with ``df`` degrees of freedom (sign kept).
    Scalars give a float; arrays (any shape, broadcast) an array."""
    p = 2 * sps.t.sf(np.abs(t_stat), df)
    z = np.copysign(sps.norm.isf(p / 2), t_stat)
    return float(z) if np.ndim(z) == 0 else z


def repeated_interval(estimate: float, se: float, df: float, bound: float) -> tuple[float, float]:
    """Repeated confidence interval at a look with z boundary ``bound``: ``estimate +/- q * se``, where
    ``q`` is the t quantile (``df``) with the same two-sided tail as ``bound`` on the z scale. It
    excludes 0 exactly when the look's test crosses its boundary."""
    q = sps.t.isf(sps.norm.sf(bound), df)
    return (estimate - q * se, estimate + q * se)
