"""`suite run FILE --until-decided`: seeds in rounds, only the primary comparison's cells after the first,
the design fixed before the first look."""

from __future__ import annotations

import json

import yaml

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
