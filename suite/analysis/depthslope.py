"""How each scheme's stability frontier moves with depth: one Firth logistic model over every scheme, depth and rate,
and profile-likelihood slopes (docs/statistics.md, "Stability frontier across depth"). Pure functions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sps

from suite.analysis.doseresponse import BOUND, firth_fit, profile_end, profile_max


@dataclass(frozen=True)
class Slope:
    """One scheme's frontier on log depth: ``lr50 = 10^(at_centre) * (depth / centre_depth)^slope``."""

    slope: float = math.nan
    low: float = math.nan  # profile-likelihood interval; -inf / inf where an end is open
    high: float = math.nan
    note: str = ""


@dataclass(frozen=True)
class DepthFrontier:
    """The fitted model: the schemes' slopes, their frontier lines with pointwise bands, the checks."""

    schemes: tuple[str, ...] = ()
    beta: np.ndarray = field(default_factory=lambda: np.zeros(0))
    cov: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    centre: tuple[float, float] = (math.nan, math.nan)  # (x0, z0): log10 rate and log10 depth
    slopes: dict[str, Slope] = field(default_factory=dict)
    parallel_p: float = math.nan  # a rate steepness per scheme against one common steepness
    linear_p: float = math.nan  # one frontier per depth against a line in log depth
    note: str = ""

    def lr50(self, scheme: str, depths: Sequence[float], alpha: float = 0.05) -> tuple[np.ndarray, ...]:
        """(LR50, low, high) at ``depths``: the frontier line and its pointwise ``1 - alpha`` delta-method band."""
        i, k = self.schemes.index(scheme), len(self.schemes)
        z = np.log10(np.asarray(depths, float)) - self.centre[1]
        b, c, d = self.beta[0], self.beta[1 + i], self.beta[1 + k + i]
        x50 = self.centre[0] - (c + d * z) / b
        grad = np.zeros((z.size, self.beta.size))  # d x50 / d (b, c_i, d_i)
        grad[:, 0] = (c + d * z) / b ** 2
        grad[:, 1 + i] = -1 / b
        grad[:, 1 + k + i] = -z / b
        se = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", grad, self.cov, grad), 0))
        q = sps.norm.isf(alpha / 2)
        return 10 ** x50, 10 ** (x50 - q * se), 10 ** (x50 + q * se)


@dataclass(frozen=True)
class SlopeDifference:
    """``slope(scheme) - slope(baseline)`` with its profile-likelihood interval and test."""

    estimate: float = math.nan
    low: float = math.nan
    high: float = math.nan
    p: float = math.nan
    note: str = ""


def _rows(lrs, depths, schemes, not_ok) -> tuple[np.ndarray, ...]:
    """Runs as binomial rows, one per (scheme, depth, rate): (x, z, scheme index, not ok, runs), centred."""
    names = sorted(set(schemes), key=list(schemes).index)
    s = np.array([names.index(v) for v in schemes])
    x, z, y = np.log10(np.asarray(lrs, float)), np.log10(np.asarray(depths, float)), np.asarray(not_ok, float)
    keys, index = np.unique(np.column_stack([x, z, s]), axis=0, return_inverse=True)
    index = index.ravel()
    return keys[:, 0], keys[:, 1], keys[:, 2].astype(int), np.bincount(index, y), np.bincount(index).astype(float)


def _design(x: np.ndarray, z: np.ndarray, s: np.ndarray, k: int, fixed: dict[int, float] | None = None,
            tie: tuple[int, int] | None = None) -> np.ndarray:
    """Columns [rate, intercept per scheme, depth slope per scheme]; ``fixed`` {i: f} moves f z into i's rate column
    and drops its depth column; ``tie`` (a, b) folds a's depth column into b's (``fixed[a]`` is then f_a - f_b)."""
    one = np.eye(k)[s]
    rate = x.copy()
    for i, f in (fixed or {}).items():
        rate = rate - f * z * one[:, i]
    depth = one * z[:, None]
    drop = set(fixed or {})
    if tie is not None:
        depth[:, tie[1]] += depth[:, tie[0]]
    keep = [j for j in range(k) if j not in drop]
    return np.column_stack([rate, one, depth[:, keep]])


