"""suite.analysis.robust and suite.analysis.regression on hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from suite.analysis import regression, robust


def test_iqm_by_hand():
    assert robust.iqm([1, 2, 3, 4, 100, 6, 7, 8]) == pytest.approx(5.0)  # sorted, the middle four: 3, 4, 6, 7
    assert robust.iqm([1, 2, 3, 4]) == pytest.approx(2.5)  # middle two of four: 2, 3
    assert math.isnan(robust.iqm([]))


def test_probability_of_improvement_by_hand():
    assert robust.probability_of_improvement([[1, 3]], [[2]]) == pytest.approx(0.5)
    # stratum 1: 2 > 1 always (1.0); stratum 2: 5 vs 5 tie (0.5) -> mean 0.75
    assert robust.probability_of_improvement([[2], [5]], [[1], [5]]) == pytest.approx(0.75)
    assert math.isnan(robust.probability_of_improvement([[]], [[1]]))


def test_stratified_bootstrap_keeps_strata_and_refuses_small_samples():
    strata = [np.array([0.0] * 5), np.array([1.0] * 5)]  # within a stratum nothing varies
    low, high = robust.stratified_bootstrap([strata], lambda g: np.concatenate(g, axis=-1).mean(axis=-1), n_resamples=200)
    assert low == high == 0.5  # resampling within strata can never change the mix of 0s and 1s
    again = robust.stratified_bootstrap([strata], lambda g: np.concatenate(g, axis=-1).mean(axis=-1), n_resamples=200)
    assert again == (low, high)  # seeded
    few = [np.array([0.1, 0.2, 0.3])]
    assert all(math.isnan(v) for v in robust.stratified_bootstrap([few], lambda g: np.zeros(len(g[0]))))  # 3 < MIN_RUNS
    lonely = [np.arange(12.0), np.array([1.0])]
    assert all(math.isnan(v) for v in robust.stratified_bootstrap([lonely], lambda g: np.zeros(len(g[0]))))  # a stratum of one


def test_linear_slope_matches_scipy():
    x = np.log2([6, 6, 12, 12, 24, 24])
    y = np.array([0.9, 0.88, 0.8, 0.83, 0.7, 0.69])
    fit = sps.linregress(x, y)
    s = regression.linear_slope(x, y)
    half = sps.t.ppf(0.975, 4) * fit.stderr
    assert (s.estimate, s.low, s.high, s.p) == pytest.approx((fit.slope, fit.slope - half, fit.slope + half, fit.pvalue))
    assert math.isnan(regression.linear_slope([1, 1, 1], [1, 2, 3]).estimate)


def test_logistic_slope_difference_equals_separate_fits_and_refuses_separation():
    import statsmodels.api as sm

    x = np.repeat([0.0, 1.0, 2.0, 3.0], 10)
    k1 = np.array([0] * 9 + [1] + [0] * 8 + [1] * 2 + [0] * 6 + [1] * 4 + [0] * 4 + [1] * 6)
    k2 = np.array([0] * 8 + [1] * 2 + [0] * 7 + [1] * 3 + [0] * 7 + [1] * 3 + [0] * 6 + [1] * 4)
    d = regression.logistic_slope_difference(x, k1, x, k2)

    def slope(k):
        return sm.GLM(k, sm.add_constant(x), family=sm.families.Binomial()).fit().params[1]

    assert d.estimate == pytest.approx(slope(k1) - slope(k2), rel=1e-6)  # the saturated model = two fits
    assert d.low < d.estimate < d.high and 0 < d.p < 1
    never = np.zeros_like(k1)
    assert math.isnan(regression.logistic_slope_difference(x, never, x, k2).estimate)
    separated = (x >= 2).astype(float)  # not ok exactly from depth 2 on: the MLE runs off to infinity
    assert math.isnan(regression.logistic_slope_difference(x, separated, x, k2).estimate)


def test_iqm_is_the_mean_of_the_middle_half_and_poi_counts_pairs():
    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 5, 7, 10, 13):
        x = rng.normal(size=n)
        cut = int(n / 4)
        assert robust.iqm(x) == pytest.approx(float(np.sort(x)[cut:n - cut].mean()))
    assert robust.iqm([1, 2, 3, 4, 100, 6, 7, 8]) == 5.0
    xs, ys = [np.array([1.0, 3.0]), np.array([0.0, 2.0, 2.0])], [np.array([2.0]), np.array([2.0, 1.0])]
    by_hand = np.mean([np.mean([(a > b) + 0.5 * (a == b) for a in x for b in y]) for x, y in zip(xs, ys)])
    assert robust.probability_of_improvement(xs, ys) == pytest.approx(by_hand)
    stacked = robust.probability_of_improvement([np.stack([xs[0], xs[0][::-1]])], [ys[0]])  # resamples on axis 0
    assert stacked == pytest.approx([0.5, 0.5])


def _noisy_trends(root, accs: dict[int, tuple[float, float]]):
    from suite.results import run_records
    from suite.analysis.trends import depth_trends

    from test_analyze import write_run

    for depth, (a, b) in accs.items():
        for seed in range(2):
            write_run(root, "layerscale", depth, seed, acc=a if seed == 0 else b)
            write_run(root, "preln", depth, seed, acc=0.5 + 0.01 * seed)
    return depth_trends(run_records(root), ["variant", "model.depth"], "preln").set_index("variant").loc["layerscale"]


def test_no_depth_interaction_interval_reaches_past_what_a_slope_can_be(tmp_path):
    """Two noisy seeds at depths 4, 8, 16: the paired t on 1 degree of freedom gives intervals of hundreds of
    points per doubling. Scores lie in [chance, 1] = [0.1, 1], so a slope of differences with weights (-1/2, 0, 1/2)
    is at most 0.9, and a slope of scores on two runs at each of x = 2, 3, 4 at most 0.9 * 4 / (2 * 4) = 0.45."""
    row = _noisy_trends(tmp_path, {4: (0.9, 0.4), 8: (0.3, 0.8), 16: (0.2, 0.9)})
    assert (row["acc_interaction_ci_low"], row["acc_interaction_ci_high"]) == pytest.approx((-0.9, 0.9))
    assert -0.45 == pytest.approx(row["acc_slope_ci_low"]) and row["acc_slope_ci_high"] <= 0.45


def test_a_two_depth_interaction_is_in_points_so_its_interval_may_reach_two(tmp_path):
    """At two depths the interaction is (gain at 48) - (gain at 12), not per doubling: it can reach 2 (1 - chance)
    = 1.8. A bound of 2 / log2(48 / 12) = 1 cut true values off (results/tune printed [-1.000, 1.000])."""
    from suite.analysis.trends import most_slope

    row = _noisy_trends(tmp_path, {12: (0.95, 0.1), 48: (0.1, 0.95)})
    assert row["acc_interaction_kind"] == "depth 12->48"
    assert (row["acc_interaction_ci_low"], row["acc_interaction_ci_high"]) == pytest.approx((-1.8, 1.8))
    assert (row["acc_slope_ci_low"], row["acc_slope_ci_high"]) == pytest.approx((-0.45, 0.45))  # over 2 doublings
    assert most_slope(np.arange(6.0)) == pytest.approx(9 / 35)  # five doublings: more than 1 / 5
    assert most_slope(np.arange(6.0), 0.9) == pytest.approx(0.9 * 9 / 35)
    assert most_slope(np.array([3.0, 3.0])) == math.inf
