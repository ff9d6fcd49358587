"""`suite report`: one self-contained HTML page of an analysed folder, checked as text and in a real
headless Chromium (loads with no console error, every figure decodes, the answer and a figure are in
the first screen)."""

import importlib.util
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from suite.analysis.analyze import analyze
from suite.analysis.report import sparkline_points, write_report
from suite.cli import main

from test_analyze import write_run
from test_primary import DECLARED, folder

SCORES = {("layerscale", 0.001): [0.90, 0.91, 0.92], ("layerscale", 0.01): [0.5, 0.52, 0.51],
          ("preln", 0.001): [0.70, 0.72, 0.71], ("preln", 0.01): [0.3, 0.31, 0.29]}


@pytest.fixture(scope="module")
def analysed(tmp_path_factory) -> Path:
    """An analysed folder with a declared primary comparison, one run that errored with HTML in its
    message, and one run folder with its config.yaml."""
    root = folder(tmp_path_factory.mktemp("report") / "demo", DECLARED, SCORES)
    bad = write_run(root, "preln", 6, 7, status="error", lr=0.001)
    summary = (bad / "summary.json").read_text().replace("RuntimeError: out of memory", "ValueError: <script>x</script>")
    (bad / "summary.json").write_text(summary)
    first = sorted((root / "runs").iterdir())[0]
    (first / "config.yaml").write_text("model:\n  depth: 12\n")
    with pytest.warns(Warning):
        analyze(root)
    return root


def test_the_page_answers_first_and_embeds_everything(analysed):
    page = write_report(analysed).read_text()
    answer = page.index('id="answer"')
    assert "<strong>Primary comparison</strong>" in page[answer:page.index('id="figures"')]
    assert (page.index('id="design"') < answer < page.index("<img") < page.index('id="tables"')
            < page.index('id="findings-exploratory"') < page.index('id="runs"'))
    toc = page[page.index("<nav>"):page.index("</nav>")]
    assert all(f'href="#{part}"' in toc for part in ("design", "answer", "figures", "tables", "findings-exploratory",
                                                     "runs"))
    n_png = len(list((analysed / "figures").glob("*.png")))
    assert n_png >= 2 and page.count('src="data:image/png;base64,') == n_png
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing fetched at view time
    assert "<script" not in page and "&lt;script&gt;x&lt;/script&gt;" in page  # the error text is escaped
    first = sorted((analysed / "runs").iterdir())[0].name
    assert f'<a href="runs/{first}/config.yaml">{first}</a>' in page
    assert page.count("<polyline") == len(pd.read_csv(analysed / "runs.csv"))  # every run logged its loss
    assert "25 runs (24 ok, 0 diverged, 0 failed, 1 error)" in page


def test_a_folder_without_a_primary_says_it_decides_nothing(tmp_path):
    root = tmp_path / "demo"
    for seed in range(2):
        write_run(root, "preln", 6, seed)
        write_run(root, "layerscale", 6, seed, acc=0.95)
    analyze(root, figures=False)
    page = write_report(root).read_text()
    assert "No primary comparison is declared" in page[page.index('id="answer"'):page.index('</section>', page.index('id="answer"'))]


def test_an_incomplete_sweep_is_flagged(analysed, tmp_path):
    root = shutil.copytree(analysed, tmp_path / "copy")
    import csv

    ran = [row["run_id"] for row in csv.DictReader((root / "runs.csv").open())]
    (root / "run_ids.json").write_text(json.dumps(ran + [f"planned{i}" for i in range(40 - len(ran))]))
    assert f"Incomplete sweep: {len(ran)} of 40 runs" in write_report(root).read_text()


