"""Cross-fitting (docs/statistics.md, "Learning rates"): each half of the seeds (even, odd positions) scored at the
rate the other half chose, with ``se = sum_h (n_h / n) s_p / sqrt(n_h)`` on ``n - H`` df, valid for any correlation."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from suite.analysis import stats
from suite.grouping import sort_value

TEST = "cross-fitted paired t"
# What findings.md says about how the rates were chosen and what that costs (one sentence).
SENTENCE = ("Each scheme's rate is chosen by cross-fitting: the seeds are split into two halves, each half is "
            "scored on test at the rate the other half chose on validation, and the difference is tested "
            "with the standard error of n/2 seeds, so a rate that looks best by luck is never scored on the "
            "seeds that chose it; the cost is the power of half the seeds.")


def crossfit_scores(val: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each seed's test score at the rate the other half chose on validation (ties: the smaller), and each half's
    rate index (-1: none); ``val``, ``test``: (..., seeds, ascending rates), nan where missing."""
    val, test = np.asarray(val, float), np.asarray(test, float)
    n_seeds = val.shape[-2]
    half = np.arange(n_seeds) % 2
    scores = np.full(val.shape[:-1], np.nan)
    choice = np.full(val.shape[:-2] + (2,), -1, dtype=int)
    for h in (0, 1):
        other = val[..., half != h, :]
        counts = np.sum(~np.isnan(other), axis=-2)
        sums = np.nansum(other, axis=-2)
        means = np.where(counts > 0, sums / np.maximum(counts, 1), -np.inf)
        best = np.argmax(means, axis=-1)  # the first of equal means: the smaller rate
        has = np.isfinite(np.max(means, axis=-1))
        choice[..., h] = np.where(has, best, -1)
        mine = test[..., half == h, :]
        index = np.broadcast_to(best[..., None, None], mine.shape[:-1] + (1,))
        picked = np.take_along_axis(mine, index, axis=-1)[..., 0]
        scores[..., half == h] = np.where(has[..., None], picked, np.nan)
    return scores, choice


def combine(d: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, se, df, n, sd) of (..., S) cross-fitted differences by seed position (nan: no pair), each (...)."""
    d = np.asarray(d, float)
    half = np.arange(d.shape[-1]) % 2
    ok = ~np.isnan(d)
    filled = np.where(ok, d, 0.0)
    n_h = np.stack([np.sum(ok & (half == h), axis=-1) for h in (0, 1)], axis=-1)
    m_h = np.stack([np.sum(np.where(half == h, filled, 0.0), axis=-1) for h in (0, 1)], axis=-1) / np.maximum(n_h, 1)
    n = n_h.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = np.where(n > 0, np.sum(n_h * m_h, axis=-1) / np.maximum(n, 1), np.nan)
        resid = np.where(ok, d - np.take(m_h, half, axis=-1), 0.0)
        df = n - np.sum(n_h > 0, axis=-1)
        sd = np.where(df >= 1, np.sqrt(np.sum(resid * resid, axis=-1) / np.maximum(df, 1)), np.nan)
        se = sd * np.sum(np.sqrt(n_h), axis=-1) / np.maximum(n, 1)
    return estimate, se, df.astype(float), n, sd


def difference(d: Sequence[float], alpha: float = 0.05) -> tuple[stats.Difference, float]:
    """The cross-fitted test of differences ``d`` by seed (nan: no pair), and the pooled within-half SD."""
    estimate, se, df, n, sd = (float(v) for v in combine(np.asarray(d, float)))
    if n == 0:
        return stats.NO_DIFFERENCE, math.nan
    if not math.isfinite(se) or se <= 1e-12 * max(1.0, abs(estimate)):
        return stats.Difference(estimate, math.nan, math.nan, math.nan, TEST, int(n)), sd
    half = float(sps.t.isf(alpha / 2, df)) * se
    p = float(2 * sps.t.sf(abs(estimate) / se, df))
    return stats.Difference(estimate, estimate - half, estimate + half, p, TEST, int(n), se, df), sd


def tost_p(diff: stats.Difference, margin: float) -> float:
    """TOST of ``|difference| < margin`` on the cross-fitted estimate: the larger one-sided p; nan without a test."""
    if not (math.isfinite(diff.se) and diff.se > 0 and math.isfinite(diff.df)):
        return math.nan
    low = sps.t.sf((diff.estimate + margin) / diff.se, diff.df)
    high = sps.t.sf((margin - diff.estimate) / diff.se, diff.df)
    return float(max(low, high))


@dataclass
class CrossFit:
    """One scheme against the baseline, each at the rates cross-fitting chose."""

    diff: stats.Difference
    sd: float  # pooled within-half SD of the differences
    scheme_mean: float  # the scheme's cross-fitted test score, over the paired seeds
    base_mean: float
    scheme_lrs: tuple[float, float]  # the rate each half was scored at (chosen on the other half)
    base_lrs: tuple[float, float]


def arrays(by_lr: dict[float, dict[Any, float | None]], seeds: list[Any]) -> tuple[list[float], np.ndarray]:
    """Rates (ascending) and an (S, R) array of scores by seed and rate, nan where missing."""
    rates = sorted(by_lr)
    out = np.full((len(seeds), len(rates)), np.nan)
    for j, lr in enumerate(rates):
        for i, s in enumerate(seeds):
            x = by_lr[lr].get(s)
            if x is not None:
                out[i, j] = x
    return rates, out


def compare(scheme: dict[str, Any], base: dict[str, Any], alpha: float = 0.05) -> CrossFit | None:
    """Cross-fit a scheme's cell (as :func:`suite.analysis.lr.lr_cell` returns it) against the baseline's; None when
    a side has no scored run. ``_seeds`` includes errored runs' seeds, so the halves do not move when a run errors."""
    if not scheme.get("_val") or not base.get("_val"):
        return None
    seeds = sorted(set(scheme["_seeds"]) | set(base["_seeds"]), key=sort_value)
    sides = []
    for cell in (scheme, base):
        rates, val = arrays({lr: dict(pairs) for lr, pairs in cell["_val"].items()}, seeds)
        _, test = arrays(cell["_test_by_lr"], seeds)
        scores, choice = crossfit_scores(val, test)
        sides.append((scores, tuple(rates[c] if c >= 0 else math.nan for c in choice)))
    (xa, lrs_a), (xb, lrs_b) = sides
    d = xa - xb
    diff, sd = difference(d, alpha)
    paired = ~np.isnan(d)
    mean_a = float(np.mean(xa[paired])) if paired.any() else math.nan
    mean_b = float(np.mean(xb[paired])) if paired.any() else math.nan
    return CrossFit(diff, sd, mean_a, mean_b, lrs_a, lrs_b)
