"""scripts/settled_gamma.py: the scale a learned γ settles at, per depth, at the variant's best rate (what
ablations/mechanisms.yaml freezes its matched arms at)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from test_analyze import write_run

_spec = importlib.util.spec_from_file_location(
    "settled_gamma", Path(__file__).resolve().parents[2] / "scripts" / "settled_gamma.py")
settled_gamma = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(settled_gamma)


def test_gamma_is_read_at_the_last_step_of_the_best_rate_per_depth(tmp_path, capsys):
    root = tmp_path / "demo"
    for depth in (4, 8):
        for seed in range(2):
            # the better rate (validation 0.9) ran 100 steps, the worse (0.5) 30: write_run's γ grows with step
            write_run(root, "layerscale", depth, seed, lr=1e-3, val_acc=0.9, scales=True, steps=100)
            write_run(root, "layerscale", depth, seed, lr=1e-2, val_acc=0.5, scales=True, steps=30)
            write_run(root, "preln", depth, seed, lr=1e-3)
    assert settled_gamma.main([str(root), "layerscale"]) == 0
    rows = settled_gamma.settled(root, "layerscale")
    assert [(r["depth"], r["best_lr"], r["n"], r["step"]) for r in rows] == [(4, 1e-3, 2, 100), (8, 1e-3, 2, 100)]
    # write_run's scale is 1e-5 (1 + step) (1 + block): the mean over blocks 0..depth-1 at step 100
    assert rows[0]["gamma"] == pytest.approx(1e-5 * 101 * 2.5)
    assert rows[1]["gamma"] == pytest.approx(1e-5 * 101 * 4.5)
    assert rows[1]["block_min"] == pytest.approx(1e-5 * 101) and rows[1]["block_max"] == pytest.approx(1e-5 * 101 * 8)
    text = (root / "settled_gamma.md").read_text()
    assert text == capsys.readouterr().out and "| 8 | 0.001 | 2 | 100 | 0.00455 |" in text


def test_a_variant_without_gamma_or_runs_is_one_line_and_exit_2(tmp_path, capsys):
    root = tmp_path / "demo"
    write_run(root, "preln", 4, 0)
    assert settled_gamma.main([str(root), "preln"]) == 2
    assert "logged no γ" in capsys.readouterr().err
    assert settled_gamma.main([str(root), "rezero"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no runs of variant 'rezero'" in err
    assert settled_gamma.main([str(tmp_path / "missing"), "preln"]) == 2
    (root / "runs").rename(root / "gone")  # a committed folder: runs.csv without run folders (it blamed runs.csv)
    (root / "runs.csv").write_text("run_id\n")
    capsys.readouterr()
    assert settled_gamma.main([str(root), "preln"]) == 2
    assert "no runs/ folder; the settled γ is read from each run's runs/<id>/metrics.jsonl" in capsys.readouterr().err


def test_damaged_summaries_and_records_are_skipped_or_one_line(tmp_path, capsys):
    import json
    import warnings

    root = tmp_path / "demo"
    for seed in range(2):
        write_run(root, "layerscale", 4, seed, lr=1e-3, scales=True)
    no_rate = write_run(root, "layerscale", 4, 5, lr=1e-2, scales=True)
    summary = json.loads((no_rate / "summary.json").read_text())
    del summary["train.lr"]
    (no_rate / "summary.json").write_text(json.dumps(summary))
    text_rate = write_run(root, "layerscale", 4, 6, lr=3e-3, scales=True)
    (text_rate / "summary.json").write_text((text_rate / "summary.json").read_text().replace("0.003", '"fast"'))
    with open(root / "runs" / sorted(p.name for p in (root / "runs").iterdir())[0] / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"kind": "train", "step": "abc", "blocks": "xyz"}) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert settled_gamma.main([str(root), "layerscale"]) == 0
    assert "| 4 | 0.001 | 2 |" in capsys.readouterr().out
