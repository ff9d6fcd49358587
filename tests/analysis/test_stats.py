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
    a, b = [1.0, 2.0, 3.0], [4.0, 6.0, 8.0, 10.0]
    va, vb = np.var(a, ddof=1) / 3, np.var(b, ddof=1) / 4  # 1/3, 20/12
    t = (np.mean(a) - np.mean(b)) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 3)
    assert stats.welch_t_p(a, b) == pytest.approx(2 * sps.t.sf(abs(t), df))
    assert stats.welch_t_p(a, b) == pytest.approx(sps.ttest_ind(a, b, equal_var=False).pvalue)


def test_welch_undefined_cases_are_nan():
    assert math.isnan(stats.welch_t_p([0.9], [0.8, 0.7]))
    assert math.isnan(stats.welch_t_p([0.9, 0.9], [0.8, 0.8]))


# ----------------------------------------------------------------------------- bootstrap


def test_bootstrap_is_deterministic_and_seeded():
    x = [0.80, 0.82, 0.85, 0.81, 0.79, 0.86, 0.83, 0.84]
    first, again = stats.bootstrap_ci(x), stats.bootstrap_ci(x)
    assert first == again
    assert stats.bootstrap_ci(x, n_resamples=200, seed=1) != stats.bootstrap_ci(x, n_resamples=200, seed=2)
    assert min(x) <= first[0] < np.mean(x) < first[1] <= max(x)


def test_bootstrap_equals_manual_resampling():
    x = np.array([1.0, 2.0, 4.0])
    rng = np.random.default_rng(0)
    means = x[rng.integers(0, 3, size=(10_000, 3))].mean(axis=1)
    assert stats.bootstrap_ci(x) == pytest.approx(tuple(np.quantile(means, [0.025, 0.975])))


def test_bootstrap_single_observation_has_no_interval():
    assert all(math.isnan(v) for v in stats.bootstrap_ci([0.9]))
    assert stats.bootstrap_ci([0.5, 0.5]) == (0.5, 0.5)  # real zero spread, not a missing interval


def test_ratio_of_medians():
    ratio, low, high = stats.ratio_of_medians([11.0, 12.0, 10.0], [10.0, 9.0, 11.0])
    assert ratio == pytest.approx(1.1)
    assert low <= ratio <= high
    assert (ratio, low, high) == stats.ratio_of_medians([11.0, 12.0, 10.0], [10.0, 9.0, 11.0])
    r1 = stats.ratio_of_medians([11.0], [10.0, 9.0])
    assert r1[0] == pytest.approx(11 / 9.5) and math.isnan(r1[1]) and math.isnan(r1[2])
    assert all(math.isnan(v) for v in stats.ratio_of_medians([], [1.0]))


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