def test_before_analyze_and_bad_folders_are_one_line_exit_2(tmp_path, capsys):
    write_run(tmp_path / "raw", "preln", 6, 0)
    assert main(["report", str(tmp_path / "raw")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "runs.csv: missing; run `suite analyze" in err
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_sparkline_points_fill_the_box_and_skip_non_finite():
    pts = sparkline_points([(0, 2.0), (10, float("nan")), (20, 1.0), (40, 0.0)], width=100, height=10)
    assert pts == "0.0,0.0 50.0,5.0 100.0,10.0"
    assert sparkline_points([(0, 1.0)]) == ""
    long = sparkline_points([(s, 1.0 / (1 + s)) for s in range(1000)])
    assert len(long.split()) <= 201 and long.split()[-1].startswith("120.0,")


def _screenshot_script():
    spec = importlib.util.spec_from_file_location("report_screenshot", Path(__file__).parents[2] / "scripts" /
                                                  "report_screenshot.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SHOT = _screenshot_script()


@pytest.mark.skipif(SHOT.chromium() is None, reason="no Chromium here (.ci/run installs Debian's `chromium`)")
def test_the_page_loads_in_headless_chromium(analysed, tmp_path):
    pytest.importorskip("playwright.sync_api")
    seen = SHOT.open_page(write_report(analysed), tmp_path / "report.png")
    assert seen["problems"] == []
    assert seen["decoded"] and all(seen["decoded"])
    assert "Primary comparison" in seen["answer_text"] and "layerscale scores higher than preln" in seen["answer_text"]
    height = SHOT.VIEWPORT["height"]
    assert seen["answer"]["y"] < height and seen["figure"]["y"] + seen["figure"]["height"] / 2 < height  # first screen
    assert (tmp_path / "report.png").stat().st_size > 10_000


def test_a_broken_page_is_caught_by_the_browser_check(tmp_path):
    """The check above can fail: a figure that does not decode and a script error are both reported."""
    if SHOT.chromium() is None:
        pytest.skip("no Chromium here (.ci/run installs Debian's `chromium`)")
    pytest.importorskip("playwright.sync_api")
    page = tmp_path / "report.html"
    page.write_text('<html><body><section id="answer">x</section><figure><img src="data:image/png;base64,AAAA">'
                    "</figure><script>null.x</script></body></html>")
    seen = SHOT.open_page(page, None)
    assert seen["decoded"] == [False] and any("null" in p for p in seen["problems"])


def test_a_folder_it_cannot_write_is_one_line_exit_2(analysed, monkeypatch, capsys):
    from suite.analysis import markup

    def refuse(text, path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(markup, "write_text", refuse)
    assert main(["report", str(analysed)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot write" in err and "Permission denied" in err


def test_the_report_renders_what_analyze_wrote_and_computes_nothing(analysed, tmp_path, monkeypatch):
    """`suite report` reads analysis.json, runs.csv and figures/: with every analysis function gone it writes
    the same page."""
    from suite.analysis import analyze as analyze_module
    from suite.analysis import findings as findings_module

    root = shutil.copytree(analysed, tmp_path / "copy")
    before = write_report(root).read_text()

    def computed(*args, **kw):
        raise AssertionError("the report recomputed the analysis")

    for module, name in ((analyze_module, "study"), (findings_module, "parts"), (findings_module, "answer_block")):
        monkeypatch.setattr(module, name, computed)
    assert write_report(root).read_text() == before


@pytest.mark.parametrize("damage", ["{", "[]", '{"title": 3}', "missing"])
def test_a_damaged_or_missing_analysis_json_is_one_line_exit_2(analysed, tmp_path, capsys, damage):
    root = shutil.copytree(analysed, tmp_path / "copy")
    if damage == "missing":
        (root / "analysis.json").unlink()
    else:
        (root / "analysis.json").write_text(damage)
    assert main(["report", str(root)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "analysis.json" in err and "run `suite analyze" in err


def test_a_registered_table_is_written_rendered_and_linked_with_no_other_change(analysed, tmp_path, monkeypatch):
    """A new table kind is one registry entry and its builder: analyze writes its files, the report shows it and
    findings.md links it."""
    from suite.analysis import products
    from suite.analysis.markup import Table

    def counts(frame, keys, baseline, flavour):
        rows = [(str(v), [str(int(n))]) for v, n in frame.groupby("variant")["acc_n"].sum().items()]
        return [Table("Runs per scheme", "tab:dummy", "scheme", ["runs"], rows, notes=["counted from the summary"])]

    monkeypatch.setitem(products.TABLES, "dummy", products.TableKind(
        "dummy", "Runs per scheme (a dummy)", "how many runs each scheme has", "intervals-and-tests",
        lambda inputs, frames: frames["summary"], (counts,)))
    root = shutil.copytree(analysed, tmp_path / "copy")
    analyze(root, figures=False)
    assert {p.name for p in (root / "tables").glob("dummy.*")} == {"dummy.md", "dummy.tex", "dummy.csv"}
    page = write_report(root).read_text()
    assert 'id="tab-dummy"' in page and "Runs per scheme (a dummy)" in page and "counted from the summary" in page
    assert "tables/dummy.md" in (root / "findings.md").read_text()
