"""Cross-fitted best-rate comparisons: hand-computed cases, and the false-positive rate when one scheme's
curve is flat and the other's peaked with the same maximum (the case that fooled the paired t at rates
chosen on the same seeds)."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats as sps

from suite.analysis import crossfit

FLAT = np.full(5, 0.70)
PEAKED = 0.70 - 0.02 * np.abs(np.arange(5) - 2)  # the same maximum, at the middle rate


def curves(rng: np.random.Generator, studies: int, seeds: int, error: float = 0.05, sd: float = 0.03,
           rho: float = 0.95, seed_sd: float = 0.01) -> tuple[np.ndarray, ...]:
    """Validation and test scores (studies, seeds, rates) of a flat and a peaked scheme.

    Each run's validation and test noise correlate ``rho`` (the same trained weights), a seed shifts
    every run of both schemes alike (``seed_sd``), and a run errors (nan on both splits) with
    probability ``error``.

    Returns:
        (val_flat, test_flat, val_peaked, test_peaked).
    """
    shift = rng.normal(0, seed_sd, (studies, seeds, 1))
    chol = np.linalg.cholesky(np.array([[1, rho], [rho, 1]]) * sd ** 2)
    out = []
    for mean in (FLAT, PEAKED):
        noise = rng.standard_normal((studies, seeds, mean.size, 2)) @ chol.T
        lost = rng.random((studies, seeds, mean.size)) < error
        for split in (0, 1):
            out.append(np.where(lost, np.nan, mean + shift + noise[..., split]))
    return tuple(out)


def test_each_half_is_scored_at_the_rate_the_other_half_chose():
    val = np.array([[0.5, 0.6], [0.7, 0.4], [0.6, 0.6]])  # seeds 0 and 2 form half 0, seed 1 half 1
    test = val + np.array([[0.01], [0.02], [0.03]])
    scores, choice = crossfit.crossfit_scores(val, test)
    # half 0 is scored where seed 1 is best (rate 0); half 1 where seeds 0 and 2 are (means .55 / .60: rate 1)
    assert choice.tolist() == [0, 1] and scores == pytest.approx([0.51, 0.42, 0.63])
    tied = np.array([[0.5, 0.5], [0.5, 0.5]])  # ties: the smaller rate
    assert crossfit.crossfit_scores(tied, tied)[1].tolist() == [0, 0]
    val[1] = np.nan  # half 1 chose nothing for half 0: no scores there
    scores, choice = crossfit.crossfit_scores(val, test)
    assert choice[0] == -1 and np.isnan(scores[[0, 2]]).all() and scores[1] == pytest.approx(0.42)


def test_the_halves_combine_with_the_standard_error_of_half_the_seeds():
    d = np.array([0.1, 0.2, np.nan, 0.3, 0.05])  # half 0: 0.1, 0.05 (mean .075); half 1: 0.2, 0.3 (.25)
    estimate, se, df, n, sd = (float(v) for v in crossfit.combine(d))
    assert (estimate, df, n) == (pytest.approx((0.15 + 0.5) / 4), 2.0, 4.0)
    pooled = math.sqrt((0.025 ** 2 * 2 + 0.05 ** 2 * 2) / 2)
    assert sd == pytest.approx(pooled) and se == pytest.approx((0.5 * pooled / math.sqrt(2)) * 2)
    diff, _ = crossfit.difference(d)
    t = estimate / se
    assert diff.p == pytest.approx(2 * sps.t.sf(t, 2)) and diff.test == crossfit.TEST and diff.n_pairs == 4
    half = sps.t.isf(0.025, 2) * se
    assert (diff.low, diff.high) == pytest.approx((estimate - half, estimate + half))
    same = crossfit.difference([0.1, 0.1, 0.1])[0]  # no spread: an estimate, no test
    assert same.estimate == pytest.approx(0.1) and math.isnan(same.p) and math.isnan(same.low)
    assert math.isnan(crossfit.difference([0.1, 0.2])[0].p)  # one seed per half: no degree of freedom


def _naive_p(val: np.ndarray, test: np.ndarray, other_val: np.ndarray, other_test: np.ndarray) -> np.ndarray:
    """The former test: each scheme at the rate with the best mean validation score over all seeds, the
    paired t on the same seeds' test scores there."""
    def at_best(v, t):
        means = np.nanmean(v, axis=1)
        best = np.argmax(np.where(np.isnan(means), -np.inf, means), axis=-1)
        return np.take_along_axis(t, np.broadcast_to(best[:, None, None], t.shape[:2] + (1,)), axis=-1)[..., 0]

    with warnings.catch_warnings():  # a rate every seed of a study errored at: an empty mean, never chosen
        warnings.simplefilter("ignore", RuntimeWarning)
        d = at_best(val, test) - at_best(other_val, other_test)
        n = np.sum(~np.isnan(d), axis=1)
        t = np.nanmean(d, axis=1) / (np.nanstd(d, axis=1, ddof=1) / np.sqrt(n))
        return 2 * sps.t.sf(np.abs(t), n - 1)


@pytest.mark.parametrize("seeds", [4, 6, 10])
def test_a_flat_curve_against_a_peaked_one_keeps_the_false_positive_rate(seeds):
    """Flat (0.70 at 5 rates) against peaked (0.70 at the middle, 2 points less per step), validation and
    test noise correlated 0.95 within a run (SD 3 points), 5% of runs errored; 20,000 studies each.
    Measured: cross-fitted 4.6% / 4.5% / 4.3% false positives at 4 / 6 / 10 seeds; the paired t at
    the rates chosen on all seeds 4.9% / 5.5% / 6.8% (at 10 seeds it fails the 5.5% bound the test holds)."""
    rng = np.random.default_rng(seeds)
    vf, tf, vp, tp = curves(rng, 20_000, seeds)
    xa, _ = crossfit.crossfit_scores(vf, tf)
    xb, _ = crossfit.crossfit_scores(vp, tp)
    estimate, se, df, _, _ = crossfit.combine(xa - xb)
    with np.errstate(invalid="ignore"):
        p = 2 * sps.t.sf(np.abs(estimate / se), df)
    rate = float(np.mean(np.nan_to_num(p, nan=1.0) < 0.05))
    assert rate <= 0.055
    naive = float(np.mean(np.nan_to_num(_naive_p(vf, tf, vp, tp), nan=1.0) < 0.05))
    if seeds == 10:  # the scenario has teeth: the former test fails it
        assert naive > 0.055


def test_cross_fitting_finds_a_real_difference():
    """Not a test that never rejects: the peaked scheme 8 points better than the flat one is found at 10
    seeds (89% measured; 5 points: 49%, the cost of testing on half the seeds)."""
    rng = np.random.default_rng(7)
    vf, tf, vp, tp = curves(rng, 4000, 10)
    xa, _ = crossfit.crossfit_scores(vf - 0.08, tf - 0.08)
    xb, _ = crossfit.crossfit_scores(vp, tp)
    estimate, se, df, _, _ = crossfit.combine(xa - xb)
    with np.errstate(invalid="ignore"):
        p = 2 * sps.t.sf(np.abs(estimate / se), df)
    assert np.mean(np.nan_to_num(p, nan=1.0) < 0.05) >= 0.8
