"""suite.analysis.pooled: the pooled SD of few-seed comparisons, clipping, verdict words; and what
summarize prints with 2 seeds."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from suite.analysis import pooled
from suite.analysis.summary import summarize


def test_one_scheme_against_the_baseline_pools_to_the_paired_t():
    """Two arms: the residual of score ~ arm + seed is half the differences' spread, so the pooled
    interval is the paired t interval exactly."""
    a, b = {0: 0.93, 1: 0.95, 2: 0.95}, {0: 0.90, 1: 0.91, 2: 0.92}
    sd, df = pooled.pooled_sd([{"ls": a, "preln": b}])
    d = np.subtract(list(a.values()), list(b.values()))
    assert df == 2 and sd == pytest.approx(np.std(d, ddof=1) / math.sqrt(2))
    res = pooled.pooled_difference(d, sd, df)
    assert (res.low, res.high, res.p) == pytest.approx((*sps.ttest_rel(list(a.values()), list(b.values()))
                                                        .confidence_interval(), sps.ttest_rel(
                                                            list(a.values()), list(b.values())).pvalue))


def test_pooled_sd_matches_statsmodels_two_way_anova_with_a_missing_run():
    import pandas as pd
    import statsmodels.formula.api as smf

    depth4 = {"preln": {0: 0.50, 1: 0.55}, "a": {0: 0.53, 1: 0.56}, "b": {0: 0.40, 1: 0.62}}
    depth8 = {"preln": {0: 0.48, 1: 0.50, 2: 0.47}, "a": {0: 0.52, 1: 0.51}, "b": {0: 0.31, 1: 0.55, 2: 0.45}}
    sd, df = pooled.pooled_sd([depth4, depth8])
    rss = dof = 0.0
    for cell in (depth4, depth8):
        frame = pd.DataFrame([(arm, str(s), x) for arm, xs in cell.items() for s, x in xs.items()],
                             columns=["arm", "seed", "y"])
        fit = smf.ols("y ~ C(arm) + C(seed)", frame).fit()
        rss, dof = rss + fit.ssr, dof + fit.df_resid
    assert (sd, df) == pytest.approx((math.sqrt(rss / dof), dof)) and df == 2 + 3


def test_arms_without_noise_are_left_out_of_the_fit():
    cell = {"preln": {0: 0.5, 1: 0.6, 2: 0.55}, "same": {0: 0.5, 1: 0.6, 2: 0.55},
            "chance": {0: 0.1, 1: 0.1, 2: 0.1}, "ls": {0: 0.52, 1: 0.63, 2: 0.61}}
    assert set(pooled.fitted_arms(cell, "preln")) == {"preln", "ls"}
    assert math.isnan(pooled.pooled_sd([{"preln": {0: 0.5, 1: 0.6}}])[0])  # one arm: no residual df


def test_pooled_difference_by_hand():
    d = [0.02, 0.06]
    res = pooled.pooled_difference(d, sd=0.03, df=12)
    se = 0.03 * math.sqrt(2 / 2)
    half = sps.t.ppf(0.975, 12) * se
    assert (res.estimate, res.low, res.high) == pytest.approx((0.04, 0.04 - half, 0.04 + half))
    assert res.p == pytest.approx(2 * sps.t.sf(0.04 / se, 12))
    assert res.test == "paired t, pooled SD (12 df)" and res.n_pairs == 2 and res.df == 12
    # the Bonferroni level comes from Difference.at, on the pooled df
    at = res.at(0.05 / 18)
    assert at.high - at.estimate == pytest.approx(sps.t.isf(0.05 / 36, 12) * se)
    assert math.isnan(pooled.pooled_difference([0.1, 0.1], 0.03, 12).low)  # identical differences: no test
    assert math.isnan(pooled.pooled_difference(d, math.nan, 0).p)


def test_clip_and_verdict():
    assert pooled.clip(-3.2, 3.4, 0.9) == (-0.9, 0.9, True)
    assert pooled.clip(-0.1, 0.2, 0.9) == (-0.1, 0.2, False)
    assert pooled.clip(math.nan, math.nan, 0.9)[2] is False
    assert pooled.verdict(0.05, 0.01, 3) == "too few seeds"
    assert pooled.verdict(0.05, 0.01, 4) == "higher" and pooled.verdict(-0.05, 0.01, 6) == "lower"
    assert pooled.verdict(0.05, 0.2, 6) == "not significant" and pooled.verdict(0.05, math.nan, 6) == ""


def test_pooled_intervals_keep_their_level_with_two_seeds_against_a_shared_baseline():
    """6 schemes x 3 depths against one baseline per depth, 2 seeds, no difference anywhere, equal spreads:
    each pooled test rejects about 5% of the time (measured, 20,000 studies: 5.0%) and the Bonferroni
    family of 18 at most 5% (3.8%). Pooling the paired differences' variances instead and counting
    18 df: 6.5% per test, 7.4% for the family."""
    rng = np.random.default_rng(11)
    studies, schemes, depths, seeds = 800, 6, 3, 2
    single = family = 0
    for _ in range(studies):
        base = rng.normal(0.6, 0.03, (depths, seeds))
        arms = rng.normal(0.6, 0.03, (schemes, depths, seeds))
        strata = [{"preln": dict(enumerate(base[d])), **{s: dict(enumerate(arms[s, d])) for s in range(schemes)}}
                  for d in range(depths)]
        sd, df = pooled.pooled_sd(strata)
        assert df == depths * schemes * (seeds - 1)
        p = np.array([pooled.pooled_difference(arms[s, d] - base[d], sd, df).p
                      for s in range(schemes) for d in range(depths)])
        single += (p < 0.05).sum()
        family += (p.min() * p.size < 0.05)
    assert 0.04 <= single / (studies * schemes * depths) <= 0.06
    assert family / studies <= 0.06


def _run(variant, depth, seed, acc, status="ok"):
    return {"variant": variant, "model.depth": depth, "seed": seed, "status": status, "test_acc": acc,
            "model.num_classes": 10, "run_id": f"{variant}-{depth}-{seed}"}


def test_two_seed_cells_get_a_pooled_interval_within_the_range_and_no_verdict():
    """The mechanisms study's case: 2 seeds per cell. Paired t at 1 df with Bonferroni x4 printed
    +/-200 points; pooled over the table's all-ok arms (depth 4: 3 arms x 2 seeds, 2 df; depth 8: 2 arms,
    1 df) it is finite, within +/-(1 - chance), and carries no verdict word. A comparison with a run at
    chance keeps its own paired t (1 df), and its interval is clipped to +/-90 points."""
    runs = []
    accs = {("preln", 4): [0.50, 0.55], ("a", 4): [0.53, 0.56], ("b", 4): [0.40, 0.62],
            ("preln", 8): [0.48, 0.50], ("a", 8): [0.52, 0.51], ("b", 8): [0.10, 0.55]}
    for (v, depth), xs in accs.items():
        runs += [_run(v, depth, s, x, "ok" if x > 0.1 else "diverged") for s, x in enumerate(xs)]
    t = summarize(runs, ["variant", "model.depth"], "preln").set_index(["variant", "model.depth"])
    sd, df = pooled.pooled_sd([{v: dict(enumerate(accs[(v, 4)])) for v in ("preln", "a", "b")},
                               {v: dict(enumerate(accs[(v, 8)])) for v in ("preln", "a")}])
    assert df == 3
    for k in [("a", 4), ("b", 4), ("a", 8)]:
        d = np.subtract(accs[k], accs[("preln", k[1])])
        r = t.loc[k]
        assert r["acc_test"] == "paired t, pooled SD (3 df)" and r["acc_diff_df"] == 3 and r["acc_pairs"] == 2
        assert r["acc_diff_sd"] == pytest.approx(np.std(d, ddof=1))  # the comparison's own SD, for the planner
        half = sps.t.isf(0.05 / 8, 3) * sd
        assert (r["acc_diff_ci_low"], r["acc_diff_ci_high"]) == pytest.approx((d.mean() - half, d.mean() + half))
        assert not r["acc_diff_ci_clipped"] and r["acc_verdict"] == "too few seeds"
    mixed = t.loc[("b", 8)]
    assert mixed["acc_test"] == "paired t" and mixed["acc_diff_df"] == 1 and mixed["acc_verdict"] == "too few seeds"
    assert mixed["acc_diff_ci_clipped"] and (mixed["acc_diff_ci_low"], mixed["acc_diff_ci_high"]) == (-0.9, 0.9)
    assert t.loc[("preln", 4), "acc_verdict"] == ""


def test_from_four_seeds_a_comparison_keeps_its_own_paired_t_and_gets_a_word():
    runs = []
    base, ls = [0.50, 0.52, 0.51, 0.53], [0.56, 0.59, 0.57, 0.60]
    for s in range(4):
        runs += [_run("preln", 4, s, base[s]), _run("ls", 4, s, ls[s])]
    r = summarize(runs, ["variant", "model.depth"], "preln").set_index("variant").loc["ls"]
    res = sps.ttest_rel(ls, base)
    assert r["acc_test"] == "paired t" and r["acc_p"] == pytest.approx(res.pvalue) and r["acc_diff_df"] == 3
    assert r["acc_verdict"] == "higher" and not r["acc_diff_ci_clipped"]
