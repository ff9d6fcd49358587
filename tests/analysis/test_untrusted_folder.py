"""A results folder travels between people: what an outside review planted in one and saw come out (issue 51's rule:
escaped by construction, one line for bad input, nothing read from outside the folder, no row lost)."""

from __future__ import annotations

import json
import shutil
import warnings

import pandas as pd
import pytest

from suite.analysis.analyze import analyze
from suite.results import AnalysisError, AnalysisWarning
from suite.store import neutral, unneutral

from test_analyze import write_run


def quiet(*args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AnalysisWarning)
        return analyze(*args, **kw)


def folder(root, variant: str = "layerscale", **kw):
    for seed in range(4):
        write_run(root, "preln", 6, seed, acc=0.5 + 0.01 * seed, **kw)
        write_run(root, variant, 6, seed, acc=0.8 + 0.01 * seed, **kw)
    return root


def test_a_folder_name_with_line_breaks_stays_inside_the_latex_comment(tmp_path):
    """The title (the folder's name where no ablation is named) went raw into `% Analysis: ...`: a newline ended the
    comment and the next line, e.g. \\write18{...}, was live LaTeX in every tables/*.tex."""
    root = folder(tmp_path / "res\n\\immediate\\write18{touch PWNED}\n%", ablation=None)
    quiet(root, figures=False)
    tex = (root / "tables" / "summary.tex").read_text().splitlines()
    assert tex[0].startswith("% Analysis: res \\textbackslash{}immediate") and tex[1].startswith("% ")
    assert not any(line.lstrip().startswith("\\immediate") for line in tex)
    assert (root / "findings.md").read_text().splitlines()[0].count("write18") == 1


@pytest.mark.parametrize("value", ["+ls", "-x", "=1", "@a", "'+ls", "''=q", "'plain", "plain"])
def test_the_csv_formula_guard_reads_back_as_it_was(value):
    assert unneutral(neutral(value)) == value


def test_a_variant_that_starts_like_a_formula_keeps_its_name_and_its_answer_on_reanalysis(tmp_path):
    """`+ls` was written `'+ls` and read back so: the second analysis renamed the variant and found no runs of it."""
    root = folder(tmp_path / "demo", variant="+ls")
    first = quiet(root, figures=False)
    shutil.rmtree(root / "runs")
    again = quiet(root, figures=False)
    assert set(again["variant"]) == set(first["variant"]) == {"preln", "+ls"}
    assert ",'+ls," in (root / "runs.csv").read_text()  # still guarded in the file


def test_a_huge_text_field_is_cut_so_runs_csv_reads_back(tmp_path):
    """An error message over 128 KiB went into runs.csv whole; every later analyze and report refused the file."""
    root = folder(tmp_path / "demo")
    write_run(root, "preln", 6, 9, status="error", extra={"error": "E" * 200_000})
    quiet(root, figures=False)
    quiet(root, figures=False)  # reads its own runs.csv back
    cell = pd.read_csv(root / "runs.csv").set_index("seed").loc[9, "error"]
    assert len(cell) < 101_000 and cell.endswith("[cut at 100,000 of 200,000 characters]")


def test_names_that_are_not_one_printable_line_are_skipped_not_rendered(tmp_path):
    """U+2028 is a line break to str.splitlines (the report forged a heading and a table row from it); a bidi
    override reorders text; a number or a list is no name (an empty or numeric variant gave a traceback)."""
    root = folder(tmp_path / "demo")
    write_run(root, "ls\u2028# FAKE", 6, 5)
    write_run(root, "ls\u202eevil", 6, 6)
    write_run(root, "x" * 300, 6, 7)
    with pytest.warns(AnalysisWarning, match="not one printable line"):
        frame = analyze(root, figures=False)
    assert set(frame["variant"]) == {"preln", "layerscale"}
    numeric = tmp_path / "numeric"
    folder(numeric)
    path = next((numeric / "runs").glob("laye*")) / "summary.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "variant": 5}))
    with pytest.warns(AnalysisWarning, match="'variant' is '5', not text"):
        analyze(numeric, figures=False)


def test_an_empty_variant_cell_is_the_runs_scheme_as_in_its_summary(tmp_path):
    root = folder(tmp_path / "demo")
    quiet(root, figures=False)
    shutil.rmtree(root / "runs")
    rows = pd.read_csv(root / "runs.csv", dtype=str, keep_default_na=False)
    rows.loc[rows["variant"] == "preln", "variant"] = ""
    rows.to_csv(root / "runs.csv", index=False)
    assert set(quiet(root, figures=False)["variant"]) == {"preln", "layerscale"}


def test_a_row_without_a_run_id_is_not_dropped_without_force(tmp_path):
    root = folder(tmp_path / "demo")
    quiet(root, figures=False)
    shutil.rmtree(root / "runs")
    rows = pd.read_csv(root / "runs.csv", dtype=str, keep_default_na=False)
    rows.loc[0, "run_id"] = ""
    rows.to_csv(root / "runs.csv", index=False)
    with pytest.raises(AnalysisError, match=r"line 2 \(no run_id\)"):
        quiet(root, figures=False)


def test_a_run_dir_cell_cannot_add_a_line_to_an_error(tmp_path, capsys):
    from suite.cli import main

    root = folder(tmp_path / "demo")
    quiet(root, figures=False)
    rows = pd.read_csv(root / "runs.csv", dtype=str, keep_default_na=False)
    rows.loc[1, "run_id"] = rows.loc[0, "run_id"]
    rows.loc[1, "run_dir"] = "runs/a\nerror: FAKE\x1b[31m"
    rows.to_csv(root / "runs.csv", index=False)
    shutil.rmtree(root / "runs")
    assert main(["analyze", str(root), "--no-figures"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "appears twice" in err and "\x1b" not in err


def test_a_linked_summary_is_not_read_through(tmp_path):
    """A summary.json linked to a file outside the folder brought that file's text into runs.csv and the report."""
    root = folder(tmp_path / "demo")
    outside = tmp_path / "outside.json"
    victim = next((root / "runs").glob("laye*")) / "summary.json"
    outside.write_text(json.dumps({**json.loads(victim.read_text()), "error": "OUTSIDE-SECRET", "status": "error"}))
    victim.unlink()
    victim.symlink_to(outside)
    with pytest.warns(AnalysisWarning, match="is a symbolic link"):
        analyze(root, figures=False)
    assert "OUTSIDE-SECRET" not in (root / "runs.csv").read_text()
