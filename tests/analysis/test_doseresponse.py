"""The dose-response frontier: Firth's logistic regression against statsmodels and by its own score."""

import math

import numpy as np
import pytest
import statsmodels.api as sm

from suite.analysis.doseresponse import curves_differ, firth, frontier


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
