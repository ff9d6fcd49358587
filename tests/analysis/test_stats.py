"""suite.analysis.stats on tiny hand-computed cases and against scipy."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from suite.analysis import stats


def wilson_by_hand(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


# ----------------------------------------------------------------------------- Wilson


def test_wilson_zero_of_n_has_width():
    low, high = stats.wilson_interval(0, 10)
    assert low == 0.0
    assert round(high, 4) == 0.2775  # z^2 / (n + z^2)


def test_wilson_n_of_n_mirrors_zero_of_n():
    low, high = stats.wilson_interval(10, 10)
    assert round(low, 4) == 0.7225
    assert high == 1.0


@pytest.mark.parametrize("k,n", [(3, 10), (1, 4), (7, 9), (2, 2), (0, 1)])
def test_wilson_matches_the_formula(k, n):
    assert stats.wilson_interval(k, n) == pytest.approx(wilson_by_hand(k, n), abs=1e-12)


def test_wilson_three_of_ten():
    low, high = stats.wilson_interval(3, 10)
    assert (round(low, 4), round(high, 4)) == (0.1078, 0.6032)


def test_wilson_no_runs_is_nan_and_bad_counts_raise():
    assert all(math.isnan(x) for x in stats.wilson_interval(0, 0))
    with pytest.raises(ValueError):
        stats.wilson_interval(4, 3)


# ----------------------------------------------------------------------------- Fisher


def test_fisher_two_by_two_by_hand():
    # margins 4/4 x 4/4: hypergeometric weights 1, 16, 36, 16, 1 (/70); observed 3 -> (1+16+16+1)/70
    assert stats.fisher_exact_p(3, 4, 1, 4) == pytest.approx(34 / 70)
    # 0/5 vs 5/5: only the two extreme tables, each 1/252
    assert stats.fisher_exact_p(0, 5, 5, 5) == pytest.approx(2 / 252)
    assert stats.fisher_exact_p(2, 5, 2, 5) == pytest.approx(1.0)


def test_fisher_matches_scipy_and_handles_empty_groups():
    assert stats.fisher_exact_p(1, 8, 6, 9) == pytest.approx(sps.fisher_exact([[1, 7], [6, 3]]).pvalue)
    assert math.isnan(stats.fisher_exact_p(0, 0, 2, 5))


# ----------------------------------------------------------------------------- Holm


def test_holm_monotonicity_step():
    # sorted: 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> raised to 0.06 by the running max
    assert stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_holm_caps_at_one_and_skips_nan():
    out = stats.holm([0.5, math.nan, 0.02, 0.6])
    assert out[[0, 2, 3]] == pytest.approx([1.0, 0.06, 1.0])
    assert math.isnan(out[1])
    assert np.isnan(stats.holm([math.nan, math.nan])).all()
    assert stats.holm([]).shape == (0,)


def test_holm_single_p_is_unchanged():
    assert stats.holm([0.012]) == pytest.approx([0.012])


# ----------------------------------------------------------------------------- Welch


def test_welch_by_hand():
    a, b = [0.90, 0.92, 0.94], [0.80, 0.85]
    va, vb = np.var(a, ddof=1) / 3, np.var(b, ddof=1) / 2
    t = (np.mean(a) - np.mean(b)) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / 2 + vb ** 2 / 1)  # Welch-Satterthwaite
    d = stats.welch_difference(a, b)
    assert d.p == pytest.approx(2 * sps.t.sf(abs(t), df))
    half = sps.t.ppf(0.975, df) * math.sqrt(va + vb)
    assert (d.estimate, d.low, d.high) == pytest.approx((np.mean(a) - np.mean(b),) * 1 + (
        np.mean(a) - np.mean(b) - half, np.mean(a) - np.mean(b) + half))
    assert d.test == "Welch t" and d.n_pairs == 0


def test_welch_undefined_cases_are_nan():
    assert math.isnan(stats.welch_difference([0.9], [0.8, 0.7]).p)
    assert math.isnan(stats.welch_difference([0.9, 0.9], [0.8, 0.8]).p)
    assert stats.welch_difference([], [0.8]) == stats.NO_DIFFERENCE


def test_paired_difference_by_hand():
    a, b = [0.93, 0.95, 0.95], [0.90, 0.91, 0.92]
    d = np.subtract(a, b)  # 0.03, 0.04, 0.03
    t = d.mean() / (d.std(ddof=1) / math.sqrt(3))
    res = stats.paired_difference(a, b)
    assert res.p == pytest.approx(2 * sps.t.sf(abs(t), 2)) == pytest.approx(sps.ttest_rel(a, b).pvalue)
    assert (res.low, res.high) == pytest.approx(tuple(sps.ttest_rel(a, b).confidence_interval()))
    assert res.test == "paired t" and res.n_pairs == 3 and res.estimate == pytest.approx(1 / 30)
    same = stats.paired_difference([0.9, 0.8], [0.8, 0.7])  # every difference 0.1: t undefined
    assert same.estimate == pytest.approx(0.1) and math.isnan(same.p) and math.isnan(same.low)


def test_t_interval_by_hand():
    x = [0.90, 0.91, 0.92]
    half = sps.t.ppf(0.975, 2) * 0.01 / math.sqrt(3)  # 4.303 * 0.01 / 1.732
    assert stats.t_interval(x) == pytest.approx((0.91 - half, 0.91 + half))
    assert half == pytest.approx(0.024841, abs=1e-6)
    assert all(math.isnan(v) for v in stats.t_interval([0.9]))


def _percentile_bootstrap(x: np.ndarray, rng: np.random.Generator, resamples: int = 2000) -> tuple[float, float]:
    """The interval the tables printed before: a percentile bootstrap of the mean."""
    means = x[rng.integers(0, x.size, (resamples, x.size))].mean(axis=1)
    return tuple(np.quantile(means, [0.025, 0.975]))


def _coverage(interval, n: int, trials: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        low, high = interval(rng.normal(0.7, 0.05, n), rng)
        hits += low <= 0.7 <= high
    return hits / trials


@pytest.mark.parametrize("n", [2, 3, 5, 10])
def test_the_printed_interval_covers_95_percent(n):
    """Coverage of the tables' accuracy interval at the seed counts sweeps use (normal data)."""
    assert 0.93 <= _coverage(lambda x, rng: stats.t_interval(x), n, 4000, seed=n) <= 0.97


