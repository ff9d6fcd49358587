"""`suite run FILE --until-decided`: seeds in rounds, only the primary comparison's cells after the first,
the design fixed before the first look."""

from __future__ import annotations

import json

import yaml

from suite.analysis.primary import look
from suite.cli import main
from test_api import TINY as API_TINY

TINY = {**API_TINY, "name": "until", "seeds": 2,  # the notebook test's seconds-long runs, a third scheme
        "variants": {**API_TINY["variants"], "rezero": {"model.residual": "rezero"}},
        "primary": {"scheme": "layerscale", "baseline": "preln", "endpoint": "score", "margin": 5}}
ARGS = ["--device", "cpu", "--workers", "1", "--threads", "1"]


def test_rounds_of_seeds_until_the_cap_with_the_design_recorded(tmp_path, capsys):
    path = tmp_path / "until.yaml"
    path.write_text(yaml.safe_dump(TINY))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--until-decided", "--max-seeds", "4", *ARGS]) == 0
    printed = capsys.readouterr().out
    design = json.loads((out / "sequential.json").read_text())
    assert design["rounds"] == [2, 4] and design["seeds"] == [0, 1, 2, 3]
    looks = design["looks"]
    assert [x["seeds"] for x in looks][0] == 2 and "look 1 of 2 at 2 seeds" in printed
    summaries = [json.loads(p.read_text()) for p in (out / "runs").glob("*/summary.json")]
    by = {(s["variant"], s["seed"]) for s in summaries}
    assert {("rezero", 0), ("rezero", 1)} <= by and ("rezero", 2) not in by  # later rounds: primary cells only
    if len(looks) == 2:  # undecided at 2 seeds (3 steps rarely separate two schemes): the cap's round ran
        assert {("layerscale", 3), ("preln", 3)} <= by and "look 2 of 2 at 4 seeds" in printed
    assert "Primary comparison" in printed and "O'Brien-Fleming" in printed
    findings = (out / "findings.md").exists()  # `suite analyze` is separate: nothing written yet
    assert not findings
    # the looks of a design are fixed before the first: another cap for this folder is refused
    assert main(["run", str(path), "--out", str(out), "--until-decided", "--max-seeds", "6", *ARGS]) == 2
    assert "planned looks at [2, 4] seeds, not [2, 4, 6]" in capsys.readouterr().err


def test_until_decided_needs_a_primary_and_a_sensible_cap(tmp_path, capsys):
    path = tmp_path / "none.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in TINY.items() if k != "primary"}))
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--until-decided", *ARGS]) == 2
    assert "primary: --until-decided needs the question it decides" in capsys.readouterr().err
    path.write_text(yaml.safe_dump(TINY))
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--until-decided", "--max-seeds", "1", *ARGS]) == 2
    assert "--max-seeds 1" in capsys.readouterr().err
    # a cap bounded like a grid (--max-runs): 10^12 seeds was a MemoryError
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--until-decided", "--max-seeds", "1000000000000",
                 *ARGS]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "more than the limit of 100,000; lower --max-seeds" in err
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--max-seeds", "6", *ARGS]) == 2
    assert "--max-seeds: only with --until-decided" in capsys.readouterr().err
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--until-decided", "--only", "variant=preln",
                 *ARGS]) == 2
    assert "drop --only" in capsys.readouterr().err


class _FakeSweep:
    """What run_until_decided reads of a sweep."""

    stopped = None


def test_errored_runs_are_run_again_before_a_look_and_each_look_is_recorded(tmp_path, monkeypatch):
    """A run of the compared cells errors; before the look it is run once more (retry_errors, only the
    compared cells), so the look has every pair. A run that errors again is left out, and the look is
    tested at the pairs it has (sequential.json records them)."""
    from suite.sweep import until
    from suite.sweep.sweep import SweepOptions

    calls, flaky = [], {("layerscale", 1): 1, ("preln", 4): 2}  # errors before succeeding (2: never, here)

    def fake_sweep(raw, out, opts, report=None, notify=None):
        calls.append((list(raw["seeds"]), list(opts.only), opts.retry_errors))
        for variant in raw["variants"]:
            if opts.only and not any(f"variant={variant}" == c for c in opts.only):
                continue
            for seed in raw["seeds"]:
                path = out / "runs" / f"{variant}-{seed}" / "summary.json"
                if path.exists() and not (opts.retry_errors and json.loads(path.read_text())["status"] == "error"):
                    continue
                left = flaky.get((variant, seed), 0)
                flaky[(variant, seed)] = left - 1
                path.parent.mkdir(parents=True, exist_ok=True)
                acc = 0.6 + 0.01 * seed + (0.05 if variant == "layerscale" else 0.0) * (seed % 2)
                path.write_text(json.dumps({
                    "schema": 1, "run_id": f"{variant}-{seed}", "ablation": "until", "variant": variant,
                    "seed": seed, "model.depth": 1, "model.num_classes": 4, "status": "error" if left > 0 else "ok",
                    "test_acc": None if left > 0 else acc, "val_acc": None if left > 0 else acc}))
        return _FakeSweep()

    monkeypatch.setattr(until, "run_sweep", fake_sweep)
    path = tmp_path / "until.yaml"
    path.write_text(yaml.safe_dump({**TINY, "seeds": 3}))
    lines: list[str] = []
    until.run_until_decided(path, tmp_path / "out", SweepOptions(device="cpu"), 6, look, notify=lines.append)
    cells = ["variant=layerscale", "variant=preln"]
    assert calls[:3] == [([0, 1, 2], [], False), ([0, 1, 2], cells, True), ([0, 1, 2, 3, 4, 5], cells, False)]
    assert "look 1: 1 run of the compared cells errored; running it once more before the look" in lines
    design = json.loads((tmp_path / "out" / "sequential.json").read_text())
    # look 1 (differences 0, 5, 0 points) is undecided; look 2 has 5 pairs: (preln, 4) errored twice
    assert [(x["seeds"], x["pairs"], x["decision"]) for x in design["looks"]][0] == (3, 3, "undecided")
    assert calls[3:] == [([0, 1, 2, 3, 4, 5], cells, True)] and design["looks"][1]["pairs"] == 5
    assert design["looks"][1]["p"] is not None  # tested at the 5 pairs it has, not skipped
