"""Best-rate comparisons that account for the choice of rate: cross-fitting over seeds.

Comparing two schemes "each at its own best learning rate" chooses the rate and tests it on the same
seeds. Validation and test scores of one run move together (within a cell they correlate about 0.95:
the same trained weights), so the rate that looks best on validation by luck also scores high on test,
and a scheme whose curve is flat (many rates nearly as good, many chances to be lucky) gains most. The
paired t at rates chosen on all seeds gave up to 6.8% false positives when a flat curve met a peaked one
with the same maximum (tests/analysis/test_crossfit.py, 10 seeds).

Cross-fitting removes the luck from the test. The seeds, in the study's order, are split into two halves
by position (1st, 3rd, 5th... and 2nd, 4th, ...), so later rounds of seeds keep earlier seeds' halves.
For each scheme and half, the rate is chosen on the *other* half: the highest mean validation score over
its seeds at that rate (ties: the smaller rate; a run that errored is left out of the mean). Each seed
is then scored on test at the rate chosen for its half, and compared seed by seed (seeds missing on
either side are dropped). A seed's test score never helped choose its own rate.

The halves are not independent: each half's validation scores chose the rate the other half is scored
at, and those scores track its own test scores, so when both halves happen to choose the same rate both
are lucky together (in the flat-curve simulation the two halves' means correlate), and a t-test that pools
all the cross-fitted differences as independent gives too many false positives. So the halves
are combined with a standard error that holds for any correlation between them (Cauchy-Schwarz: the SD
of a weighted mean is at most the weighted mean of the SDs):

- ``d_s``: the cross-fitted difference of seed s; ``n_h`` seeds in half h with mean ``m_h`` (h = 1, 2).
- estimate: ``sum_h n_h m_h / n``, the mean of all n differences.
- ``s_p``: the pooled within-half SD, ``sqrt(sum_h sum_s (d_s - m_h)^2 / (n - H))``, H the halves
  with a seed (2, or 1 when every seed of one half is missing).
- standard error: ``sum_h (n_h / n) * s_p / sqrt(n_h)``, about ``s_p / sqrt(n / 2)``: the standard
  error of n/2 seeds.
- test: ``t = estimate / se`` against Student's t with ``n - H`` degrees of freedom; the interval is
  ``estimate +/- t_{1 - alpha/2, n - H} * se``.

The cost: the test has the precision of n/2 seeds, and each half's rate is chosen on n/2 seeds, so a
peaked scheme sometimes gets a neighbouring rate (and is scored honestly there). Its false positives and
power, simulated in tests/analysis/test_crossfit.py, are in docs/statistics.md
(#learning-rates-each-scheme-at-its-best-and-how-wide-a-range-trains).
"""

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
    """Each seed's test score at the rate the other half of the seeds chose on validation.

    Args:
        val: (..., S, R) validation scores of S seeds (in the study's order) at R rates (ascending);
            nan where a run errored or is missing. Any leading axes (e.g. simulated studies) are kept.
        test: (..., S, R) test scores, the same layout.

    Returns:
        (scores (..., S): seed s's test score at the rate chosen for its half, nan where there is none;
        choice (..., 2): the index of the rate chosen for half 0 (seeds at even positions) and half 1,
        -1 when the other half scored no rate).
    """
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
    """The cross-fitted difference, its standard error (the bound of the module docstring), degrees of
    freedom, number of pairs and pooled within-half SD.

    Args:
        d: (..., S) cross-fitted differences by seed position (halves: even and odd positions), nan
            where a seed has no pair.

    Returns:
        (estimate, se, df, n, sd), each of shape (...); estimate nan without a pair, se and sd nan with
        df < 1.
    """
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
    """The cross-fitted test of one comparison, with the standard error of the module docstring.

    ``d``: (S,) cross-fitted differences by seed position, nan where a seed has no pair. Returns the
    :class:`~suite.analysis.stats.Difference` (test :data:`TEST`) and the pooled within-half SD ``s_p``;
    interval and p are nan with no degree of freedom or no spread within the halves.
    """
    estimate, se, df, n, sd = (float(v) for v in combine(np.asarray(d, float)))
    if n == 0:
        return stats.NO_DIFFERENCE, math.nan
    if not math.isfinite(se) or se <= 1e-12 * max(1.0, abs(estimate)):
        return stats.Difference(estimate, math.nan, math.nan, math.nan, TEST, int(n)), sd
    half = float(sps.t.isf(alpha / 2, df)) * se
    p = float(2 * sps.t.sf(abs(estimate) / se, df))
    return stats.Difference(estimate, estimate - half, estimate + half, p, TEST, int(n), se, df), sd


def tost_p(diff: stats.Difference, margin: float) -> float:
    """Two one-sided tests of ``|difference| < margin`` on the cross-fitted estimate, its se and df: the
    larger one-sided p; nan without a test."""
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
    """Cross-fit one cell of a scheme against the baseline's.

    Args:
        scheme: a cell as :func:`suite.analysis.lr.lr_cell` returns it: ``_val`` (rate -> [(seed, score)]
            on the selection split), ``_test_by_lr`` (rate -> {seed: test score or None}) and ``_seeds``
            (every seed with a run, errored ones included: the halves do not move when a run errors).
        base: the baseline's cell, alike.
        alpha: 1 - confidence level of the interval.

    Returns:
        The :class:`CrossFit`, or None when a side has no scored run.
    """
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
