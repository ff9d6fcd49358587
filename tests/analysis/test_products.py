"""One registry of analysis products (suite/analysis/products.py), the report built from the analysis
itself, runs.csv as the source of truth for a folder without run folders, and the report's readability
and hostile-input rules of issue 40 (legends once, titles from keys, a table of contents, bounded
sparklines, damaged CSV cells in one line, a non-ASCII path under the C locale)."""

import os
import re
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from suite.analysis import products
from suite.analysis.analyze import analyze, study
from suite.results import AnalysisError, AnalysisWarning, run_records
from suite.analysis.report import MAX_CURVE_POINTS, SPARK_READ_ALL, _sparkline, write_report

from test_analyze import write_run
from test_primary import DECLARED, folder

REPO = Path(__file__).resolve().parents[2]
SCORES = {("layerscale", 0.001): [0.90, 0.91, 0.92], ("layerscale", 0.01): [0.5, 0.52, 0.51],
          ("preln", 0.001): [0.70, 0.72, 0.71], ("preln", 0.01): [0.3, 0.31, 0.29]}


@pytest.fixture(scope="module")
def analysed(tmp_path_factory) -> Path:
    root = folder(tmp_path_factory.mktemp("products") / "demo", DECLARED, SCORES)
    analyze(root)
    return root


def _outputs(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in [root / "findings.md", *sorted((root / "tables").iterdir())]}


def test_runs_csv_alone_reproduces_every_table_and_the_findings(analysed, tmp_path):
    """A folder shared without its run folders (the committed results/default) is analysed from its
    runs.csv to the same bytes: types come back as the summaries held them."""
    root = shutil.copytree(analysed, tmp_path / "shared")
    shutil.rmtree(root / "runs")
    before = _outputs(root)
    runs = run_records(root, from_csv=True)
    assert len(runs) == len(run_records(analysed))
    first = runs[0]
    assert isinstance(first["seed"], int) and isinstance(first["train.betas"], list)
    assert isinstance(first["run_id"], str) and first["diverged_step"] is None
    with pytest.raises(AnalysisError, match="no usable summary.json"):
        run_records(root)  # the notebook loader reads run folders only
    analyze(root, figures=False)
    assert _outputs(root) == before
    assert write_report(root).is_file()


def test_every_product_analyze_writes_is_in_the_registry(analysed):
    stems = {p.stem for p in (analysed / "tables").iterdir()}
    assert stems <= set(products.TABLES)
    for path in (analysed / "figures").glob("*.png"):
        kind, _ = products.figure_kind(path.stem, None)
        assert kind is not None, path.name


def test_every_registry_entry_points_at_a_heading_that_exists():
    def anchors(page: Path) -> set[str]:
        heads = re.findall(r"^#+ (.+)$", page.read_text(), flags=re.M)
        return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}

    entries = [*products.TABLES.values(), *products.FIGURES.values(), *products.FINDINGS.values()]
    for entry in entries:
        page, _, anchor = products.doc_link(entry.anchor).partition("#")
        assert anchor in anchors(REPO / page), f"{entry.name}: {page}#{anchor}"


def test_the_page_has_contents_the_design_and_each_legend_once(analysed):
    page = write_report(analysed).read_text()
    toc = page[page.index("<nav>"):page.index("</nav>")]
    for target in re.findall(r'href="#([^"]+)"', toc):
        assert f'id="{target}"' in page
    design = page[page.index('id="design"'):page.index('id="answer"')]
    assert "model.residual = layerscale" in design or "layerscale" in design
    # the score tables come one per learning rate; their legend is printed once
    n_tables = page.count("Accuracy and stability (train.lr")
    assert n_tables >= 2
    assert page.count("Cell: the score, the mean test score") == 1
    assert page.count("How to read these tables") == len(re.findall(r'<section id="tab-', page))


def test_figure_titles_come_from_the_grouping_keys(analysed):
    page = write_report(analysed).read_text()
    captions = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<figcaption>(.*?)</figcaption>", page, flags=re.S)]
    assert any(c.startswith("train.lr = 0.001") for c in captions)
    assert not any("-train.lr-" in c for c in captions)


def test_vs_depth_figures_need_two_depths(tmp_path):
    one = tmp_path / "one"
    for seed in range(2):
        for lr in (1e-3, 1e-2):
            write_run(one, "preln", 12, seed, lr=lr)
            write_run(one, "layerscale", 12, seed, acc=0.95, lr=lr)
    analyze(one)
    assert not [p for p in (one / "figures").glob("*vs_depth*")]
    two = tmp_path / "two"
    for depth in (6, 12):
        for seed in range(2):
            write_run(two, "preln", depth, seed)
            write_run(two, "layerscale", depth, seed, acc=0.95)
    analyze(two)
    assert list((two / "figures").glob("accuracy_vs_depth*.png"))


def test_log_axes_label_no_minor_tick():
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from suite.analysis.figures import readable_log_ticks

    fig, ax = plt.subplots()
    ax.plot([3e-3, 4.5e-3], [1, 2])
    ax.set_xscale("log")
    fig.canvas.draw()
    readable_log_ticks(fig)
    fig.canvas.draw()
    minor = [t.get_text() for t in ax.get_xticklabels(minor=True)]
    major = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    plt.close(fig)
    assert all(m == "" for m in minor) and major and all("10^" not in m and "times" not in m for m in major)


