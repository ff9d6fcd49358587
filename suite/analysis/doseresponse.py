"""The stability frontier as a dose-response estimate: Firth logistic regression of not ok on log10(rate), its LR50
and a Wald test that two curves differ, and two schemes' relative potency (docs/statistics.md, "Learning rates: each
scheme at its best, and how wide a range trains", and "endpoint: frontier"). Pure functions of arrays."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

MAX_ITER = 100
TOL = 1e-8


def firth(X: np.ndarray, y: np.ndarray, trials: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Firth logistic regression: (coefficients, covariance); ``y`` (n,) counts not ok out of ``trials`` (default 1)."""
    beta, _, cov = firth_fit(X, y, trials)
    return beta, cov


def firth_fit(X: np.ndarray, y: np.ndarray, trials: np.ndarray | None = None,
              start: np.ndarray | None = None, tol: float = TOL) -> tuple[np.ndarray, float, np.ndarray]:
    """(coefficients, penalised log-likelihood, covariance) of the Firth fit (Newton-Raphson, step halving)."""
    X, y = np.asarray(X, float), np.asarray(y, float)
    m = np.ones_like(y) if trials is None else np.asarray(trials, float)

    def state(b: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """(penalised log-likelihood, p, information) at b; -inf where singular."""
        eta = X @ b
        p = 1 / (1 + np.exp(-eta))
        info = X.T @ (X * (m * p * (1 - p))[:, None])
        sign, logdet = np.linalg.slogdet(info)
        value = float(np.sum(y * eta - m * np.logaddexp(0, eta)) + 0.5 * logdet) if sign > 0 else -math.inf
        return value, p, info

    beta = np.zeros(X.shape[1]) if start is None else np.asarray(start, float)
    current = state(beta)
    if start is not None and not math.isfinite(current[0]):  # a warm start out where the information vanished
        beta = np.zeros(X.shape[1])
        current = state(beta)
    for _ in range(MAX_ITER):
        value, p, info = current
        inv = np.linalg.inv(info)
        sx = X * np.sqrt(m * p * (1 - p))[:, None]
        h = np.einsum("ij,jk,ik->i", sx, inv, sx)
        step = inv @ (X.T @ (y - m * p + h * (0.5 - p)))
        t = 1.0
        while True:  # halve until the penalised likelihood does not fall, or the step is negligible
            candidate = state(beta + t * step)
            if candidate[0] >= value - 1e-12 or t <= 1e-6:
                break
            t /= 2
        beta, current = beta + t * step, candidate  # the state is the one at this very step
        if np.max(np.abs(t * step)) < tol:
            break
    return beta, current[0], np.linalg.inv(current[2])


@dataclass(frozen=True)
class Frontier:
    """The rate where P(not ok) = 0.5, its 95% interval, or where the data put it instead."""

    lr50: float = math.nan
    low: float = math.nan
    high: float = math.nan
    censored: str = ""  # "above" the largest rate tested, "below" the smallest, or ""


def frontier(lrs: Sequence[float], not_ok: Sequence[int], alpha: float = 0.05) -> Frontier:
    """One cell's dose-response frontier from its runs' rates and not-ok outcomes (0/1)."""
    x, y = np.log10(np.asarray(lrs, float)), np.asarray(not_ok, float)
    if x.size == 0:
        return Frontier()
    if not y.any():
        return Frontier(censored="above")
    if y.all():
        return Frontier(censored="below")
    if np.unique(x).size < 2:
        return Frontier()
    beta, cov = firth(np.column_stack([np.ones_like(x), x]), y)
    b0, b1 = beta
    if b1 <= 0:  # instability falls with the rate: no frontier to speak of
        return Frontier()
    x50 = -b0 / b1
    grad = np.array([-1 / b1, b0 / b1 ** 2])
    se = math.sqrt(max(float(grad @ cov @ grad), 0.0))
    z = sps.norm.isf(alpha / 2)
    censored = "above" if x50 > x.max() else "below" if x50 < x.min() else ""
    return Frontier(10 ** x50, 10 ** (x50 - z * se), 10 ** (x50 + z * se), censored)


def curves_differ(lrs_a: Sequence[float], bad_a: Sequence[int], lrs_b: Sequence[float],
                  bad_b: Sequence[int]) -> float:
    """p of the Wald test (2 df) that two cells' curves are the same; nan without both outcomes or two rates a side."""
    xa, xb = np.log10(np.asarray(lrs_a, float)), np.log10(np.asarray(lrs_b, float))
    y = np.r_[np.asarray(bad_a, float), np.asarray(bad_b, float)]
    if y.size == 0 or not y.any() or y.all() or np.unique(xa).size < 2 or np.unique(xb).size < 2:
        return math.nan
    x = np.r_[xa, xb]
    g = np.r_[np.ones(xa.size), np.zeros(xb.size)]
    beta, cov = firth(np.column_stack([np.ones_like(x), x, g, x * g]), y)
    d = beta[2:]
    stat = float(d @ np.linalg.solve(cov[2:, 2:], d))
    return float(sps.chi2.sf(stat, 2))


BOUND = 6.0  # decades: an interval end that has not closed by a ratio of 10^+-6 is reported unbounded
MAX_STEP = 0.5  # decades: the longest step in search of an interval's end


@dataclass(frozen=True)
class Potency:
    """LR50(scheme) / LR50(baseline), its profile-likelihood interval (an open end: 0 or inf, ``censored``), test."""

    ratio: float = math.nan
    low: float = math.nan
    high: float = math.nan
    p: float = math.nan  # penalised likelihood-ratio test of ratio = 1
    slope: float = math.nan  # the common slope: change in log-odds of not ok per decade of rate
    censored: str = ""
    note: str = ""


def _grouped(xa: np.ndarray, ya: np.ndarray, xb: np.ndarray, yb: np.ndarray):
    """Runs as binomial rows: (x, g, not ok, runs), one row per (rate, arm); g = 1 for the scheme."""
    x, g, y = np.r_[xa, xb], np.r_[np.ones(xa.size), np.zeros(xb.size)], np.r_[ya, yb]
    keys, index = np.unique(np.column_stack([x, g]), axis=0, return_inverse=True)
    index = index.ravel()
    return keys[:, 0], keys[:, 1], np.bincount(index, y), np.bincount(index).astype(float)


def relative_potency(lrs_scheme: Sequence[float], bad_scheme: Sequence[int], lrs_base: Sequence[float],
                     bad_base: Sequence[int], alpha: float = 0.05) -> Potency:
    """LR50(scheme) / LR50(baseline) under parallel curves, profiled over its log (docs/statistics.md, "endpoint:
    frontier"); ``bad_*``: 1 where a run was not ok."""
    xa, xb = np.log10(np.asarray(lrs_scheme, float)), np.log10(np.asarray(lrs_base, float))
    ya, yb = np.asarray(bad_scheme, float), np.asarray(bad_base, float)
    y = np.r_[ya, yb]
    if not xa.size or not xb.size:
        return Potency(note=f"no runs of the {'scheme' if not xa.size else 'baseline'}")
    if not y.any():
        return Potency(note="no run ended not ok: neither frontier is within the rates tested")
    if y.all():
        return Potency(note="every run ended not ok: both frontiers lie below the rates tested")
    if np.unique(xa).size < 2 or np.unique(xb).size < 2:  # one side's penalised profile climbs to the bound
        side = "scheme" if np.unique(xa).size < 2 else "baseline"
        return Potency(note=f"the {side} ran at a single rate: its frontier cannot be placed against the other's")
    x, g, k, n = _grouped(xa, ya, xb, yb)
    fits: dict[float, tuple[float, np.ndarray]] = {}

    def loglik(rho: float) -> float:
        if rho not in fits:
            u = x - rho * g
            near = min(fits, key=lambda r: abs(r - rho)) if fits else None  # the nearest fit as the start
            try:
                beta, value, _ = firth_fit(np.column_stack([np.ones_like(u), u - u.mean()]), k, n,
                                           None if near is None else fits[near][1], tol=1e-5)
            except np.linalg.LinAlgError:  # no information on a slope
                beta, value = np.zeros(2), -math.inf
            fits[rho] = (value, beta)
        return fits[rho][0]

    # the profile can have a second peak (arms at disjoint rates): scan every overlapping shift, then climb on
    span = (float(xa.min() - xb.max()) - 0.3, float(xa.max() - xb.min()) + 0.3)
    rho_hat, top = profile_max(loglik, *np.clip(span, -BOUND, BOUND))
    slope = float(fits[rho_hat][1][1])
    if slope <= 0:
        return Potency(slope=slope, note="not ok does not rise with the rate: no frontier to compare")
    crit = float(sps.chi2.isf(alpha, 1))

    def excess(rho: float) -> float:
        return 2 * (top - loglik(rho)) - crit

    ends = [profile_end(excess, rho_hat, direction) for direction in (-1, 1)]
    p = float(sps.chi2.sf(max(2 * (top - loglik(0.0)), 0.0), 1))
    at_bound = abs(rho_hat) >= BOUND - 1e-3
    notes = ["the likelihood rises all the way to a ratio of 10^+-6: one side's frontier lies beyond its rates"
             ] if at_bound else []
    outside = (ends[0] is not None and ends[0] > 0) or (ends[1] is not None and ends[1] < 0)
    if outside and excess(0.0) <= 0:  # ratio 1 plausible on a second peak of the profile: keep test and interval
        ends = [None if e is None else f(e, 0.0) for e, f in zip(ends, (min, max))]  # in agreement
        notes.append("the profile likelihood has a second peak; the interval is widened to ratio 1, also plausible")
    censored = {(True, False): "low", (False, True): "high", (True, True): "both"}.get(
        (ends[0] is None, ends[1] is None), "")
    note = "; ".join(notes)
    return Potency(math.nan if at_bound else 10 ** rho_hat, 0.0 if ends[0] is None else 10 ** ends[0],
                   math.inf if ends[1] is None else 10 ** ends[1], p, slope, censored, note)


def profile_max(f, low: float, high: float, step: float = 0.3) -> tuple[float, float]:
    """(argmax, max) of f on [-BOUND, BOUND]: a grid on [low, high] (climbing past an end), then bounded Brent."""
    from scipy.optimize import minimize_scalar

    grid = np.linspace(low, high, max(int(round((high - low) / step)), 1) + 1)
    i = int(np.argmax([f(float(r)) for r in grid]))
    here = float(grid[i])
    lo = float(grid[i - 1]) if i > 0 else None
    hi = float(grid[i + 1]) if i + 1 < grid.size else None
    if lo is None or hi is None:  # the best point is an end of the grid: climb on
        (direction, inner), reach = ((-1.0, hi) if lo is None else (1.0, lo)), step
        while True:
            out = float(np.clip(here + direction * reach, -BOUND, BOUND))
            if out == here or f(out) < f(here):
                break
            inner, here, reach = here, out, 2 * reach
        lo, hi = sorted((inner, out))
    res = minimize_scalar(lambda r: -f(r), bounds=(lo, hi), method="bounded", options={"xatol": 1e-4})
    best = max((float(res.x), here), key=f)
    return best, f(best)


def profile_end(excess, rho_hat: float, direction: int) -> float | None:
    """Where ``excess`` crosses 0 from rho_hat in ``direction`` (steps under ``MAX_STEP``); None by the bound."""
    from scipy.optimize import brentq

    base = excess(rho_hat)  # -critical value
    trial = float(np.clip(rho_hat + direction * 0.2, -BOUND, BOUND))
    rise = excess(trial) - base
    if rise > -base:
        return brentq(excess, *sorted((rho_hat, trial)), xtol=1e-4)
    inner, step = trial, min((1.1 * 0.2 * math.sqrt(-base / rise) if rise > 0 else 0.4) - 0.2, MAX_STEP)
    while True:
        outer = float(np.clip(inner + direction * step, -BOUND, BOUND))
        if excess(outer) > 0:
            return brentq(excess, *sorted((inner, outer)), xtol=1e-4)
        if outer == direction * BOUND:
            return None
        inner, step = outer, min(2 * step, MAX_STEP)
