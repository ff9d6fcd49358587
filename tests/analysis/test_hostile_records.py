"""Records that are valid files but wrong data (issue 51, round four): each is refused or skipped in one
warning naming the file, never a traceback and never a silently wrong table."""

import json
import warnings
from pathlib import Path

import pandas as pd
import pytest

from suite.analysis.analyze import analyze
from suite.results import AnalysisWarning
from suite.cli import main

from test_analyze import write_run


def folder(tmp_path, seeds=3):
    root = tmp_path / "demo"
    for seed in range(seeds):
        write_run(root, "preln", 6, seed, acc=0.8 + 0.01 * seed)
        write_run(root, "layerscale", 6, seed, acc=0.85 + 0.01 * seed, scales=True)
    return root


def quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AnalysisWarning)
        return fn(*args, **kw)


@pytest.mark.parametrize("key, value", [("variant", "x\n## Primary comparison: LayerScale wins"),
                                        ("train.lr", "inf"), ("train.lr", "-0.001"), ("model.depth", "1e300"),
                                        ("model.depth", "9" * 4001), ("seed", "1" + "0" * 30), ("train.lr", "fast"),
                                        ("diverged_step", "1" + "0" * 400), ("model.dim", "{'a': 1}"),
                                        ("model.dim", "{1, 2}"), ("train.betas", "[[0.9], 0.99]")])
def test_a_runs_csv_row_with_an_impossible_value_is_skipped_and_never_analysed(tmp_path, capsys, key, value):
    root = folder(tmp_path)
    quiet(analyze, root, figures=False)
    import shutil

    shutil.rmtree(root / "runs")
    frame = pd.read_csv(root / "runs.csv", dtype=str, keep_default_na=False)
    frame.loc[0, key] = value
    frame.to_csv(root / "runs.csv", index=False)
    # the row cannot be a run's: a warning names its line, and a rewrite that would drop it is refused
    assert main(["analyze", str(root), "--no-figures"]) == 2
    err = capsys.readouterr().err
    assert "would be dropped (" in err and err.count("\n") == 1 and "Traceback" not in err
    assert main(["analyze", str(root), "--no-figures", "--force"]) == 0
    text = (root / "findings.md").read_text() + "".join(p.read_text() for p in (root / "tables").glob("*.md"))
    assert "## Primary comparison: LayerScale wins" not in text and "inf (highest" not in text


@pytest.mark.parametrize("key, value", [("train.lr", 10 ** 400), ("diverged_step", 10 ** 400),
                                        ("model.dim", {"a": 1}), ("train.betas", [{"a": 1}, 0.99])])
def test_a_summary_with_a_value_no_run_writes_is_skipped_in_one_warning(tmp_path, capsys, key, value):
    """An integer past a float's range (OverflowError where it was compared) or a mapping where a key's value
    belongs (unhashable when grouped) was a traceback."""
    root = folder(tmp_path)
    path = sorted((root / "runs").iterdir())[0] / "summary.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), key: value}))
    assert main(["analyze", str(root), "--no-figures"]) == 0
    err = capsys.readouterr().err
    assert f"{path}: skipped: " in err and "Traceback" not in err


def test_a_cell_that_starts_like_a_formula_is_written_as_text(tmp_path):
    root = folder(tmp_path)
    runs = sorted((root / "runs").iterdir())
    for run, payload in zip(runs, ["=HYPERLINK(\"http://x\",\"y\")", "+cmd|' /C calc'!A0", "@SUM(1+1)"]):
        path = run / "summary.json"
        summary = json.loads(path.read_text())
        path.write_text(json.dumps({**summary, "hostname": payload, "git_commit": payload}))
    quiet(analyze, root, figures=False)
    text = (root / "runs.csv").read_text()
    assert ",=HYPERLINK" not in text and ",+cmd" not in text and ",@SUM" not in text
    assert "'=HYPERLINK" in text and "'+cmd" in text and "'@SUM" in text
    again = pd.read_csv(root / "runs.csv")
    assert again["score"].min() > 0.79  # numbers stay numbers (a negative one would keep its sign)