@pytest.mark.parametrize("n,at_most", [(2, 0.60), (3, 0.82)])
def test_the_old_percentile_bootstrap_fails_the_same_check(n, at_most):
    """The old interval: about 52% coverage at n = 2 and 76% at n = 3 where it claims 95%."""
    assert _coverage(_percentile_bootstrap, n, 1000, seed=n) <= at_most


def test_paired_seeds_needed_is_the_smallest_n_with_the_power():
    from statsmodels.stats.power import TTestPower

    n = stats.paired_seeds_needed(0.05, 0.06)
    assert TTestPower().power(effect_size=0.05 / 0.06, nobs=n, alpha=0.05) >= 0.8
    assert TTestPower().power(effect_size=0.05 / 0.06, nobs=n - 1, alpha=0.05) < 0.8
    assert n == 14  # effect size 0.83: 14 pairs (a normal approximation would say 12)
    assert stats.paired_seeds_needed(0.05, 0.001) <= 3  # a huge effect: about the fewest a paired t-test can use
    assert math.isnan(stats.paired_seeds_needed(0.05, math.nan)) and stats.paired_seeds_needed(0, 0.1) == math.inf


# ----------------------------------------------------------------------------- power


def power_by_brute_force(p1, p2, n1, n2, alpha=0.05):
    total = 0.0
    for a in range(n1 + 1):
        for b in range(n2 + 1):
            if sps.fisher_exact([[a, n1 - a], [b, n2 - b]]).pvalue <= alpha:
                total += sps.binom.pmf(a, n1, p1) * sps.binom.pmf(b, n2, p2)
    return total


@pytest.mark.parametrize("p1,p2,n1,n2", [(0.1, 0.6, 8, 10), (0.0, 0.5, 5, 5), (0.3, 0.9, 12, 7)])
def test_fisher_power_matches_scipy_enumeration(p1, p2, n1, n2):
    assert stats.fisher_power(p1, p2, n1, n2) == pytest.approx(power_by_brute_force(p1, p2, n1, n2), abs=1e-12)


def test_fisher_power_by_hand():
    # 0/4 vs 4/4 always happens at rates 0 and 1, and its p is 2/70 < 0.05; 0/3 vs 3/3 gives 2/20
    assert stats.fisher_power(0.0, 1.0, 4, 4) == pytest.approx(1.0)
    assert stats.fisher_power(0.0, 1.0, 3, 3) == pytest.approx(0.0)
    # only 0/5 vs 5/5 (p = 2/252) and 0/5 vs 4/5 (p = 0.0476) reject: 0.5^5 + 5 * 0.5^5
    assert stats.fisher_power(0.0, 0.5, 5, 5) == pytest.approx(6 / 32)


def test_fisher_seeds_needed():
    assert stats.fisher_seeds_needed(0.0, 1.0) == 4
    n = stats.fisher_seeds_needed(0.2, 0.6)
    assert n == 27
    assert stats.fisher_power(0.2, 0.6, 27, 27) >= 0.8 > stats.fisher_power(0.2, 0.6, 26, 26)
    assert stats.fisher_seeds_needed(0.3, 0.3) == math.inf
    assert stats.fisher_seeds_needed(0.30, 0.31, max_n=64) == math.inf
