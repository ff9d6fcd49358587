"""`suite run FILE --refine`: a best learning rate at the grid's edge gets the next rate past it, and an arm
whose highest rate is still mostly ok gets the next rate up, within the file's `refine:` limits."""

from __future__ import annotations

import copy
import dataclasses
import json
import sys
from pathlib import Path

import pytest
import yaml

from suite.cli import main
from suite.results import run_records
from suite.sweep import refine
from suite.sweep.folder import RunnerError
from suite.sweep.refine import MAX_ROUNDS, edge_cells, frontier_arms, past_edge, plan_round, run_refine
from suite.sweep.spec import Refine, SpecError, load_ablation
from suite.sweep.sweep import Sweep, SweepOptions

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
from test_analyze import write_run  # noqa: E402
from test_api import TINY as API_TINY  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_the_next_rate_keeps_the_grid_spacing():
    assert past_edge([1e-3, 2e-3, 4e-3], "highest") == pytest.approx(8e-3)
    assert past_edge([5.6e-4, 3.2e-3, 1.8e-2], "lowest") == pytest.approx(9.8e-5)
    with pytest.raises(ValueError):
        past_edge([1e-3], "lowest")


def test_edge_cells_are_those_whose_best_rate_is_at_an_edge_and_above_chance(tmp_path):
    for seed in range(2):
        for lr, acc in ((1e-3, 0.5), (2e-3, 0.7)):  # preln: best at the highest rate
            write_run(tmp_path, "preln", 6, seed, lr=lr, acc=acc)
        for lr, acc in ((1e-3, 0.5), (2e-3, 0.4)):  # layerscale: best at the lowest rate
            write_run(tmp_path, "layerscale", 6, seed, lr=lr, acc=acc)
        for lr in (1e-3, 2e-3):  # rezero never learns: its "best" rate is a tie, not an optimum
            write_run(tmp_path, "rezero", 6, seed, lr=lr, status="failed", acc=0.1)
    cells = {c["variant"]: c for c in edge_cells(tmp_path)}
    assert set(cells) == {"preln", "layerscale"}
    assert (cells["preln"]["lr"], cells["preln"]["new"]) == (2e-3, pytest.approx(4e-3))
    assert (cells["layerscale"]["lr"], cells["layerscale"]["new"]) == (1e-3, pytest.approx(5e-4))
    assert cells["preln"]["keys"] == {"model.depth": 6}


def test_an_arm_whose_other_rates_only_errored_has_no_edge_to_step_past(tmp_path):
    for seed in range(3):
        for lr, acc in ((1e-3, 0.5), (2e-3, 0.7), (4e-3, 0.6)):
            write_run(tmp_path, "preln", 6, seed, lr=lr, acc=acc)
        write_run(tmp_path, "layerscale", 6, seed, lr=1e-3, acc=0.5)
        for lr in (2e-3, 4e-3):
            write_run(tmp_path, "layerscale", 6, seed, lr=lr, status="error", acc=None)
    assert edge_cells(tmp_path) == []


BASE = copy.deepcopy(API_TINY["base"])  # the notebook test's runs, with enough data and steps to learn
BASE["data"].update(synthetic_train=128, synthetic_test=64)
BASE["train"].update(steps=12, batch_size=32, warmup_steps=2, log_every=4)
TINY = {
    "name": "refine",
    "base": BASE,
    "grid": {"train.lr": [1.0e-3, 2.0e-3]},  # 12 steps: the larger one is best (val 1.0 vs 0.96), at the edge
    "variants": {"preln": {"model.residual": "preln"}},
    "seeds": 2,
    "refine": {"max_lr": 4.0e-3},  # one round: 4e-3 is both past the edge optimum and the next rate up
}


