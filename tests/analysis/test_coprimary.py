"""The frontier endpoint (the LR50 ratio as the declared comparison) and co-primary comparisons: a list
under `primary:`, tested as one family with Holm."""

import math
from pathlib import Path

import pytest
import yaml

from suite.analysis import coprimary, primary, primary_text
from suite.analysis.analyze import analyze
from suite.analysis.doseresponse import relative_potency
from suite.results import run_records
from suite.analysis.plan import plan_table
from suite.analysis.findings import answer_lines
from suite.sweep.spec import SpecError, load_ablation

from test_analyze import write_run

RATES = [0.0005, 0.001, 0.002, 0.004, 0.008, 0.016]
ABLATION = {
    "name": "demo", "base": {"data": {"name": "digits"}, "model": {"patch_size": 4}},
    "grid": {"model.depth": [6, 12], "train.lr": RATES},
    "variants": {"preln": {"model.residual": "preln"}, "layerscale": {"model.residual": "layerscale"}},
    "seeds": 4,
}
AT = {"scheme": "layerscale", "baseline": "preln", "where": {"model.depth": 12}}
FRONTIER = {**AT, "endpoint": "frontier"}
# runs not ok of 4 per rate: preln fails from 0.002 up, layerscale from 0.008: about 4x preln's rate
NOT_OK = {"preln": [0, 0, 1, 3, 4, 4], "layerscale": [0, 0, 0, 0, 1, 3]}


def folder(root: Path, block, not_ok=NOT_OK, acc=None) -> Path:
    """Depth-12 runs at every rate, 4 seeds, with `not_ok[variant][i]` of the 4 diverged at RATES[i]."""
    root.mkdir(parents=True)
    (root / "ablation.yaml").write_text(yaml.safe_dump({**ABLATION, "primary": block}))
    for variant, counts in not_ok.items():
        for lr, k in zip(RATES, counts):
            for seed in range(4):
                score = (acc or {}).get(variant, 0.8) + 0.01 * ((3 * seed + len(variant)) % 4)  # seed-matched
                write_run(root, variant, 12, seed, status="diverged" if seed < k else "ok", acc=score, lr=lr)
    return root


def test_the_frontier_endpoint_is_the_lr50_ratio_with_its_profile_interval(tmp_path):
    root = folder(tmp_path / "f", FRONTIER)
    answer = primary.evaluate(run_records(root), primary.read(root))
    bad = {v: [int(s < k) for k in c for s in range(4)] for v, c in NOT_OK.items()}
    lrs = [lr for lr in RATES for _ in range(4)]
    fit = relative_potency(lrs, bad["layerscale"], lrs, bad["preln"])
    assert (answer.estimate, answer.low, answer.high, answer.p) == pytest.approx((fit.ratio, fit.low, fit.high, fit.p))
    assert 2 < answer.estimate < 8 and answer.low > 1 and answer.decision == "difference"
    assert answer.counts == (4, 24, 12, 24) and answer.seeds == 4
    text = primary_text.paragraph(answer)
    assert text.startswith("**Primary comparison** (declared in ablation.yaml, tested alone at alpha = 0.05)")
    assert f"**layerscale tolerates {fit.ratio:.2g}x preln's learning rate.**" in text
    assert f"[{fit.low:.2g}, {fit.high:.2g}]" in text and "penalised likelihood-ratio test" in text


def test_an_undecided_frontier_names_the_seeds_and_an_open_interval_says_so(tmp_path):
    close = {"preln": [0, 0, 1, 2, 3, 4], "layerscale": [0, 0, 1, 1, 3, 4]}
    answer = primary.evaluate(run_records(folder(tmp_path / "u", FRONTIER, close)), primary.Primary(**FRONTIER))
    assert answer.decision == "undecided" and answer.low < 1 < answer.high and answer.seeds_needed > 4
    text = primary_text.paragraph(answer)
    assert "**Undecided**: the interval includes 1." in text
    assert f"about {int(answer.seeds_needed)} seeds per rate" in text
    never = {"preln": [0, 0, 1, 3, 4, 4], "layerscale": [0] * 6}  # layerscale never fails: no upper end
    answer = primary.evaluate(run_records(folder(tmp_path / "n", FRONTIER, never)), primary.Primary(**FRONTIER))
    assert answer.censored == "high" and math.isinf(answer.high) and answer.decision == "difference"
    text = primary_text.paragraph(answer)
    assert f"tolerates at least {answer.low:.2g}x preln's" in text and "The interval is open above" in text


