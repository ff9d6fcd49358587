"""The declared primary comparison: the `primary:` block of an ablation file, its test alone, its
answer in words, and `suite plan`'s row for it."""

import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats as sps

from suite.analysis import crossfit, primary, primary_text, stats
from suite.analysis.analyze import analyze
from suite.sweep.spec import SpecError, load_ablation

from test_analyze import write_run
from test_stats import power_by_integration

ABLATION = {
    "name": "demo", "base": {"data": {"name": "digits"}, "model": {"patch_size": 4}},
    "grid": {"model.depth": [6, 12], "train.lr": [0.001, 0.01]},
    "variants": {"preln": {"model.residual": "preln"}, "layerscale": {"model.residual": "layerscale"}},
    "seeds": 3,
}


def folder(root: Path, primary_block: dict, test: dict, val: dict | None = None, status: dict | None = None) -> Path:
    """Runs of `ABLATION` at depth 12 (and a few at 6) with chosen scores; ablation.yaml as `suite run` writes it.

    test / val: (variant, lr) -> one score per seed; status: (variant, lr) -> statuses.
    """
    root.mkdir(parents=True, exist_ok=True)
    (root / "ablation.yaml").write_text(yaml.safe_dump({**ABLATION, "primary": primary_block}))
    for (variant, lr), accs in test.items():
        for seed, acc in enumerate(accs):
            st = (status or {}).get((variant, lr), ["ok"] * len(accs))[seed]
            v = (val or {}).get((variant, lr), accs)[seed]
            write_run(root, variant, 12, seed, status=st, acc=acc, lr=lr, val_acc=v)
            write_run(root, variant, 6, seed, acc=0.5, lr=lr)
    return root


DECLARED = {"scheme": "layerscale", "baseline": "preln", "where": {"model.depth": 12}}
AT_RATE = {**DECLARED, "where": {"model.depth": 12, "train.lr": 0.001}, "endpoint": "score"}


def crossfitted(d: list[float]) -> tuple[float, float, float, float]:
    """The cross-fitted test by hand (crossfit's docstring): halves by position, the mean of all
    differences, the pooled within-half SD on n - 2 df, se = sum_h (n_h / n) sd / sqrt(n_h).
    Returns (estimate, se, df, sd)."""
    halves = [np.array(d[0::2]), np.array(d[1::2])]
    n = len(d)
    sd = math.sqrt(sum(((h - h.mean()) ** 2).sum() for h in halves) / (n - 2))
    se = sum(len(h) / n * sd / math.sqrt(len(h)) for h in halves)
    return float(np.mean(d)), se, n - 2, sd


def test_the_block_is_checked_against_the_ablation(tmp_path):
    bad = {"scheme": "layerscal", "baseline": "preln", "where": {"model.depth": 24, "model.dim": 8},
           "endpoint": "mean", "margin": 500}
    path = tmp_path / "a.yaml"
    path.write_text(yaml.safe_dump({**ABLATION, "primary": bad}))
    with pytest.raises(SpecError) as err:
        load_ablation(path)
    lines = err.value.problems
    assert any("primary.scheme: 'layerscal' is not a variant" in line and "use one of layerscale, preln" in line for line in lines)
    assert any("primary.where.model.depth: 24 is not in the grid (6, 12)" in line for line in lines)
    assert any("primary.where.model.dim: not a grid axis" in line for line in lines)
    assert any("primary.endpoint: 'mean' is not one of best_lr_score, score, frontier" in line for line in lines)
    assert any("primary.margin: expected points of accuracy in (0, 100)" in line for line in lines)
    path.write_text(yaml.safe_dump({**ABLATION, "primary": {"scheme": "layerscale", "baseline": "preln"}}))
    with pytest.raises(SpecError, match=r"primary.where: also fix model.depth \(one of 6, 12\)"):
        load_ablation(path)
    for odd in ([1], {"name": "score"}):  # not a name at all: the same one line, not a TypeError
        path.write_text(yaml.safe_dump({**ABLATION, "primary": {**DECLARED, "endpoint": odd}}))
        with pytest.raises(SpecError, match=r"primary.endpoint: .* is not one of best_lr_score"):
            load_ablation(path)
    path.write_text(yaml.safe_dump({**ABLATION, "primary": {**DECLARED, "margin": 5}}))
    declared = load_ablation(path).primary
    assert declared == primary.Primary("layerscale", "preln", {"model.depth": 12}, "best_lr_score", 0.05)