def test_refine_adds_rates_past_the_edge_and_stops_at_the_limit_or_an_interior_optimum(tmp_path, capsys):
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(TINY))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--refine", "--device", "cpu", "--workers", "1",
                 "--threads", "1"]) == 0
    printed = capsys.readouterr().out
    rates = sorted({json.loads(p.read_text())["train.lr"] for p in (out / "runs").glob("*/summary.json")})
    # 2e-3 was best, at the top, and nothing failed there: 4e-3 was added once, for both reasons; it ties with
    # 2e-3 (ties go to the smaller), so 2e-3 is interior; nothing fails at 4e-3 either, and 8e-3 is above max_lr
    assert rates == [1e-3, 2e-3, pytest.approx(4e-3)]
    assert ("refine round 1: preln model.depth=1: best rate 0.002 is at the top edge; 0 of 2 seeds not ok at its "
            "highest rate 0.002; adding 0.004") in printed
    assert "refine: preln model.depth=1: not adding 0.008 above 0.004: above refine.max_lr 0.004" in printed
    assert ("refine: preln model.depth=1: frontier not bracketed: 0 of 2 seeds not ok at its highest rate 0.004; "
            "not adding 0.008") in printed and not edge_cells(out)
    assert len(rates) - 2 <= MAX_ROUNDS
    assert main(["run", str(path), "--out", str(out), "--refine", "--dry-run"]) == 2


# ----------------------------------------------------------------------------- the frontier rule, from run rows


def rows(variant: str, lr: float, statuses: str, depth: int = 6) -> list[dict]:
    """One summary row per seed: "o" ok, "d" diverged, "f" failed, "e" error."""
    names = {"o": "ok", "d": "diverged", "f": "failed", "e": "error"}
    return [{"variant": variant, "train.lr": lr, "model.depth": depth, "seed": seed, "status": names[c]}
            for seed, c in enumerate(statuses)]


def test_an_arm_is_bracketed_once_half_its_seeds_are_not_ok_at_its_highest_rate():
    runs = (rows("preln", 1e-3, "oooo") + rows("preln", 2e-3, "oood")  # 1 of 4: grow
            + rows("preln", 1e-3, "oooo", depth=12) + rows("preln", 2e-3, "oodf", depth=12)  # 2 of 4: bracketed
            + rows("layerscale", 2e-3, "oooo") + rows("layerscale", 4e-3, "oode")  # errors are not counted
            + rows("rezero", 1e-3, "oooo") + rows("rezero", 3e-3, "ooof") + rows("rezero", 9e-3, "eeee")
            + rows("postln", 1e-3, "dddd")  # one rate: no spacing to step by
            + rows("deepnorm", 1e-3, "ee") + rows("deepnorm", 2e-3, "ee"))  # nothing judged: open, nowhere to go
    arms = {(a["variant"], a["keys"]["model.depth"]): a for a in frontier_arms(runs, ["model.depth"])}
    assert set(arms) == {("preln", 6), ("preln", 12), ("layerscale", 6), ("rezero", 6), ("postln", 6), ("deepnorm", 6)}
    assert (arms["preln", 6]["not_ok"], arms["preln", 6]["n"], arms["preln", 6]["bracketed"]) == (1, 4, False)
    assert arms["preln", 6]["new"] == pytest.approx(4e-3)
    assert arms["preln", 12]["bracketed"] and arms["preln", 12]["lr"] == 2e-3
    assert (arms["layerscale", 6]["n"], arms["layerscale", 6]["errored"], arms["layerscale", 6]["bracketed"]) == (
        3, 1, False)
    # a rate at which every run errored says nothing: the arm is judged at 3e-3, and the next rate up is 9e-3
    assert (arms["rezero", 6]["lr"], arms["rezero", 6]["bracketed"]) == (3e-3, False)
    assert arms["rezero", 6]["new"] == pytest.approx(9e-3)
    assert arms["postln", 6]["bracketed"] and arms["postln", 6]["new"] is None
    assert (arms["deepnorm", 6]["n"], arms["deepnorm", 6]["bracketed"], arms["deepnorm", 6]["new"]) == (0, False, None)