def test_a_sparkline_of_a_huge_metrics_file_reads_a_bounded_sample(tmp_path):
    line = ('{"kind": "train", "step": %d, "loss": %.4f, "blocks": [' + ", ".join(['{"block": 0}'] * 60) + "]}\n")
    with open(tmp_path / "metrics.jsonl", "w") as f:
        step = 0
        while f.tell() < 3 * SPARK_READ_ALL:
            f.write(line % (step, 2.3 / (1 + step / 100)))
            step += 1
    tracemalloc.start()
    points = _sparkline(tmp_path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert 20 <= len(points.split()) <= MAX_CURVE_POINTS + 1
    assert peak < SPARK_READ_ALL / 2  # a sample, not the file
    ys = [float(p.split(",")[1]) for p in points.split()]
    assert ys[0] < ys[-1]  # the loss falls: y grows down


def test_damaged_runs_csv_cells_are_one_warning_each(analysed, tmp_path):
    root = shutil.copytree(analysed, tmp_path / "shared")
    shutil.rmtree(root / "runs")
    lines = (root / "runs.csv").read_text().splitlines()
    head = lines[0].split(",")
    for i, key, bad in ((1, "test_acc", "abc"), (2, "test_acc", "inf"), (3, "step_time_ms", "1e308"),
                        (4, "step_time_ms", "-2")):
        cells = lines[i].split(",")
        cells[head.index(key)] = bad
        lines[i] = ",".join(cells)
    (root / "runs.csv").write_text("\n".join(lines) + "\n")
    with pytest.warns(AnalysisWarning) as seen:
        runs = run_records(root, from_csv=True)
    said = [str(w.message) for w in seen]
    assert any("line 2: skipped: 'test_acc' is 'abc', not a number" in s for s in said)
    assert any("line 3: skipped: 'test_acc' is inf, not a finite number" in s for s in said)
    # finite, but two of them would average to inf in the tables (printed, with numpy's overflow warning)
    assert any("line 4: skipped: 'step_time_ms' is 1e+308, not from 0 to 1e+15" in s for s in said)
    assert any("line 5: skipped: 'step_time_ms' is -2, not from 0 to 1e+15" in s for s in said)
    assert len(runs) == len(lines) - 5


def test_the_report_of_a_non_ascii_folder_under_the_c_locale(analysed, tmp_path):
    root = shutil.copytree(analysed, tmp_path / "résultats-α")
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONIOENCODING": "", "PYTHONUTF8": "0"}
    done = subprocess.run([sys.executable, "-m", "suite", "report", str(root)], capture_output=True, env=env,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert "résultats-α" in (root / "report.html").read_text(encoding="utf-8")


def test_study_is_what_analyze_wrote(analysed):
    result = study(analysed)
    assert result.title == "demo" and result.baseline == "preln"
    assert {k for k, f in result.frames.items() if f is not None and not f.empty} >= {"summary", "lr"}
    assert result.answer is not None
    assert np.isfinite(result.summary["acc_mean"]).any()


def test_gamma_is_kept_at_log_spaced_steps():
    from suite.analysis.gamma import log_steps

    assert log_steps(list(range(0, 161, 10))) == [0, 10, 20, 30, 60, 100, 160]
    assert log_steps([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]) == [1, 2, 3, 6, 10]
    assert log_steps([]) == []


def test_gamma_trajectories_are_a_csv_product_read_back_without_run_folders(tmp_path):
    root = tmp_path / "g"
    for seed in range(2):
        write_run(root, "preln", 4, seed)
        write_run(root, "layerscale", 4, seed, scales=True, steps=100)
    analyze(root, figures=False)
    table = (root / "tables" / "gamma.csv").read_text()
    assert not (root / "tables" / "gamma.md").exists()  # too long to typeset
    import pandas as pd

    frame = pd.read_csv(root / "tables" / "gamma.csv")
    assert set(frame["variant"]) == {"layerscale"} and set(frame["block"]) == {0, 1, 2, 3}
    assert sorted(set(frame["step"])) == [0, 10, 20, 30, 60, 100] and (frame["n_runs"] == 2).all()
    # write_run's scale: 1e-5 (1 + step) (1 + block), the same for both seeds
    row = frame[(frame["step"] == 60) & (frame["block"] == 2)].iloc[0]
    assert row["scale_mean"] == pytest.approx(1e-5 * 61 * 3)
    shutil.rmtree(root / "runs")
    analyze(root, figures=False)
    assert (root / "tables" / "gamma.csv").read_text() == table


def test_packed_and_solo_runs_of_one_cell_are_not_pooled(tmp_path):
    import json

    from suite.grouping import group_keys

    root = tmp_path / "p"
    for seed in range(2):
        write_run(root, "preln", 6, seed)
        packed = write_run(root, "preln", 6, seed + 10, acc=0.5)
        summary = json.loads((packed / "summary.json").read_text())
        (packed / "summary.json").write_text(json.dumps({**summary, "packed": True, "pack_size": 2}))
    runs = run_records(root)
    assert group_keys(runs) == ["variant", "model.depth", "packed"]
    assert sorted({r["packed"] for r in runs}) == [False, True]
    assert group_keys([r for r in runs if not r["packed"]]) == ["variant", "model.depth"]
    for run in (root / "runs").iterdir():  # no packed run at all: nothing added to the summaries
        if json.loads((run / "summary.json").read_text()).get("packed"):
            shutil.rmtree(run)
    assert all("packed" not in r for r in run_records(root))