def test_a_frontier_needs_the_rate_free_and_takes_no_margin(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text(yaml.safe_dump({**ABLATION, "primary": {**FRONTIER, "margin": 5}}))
    with pytest.raises(SpecError, match=r"primary.margin: no equivalence test for frontier; remove margin"):
        load_ablation(path)
    fixed = {**FRONTIER, "where": {"model.depth": 12, "train.lr": 0.001}}
    path.write_text(yaml.safe_dump({**ABLATION, "primary": fixed}))
    with pytest.raises(SpecError, match=r"primary.endpoint: frontier needs a `train.lr` grid axis left free"):
        load_ablation(path)


def test_a_list_declares_co_primary_comparisons_checked_one_line_each(tmp_path):
    path = tmp_path / "a.yaml"
    two = [{**AT, "margin": 5}, FRONTIER]
    path.write_text(yaml.safe_dump({**ABLATION, "primary": two}))
    assert load_ablation(path).primary == [primary.Primary("layerscale", "preln", {"model.depth": 12}, margin=0.05),
                                           primary.Primary("layerscale", "preln", {"model.depth": 12}, "frontier")]
    swapped = {"scheme": "preln", "baseline": "layerscale", "where": {"model.depth": 12}}
    bad = [AT, {**AT, "scheme": "layerscal"}, swapped]
    path.write_text(yaml.safe_dump({**ABLATION, "primary": bad}))
    with pytest.raises(SpecError) as err:
        load_ablation(path)
    assert len(err.value.problems) == 2  # the typo, and the same question asked twice (swapped sides)
    assert any("primary[1].scheme: 'layerscal' is not a variant" in line for line in err.value.problems)
    assert any("primary[2]: the same comparison as primary[0]" in line for line in err.value.problems)
    path.write_text(yaml.safe_dump({**ABLATION, "primary": [AT, FRONTIER, AT, FRONTIER]}))
    with pytest.raises(SpecError, match=r"primary: a list of 1 to 3 comparisons, got 4"):
        load_ablation(path)


def test_holm_by_hand_including_the_monotonicity_step():
    # sorted 0.01, 0.03, 0.04 -> 3 x 0.01 = 0.03; 2 x 0.03 = 0.06; 1 x 0.04 = 0.04, raised to 0.06 (monotone)
    adjusted, levels = coprimary.holm([0.01, 0.04, 0.03])
    assert adjusted == pytest.approx([0.03, 0.06, 0.06])
    # the first step rejects at 0.05 / 3; the other two are decided (not rejected) at the second step's 0.05 / 2
    assert levels == pytest.approx([0.05 / 3, 0.025, 0.025])
    adjusted, levels = coprimary.holm([0.001, 0.02, 0.04])  # all three rejected: 0.003, 0.04, 0.04
    assert adjusted == pytest.approx([0.003, 0.04, 0.04]) and levels == pytest.approx([0.05 / 3, 0.025, 0.05])
    adjusted, _ = coprimary.holm([0.01, math.nan])  # an untested comparison still counts in m
    assert adjusted[0] == pytest.approx(0.02) and math.isnan(adjusted[1])


def test_a_family_is_decided_by_holm_and_findings_open_with_one_answer_each(tmp_path):
    acc = {"layerscale": 0.85, "preln": 0.70}
    root = folder(tmp_path / "fam", [{**AT, "margin": 5}, FRONTIER], acc=acc)
    summary = analyze(root, figures=False)
    answers = summary.attrs["primary"]
    assert isinstance(answers, list) and [a.primary.endpoint for a in answers] == ["best_lr_score", "frontier"]
    m = 3  # a difference test each, and the score comparison's equivalence test
    raw = [answers[0].p, answers[1].p, answers[0].tost_p]
    adjusted, levels = coprimary.holm(raw)
    assert all(a.family == m for a in answers)
    assert (answers[0].p_adj, answers[1].p_adj, answers[0].tost_p_adj) == pytest.approx(tuple(adjusted))
    assert answers[0].few  # 4 seeds with runs at chance: too few for a best-rate verdict, whatever its Holm p
    for a in answers:
        assert a.decision == ("undecided" if getattr(a, "few", False) else "difference" if a.p_adj < 0.05
                              else "undecided")
    # each interval at its Holm step's level, so it excludes the null exactly when the adjusted p is below alpha
    assert answers[0].level == pytest.approx(1 - levels[0]) and answers[1].level == pytest.approx(1 - levels[1])
    assert (answers[0].low > 0) == (answers[0].p_adj < 0.05)
    assert (answers[1].low > 1) == (answers[1].p_adj < 0.05)
    text = (root / "findings.md").read_text()
    table, regime, head, items = text.split("\n\n")[1:5]
    # the verdict table first (question, estimate, interval, Holm p, verdict), then the regime, then the prose
    assert table.startswith("| question | estimate | interval | p (Holm) | verdict |") and table.count("\n") == 3
    assert regime.startswith("*Regime*: data mnist5k, ")
    assert head.startswith("**Primary comparisons** (declared in ablation.yaml): 2 comparisons tested as one "
                           "family of 3 hypotheses") and "Holm's step-down correction at alpha = 0.05" in head
    assert items.startswith("1. layerscale vs preln at model.depth = 12, each at its own best")
    assert "\n2. layerscale vs preln at model.depth = 12, the learning rate where half" in items
    assert items.count("Holm-adjusted p") == 2
    assert "\n".join(answer_lines(answers)).strip().endswith(f"{head}\n\n{items}")  # the report's answer box
    rows = plan_table(root)
    co = rows[rows["role"].str.startswith("co-primary")]
    assert list(co["endpoint"]) == ["best_lr_score", "frontier"] and list(co["alpha"]) == pytest.approx([0.05 / 3] * 2)



@pytest.mark.parametrize("family", [False, True])
def test_an_equivalence_verdict_prints_its_tosts_interval(tmp_path, family):
    """TOST at level a is the 1 - 2a interval: 90% alone, 1 - 2 x its Holm step's level in a family; the interval lies
    within the margin exactly when the verdict says equivalent."""
    block = {**AT, "endpoint": "score", "where": {**AT["where"], "train.lr": RATES[0]}, "margin": 5}
    root = folder(tmp_path / "eq", [block, FRONTIER] if family else block,
                  not_ok={"layerscale": [0] * 6, "preln": [0] * 6}, acc={"layerscale": 0.80, "preln": 0.80})
    answers = coprimary.evaluate_all(run_records(root), primary.read(root))
    answer = answers[0]
    assert answer.decision == "equivalent" and -0.05 < answer.low and answer.high < 0.05
    if not family:
        assert answer.level == pytest.approx(0.90)
    else:
        tests = [answers[0].p, answers[1].p, answers[0].tost_p]
        level = coprimary.holm(tests)[1][2]
        assert answer.level == pytest.approx(1 - 2 * level) and answer.level > 0.90  # a stricter step: wider


def test_a_family_keeps_the_no_verdict_of_too_few_seed_pairs_at_chance():
    """Holm adjusts p; it does not lift the rule that 2 seed pairs holding runs at chance give no verdict
    (docs/statistics.md, "Too few seeds with runs at chance"), for the score and the best-rate score alike."""
    from suite.declared import Primary

    def cells(status_at_4: str, seeds: int, lrs=(None,)) -> list[dict]:
        runs = []
        for depth, status in ((4, status_at_4), (8, "ok")):
            for lr in lrs:
                for seed in range(seeds):
                    common = {"seed": seed, "model.depth": depth, "model.num_classes": 10,
                              **({} if lr is None else {"train.lr": lr})}
                    runs.append({**common, "variant": "b", "status": status, "test_acc": 0.1, "val_acc": 0.1})
                    runs.append({**common, "variant": "a", "status": "ok", "test_acc": 0.7 + 0.01 * seed,
                                 "val_acc": 0.7 + 0.01 * seed})
        return runs

    for endpoint, seeds, lrs in (("score", 2, (None,)), ("best_lr_score", 4, (1e-3, 2e-3))):
        family = [Primary(scheme="b", baseline="a", where={"model.depth": d}, endpoint=endpoint) for d in (4, 8)]
        few, fine = coprimary.evaluate_all(cells("failed", seeds, lrs), family)
        assert few.few and few.p_adj < 0.05 and few.decision == "undecided", endpoint
        assert few.seeds_needed >= seeds + 1 and "a verdict needs" in primary_text.verdict(few)
        assert fine.decision == "difference", endpoint


def test_the_declared_cells_print_their_failures_with_a_one_sided_95_percent_upper_bound():
    """0 of 10 is at most 25.9% (1 - 0.05^(1/10)), not the 30.8% of a two-sided interval's upper end; 10 of 10: 100%."""
    from suite.analysis.findings import declared_cells_line
    from suite.declared import Primary

    score = Primary(scheme="b", baseline="a", where={"model.depth": 4}, endpoint="score")
    runs = [{"variant": v, "seed": s, "status": "failed" if v == "b" else "ok", "test_acc": 0.1 if v == "b" else 0.7,
             "model.depth": 4, "model.num_classes": 10} for v in "ab" for s in range(10)]
    line = declared_cells_line([primary.evaluate(runs, score)], runs)
    assert "b depth 4: 10/10 (one-sided 95% upper bound 100%)" in line
    assert "a depth 4: 0/10 (one-sided 95% upper bound 26%)" in line
    assert 1 - 0.05 ** (1 / 10) == pytest.approx(0.2589, abs=1e-4)


@pytest.mark.parametrize("low, high, word", [(1.7, math.inf, "higher"), (0.0, 0.6, "lower")])
def test_a_ratio_left_at_the_bound_is_told_by_its_interval_in_the_verdict_table_too(low, high, word):
    """No estimate (the likelihood rose to 10^6) but a decided interval: the table's word follows the interval, as the
    paragraph does (it said "lower" for every nan estimate)."""
    from suite.analysis.endpoints import endpoint
    from suite.analysis.endpoints.failure import FailureAnswer
    from suite.declared import Primary

    a = FailureAnswer(Primary(scheme="b", baseline="a", where={"model.depth": 4}, endpoint="frontier"),
                      decision="difference", estimate=math.nan, low=low, high=high, p=0.01,
                      censored="high" if high == math.inf else "low")
    frontier = endpoint("frontier")
    assert frontier.decided(a) == f"decided: b tolerates {word} rates"
    assert ("at least 1.7x" if word == "higher" else "at most 0.6x") in frontier.verdict(a)