def test_a_round_adds_a_rate_asked_for_by_both_rules_once_and_both_sides_of_an_arm(tmp_path):
    for seed in range(2):
        for lr, acc in ((1e-3, 0.5), (2e-3, 0.7)):  # preln: best at the top, and nothing fails there
            write_run(tmp_path, "preln", 6, seed, lr=lr, acc=acc)
        for lr, acc in ((1e-3, 0.6), (2e-3, 0.5)):  # layerscale: best at the bottom, nothing fails at the top
            write_run(tmp_path, "layerscale", 6, seed, lr=lr, acc=acc)
    plans = {p["variant"]: p for p in plan_round(run_records(tmp_path)).values()}
    (preln,) = plans["preln"]["add"]
    assert (preln["from"], preln["new"]) == (2e-3, pytest.approx(4e-3))
    assert preln["why"] == ["best rate 0.002 is at the top edge", "0 of 2 seeds not ok at its highest rate 0.002"]
    assert sorted(a["new"] for a in plans["layerscale"]["add"]) == [pytest.approx(5e-4), pytest.approx(4e-3)]
    assert plans["preln"]["label"] == "preln model.depth=6"


# ----------------------------------------------------------------------------- run_refine with a simulated sweep


def simulated(outcome, trained: list):
    """A stand-in for run_sweep: each run's summary comes from ``outcome(lr, seed) -> (status, accuracy)``
    at once; every config it is given must be one `suite config` accepts."""
    from suite.config import validate

    def run_sweep(ablation, out, options=None, report=None, notify=None):
        out, results, done, todo = Path(out), {}, {}, []
        for run in ablation.runs:
            if (out / run.run_id).exists():  # done: skipped, as the real sweep does
                done[run.run_id] = json.loads(next((out / run.run_id).rglob("summary.json")).read_text())
                continue
            todo.append(run)
            validate(run.cfg)  # nothing invalid ever trains
            trained.append(run.cfg.train.lr)
            status, acc = outcome(run.cfg.train.lr, run.seed)
            folder = write_run(out / run.run_id, run.variant, run.cfg.model.depth, run.seed, status=status, acc=acc,
                               lr=run.cfg.train.lr, ablation=ablation.name)
            results[run.run_id] = {**json.loads((folder / "summary.json").read_text()), "run_id": run.run_id}
            (folder / "summary.json").write_text(json.dumps(results[run.run_id]))
        return Sweep(ablation.name, out, ablation, list(ablation.runs), todo, done, {}, results)

    return run_sweep


def refine_file(tmp_path: Path, grid: list[float], **refine_limits) -> Path:
    spec = {"name": "demo", "base": {"model": {"depth": 2}}, "grid": {"train.lr": grid},
            "variants": {"preln": {"model.residual": "preln"}}, "seeds": 2}
    if refine_limits:
        spec["refine"] = refine_limits
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def refined(tmp_path, monkeypatch, outcome, grid, **limits):
    trained: list[float] = []
    monkeypatch.setattr(refine, "run_sweep", simulated(outcome, trained))
    lines: list[str] = []
    _, left = run_refine(refine_file(tmp_path, grid, **limits), tmp_path / "out", SweepOptions(), notify=lines.append)
    return trained, lines, left


def test_a_rate_that_makes_an_invalid_config_is_never_added(tmp_path, monkeypatch):
    # 30.0 diverges, so 3e-3 is best, at the bottom: the next rate down, 3e-3 * 3e-3 / 30 = 3e-7, is below
    # train.min_lr (1e-5), a config `suite config` refuses. The frontier is bracketed (30.0: 2 of 2 not ok).
    def outcome(lr, seed):
        return ("diverged", None) if lr > 1 else ("ok", 0.5)

    trained, lines, left = refined(tmp_path, monkeypatch, outcome, [3e-3, 30.0])
    assert sorted(trained) == [3e-3, 3e-3, 30.0, 30.0]
    assert lines[0].startswith("refine: preln model.depth=2: not adding 3e-07 below 0.003: not a valid run (preln")
    assert "train.min_lr (1e-05) must be <= train.lr (3e-07)" in lines[0]
    assert [c["kind"] for c in left] == ["edge"] and "not a valid run" in left[0]["stopped"]
    assert lines[1].startswith("refine: preln model.depth=2: best rate 0.003 is still at an edge")
    assert len(lines) == 2  # the refusal once, then what is left open; 30.0 above max_lr 1.0 is the grid's own


