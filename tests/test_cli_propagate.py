"""`suite propagate --help` lists only the options a propagation sweep honours; its folder is analysed and reported."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from suite.cli import main
from suite.cli import propagate, run as run_cli


def flags(command: str, capsys) -> set[str]:
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", capsys.readouterr().out))


def test_help_lists_the_options_of_suite_run_less_those_only_training_honours(capsys):
    ours, theirs = flags("propagate", capsys), flags("run", capsys)
    assert set(propagate.TRAINING_ONLY) <= theirs  # each one is a `suite run` option today ...
    assert not ours & set(propagate.TRAINING_ONLY)  # ... that propagate does not offer
    assert ours == theirs - set(propagate.TRAINING_ONLY)


@pytest.mark.parametrize("option", [["--pack", "2"], ["--refine"]])
def test_an_option_propagate_would_ignore_is_refused_in_one_line(option, capsys):
    with pytest.raises(SystemExit) as done:
        main(["propagate", "ablations/propagation.yaml", *option])
    assert done.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: suite propagate: unrecognized arguments: {' '.join(option)} (see `suite propagate --help`)"


def test_what_suite_run_reads_of_the_dropped_options_is_their_default():
    parser = argparse.ArgumentParser()
    run_cli.add_arguments(parser)
    defaults = parser.parse_args(["f.yaml"])
    for flag, (dest, default) in propagate.TRAINING_ONLY.items():
        assert getattr(defaults, dest) == default, flag


def test_a_propagation_folder_is_analysed_and_reported(tmp_path):
    """`suite report` on a `suite propagate` folder was `KeyError: 'has_baseline'` (its findings are a training
    analysis's)."""
    smoke = Path(__file__).resolve().parents[1] / "ablations" / "smoke.yaml"
    out = tmp_path / "prop"
    assert main(["propagate", str(smoke), "--out", str(out), "--device", "cpu"]) == 0
    assert main(["analyze", str(out), "--no-figures"]) == 0
    assert main(["report", str(out)]) == 0
    assert "Signal propagation" in (out / "report.html").read_text()
