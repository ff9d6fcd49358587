"""Small CLI errors that named the wrong fix or no flag (an outside review of the commands around `suite run`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from suite.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_a_folder_swallowed_by_watch_is_told_to_go_first(capsys, tmp_path):
    """`suite status --watch DIR` read DIR as --watch's number and said only 'pass a number'."""
    with pytest.raises(SystemExit) as exited:
        main(["status", "--watch", str(tmp_path)])
    assert exited.value.code == 2 and f"or put '{tmp_path}' before --watch" in capsys.readouterr().err


def test_a_folder_where_the_report_goes_is_named_as_such(capsys, tmp_path):
    """It said 'check the folder's permissions' when a folder named report.html was in the way."""
    out = tmp_path / "default"
    shutil.copytree(ROOT / "results" / "default", out)
    (out / "report.html").unlink(missing_ok=True)
    (out / "report.html").mkdir()
    assert main(["report", str(out)]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]  # a clone warns too
    assert len(errors) == 1 and "a folder of that name is in the way" in errors[0]


def test_bench_names_the_flag_of_a_bad_shape_or_arm(capsys, tmp_path):
    assert main(["bench", "--tokens", "64", "--rounds", "2", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: --tokens 64: ")
    assert main(["bench", "--schemes", "bogus", "--rounds", "2", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: --schemes: unknown bench arm 'bogus'")


def test_propagates_help_names_its_own_example_and_no_packs(capsys):
    with pytest.raises(SystemExit):
        main(["propagate", "--help"])
    text = capsys.readouterr().out
    assert "ablations/propagation.yaml" in text and "ablations/default.yaml" not in text and "pack" not in text


def test_bench_refuses_a_flag_its_mode_does_not_read(capsys, tmp_path):
    """`--throughput --schemes rezero --depth 48` measured the default arms and shape; `--pack-phases 4 --compile` ran
    eager; all without a word."""
    for argv, said in ((["--throughput", "--schemes", "rezero"], "--schemes: --throughput does not read it"),
                       (["--pack-phases", "4", "--throughput"], "--throughput and --pack-phases: two measurements"),
                       (["--pack-phases", "4", "--compile"], "--compile: --pack-phases does not read it"),
                       (["--runs", "3"], "--runs: the overhead measurement does not read it")):
        assert main(["bench", *argv, "--out", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and said in err, argv