def test_the_sweep_it_returns_counts_every_round(tmp_path, monkeypatch):
    """`suite run --refine`'s last line counts the returned sweep: every round's runs, not the last round's."""
    def outcome(lr, seed):  # best at 4e-3; at 8e-3 seed 0 diverges: three rounds after the first sweep's 4 runs
        return ("diverged", None) if lr > 6e-3 and seed == 0 else ("ok", {1e-3: 0.5, 2e-3: 0.6, 4e-3: 0.7}.get(lr, 0.6))

    trained: list[float] = []
    monkeypatch.setattr(refine, "run_sweep", simulated(outcome, trained))
    sweep, _ = run_refine(refine_file(tmp_path, [1e-3, 2e-3]), tmp_path / "out", SweepOptions())
    assert len(sweep.runs) == len(sweep.todo) == len(sweep.results) == len(trained) == 8
    assert sweep.counts()["diverged"] == 1 and sweep.counts()["ok"] == 7


def test_refine_grows_an_arm_until_half_its_seeds_fail_and_says_why(tmp_path, monkeypatch):
    def outcome(lr, seed):  # best at 4e-3; at 8e-3 seed 0 diverges
        return ("diverged", None) if lr > 6e-3 and seed == 0 else ("ok", {1e-3: 0.5, 2e-3: 0.6, 4e-3: 0.7}.get(lr, 0.6))

    trained, lines, left = refined(tmp_path, monkeypatch, outcome, [1e-3, 2e-3])
    assert sorted(set(trained)) == [1e-3, 2e-3, 4e-3, 8e-3] and len(trained) == 8
    assert lines == [
        "refine round 1: preln model.depth=2: best rate 0.002 is at the top edge; 0 of 2 seeds not ok at its highest "
        "rate 0.002; adding 0.004",
        "refine round 2: preln model.depth=2: best rate 0.004 is at the top edge; 0 of 2 seeds not ok at its highest "
        "rate 0.004; adding 0.008",
        "refine: every best learning rate is interior and every arm's frontier bracketed (after 2 round(s))",
    ]
    assert left == []


def test_refine_stops_at_max_lr_and_at_the_round_limit(tmp_path, monkeypatch):
    def outcome(lr, seed):  # never fails; best at 4e-3
        return "ok", 0.7 if lr == 4e-3 else 0.6 + lr

    trained, lines, left = refined(tmp_path, monkeypatch, outcome, [1e-3, 2e-3], max_lr=1.0e-2)
    assert max(trained) == 8e-3  # 1.6e-2 is above the cap
    assert lines[:2] == [  # as docs/ablations.md shows them
        "refine round 1: preln model.depth=2: best rate 0.002 is at the top edge; 0 of 2 seeds not ok at its highest "
        "rate 0.002; adding 0.004",
        "refine round 2: preln model.depth=2: best rate 0.004 is at the top edge; 0 of 2 seeds not ok at its highest "
        "rate 0.004; adding 0.008"]
    assert lines[2] == ("refine: preln model.depth=2: not adding 0.016 above 0.008: above refine.max_lr 0.01 (raise it "
                        "in the ablation file's `refine:` to go further)")
    assert [c["kind"] for c in left] == ["frontier"] and "refine.max_lr 0.01" in left[0]["stopped"]
    assert lines[-1].startswith("refine: preln model.depth=2: frontier not bracketed: 0 of 2 seeds not ok at its "
                                "highest rate 0.008; not adding 0.016 above 0.008: above refine.max_lr 0.01")

    trained, lines, left = refined(tmp_path / "limit", monkeypatch, lambda lr, seed: ("ok", 0.5 + lr),
                                   [1e-3, 2e-3], max_rounds=2)
    assert sorted(set(trained)) == [1e-3, 2e-3, 4e-3, 8e-3]
    assert {c["kind"] for c in left} == {"edge", "frontier"}
    assert all("round limit (2 rounds, refine.max_rounds)" in c["stopped"] for c in left)


