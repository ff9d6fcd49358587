"""Tune, then confirm (issue 48): `rates_from` takes each cell's best validation rate from a tuning study,
`rates` keeps them, a confirmation seed the tuning used is refused, the interaction endpoint is a paired t
on each seed's difference of differences, and a design that cannot decide is named when it is validated."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats as sps

from suite import store
from suite.analysis.primary import Primary, evaluate
from suite.cli import main
from suite.sweep.spec import SpecError, load_ablation

BASE = """
base:
  data: {name: synthetic, synthetic_img_size: 16}
  model: {patch_size: 4, dim: 32, heads: 2}
  train: {steps: 5}
grid:
  model.depth: [2, 4]
variants:
  preln: {model.residual: preln}
  ls: {model.residual: layerscale}
"""
# (variant, depth) -> {lr: validation accuracy per tuning seed}; ties go to the smaller rate
TUNING = {("preln", 2): {1e-3: [0.5, 0.6], 4e-3: [0.7, 0.6], 1.6e-2: [0.2, 0.1]},
          ("preln", 4): {1e-3: [0.6, 0.6], 4e-3: [0.6, 0.6], 1.6e-2: [0.1, 0.1]},
          ("ls", 2): {1e-3: [0.5, 0.5], 4e-3: [0.6, 0.7], 1.6e-2: [0.8, 0.7]},
          ("ls", 4): {1e-3: [0.5, 0.5], 4e-3: [0.9, 0.8], 1.6e-2: [0.3, 0.2]}}
BEST = {("preln", 2): 4e-3, ("preln", 4): 1e-3, ("ls", 2): 1.6e-2, ("ls", 4): 4e-3}


def tuning_folder(root: Path) -> Path:
    for (variant, depth), by_lr in TUNING.items():
        for lr, accs in by_lr.items():
            for seed, acc in zip((100, 101), accs):
                folder = root / "runs" / f"{variant}{depth}{seed}{lr:g}"
                folder.mkdir(parents=True)
                (folder / "summary.json").write_text(json.dumps({
                    "schema": 1, "run_id": folder.name, "ablation": "tune", "variant": variant, "seed": seed,
                    "model.depth": depth, "train.lr": lr, "model.num_classes": 10, "status": "ok",
                    "val_acc": acc, "test_acc": acc, "steps_done": 5}))
    return root


def ablation(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "ablations" / "confirm.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("name: confirm\n" + textwrap.dedent(BASE) + textwrap.dedent(extra))
    return path


def test_rates_from_takes_each_cells_best_validation_rate(tmp_path):
    tuning_folder(tmp_path / "results" / "tune")
    ab = load_ablation(ablation(tmp_path, "rates_from: ../results/tune\nseeds: [200, 201]\n"))
    assert {(r.variant, r.cfg.model.depth): r.cfg.train.lr for r in ab.runs} == BEST
    assert len(ab.runs) == 8 and ab.runs[0].label == "preln depth=2 lr=0.004 seed=200"
    rates = {(e["variant"], e["model.depth"]): e for e in ab.resolved["rates"]}
    assert rates["ls", 2]["at_edge"] == "highest" and rates["preln", 4]["at_edge"] == "lowest"
    assert rates["ls", 4] == {"variant": "ls", "model.depth": 4, "train.lr": 4e-3, "tuning_seeds": [100, 101],
                              "val_score": 0.85, "at_edge": ""}
    # the results folder's copy holds the rates, so it loads (suite status) without the tuning folder
    copy = tmp_path / "elsewhere" / "ablation.yaml"
    copy.parent.mkdir()
    copy.write_text(yaml.safe_dump(ab.resolved))
    assert {r.run_id for r in load_ablation(copy).runs} == {r.run_id for r in ab.runs}


@pytest.mark.parametrize("extra, message", [
    ("rates_from: ../results/tune\nseeds: [101, 200]\n", "seeds: 101 also tuned the rates"),
    ("rates_from: ../results/nowhere\n", "rates_from: "),
    ("rates_from: ../results/tune\nseeds: [200]\n# lr axis\n", "grid.train.lr: the rates come"),
    ("rates: [{variant: preln, model.depth: 2, train.lr: 0.1}]\n", "rates: no rate for variant preln at model.depth=4"),
    ("rates: [{variant: preln, model.depth: 2, train.lr: -1}]\n", "rates[0].train.lr: expected a number > 0"),
    # issue 61: a file, or a folder that is no sweep's (`rates_from: /` walked the whole disk), said at once
    ("rates_from: ../results/tune/runs/preln21000.004/summary.json\n", "is a file, not a results folder"),
    ("rates_from: ../ablations\n", "holds neither runs.csv nor runs/"),
])
def test_rates_that_cannot_be_used_are_one_line_each(tmp_path, capsys, extra, message):
    tuning_folder(tmp_path / "results" / "tune")
    path = ablation(tmp_path, extra)
    if "# lr axis" in extra:
        path.write_text(path.read_text().replace("model.depth: [2, 4]", "model.depth: [2, 4]\n  train.lr: [0.1]"))
    with pytest.raises(SpecError, match=message.replace("[", r"\[").replace(".", r"\.")):
        load_ablation(path)
    assert main(["validate", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_a_tuning_run_that_cannot_be_read_is_named_not_dropped(tmp_path):
    """Issue 61: a damaged best row was dropped silently and the confirmation ran at another rate."""
    tuning = tuning_folder(tmp_path / "results" / "tune")
    (tuning / "runs" / "ls41010.004" / "summary.json").write_text('{"status": "ok", "val_acc": 2.5}')
    with pytest.raises(SpecError, match=r"rates_from: 1 run\(s\) of the tuning study cannot be read.*ls41010\.004"):
        load_ablation(ablation(tmp_path, "rates_from: ../results/tune\nseeds: [200, 201]\n"))


def test_the_interaction_is_a_paired_t_on_each_seeds_difference_of_differences():
    runs = []
    rng = np.random.default_rng(1)
    table = {}
    for seed in range(6):
        for variant in ("preln", "ls"):
            for depth in (12, 48):
                acc = 0.5 + 0.2 * (variant == "ls") * (depth == 48) + 0.05 * (variant == "ls") + rng.normal(0, 0.02)
                table[seed, variant, depth] = acc
                runs.append({"variant": variant, "model.depth": depth, "seed": seed, "status": "ok", "test_acc": acc,
                             "model.num_classes": 10})
    d = [(table[s, "ls", 48] - table[s, "preln", 48]) - (table[s, "ls", 12] - table[s, "preln", 12]) for s in range(6)]
    answer = evaluate(runs, Primary("ls", "preln", {"model.depth": 48}, "interaction", versus={"model.depth": 12}))
    t = np.mean(d) / (np.std(d, ddof=1) / math.sqrt(6))
    assert answer.estimate == pytest.approx(np.mean(d)) and answer.n_pairs == 6
    assert answer.p == pytest.approx(2 * sps.t.sf(abs(t), 5)) and answer.decision == "difference"


def test_an_interaction_needs_another_cell(tmp_path, capsys):
    path = ablation(tmp_path, "seeds: 2\nprimary: {scheme: ls, baseline: preln, where: {model.depth: 4}, "
                              "endpoint: interaction}\n")
    assert main(["validate", str(path)]) == 2
    assert "primary.versus: `endpoint: interaction` needs `versus`" in capsys.readouterr().err


def test_a_cross_fitted_comparison_on_too_few_seeds_is_named_with_its_critical_t(tmp_path, capsys):
    path = ablation(tmp_path, "seeds: 3\nprimary: {scheme: ls, baseline: preln, where: {model.depth: 2}}\n")
    path.write_text(path.read_text().replace("model.depth: [2, 4]", "model.depth: [2]\n  train.lr: [0.001, 0.004]"))
    with pytest.warns(store.SuiteWarning, match=r"on 3 seeds has 1 degrees of freedom \(critical t 12\.7 at alpha "
                                                r"0\.05\), so it can hardly be decided"):
        load_ablation(path)
    path.write_text(path.read_text().replace("seeds: 3", "seeds: 8"))
    loads_without_a_warning(path)


@pytest.mark.parametrize("endpoint, where", [("frontier", ", where: {model.depth: 2}"), ("frontier_slope", "")])
def test_a_frontier_comparison_on_one_seed_is_warned_of_and_on_two_is_not(tmp_path, endpoint, where):
    path = ablation(tmp_path, f"seeds: 1\nprimary: {{scheme: ls, baseline: preln, endpoint: {endpoint}{where}}}\n")
    path.write_text(path.read_text().replace("model.depth: [2, 4]", "model.depth: [2, 4]\n  train.lr: [0.001, 0.004]"))
    with pytest.warns(store.SuiteWarning, match=rf"primary: a {endpoint} comparison on one seed places each frontier "
                                                r"with single runs"):
        load_ablation(path)
    path.write_text(path.read_text().replace("seeds: 1", "seeds: 2"))
    loads_without_a_warning(path)


def loads_without_a_warning(path):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", store.SuiteWarning)
        load_ablation(path)


def _edit(folder: Path, name: str, **fields) -> None:
    path = folder / "runs" / name / "summary.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


def test_a_cell_whose_tuning_runs_differ_in_a_setting_is_refused_not_pooled(tmp_path):
    """The tuning study ran preln at two widths that this ablation does not split: the mean over both would be no
    setting's best rate (a review's case: depths 2 and 4 averaged into one rate for a depth-4 confirmation)."""
    tuning = tuning_folder(tmp_path / "results" / "tune")
    _edit(tuning, "preln21000.001", **{"model.dim": 32})
    _edit(tuning, "preln21010.001", **{"model.dim": 64})
    with pytest.raises(SpecError, match=r"its runs of variant preln at model\.depth=2 differ in model\.dim \(32, 64\)"):
        load_ablation(ablation(tmp_path, "rates_from: ../results/tune\nseeds: [200, 201]\n"))
    _edit(tuning, "preln21010.001", **{"model.dim": 32})
    _edit(tuning, "preln21000.004", packed=True)  # `suite analyze` keeps packed and solo runs apart: so does this
    with pytest.raises(SpecError, match=r"at model\.depth=2 differ in packed \(False, True\)"):
        load_ablation(ablation(tmp_path, "rates_from: ../results/tune\nseeds: [200, 201]\n"))


def test_a_rate_is_chosen_on_validation_or_refused_never_on_test(tmp_path):
    """One ok run without a validation score, anywhere in the tuning folder, switched every cell's choice to test
    accuracy, still recorded as val_score; now the cell that lacks it is refused and the others choose on val."""
    tuning = tuning_folder(tmp_path / "results" / "tune")
    for name in [p.name for p in (tuning / "runs").iterdir()]:
        _edit(tuning, name, test_acc=1.0 if "0.016" in name else 0.0)  # test would pick 1.6e-2 everywhere
    ab = load_ablation(ablation(tmp_path, "rates_from: ../results/tune\nseeds: [200, 201]\n"))
    assert {(r.variant, r.cfg.model.depth): r.cfg.train.lr for r in ab.runs} == BEST
    _edit(tuning, "ls41010.004", val_acc=None)
    with pytest.raises(SpecError, match=r"an ok run of variant ls at model\.depth=4 has no validation score"):
        load_ablation(ablation(tmp_path, "rates_from: ../results/tune\nseeds: [200, 201]\n"))


def test_an_unfinished_tuning_study_is_warned_of(tmp_path):
    tuning = tuning_folder(tmp_path / "results" / "tune")
    ids = [p.name for p in (tuning / "runs").iterdir()]
    (tuning / "run_ids.json").write_text(json.dumps(ids + ["preln21020.016"]))
    with pytest.warns(store.SuiteWarning, match="1 of its 25 runs have not finished"):
        load_ablation(ablation(tmp_path, "rates_from: ../results/tune\nseeds: [200, 201]\n"))


def test_a_folder_whose_runs_used_other_rates_is_refused(tmp_path):
    """The tuning study gained runs after the confirmation ran: its rates moved, and a rerun into the same folder
    trained the new rates beside the old, which the analysis pooled (duplicate seeds, a Welch t over two rates)."""
    from suite.sweep.folder import RunnerError, check_out

    tuning = tuning_folder(tmp_path / "results" / "tune")
    path = ablation(tmp_path, "rates_from: ../results/tune\nseeds: [200, 201]\n")
    out = tmp_path / "results" / "confirm"
    out.mkdir()
    ran = load_ablation(path)
    (out / "ablation.yaml").write_text(yaml.safe_dump(ran.resolved))
    check_out(out, load_ablation(path))  # the same rates: the same folder
    _edit(tuning, "preln41000.016", val_acc=0.99)
    _edit(tuning, "preln41010.016", val_acc=0.99)
    check_out(out, load_ablation(path))  # no run of the cell here yet (an --only that left it out): it may move
    (out / "runs.csv").write_text("run_id,variant,status\n" + "".join(f"{r.run_id},{r.variant},ok\n" for r in ran.runs))
    with pytest.raises(RunnerError, match=r"its runs of preln model\.depth=4 used train\.lr 0\.001 .* now gives 0\.016"):
        check_out(out, load_ablation(path))
    (out / "runs.csv").unlink()
    (out / "runs" / ran.runs[0].run_id).mkdir(parents=True)  # a run folder of another cell: nothing moved there
    check_out(out, load_ablation(path))
    damaged = {**ran.resolved, "rates": [{**e, "train.lr": "fast"} for e in ran.resolved["rates"]]}
    (out / "ablation.yaml").write_text(yaml.safe_dump(damaged))
    check_out(out, load_ablation(path))  # a recorded rate that is no number: nothing to compare, no traceback