def test_an_outcome_is_not_a_grouping_key(tmp_path, capsys):
    root = folder(tmp_path)
    for key in ("test_acc", "val_acc", "wall_s"):
        assert main(["analyze", str(root), "--no-figures", "--by", key]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"--by {key}: runs cannot be grouped by {key} (not a config key)" in err


@pytest.mark.parametrize("record", [{"kind": "train", "step": "abc", "loss": 1.0},
                                    {"kind": "train", "step": 10, "loss": 1.0, "blocks": "xyz"},
                                    {"kind": "train", "step": 10, "loss": [1, 2]},
                                    {"kind": "train", "loss": 1.0},
                                    {"kind": "train", "step": 1e400, "loss": 1.0}])
def test_a_metrics_record_of_the_wrong_type_is_skipped_with_a_warning(tmp_path, capsys, record):
    root = folder(tmp_path)
    metrics = next((root / "runs").glob("laye*")) / "metrics.jsonl"
    text = json.dumps(record).replace("Infinity", "1e400")
    metrics.write_text(metrics.read_text() + text + "\n" + json.dumps({"kind": "eval", "step": 30}) + "\n")
    assert main(["analyze", str(root)]) == 0
    err = capsys.readouterr().err
    assert "train record(s) skipped: a step, loss or blocks of the wrong type" in err and "Traceback" not in err
    assert main(["report", str(root)]) == 0


def test_status_agrees_with_run_dry_run_without_a_usable_run_ids_json(tmp_path, capsys):
    from pathlib import Path

    smoke = Path(__file__).resolve().parents[2] / "ablations" / "smoke.yaml"
    out = tmp_path / "smoke"
    # two of the eight runs: both commands must count the same two done and six to do
    assert main(["run", str(smoke), "--out", str(out), "--workers", "1", "--only", "variant=preln,seed=0"]) == 0
    (out / "run_ids.json").write_text("not json")
    capsys.readouterr()
    assert main(["status", str(out)]) == 0
    status = capsys.readouterr().out
    assert main(["run", str(smoke), "--out", str(out), "--dry-run"]) == 0
    dry = capsys.readouterr().out
    assert "2 already done" in dry and "8 runs: 2 done, 0 running, 0 interrupted, 6 pending" in status


def test_a_report_that_cannot_read_a_file_says_read_not_write(tmp_path, capsys):
    import os

    root = folder(tmp_path)
    quiet(analyze, root, figures=False)
    (root / "runs.csv").unlink()
    os.mkfifo(root / "runs.csv")  # not a regular file: never read
    assert main(["report", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "runs.csv" in err and "cannot write" not in err


def test_validate_names_no_data_when_the_data_is_not_here(capsys):
    from pathlib import Path

    paper = Path(__file__).resolve().parents[2] / "ablations" / "paper_tune.yaml"
    assert main(["validate", str(paper)]) == 2
    assert "`suite validate --no-data`" in capsys.readouterr().err


def test_a_run_folder_named_with_a_hash_links_to_itself_and_one_not_utf8_is_skipped(tmp_path):
    from suite.analysis.report import write_report

    root = folder(tmp_path)
    first, second = sorted((root / "runs").iterdir())[:2]
    first.rename(root / "runs" / "x#y")
    second.rename(root / "runs" / "bad\udcff")  # os.fsdecode of the byte 0xff: a name that is not UTF-8
    with pytest.warns(AnalysisWarning, match=r"bad\\udcff/summary.json: skipped: its folder's name is not printable"):
        analyze(root, figures=False)
    page = write_report(root).read_text()
    assert 'href="runs/x%23y/metrics.jsonl"' in page and "runs/x#y" not in page


def test_runs_csv_reads_back_at_the_most_runs_an_ablation_may_have():
    """A runs.csv of 28,000 runs (17.3 MB) was written, then refused by the reader's 16 MiB cap."""
    from suite.results import RUNS_CSV_BYTES
    from suite.sweep.spec import MAX_RUNS

    rows = (Path(__file__).resolve().parents[2] / "results" / "stability" / "runs.csv").read_text().splitlines()[1:]
    assert RUNS_CSV_BYTES >= MAX_RUNS * 2 * max(len(r.encode()) for r in rows)


def test_when_every_runs_csv_row_is_skipped_the_reasons_come_before_the_error(tmp_path, capsys):
    import csv
    import shutil

    root = folder(tmp_path)
    quiet(analyze, root, figures=False)
    shutil.rmtree(root / "runs")
    rows = list(csv.DictReader(open(root / "runs.csv", newline="")))
    for row in rows:
        row["train.lr"] = "fast"
    with open(root / "runs.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert main(["analyze", str(root), "--no-figures"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no usable summary.json or runs.csv row found (6 rows skipped, e.g." in err
    assert "line 2: skipped: 'train.lr' is 'fast'" in err


def test_status_reads_past_a_metrics_step_no_number_can_hold(tmp_path, capsys):
    from suite import store

    run = folder(tmp_path) / "runs"
    first = sorted(run.iterdir())[0]
    with open(first / "metrics.jsonl", "a") as f:
        f.write('{"kind": "train", "step": 1e400, "loss": 1.0}\n')
    assert store.last_logged_step(first) == 30


def test_runs_from_before_a_key_was_added_group_with_runs_that_record_it(tmp_path):
    """train.spike_window came later at 20 (store.ADDED_KEYS): old runs, which lack it, and new seeds, which
    record 20, are one group, not two."""
    from suite.grouping import group_keys
    from suite.results import run_records

    root = folder(tmp_path)
    for seed in (7, 8):
        run = write_run(root, "preln", 6, seed, acc=0.8)
        summary = json.loads((run / "summary.json").read_text())
        (run / "summary.json").write_text(json.dumps({**summary, "train.spike_window": 20}))
    runs = run_records(root)
    assert "train.spike_window" not in group_keys(runs) and {r["train.spike_window"] for r in runs} == {20}


def test_a_file_analyze_cannot_read_is_named_as_read_and_a_full_disk_as_full(tmp_path, capsys, monkeypatch):
    """Every OSError read "cannot write the outputs ...; check the folder's permissions", a metrics.jsonl it only
    reads and a full disk alike."""
    import errno

    from suite import store

    root = folder(tmp_path)
    metrics = sorted((root / "runs").iterdir())[0] / store.METRICS

    def denied(run_dir, *args, **kw):
        raise PermissionError(errno.EACCES, "Permission denied", str(metrics))

    monkeypatch.setattr(store, "read_metrics", denied)
    assert main(["analyze", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot read {metrics} (Permission denied); fix or remove it" in err

    def full(run_dir, *args, **kw):
        raise OSError(errno.ENOSPC, "No space left on device", str(root / "figures"))

    monkeypatch.setattr(store, "read_metrics", full)
    assert main(["analyze", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no space left on" in err and "free some space" in err


def test_a_runs_csv_that_is_a_link_is_replaced_not_read(tmp_path, capsys):
    """README: writes never follow a link. The row-loss check read through it and refused the re-analysis that
    would replace it, naming the command that had just failed."""
    root, other = folder(tmp_path), tmp_path / "other"
    for seed in range(3):
        write_run(other, "preln", 6, 10 + seed)
    quiet(analyze, other, figures=False)
    (root / "runs.csv").symlink_to(other / "runs.csv")
    assert main(["analyze", str(root), "--no-figures"]) == 0
    assert "is a symbolic link, not read" in capsys.readouterr().err
    assert not (root / "runs.csv").is_symlink() and (other / "runs.csv").is_file()