# ----------------------------------------------------------------------------- the `refine:` field


def test_the_refine_field_sets_the_limits_and_extends_merges_it_per_key(tmp_path):
    spec = {"name": "x", "grid": {"train.lr": [1e-3, 2e-3]}, "variants": {"preln": {}}}
    assert load_ablation(spec).refine == Refine(max_lr=1.0, max_rounds=MAX_ROUNDS)
    assert load_ablation({**spec, "refine": {"max_lr": "1e-1"}}).refine == Refine(max_lr=0.1)  # YAML 1.1's string
    assert load_ablation({**spec, "refine": None}).refine == Refine()
    (tmp_path / "parent.yaml").write_text(yaml.safe_dump({**spec, "refine": {"max_lr": 0.5, "max_rounds": 2}}))
    (tmp_path / "child.yaml").write_text("extends: parent.yaml\nrefine: {max_rounds: 6}\n")
    ablation = load_ablation(tmp_path / "child.yaml")
    assert ablation.refine == Refine(max_lr=0.5, max_rounds=6)
    assert ablation.resolved["refine"] == {"max_lr": 0.5, "max_rounds": 6}


@pytest.mark.parametrize("value, problems", [
    ({"max_lrr": 0.1},
     ["x.yaml: refine.max_lrr: unknown key (did you mean 'max_lr'?); valid keys: max_lr, max_rounds"]),
    ({"max_lr": 0, "max_rounds": 0}, [
        "x.yaml: refine.max_lr: expected a number > 0 (the highest learning rate --refine may add), got 0; "
        "e.g. `max_lr: 0.5`",
        "x.yaml: refine.max_rounds: expected an integer >= 1 (rounds of added rates), got 0; e.g. `max_rounds: 4`"]),
    ({"max_lr": ".inf", "max_rounds": 2.5}, ["refine.max_lr: expected", "refine.max_rounds: expected"]),
    ({"max_lr": True}, ["refine.max_lr: expected"]),
    ({"max_lr": 10 ** 400}, ["refine.max_lr: expected"]),  # too large for a float: it was an OverflowError
    ([0.1], ["x.yaml: refine: expected a mapping of max_lr / max_rounds, got [0.1]; "
             "e.g. `refine: {max_lr: 0.5, max_rounds: 4}`"]),
])
def test_a_bad_refine_field_is_one_line_per_problem_in_validate(tmp_path, capsys, value, problems):
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "variants": {"preln": {}}, "refine": value}))
    with pytest.raises(SpecError) as err:
        load_ablation(path)
    assert len(err.value.problems) == len(problems)
    for line, expected in zip(err.value.problems, problems):
        assert expected.replace("x.yaml", str(path)) in line
    assert main(["validate", str(path)]) == 2
    printed = capsys.readouterr().err.splitlines()
    assert len(printed) == len(problems) and all(": refine" in line for line in printed)


def test_past_edge_meets_a_4x_grid_exactly():
    """The mechanisms study's refine added 3.13e-05 beside the grid's 3.125e-05 (3 significant digits): two
    rates where one was meant, so the arm shared no rate there with the others."""
    assert past_edge([1.25e-4, 5e-4], "lowest") == 3.125e-05
    assert past_edge([3.125e-5, 1.25e-4], "lowest") == 7.8125e-06
    assert past_edge([3.2e-2, 1.28e-1], "highest") == 0.512