def test_a_difference_at_the_best_rates_is_decided_by_the_cross_fitted_test(tmp_path):
    # layerscale is best at 0.01, preln at 0.001 (chosen on validation); test scores at those rates
    ls, pre = [0.80, 0.84, 0.83, 0.82], [0.60, 0.66, 0.61, 0.63]
    root = folder(tmp_path / "r", DECLARED, {("layerscale", 0.001): [0.5] * 4, ("layerscale", 0.01): ls,
                                             ("preln", 0.001): pre, ("preln", 0.01): [0.2, 0.2, 0.3, 0.2]})
    answer = primary.evaluate(__import__("suite.results", fromlist=["x"]).run_records(root), primary.read(root))
    # every half chooses the same rates here, so the differences are the paired ones; the test is not
    estimate, se, df, sd = crossfitted(list(np.array(ls) - np.array(pre)))
    p = 2 * sps.t.sf(estimate / se, df)
    assert (answer.scheme_lr, answer.base_lr) == (0.01, 0.001)
    assert answer.scheme_lrs == (0.01, 0.01) and answer.base_lrs == (0.001, 0.001)
    assert answer.test == crossfit.TEST and answer.n_pairs == 4 and answer.sd == pytest.approx(sd)
    assert answer.estimate == pytest.approx(estimate) and answer.p == pytest.approx(p)
    assert answer.decision == "difference" and answer.selection == crossfit.SENTENCE
    half = sps.t.isf(0.025, df) * se
    assert (answer.low, answer.high) == pytest.approx((estimate - half, estimate + half))
    summary = analyze(root, figures=False)
    text = (root / "findings.md").read_text()
    first = text.split("\n\n")[3]  # after the verdict table and the regime line
    assert first.startswith("**Primary comparison** (declared in ablation.yaml, tested alone at alpha = 0.05)")
    assert "**layerscale scores higher than preln.**" in first and f"p = {p:.3f}" in first
    assert "preln's best rate (0.001) is the lowest tested" in first  # the grid's edge is named
    assert summary.attrs["primary"].decision == "difference"


def test_a_rate_that_looks_best_by_luck_is_scored_on_seeds_that_did_not_choose_it(tmp_path):
    """Layerscale's 0.01 wins on validation over all seeds only through seed 2 (0.95), whose test score
    there is high too (0.94): chosen and tested on the same seeds, layerscale would be 2 points ahead.
    Cross-fitted, seeds 0 and 2 are scored at the rate seeds 1 and 3 chose (0.001), seeds 1 and 3 at the
    rate seeds 0 and 2 chose (0.01), where they score what 0.01 is worth without luck."""
    val = {("layerscale", 0.001): [0.80] * 4, ("layerscale", 0.01): [0.78, 0.78, 0.95, 0.78],
           ("preln", 0.001): [0.80] * 4, ("preln", 0.01): [0.2] * 4}
    test = {("layerscale", 0.001): [0.81, 0.79, 0.80, 0.80], ("layerscale", 0.01): [0.78, 0.78, 0.94, 0.78],
            ("preln", 0.001): [0.80, 0.80, 0.81, 0.79], ("preln", 0.01): [0.2] * 4}
    from suite.results import run_records

    root = folder(tmp_path / "luck", DECLARED, test, val)
    answer = primary.evaluate(run_records(root), primary.read(root))
    assert answer.scheme_lr == 0.01 and answer.scheme_lrs == (0.001, 0.01) and answer.base_lrs == (0.001, 0.001)
    scheme, base = [0.81, 0.78, 0.80, 0.78], [0.80, 0.80, 0.81, 0.79]
    assert answer.scheme_mean == pytest.approx(np.mean(scheme)) and answer.base_mean == pytest.approx(np.mean(base))
    assert answer.estimate == pytest.approx(-0.0075)  # not the +2.0 points of the rates chosen on all seeds
    estimate, se, df, _ = crossfitted(list(np.array(scheme) - np.array(base)))
    assert answer.p == pytest.approx(2 * sps.t.sf(abs(estimate) / se, df))


