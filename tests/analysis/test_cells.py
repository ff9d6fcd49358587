"""How runs become cells, whether they come from run folders or from runs.csv alone: a list-valued key, a key that is
None, a number-or-name key, a seed that repeats in a pooled cell, a run older than a field (a review's cases)."""

from __future__ import annotations

import dataclasses
import math
import typing
import warnings

import pytest

from suite.analysis.findings import _learn_pair, cause_lines
from suite.analysis.summary import runs_frame
from suite.analysis.survival import learn_table, times
from suite.analysis.trends import aggregates, depth_trends
from suite.config import RunConfig
from suite.results import NUMBER_OR_NAME, AnalysisWarning, _summary_problem, runs_from_csv


def run(variant="preln", seed=0, depth=4, acc=0.6, status="ok", **keys):
    return {"run_id": f"{variant}-{depth}-{seed}-{sorted(keys.items())}", "variant": variant, "seed": seed,
            "model.depth": depth, "status": status, "test_acc": acc, "val_acc": acc, "model.num_classes": 10,
            "model.residual": "preln", "steps_done": 100, "steps_to_learn": 20 if status == "ok" else None, **keys}


def test_why_runs_were_not_ok_groups_a_list_valued_key():
    """A sweep over train.betas with one failed run: the table's cell key was the raw list (unhashable: a traceback)."""
    runs = [run(v, s, **{"train.betas": b}) for v in ("preln", "ls") for s in range(3) for b in ([0.9, 0.999], [0.9, 0.95])]
    runs[-1] = {**runs[-1], "status": "failed", "failed_reason": "never_learned"}
    lines = cause_lines(runs, ["variant", "train.betas"])
    assert any(line.startswith("| ls | \\[0.9, 0.95\\] | 1 ") for line in lines), lines


def test_time_to_learn_pairs_rows_whose_key_is_none():
    """train.grad_clip None and 1.0: the rows of the None section never matched (NaN != NaN), and its lines were lost."""
    runs = [run(v, s, acc=0.6, **{"train.grad_clip": c}) for v in ("preln", "ls") for s in range(4) for c in (None, 1.0)]
    keys = ["variant", "train.grad_clip"]
    learn = learn_table(runs, keys, "preln")
    row = learn[(learn["variant"] == "ls") & learn["train.grad_clip"].isna()].iloc[0]
    assert _learn_pair(learn, keys, row, "preln") is not None


def test_a_diverged_run_without_its_step_is_censored_at_its_last_step():
    t, learned = times([{**run(status="diverged"), "diverged_step": None, "steps_done": 37}])
    assert list(t) == [37.0] and list(learned) == [0]


def test_a_failed_run_without_num_classes_is_refused_not_dropped_from_the_scores():
    """It could not be scored at chance, so it fell out of every mean and every not-ok count in silence."""
    assert "cannot be scored at chance" in _summary_problem({**run(status="failed"), "model.num_classes": None})
    assert _summary_problem({**run(), "model.num_classes": None}) is None  # an ok run scores its accuracy


def test_runs_csv_reads_back_what_the_run_folders_hold(tmp_path):
    """A numeric LayerScale init came back as text ('1e-05' beside 1e-05: two cells), and an ok run older than
    steps_to_learn came back with it empty, counted as never learned."""
    from suite.analysis.markup import write_csv

    runs = [run("ls", s, **{"model.layerscale.init": init}) for s in range(2) for init in (1e-05, "cait")]
    runs[0].pop("steps_to_learn")
    write_csv(runs_frame(runs, ["variant", "model.layerscale.init"], "ls"), tmp_path / "runs.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AnalysisWarning)
        back = {r["run_id"]: r for r in runs_from_csv(tmp_path / "runs.csv")}
    assert {type(r["model.layerscale.init"]) for r in back.values()} == {float, str}
    assert "steps_to_learn" not in back[runs[0]["run_id"]] and back[runs[1]["run_id"]]["steps_to_learn"] == 20


def test_number_or_name_lists_every_config_key_typed_a_number_or_a_name():
    found = set()

    def walk(cls, prefix=""):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            kind = hints[f.name]
            if dataclasses.is_dataclass(kind):
                walk(kind, f"{prefix}{f.name}.")
            elif {float, int} & set(typing.get_args(kind)) and any(
                    a is str or typing.get_origin(a) is typing.Literal for a in typing.get_args(kind)):
                found.add(prefix + f.name)

    walk(RunConfig)
    assert found == NUMBER_OR_NAME


def test_a_cell_pooling_a_varying_key_counts_every_run_and_pairs_none():
    """--by model.depth over two rates: seeds repeat in a cell, and the depth interaction kept one run per seed (by
    run-id order) for a paired t; it now takes every run, by Welch."""
    runs = [run(v, s, d, acc=0.5 + (0.2 if lr == 3e-3 else 0.0) + 0.01 * s + (0.05 if v == "ls" and d == 8 else 0),
                **{"train.lr": lr}) for v in ("preln", "ls") for d in (4, 8) for lr in (1e-3, 3e-3) for s in range(3)]
    t = depth_trends(runs, ["variant", "model.depth"], "preln").set_index("variant")
    assert t.loc["ls", "n"] == 12 and t.loc["ls", "acc_interaction_test"] == "Welch-Satterthwaite"
    assert t.loc["ls", "acc_interaction"] == pytest.approx(0.05)
    assert aggregates(runs, ["variant", "model.depth"], "preln").set_index("variant").loc["ls", "poi_pairs"] == 0


def test_a_floor_at_a_depth_the_interaction_does_not_compare_leaves_it_tested():
    runs = [run(v, s, d, acc=0.5 + 0.01 * s + (0.1 + 0.01 * s * s if v == "ls" and d == 8 else 0))
            for v in ("preln", "ls") for d in (4, 8) for s in range(4)]
    runs += [run("preln", s, 16, acc=0.0, status="failed") for s in range(4)]
    t = depth_trends(runs, ["variant", "model.depth"], "preln").set_index("variant")
    assert t.loc["ls", "bound"] == "" and not math.isnan(t.loc["ls", "acc_interaction_p"])