def fit(lrs: Sequence[float], depths: Sequence[float], schemes: Sequence[str], not_ok: Sequence[int],
        alpha: float = 0.05) -> DepthFrontier:
    """Fit the model (a scheme run at one depth or one rate left out); ``note`` says why nothing was fitted."""
    spread = {v: ({d for d, w in zip(depths, schemes) if w == v}, {r for r, w in zip(lrs, schemes) if w == v})
              for v in set(schemes)}
    use = [i for i, v in enumerate(schemes) if len(spread[v][0]) >= 2 and len(spread[v][1]) >= 2]
    if len(use) < len(schemes):
        lrs, depths, schemes, not_ok = ([seq[i] for i in use] for seq in (lrs, depths, schemes, not_ok))
    try:
        return _fit(lrs, depths, schemes, not_ok, alpha)
    except np.linalg.LinAlgError:
        return DepthFrontier(tuple(sorted(set(schemes), key=list(schemes).index)),
                             note="the model cannot be fitted (its information matrix is singular)")


def _fit(lrs, depths, schemes, not_ok, alpha: float) -> DepthFrontier:
    if not len(schemes):
        return DepthFrontier(note="no scheme was run at two depths and two rates")
    x, z, s, y, n = _rows(lrs, depths, schemes, not_ok)
    names = tuple(sorted(set(schemes), key=list(schemes).index))
    if not y.any() or (y == n).all():
        return DepthFrontier(names, note="every run ended the same way (all ok, or none): no frontier to place")
    if np.unique(z).size < 2 or np.unique(x).size < 2:
        return DepthFrontier(names, note="the runs need two depths and two rates at least")
    centre = (float(np.average(x, weights=n)), float(np.average(z, weights=n)))
    x, z = x - centre[0], z - centre[1]
    k = len(names)
    beta, top, cov = firth_fit(_design(x, z, s, k), y, n)
    if beta[0] <= 0:
        return DepthFrontier(names, note="not ok does not rise with the rate: no frontier to speak of")
    slopes = {}
    for i, name in enumerate(names):
        mine = s == i
        if not y[mine].any() or (y[mine] == n[mine]).all() or np.unique(z[mine]).size < 2:
            why = ("its runs were all ok or all not ok" if np.unique(z[mine]).size >= 2 else "one depth")
            slopes[name] = Slope(note=f"no slope: {why}")
            continue
        try:
            slopes[name] = _profile(lambda f: firth_fit(_design(x, z, s, k, {i: f}), y, n)[1],
                                    -beta[1 + k + i] / beta[0], alpha, Slope)
        except np.linalg.LinAlgError:
            slopes[name] = Slope(note="no slope: its profile cannot be computed (singular information)")
    return DepthFrontier(names, beta, cov, centre, slopes, _parallel_p(x, z, s, y, n, k),
                         _linear_p(x, z, s, y, n, k))


def _wald(X: np.ndarray, y: np.ndarray, n: np.ndarray, L: np.ndarray) -> float:
    """p of the Wald test of ``L beta = 0`` in the Firth fit of ``X``; nan where ``X`` is rank-deficient or fails."""
    if np.linalg.matrix_rank(X) < X.shape[1]:
        return math.nan
    try:
        beta, _, cov = firth_fit(X, y, n)
        d = L @ beta
        return float(sps.chi2.sf(float(d @ np.linalg.solve(L @ cov @ L.T, d)), L.shape[0]))
    except np.linalg.LinAlgError:
        return math.nan