def test_equivalence_within_the_margin_and_undecided_with_the_seeds_to_decide(tmp_path):
    close = {("layerscale", 0.001): [0.801, 0.799, 0.803, 0.800], ("layerscale", 0.01): [0.2] * 4,
             ("preln", 0.001): [0.80, 0.80, 0.801, 0.801], ("preln", 0.01): [0.2] * 4}
    root = folder(tmp_path / "eq", {**DECLARED, "margin": 5}, close)
    from suite.results import run_records

    answer = primary.evaluate(run_records(root), primary.read(root))
    estimate, se, df, _ = crossfitted([0.001, -0.001, 0.002, -0.001])
    tost = max(sps.t.sf((estimate + 0.05) / se, df), sps.t.sf((0.05 - estimate) / se, df))
    assert answer.decision == "equivalent" and answer.tost_p == pytest.approx(tost)
    assert "**No difference larger than 5 points**" in primary_text.paragraph(answer)
    # a noisy difference, planned for a 19-point margin: neither a difference nor within the margin
    noisy = {("layerscale", 0.001): [0.70, 0.95, 0.60, 0.80], ("layerscale", 0.01): [0.2] * 4,
             ("preln", 0.001): [0.72, 0.70, 0.71, 0.69], ("preln", 0.01): [0.2] * 4}
    root = folder(tmp_path / "un", {**DECLARED, "margin": 19}, noisy)
    answer = primary.evaluate(run_records(root), primary.read(root))
    *_, sd = crossfitted(list(np.array([0.70, 0.95, 0.60, 0.80]) - np.array([0.72, 0.70, 0.71, 0.69])))
    assert answer.decision == "undecided" and answer.sd == pytest.approx(sd)
    planning = stats.sd_upper(sd, 2)  # the pooled within-half SD has n - 2 = 2 degrees of freedom
    assert answer.planning_sd == pytest.approx(planning)
    # cross-fitted, the test has the precision of half the seeds: twice the pairs a paired t would need,
    # checked against the power integrated by hand
    pairs = int(answer.seeds_needed) // 2
    assert answer.seeds_needed == 2 * pairs
    assert power_by_integration(0.19, planning, pairs) >= 0.8 > power_by_integration(0.19, planning, pairs - 1)
    text = primary_text.paragraph(answer)
    assert "**Undecided**: the interval includes 0" in text and f"about {2 * pairs} seeds per scheme" in text


def test_the_planner_gives_3_seeds_where_3_suffice(tmp_path):
    """A 19-point difference with a 2-point spread of seed-matched differences: 3 pairs give 93%+ power
    even at the SD's 80% upper limit (integrated by hand), 2 do not."""
    big = {("layerscale", 0.001): [0.80, 0.82, 0.84], ("layerscale", 0.01): [0.2] * 3,
           ("preln", 0.001): [0.63, 0.63, 0.63], ("preln", 0.01): [0.2] * 3}
    root = folder(tmp_path / "p", {**AT_RATE, "margin": 19}, big)  # one rate: the paired t
    from suite.analysis.plan import plan_table

    row = plan_table(root).iloc[0]
    assert row["role"] == "primary" and row["alpha"] == 0.05 and row["effect"] == pytest.approx(0.19)
    planning = stats.sd_upper(0.02, 2)
    assert row["planning_sd"] == pytest.approx(planning) and row["seeds_needed"] == 3
    assert power_by_integration(0.19, planning, 3) >= 0.8 > power_by_integration(0.19, planning, 2)


