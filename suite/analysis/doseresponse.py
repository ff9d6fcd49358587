"""The stability frontier as a dose-response estimate: P(not ok) against log10(learning rate).

Per cell (scheme x depth x the other keys), a logistic regression of each run's not-ok outcome
(diverged or failed) on ``x = log10(lr)``, fitted by Firth's penalised likelihood (Firth 1993: the
log-likelihood plus half the log-determinant of the Fisher information). Unlike maximum likelihood
it stays finite under complete separation (every run ok below some rate and not ok above it), which
is the usual case with a few seeds per rate. Reported: the rate where P(not ok) = 0.5,
``lr50 = 10^(-b0/b1)``, with a 95% interval from the delta method on ``x50``; "above" (no instability
seen: lr50 lies above the largest rate tested) or "below" (not ok at every rate) instead when the
data cannot place it; and a test of whether two schemes' curves differ: the Wald test of the group
and group x log-rate terms of a joint Firth fit (2 degrees of freedom). Pure functions of arrays.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

MAX_ITER = 100
TOL = 1e-8


def firth(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Firth-penalised logistic regression: (coefficients, their covariance: the inverse information).

    Newton-Raphson on the modified score ``X'(y - p + h (1/2 - p))``, h the diagonal of the hat matrix
    ``W^1/2 X (X'WX)^-1 X' W^1/2``, with step halving on the penalised log-likelihood.
    """
    X, y = np.asarray(X, float), np.asarray(y, float)
    beta = np.zeros(X.shape[1])

    def penalised(b: np.ndarray) -> float:
        eta = X @ b
        p = 1 / (1 + np.exp(-eta))
        info = X.T @ (X * (p * (1 - p))[:, None])
        sign, logdet = np.linalg.slogdet(info)
        return float(np.sum(y * eta - np.logaddexp(0, eta)) + 0.5 * logdet) if sign > 0 else -math.inf

    current = penalised(beta)
    for _ in range(MAX_ITER):
        p = 1 / (1 + np.exp(-(X @ beta)))
        w = p * (1 - p)
        info = X.T @ (X * w[:, None])
        inv = np.linalg.inv(info)
        h = np.einsum("ij,jk,ik->i", X * np.sqrt(w)[:, None], inv, X * np.sqrt(w)[:, None])
        step = inv @ (X.T @ (y - p + h * (0.5 - p)))
        t = 1.0
        while t > 1e-6:
            candidate = penalised(beta + t * step)
            if candidate >= current - 1e-12:
                break
            t /= 2
        beta, current = beta + t * step, candidate
        if np.max(np.abs(t * step)) < TOL:
            break
    p = 1 / (1 + np.exp(-(X @ beta)))
    info = X.T @ (X * (p * (1 - p))[:, None])
    return beta, np.linalg.inv(info)


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
    """p of the Wald test that two cells' dose-response curves are the same (group and group x log-rate
    terms of a joint Firth fit, 2 df); nan when there is nothing to compare (no run not ok, or every one)."""
    xa, xb = np.log10(np.asarray(lrs_a, float)), np.log10(np.asarray(lrs_b, float))
    y = np.r_[np.asarray(bad_a, float), np.asarray(bad_b, float)]
    if y.size == 0 or not y.any() or y.all() or np.unique(np.r_[xa, xb]).size < 2:
        return math.nan
    x = np.r_[xa, xb]
    g = np.r_[np.ones(xa.size), np.zeros(xb.size)]
    beta, cov = firth(np.column_stack([np.ones_like(x), x, g, x * g]), y)
    d = beta[2:]
    stat = float(d @ np.linalg.solve(cov[2:, 2:], d))
    return float(sps.chi2.sf(stat, 2))