def _parallel_p(x, z, s, y, n, k: int) -> float:
    """Wald test that the per-scheme rate steepnesses are equal; nan for one scheme."""
    if k < 2:
        return math.nan
    one = np.eye(k)[s]
    X = np.column_stack([one * x[:, None], one, one * z[:, None]])
    L = np.zeros((k - 1, X.shape[1]))
    L[np.arange(k - 1), 0], L[np.arange(k - 1), np.arange(1, k)] = 1, -1
    return _wald(X, y, n, L)


def _linear_p(x, z, s, y, n, k: int) -> float:
    """Wald test that per-(scheme, depth) intercepts lie on a line in log depth; nan with no scheme at 3 depths."""
    from scipy.linalg import null_space

    cells, index = np.unique(np.column_stack([s, z]), axis=0, return_inverse=True)
    X = np.column_stack([x, np.eye(len(cells))[index.ravel()]])
    rows = []
    for i in range(k):
        mine = np.flatnonzero(cells[:, 0] == i)
        if mine.size < 3:
            continue
        for v in null_space(np.column_stack([np.ones(mine.size), cells[mine, 1]]).T).T:
            row = np.zeros(X.shape[1])
            row[1 + mine] = v
            rows.append(row)
    return _wald(X, y, n, np.array(rows)) if rows else math.nan


def difference(lrs: Sequence[float], depths: Sequence[float], schemes: Sequence[str], not_ok: Sequence[int],
               scheme: str, baseline: str, alpha: float = 0.05) -> SlopeDifference:
    """``slope(scheme) - slope(baseline)``: profile-likelihood estimate, ``1 - alpha`` interval and test of 0."""
    model = fit(lrs, depths, schemes, not_ok, alpha)
    if model.note:
        return SlopeDifference(note=model.note)
    keep = [i for i, v in enumerate(schemes) if v in model.schemes]
    lrs, depths, schemes, not_ok = ([seq[i] for i in keep] for seq in (lrs, depths, schemes, not_ok))
    for name in (scheme, baseline):
        if name not in model.slopes or math.isnan(model.slopes[name].slope):
            return SlopeDifference(note=f"{name}: " + (model.slopes[name].note if name in model.slopes
                                                        else "not run at two depths and two rates"))
    x, z, s, y, n = _rows(lrs, depths, schemes, not_ok)
    x, z = x - model.centre[0], z - model.centre[1]
    a, b, k = model.schemes.index(scheme), model.schemes.index(baseline), len(model.schemes)
    start = model.slopes[scheme].slope - model.slopes[baseline].slope
    try:
        return _profile(lambda d: firth_fit(_design(x, z, s, k, {a: d}, (a, b)), y, n)[1], start, alpha,
                        SlopeDifference, test=True)
    except np.linalg.LinAlgError:
        return SlopeDifference(note="the model cannot be fitted (its information matrix is singular)")


def _profile(loglik, start: float, alpha: float, kind, test: bool = False):
    """Profile maximum near ``start``, its ``1 - alpha`` interval (open ends +/-inf) and, with ``test``, p of 0."""
    cache: dict[float, float] = {}

    def f(v: float) -> float:
        if v not in cache:
            cache[v] = loglik(v)
        return cache[v]

    span = np.clip((start - 1.5, start + 1.5), -BOUND, BOUND)
    best, top = profile_max(f, *span, step=0.25)
    crit = float(sps.chi2.isf(alpha, 1))
    ends = [profile_end(lambda v: 2 * (top - f(v)) - crit, best, direction) for direction in (-1, 1)]
    low, high = (-math.inf if ends[0] is None else ends[0]), (math.inf if ends[1] is None else ends[1])
    note = "an end of the interval is open: the runs do not bound it" if None in ends else ""
    if not test:
        return kind(best, low, high, note)
    p = float(sps.chi2.sf(max(2 * (top - f(0.0)), 0.0), 1))
    if p >= alpha and not low <= 0 <= high:  # a second peak of the profile: keep test and interval in agreement
        low, high = min(low, 0.0), max(high, 0.0)
    return kind(best, low, high, p, note)
