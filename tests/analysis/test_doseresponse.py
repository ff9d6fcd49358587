"""The dose-response frontier: Firth's logistic regression against statsmodels and by its own score."""

import math

import numpy as np
import pytest
import statsmodels.api as sm

from suite.analysis.doseresponse import firth_fit, curves_differ, firth, frontier, relative_potency


def _penalised(X, y, b):
    eta = X @ b
    p = 1 / (1 + np.exp(-eta))
    info = X.T @ (X * (p * (1 - p))[:, None])
    return float(np.sum(y * eta - np.logaddexp(0, eta)) + 0.5 * np.linalg.slogdet(info)[1])


def test_firth_is_close_to_maximum_likelihood_with_much_data_and_maximises_its_penalised_likelihood():
    rng = np.random.default_rng(0)
    x = rng.uniform(-4, -1, 2000)
    y = (rng.random(2000) < 1 / (1 + np.exp(-3 * (x + 2.5)))).astype(float)
    X = np.column_stack([np.ones_like(x), x])
    beta, cov = firth(X, y)
    mle = sm.Logit(y, X).fit(disp=0)
    assert beta == pytest.approx(mle.params, rel=0.02)  # the penalty's bias correction is O(1/n)
    assert np.sqrt(np.diag(cov)) == pytest.approx(mle.bse, rel=0.05)
    for i in range(2):  # a maximum: every small move lowers the penalised log-likelihood
        for step in (1e-4, -1e-4):
            moved = beta.copy()
            moved[i] += step
            assert _penalised(X, y, moved) < _penalised(X, y, beta)


def test_the_frontier_under_complete_separation_is_finite_and_between_the_rates():
    rates = [1e-3] * 3 + [4e-3] * 3
    f = frontier(rates, [0, 0, 0, 1, 1, 1])
    assert 1e-3 < f.lr50 < 4e-3 and f.lr50 == pytest.approx(2e-3, rel=1e-6)  # symmetric data: the midpoint in log
    assert f.low < f.lr50 < f.high and math.isfinite(f.high) and f.censored == ""


def test_censored_and_undefined_frontiers():
    assert frontier([1e-3, 2e-3], [0, 0]).censored == "above"
    assert frontier([1e-3, 2e-3], [1, 1]).censored == "below"
    assert math.isnan(frontier([], []).lr50)
    assert math.isnan(frontier([1e-3, 2e-3], [1, 0]).lr50)  # fewer failures at the higher rate: no frontier


def test_curves_differ_tests_the_group_terms():
    rates = [1e-3] * 4 + [2e-3] * 4 + [4e-3] * 4
    same = curves_differ(rates, [0] * 4 + [0, 0, 1, 1] + [1] * 4, rates, [0] * 4 + [0, 1, 0, 1] + [1] * 4)
    apart = curves_differ(rates, [0] * 4 + [1] * 4 + [1] * 4, rates, [0] * 4 + [0] * 4 + [0, 0, 0, 1])
    assert same > 0.5 and apart < same
    assert math.isnan(curves_differ(rates, [0] * 12, rates, [0] * 12))
    # a cell left with one rate (its others only errored): its slope cannot be told from its group term
    assert math.isnan(curves_differ([2e-4], [0], [1e-4, 2e-4, 2e-4, 8e-4], [0, 0, 1, 1]))


# ----------------------------------------------------------------------------- relative potency

RATES = 1e-3 * 2.0 ** np.arange(-1, 5)  # 6 rates 2x apart, 5e-4 .. 1.6e-2


def _study(rng, seeds, lr50_base=2e-3, ratio=2.7, slope=5.0):
    """One simulated study: each scheme at every rate with `seeds` runs, not ok ~ Bernoulli(logistic)."""
    out = []
    for lr50 in (lr50_base * ratio, lr50_base):
        lrs = np.repeat(RATES, seeds)
        p = 1 / (1 + np.exp(-slope * (np.log10(lrs) - np.log10(lr50))))
        out += [lrs, (rng.random(lrs.size) < p).astype(int)]
    return out


RUNS = [1e-3] * 4 + [2e-3] * 4 + [4e-3] * 4
CURVE = [0] * 4 + [0, 1, 1, 0] + [1] * 4


def test_grouped_binomial_rows_fit_as_one_row_per_run():
    u = np.log10(RATES) - np.log10(RATES).mean()
    u = np.r_[u, u - 0.4]
    k, m = np.array([0, 1, 2, 3, 4, 4, 0, 0, 1, 1, 3, 4.0]), np.full(12, 4.0)
    beta, general, _ = firth_fit(np.column_stack([np.ones(12), u]), k, m)
    rows = np.repeat(np.arange(12), 4)  # the same data as one 0/1 row per run
    y = np.concatenate([[1] * int(c) + [0] * (4 - int(c)) for c in k])
    assert firth(np.column_stack([np.ones(48), u[rows]]), y)[0] == pytest.approx(beta, abs=1e-7)


def test_identical_arms_have_a_ratio_of_one_and_nothing_to_test():
    fit = relative_potency(RUNS, CURVE, RUNS, CURVE)
    assert fit.ratio == pytest.approx(1, abs=1e-4) and fit.p == pytest.approx(1, abs=1e-6)
    assert fit.low < 1 < fit.high and fit.censored == "" and fit.slope > 0


