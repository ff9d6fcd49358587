"""`suite status`: a sweep's state read from its results folder alone."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from suite.cli import main
from suite.sweep.plan import resolve_runs
from suite.sweep.spec import load_ablation
from suite.sweep.status import RUNNING_WITHIN, sweep_status

SMOKE = Path(__file__).resolve().parents[2] / "ablations" / "smoke.yaml"


@pytest.fixture(scope="module")
def half_done(tmp_path_factory) -> Path:
    """The smoke sweep with its seed-0 runs finished (4 of 8)."""
    out = tmp_path_factory.mktemp("status") / "out"
    assert main(["run", str(SMOKE), "--out", str(out), "--only", "seed=0", "--device", "cpu", "--threads", "1"]) == 0
    return out


def test_counts_done_running_interrupted_pending_and_errors(half_done, tmp_path):
    out = tmp_path / "out"
    import shutil

    shutil.copytree(half_done, out)
    seed1 = [r for r in resolve_runs(load_ablation(SMOKE).runs, None, "cpu") if r.seed == 1]
    running, interrupted, failed = (out / "runs" / r.run_id for r in seed1[:3])
    for folder in (running, interrupted):
        folder.mkdir(parents=True)
        (folder / "metrics.jsonl").write_text(json.dumps({"kind": "train", "step": 7}) + "\n" + '{"kind": "tr')
    old = time.time() - 2 * RUNNING_WITHIN
    os.utime(interrupted / "metrics.jsonl", (old, old))
    failed.mkdir(parents=True)
    (failed / "summary.json").write_text(json.dumps({"status": "error", "error": "RuntimeError: out of memory",
                                                     "started_at": "2026-01-01T00:00:00+00:00", "wall_s": 1.0}))
    s = sweep_status(out)
    assert (s.name, len(s.runs)) == ("smoke", 8)
    assert dict(s.counts) == {"done": 5, "running": 1, "interrupted": 1, "pending": 1}
    assert s.statuses["ok"] == 4 and s.statuses["error"] == 1
    (view,) = [v for v in s.runs if v.state == "running"]
    assert (view.folder, view.step, view.steps) == (running.name, 7, seed1[0].cfg.train.steps)
    assert [v.folder for v in s.errors] == [failed.name]
    assert sum(c["done"] for c in s.by_variant.values()) == 5


def test_throughput_and_eta_from_finish_times(half_done):
    s = sweep_status(half_done)
    assert dict(s.counts) == {"done": 4, "pending": 4}
    assert s.runs_per_hour is not None and s.runs_per_hour > 0
    assert s.eta_s == pytest.approx(4 / s.runs_per_hour * 3600)


def test_cli_prints_the_view_and_rejects_a_foreign_folder(half_done, tmp_path, capsys):
    assert main(["status", str(half_done)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("smoke: 8 runs: 4 done, 0 running, 0 interrupted, 4 pending")
    assert "runs/hour" in out and "preln" in out
    assert main(["status", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no ablation.yaml" in err
    assert main(["status", str(half_done), "--watch", "0"]) == 2


def test_a_slurm_sweep_shows_its_submission_and_the_claims_of_dead_workers(half_done, tmp_path, capsys):
    import shutil

    out = tmp_path / "out"
    shutil.copytree(half_done, out)
    assert sweep_status(out).slurm is None  # never submitted to Slurm
    (out / "slurm").mkdir()
    (out / "slurm" / "submission.json").write_text(json.dumps(
        {"cluster": "slurm", "jobs": ["123_0", "123_1"], "lease_s": 600, "submitted_at": "2026-11-30T10:00:00+00:00"}))
    (out / "claims").mkdir(exist_ok=True)  # a sweep leaves it empty
    for name, age in (("a", 10), ("b", 5000)):
        path = out / "claims" / f"{name}.json"
        path.write_text("{}")
        os.utime(path, (time.time() - age, time.time() - age))
    view = sweep_status(out).slurm
    assert (view.cluster, view.jobs, view.claimed, view.expired, view.lease_s) == ("slurm", 2, 2, 1, 600.0)
    assert main(["status", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "slurm: last submission 2 worker jobs (Slurm) at 2026-11-30T10:00:00+00:00; 2 runs claimed" in printed
    assert "1 claims not renewed within the 600 s lease" in printed
    (out / "slurm" / "submission.json").write_text("garbage")
    assert sweep_status(out).slurm is None