def test_plan_given_an_ablation_file_points_to_cost_and_run(tmp_path, capsys):
    """Before any run there is nothing to plan from: `suite plan FILE.yaml` says what to do instead of
    "no such folder"."""
    from suite.cli import main

    ablation = Path(__file__).resolve().parents[2] / "ablations" / "default.yaml"
    assert main(["plan", str(ablation)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"`suite cost {ablation}`" in err and f"`suite run {ablation}`" in err


def test_an_undecided_answer_with_the_seeds_its_plan_asks_for_says_the_difference_is_likely_smaller():
    """results/frontier: +0.09 in slope [-0.15, +0.34], 4 seeds planned for a difference of 0.5 and 6 run. "About
    4 seeds needed" read as if more seeds would decide it; with 6 a difference of 0.5 would probably have been."""
    from suite.analysis.endpoints.failure import FailureAnswer
    from suite.analysis.endpoints.score import ScoreAnswer

    slope = primary.Primary("layerscale", "preln", {}, "frontier_slope")
    ran = FailureAnswer(slope, estimate=0.09, low=-0.15, high=0.34, seeds_needed=4, seeds=6)
    assert ran.powered() and primary_text._plain(ran) == (
        "undecided at the seeds planned for (about 4; it has 6): the difference is likely smaller")
    said = ran.powered_words()
    assert "That many have run: a difference of the planned size would probably have been decided" in said
    assert "no equivalence margin is declared" in ran.powered_words()
    short = FailureAnswer(slope, seeds_needed=9, seeds=6)
    assert not short.powered() and primary_text._plain(short) == "undecided: about 9 seeds needed"
    assert short.powered_words() == ""
    score = ScoreAnswer(primary.Primary("layerscale", "preln", {"model.depth": 12}, "best_lr_score", 0.05),
                        seeds_needed=8, n_pairs=10)
    assert score.powered() and "margin" not in score.powered_words()  # a margin is declared: its test speaks
    assert not FailureAnswer(slope).powered()  # nothing planned


def _cell_runs(scheme_status: str, seeds: int, lrs=(None,)) -> list[dict]:
    runs = []
    for lr in lrs:
        for seed in range(seeds):
            extra = {} if lr is None else {"train.lr": lr}
            runs.append({"variant": "b", "seed": seed, "status": scheme_status, "test_acc": 0.1, "val_acc": 0.1,
                         "model.depth": 4, "model.num_classes": 10, **extra})
            runs.append({"variant": "a", "seed": seed, "status": "ok", "test_acc": 0.7 + 0.01 * seed,
                         "val_acc": 0.7 + 0.01 * seed, "model.depth": 4, "model.num_classes": 10, **extra})
    return runs


def test_too_few_seed_pairs_with_runs_at_chance_give_no_verdict():
    """A t on 2 seed pairs whose differences hold runs at chance exceeds its level (simulated 7-13% type-I error at
    20-60% of runs not ok); a cross-fitted one at 3-4 seeds likewise (7-11%). Such a comparison stays undecided and
    plans at least that many seeds; the same scores from ok runs are a verdict."""
    from suite.declared import Primary

    score = Primary(scheme="b", baseline="a", where={"model.depth": 4}, endpoint="score")
    few = primary.evaluate(_cell_runs("failed", 2), score)
    assert few.p < 0.05 and few.decision == "undecided" and few.few and few.seeds_needed >= 3
    assert "fewer than the 3 a verdict needs" in primary_text.verdict(few)
    assert primary.evaluate(_cell_runs("ok", 2), score).decision == "difference"
    assert primary.evaluate(_cell_runs("failed", 3), score).decision == "difference"
    best = Primary(scheme="b", baseline="a", where={"model.depth": 4}, endpoint="best_lr_score")
    runs = _cell_runs("failed", 4, lrs=(1e-3, 2e-3))
    assert primary.evaluate(runs, best).decision == "undecided"
    assert primary.evaluate(_cell_runs("failed", 6, lrs=(1e-3, 2e-3)), best).decision == "difference"