def test_swapping_the_arms_inverts_the_ratio_and_its_interval():
    late = [0] * 8 + [1, 1, 0, 1]
    ab, ba = relative_potency(RUNS, late, RUNS, CURVE), relative_potency(RUNS, CURVE, RUNS, late)
    assert ab.ratio == pytest.approx(1 / ba.ratio, rel=1e-4) and ab.p == pytest.approx(ba.p, rel=1e-6)
    assert (ab.low, ab.high) == pytest.approx((1 / ba.high, 1 / ba.low), rel=1e-3)


@pytest.mark.parametrize("k", [0.25, 3.0, 10.0])
def test_scaling_one_arms_rates_by_k_scales_the_ratio_by_k(k):
    late = [0] * 8 + [1, 1, 0, 1]
    fit = relative_potency(RUNS, late, RUNS, CURVE)
    moved = relative_potency([k * r for r in RUNS], late, RUNS, CURVE)
    assert moved.ratio == pytest.approx(k * fit.ratio, rel=1e-4)
    assert (moved.low, moved.high) == pytest.approx((k * fit.low, k * fit.high), rel=1e-3)
    assert moved.slope == pytest.approx(fit.slope, rel=1e-5)


def test_the_test_of_ratio_one_agrees_with_the_interval():
    """Both come from one profile: 1 lies outside the 95% interval exactly when p < 0.05, also on ragged
    designs (few runs, rates that differ by arm, outcomes unrelated to the rate) whose profile can have
    two peaks, where the interval is widened to ratio 1 when the test finds it plausible."""
    rng = np.random.default_rng(3)
    for _ in range(20):
        fit = relative_potency(*_study(rng, 4, ratio=2.0))
        assert (fit.p < 0.05) == (not fit.low <= 1 <= fit.high)
        assert fit.low <= fit.ratio <= fit.high
    grid = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1]
    peaks = 0
    for _ in range(150):
        arms = []
        for _ in range(2):
            lrs = np.repeat(rng.choice(grid, size=rng.integers(1, 5), replace=False), rng.integers(1, 5))
            arms += [lrs, (rng.random(lrs.size) < rng.random()).astype(int)]
        fit = relative_potency(*arms)
        peaks += "second peak" in fit.note
        if not math.isnan(fit.p):
            assert (fit.p < 0.05) == (not fit.low <= 1 <= fit.high) and fit.low <= fit.high
    assert peaks  # the widening was exercised


def test_a_side_that_never_fails_leaves_its_end_of_the_interval_open():
    never = relative_potency(RUNS, [0] * 12, RUNS, CURVE)  # the scheme is ok at every rate tested
    assert never.censored == "high" and never.high == math.inf and 1 < never.low < never.ratio
    assert never.p < 0.05  # still a difference: the baseline fails where the scheme never does
    mirror = relative_potency(RUNS, CURVE, RUNS, [0] * 12)
    assert mirror.censored == "low" and mirror.low == 0 and mirror.high == pytest.approx(1 / never.low, rel=1e-3)


@pytest.mark.parametrize("scheme, base, note", [
    ((RUNS, [0] * 12), (RUNS, [0] * 12), "no run ended not ok"),
    ((RUNS, [1] * 12), (RUNS, [1] * 12), "every run ended not ok"),
    (([1e-3] * 4, [0, 1, 1, 0]), ([2e-3] * 4, [1, 1, 0, 1]), "single rate"),
    (([0.1] * 2, [0, 1]), ([0.1, 0.2, 0.4], [0, 1, 1]), "scheme ran at a single rate"),  # was "at least 1.7x"
    ((RUNS, CURVE), ([2e-3] * 4, [1, 1, 0, 1]), "baseline ran at a single rate"),
    ((RUNS, [1] * 4 + [0] * 8), (RUNS, [1] * 8 + [0] * 4), "does not rise with the rate"),
    (([], []), (RUNS, CURVE), "no runs of the scheme"),
])
def test_nothing_to_estimate_is_nan_with_a_note(scheme, base, note):
    fit = relative_potency(*scheme, *base)
    assert math.isnan(fit.ratio) and math.isnan(fit.p) and note in fit.note


@pytest.mark.parametrize("seeds", [4, 8])
def test_the_relative_potency_interval_covers_the_true_ratio(seeds):
    """Simulated coverage of the 95% profile-likelihood interval of LR50(scheme) / LR50(baseline).

    True model: slope 5 per decade, baseline LR50 2e-3, ratio 2.7 (scheme LR50 5.4e-3), 6 rates 2x
    apart spanning both frontiers, the same rates for both schemes. 1,000 studies per seed count
    (~5 s each): the binomial SE of a coverage near 0.95 is sqrt(0.95 * 0.05 / 1000) = 0.0069, so the
    0.93 floor sits ~3 SEs under the nominal level. An open end counts as covering when the truth lies
    on its side. Measured on 20,000 studies per seed count: 95.3% at 4 seeds, 95.0% at 8 (misses split
    about evenly between the two ends); this seed's 1,000 give 95.3% and 95.0%.
    """
    rng = np.random.default_rng(20260301 + seeds)
    studies = 1000
    covered = 0
    for _ in range(studies):
        fit = relative_potency(*_study(rng, seeds))
        covered += fit.low <= 2.7 <= fit.high  # nan (nothing estimable) counts as a miss
    assert covered / studies >= 0.93
