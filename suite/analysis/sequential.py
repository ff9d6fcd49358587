"""Group-sequential testing of one comparison: look after each round of seeds, stop once decided.

Pure functions. Each look is placed at the information it actually reached (seed pairs / the most the study allows),
not the fraction planned, and alpha is spent there by the Lan-DeMets O'Brien-Fleming-type function, with no
fixed-level fallback (it inflated the type I error when runs errored). Boundaries come from the density of a Brownian
motion carried from look to look on a grid (Armitage, McPherson & Rowe 1969); after stopping, the stage-wise p-value
and the repeated confidence interval (Jennison & Turnbull). See docs/statistics.md, "Sequential seeding".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import optimize, special
from scipy import stats as sps

GRID = 201  # points carrying the continuation density (odd: Simpson's rule); bounds agree with 801 points to 1e-8
EDGE = 12.0  # |B(t)| beyond this (t <= 1: 12 SD) carries no probability worth a grid point
_ROOT2PI = math.sqrt(2 * math.pi)


def obf_spent(t: float, alpha: float = 0.05) -> float:
    """Two-sided alpha spent by information fraction ``t``: the Lan-DeMets O'Brien-Fleming-type function per side,
    the convention of R's gsDesign (``sfLDOF``), whose published boundaries the tests reproduce."""
    if t <= 0:
        return 0.0
    return float(min(alpha, 2 * (2 - 2 * sps.norm.cdf(sps.norm.isf(alpha / 4) / math.sqrt(t)))))


def _simpson(n: int) -> np.ndarray:
    w = np.ones(n)
    w[1:-1:2], w[2:-1:2] = 4, 2
    return w / 3


@dataclass(frozen=True)
class Design:
    """A group-sequential test: information fractions, alpha, the z boundaries, the cumulative alpha spent."""

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
    """Boundaries of a two-sided group-sequential test with O'Brien-Fleming-type alpha spending at the increasing
    information ``fractions`` in (0, 1]; ``bounds[k]`` is the |z| that stops at look k. ``final``: the last look
    spends all the alpha left, whatever its fraction (one short of 1 because runs errored still tests at level alpha).
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
    """The :class:`Design` of the looks so far, each at ``pairs`` / ``maximum``; cached (simulations repeat them)."""
    return _cached(tuple(min(p / maximum, 1.0) for p in pairs), float(alpha), bool(final))


@dataclass(frozen=True)
class Placed:
    """Where an analysis falls in a study: ``look`` (0-based), the pairs of each look so far, whether it is the last."""

    look: int
    information: tuple[int, ...]
    final: bool


@dataclass(frozen=True)
class Looks:
    """A study's planned rounds of seeds (increasing, the last the cap) and the (seeds, pairs) of the looks taken."""

    rounds: tuple[int, ...]
    taken: tuple[tuple[int, int], ...] = ()

    def place(self, pairs: int, seeds: int) -> Placed | str:
        """Place an analysis of ``pairs`` seed pairs from ``seeds`` seeds run: the last look again if no pairs were
        added, a new look if more, else a string saying why there is none (runs were removed after a look)."""
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
    """Two-sided p-value after stopping at ``look`` (0-based) with statistic ``z``, stage-wise ordering; below
    ``alpha`` exactly when ``|z|`` crossed the boundary at ``look``."""
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
    """The z with the same two-sided p-value as a t statistic with ``df`` degrees of freedom (sign kept)."""
    p = 2 * sps.t.sf(np.abs(t_stat), df)
    z = np.copysign(sps.norm.isf(p / 2), t_stat)
    return float(z) if np.ndim(z) == 0 else z


def repeated_interval(estimate: float, se: float, df: float, bound: float) -> tuple[float, float]:
    """Repeated confidence interval at a look with z boundary ``bound``; excludes 0 exactly when the test crosses."""
    q = sps.t.isf(sps.norm.sf(bound), df)
    return (estimate - q * se, estimate + q * se)