def test_a_rerun_finishes_an_interrupted_round_before_planning_the_next(tmp_path, monkeypatch):
    """A rerun planned from the results alone: a round stopped midway left some seeds of its new rate, and the next
    round judged the arm on them and moved on; those seeds never ran (an outside sweep review). The rounds are now
    recorded in refine.json, and a rerun finishes the recorded runs first."""
    def outcome(lr, seed):  # best at 4e-3; at 8e-3 seed 0 diverges
        return ("diverged", None) if lr > 6e-3 and seed == 0 else ("ok", {1e-3: 0.5, 2e-3: 0.6, 4e-3: 0.7}.get(lr, 0.6))

    trained: list[float] = []
    whole = simulated(outcome, trained)
    calls = []

    def stopped_in_round_one(ablation, out, options=None, report=None, notify=None):
        calls.append(len(ablation.runs))
        if len(calls) == 2:  # round 1: one of its two runs, then Ctrl-C
            sweep = whole(dataclasses.replace(ablation, runs=ablation.runs[:-1]), out)
            return dataclasses.replace(sweep, stopped="interrupted", code=130)
        return whole(ablation, out)

    monkeypatch.setattr(refine, "run_sweep", stopped_in_round_one)
    path, out = refine_file(tmp_path, [1e-3, 2e-3]), tmp_path / "out"
    sweep, _ = run_refine(path, out, SweepOptions())
    assert sweep.stopped == "interrupted" and sorted(trained) == [1e-3, 1e-3, 2e-3, 2e-3, 4e-3]
    assert json.loads((out / refine.REFINED).read_text()) == [
        [{"variant": "preln", "keys": {"model.depth": 2}, "from": 2e-3, "new": 4e-3}]]

    monkeypatch.setattr(refine, "run_sweep", whole)
    lines: list[str] = []
    sweep, left = run_refine(path, out, SweepOptions(), notify=lines.append)
    assert sorted(trained) == [1e-3, 1e-3, 2e-3, 2e-3, 4e-3, 4e-3, 8e-3, 8e-3]  # the second 4e-3 seed, then round 2
    assert lines[0] == f"refine: 1 round(s) recorded in {out / refine.REFINED}; their runs are part of this sweep"
    assert lines[1].startswith("refine round 2: preln model.depth=2: best rate 0.004 is at the top edge")
    assert left == [] and len(json.loads((out / refine.REFINED).read_text())) == 2


@pytest.mark.parametrize("content", ["{", "[[{\"variant\": \"preln\"}]]", "[1]"])
def test_a_damaged_refine_record_is_one_line_naming_it(tmp_path, content):
    (tmp_path / refine.REFINED).write_text(content)
    with pytest.raises(RunnerError, match=r"refine\.json: .*; remove it to refine from the results alone"):
        refine.recorded(tmp_path)


def test_refine_runs_are_in_run_ids_and_suite_status(tmp_path, capsys):
    """`suite status` and run_ids.json listed the ablation file's runs only, so a --refine folder looked finished
    (or, to `suite analyze`, short) while its added rates trained."""
    from suite.sweep.status import sweep_status

    spec = yaml.safe_load((ROOT / "ablations" / "smoke.yaml").read_text())
    spec.update(grid={"train.lr": [1e-3, 2e-3]}, variants={"preln": {"model.residual": "preln"}}, seeds=1,
                refine={"max_rounds": 1})
    spec["base"]["model"]["depth"] = 1
    path, out = tmp_path / "r.yaml", tmp_path / "out"
    path.write_text(yaml.safe_dump(spec))
    assert main(["run", str(path), "--out", str(out), "--refine", "--device", "cpu", "--threads", "1"]) == 0
    ids = json.loads((out / "run_ids.json").read_text())
    assert len(json.loads((out / refine.REFINED).read_text())) == 1
    assert len(ids) > 2 and set(ids) == {p.name for p in (out / "runs").iterdir()}  # the file's 2, and round 1's
    status = sweep_status(out)
    assert sorted(v.folder for v in status.runs) == sorted(ids) and {v.state for v in status.runs} == {"done"}
