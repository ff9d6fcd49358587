"""`suite status`: a sweep's state read from its results folder alone."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

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
    hold(out, running.name, os.getpid())  # this process is the running run's worker
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


def hold(out: Path, run_id: str, pid: int) -> None:
    """A claim on ``run_id`` as a worker on this host with process ``pid`` writes it."""
    (out / "claims").mkdir(exist_ok=True)
    (out / "claims" / f"{run_id}.json").write_text(json.dumps(
        {"owner": f"-@{socket.gethostname()}:{pid}", "host": socket.gethostname(), "pid": pid, "token": "t",
         "attempt": 1}))


def gone_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


EQUAL = {"name": "equal", "base": {"data": {"name": "digits"}, "model": {"patch_size": 4, "depth": 2, "dim": 16}},
         "grid": {"train.lr": [0.001 * (i + 1) for i in range(10)]},
         "variants": {"preln": {"model.residual": "preln"}, "layerscale": {"model.residual": "layerscale"}},
         "seeds": 2}


def equal_sweep(root: Path, done: int, running: int, now: float, run_s: float = 100.0, workers_alive: bool = True):
    """A sweep of 40 equal runs: ``done`` finished in ``run_s`` each (back to back on ``running``
    workers), ``running`` half-way through their steps, the rest pending."""
    root.mkdir(parents=True)
    (root / "ablation.yaml").write_text(yaml.safe_dump(EQUAL))
    runs = resolve_runs(load_ablation(root / "ablation.yaml").runs, None, "cpu")  # named as a sweep names them
    assert len(runs) == 40
    for i, run in enumerate(runs[:done]):
        folder = root / "runs" / run.run_id
        folder.mkdir(parents=True)
        started = now - 1 - run_s * (done - 1 - i) / running - run_s
        stamp = datetime.fromtimestamp(started, timezone.utc).isoformat()
        (folder / "summary.json").write_text(json.dumps({"status": "ok", "started_at": stamp, "wall_s": run_s}))
    pid = os.getpid() if workers_alive else gone_pid()
    for run in runs[done:done + running]:
        folder = root / "runs" / run.run_id
        folder.mkdir(parents=True)
        half = run.cfg.train.steps // 2
        (folder / "metrics.jsonl").write_text(json.dumps({"kind": "train", "step": half}) + "\n")
        os.utime(folder / "metrics.jsonl", (now - 1, now - 1))
        hold(root, run.run_id, pid)
    return root


def test_eta_from_run_durations_and_workers_is_within_30_percent_at_10_percent(tmp_path):
    now = time.time()
    for workers in (1, 2, 4):
        out = equal_sweep(tmp_path / f"w{workers}", done=4, running=workers, now=now)
        s = sweep_status(out, now=now)
        assert s.counts["running"] == workers and s.mean_run_s == pytest.approx(100.0)
        # the truth: each running run has half of its 100 s left, then the pending runs share the workers
        pending = 40 - 4 - workers
        truth = 50.0 + 100.0 * pending / workers
        assert s.eta_s == pytest.approx(truth, rel=0.3)
        assert s.runs_per_hour == pytest.approx(workers * 36.0)


def test_runs_whose_worker_is_gone_are_interrupted_and_no_eta_is_promised(tmp_path, capsys):
    now = time.time()
    out = equal_sweep(tmp_path / "gone", done=4, running=2, now=now, workers_alive=False)
    s = sweep_status(out, now=now)
    assert dict(s.counts) == {"done": 4, "interrupted": 2, "pending": 34}
    assert all(v.worker_gone for v in s.runs if v.state == "interrupted")
    assert s.eta_s is None and s.runs_per_hour is None
    assert main(["status", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "eta none: no run is running (run the same `suite run` again to finish)" in printed
    assert "2 runs interrupted: their worker is gone" in printed


def test_times_in_the_future_do_not_make_dead_runs_running(tmp_path):
    now = time.time()
    out = equal_sweep(tmp_path / "future", done=4, running=2, now=now)
    future = now + 20 * 86400
    for metrics in (out / "runs").glob("*/metrics.jsonl"):
        os.utime(metrics, (future, future))
    summary = next((out / "runs").glob("*/summary.json"))
    summary.write_text(json.dumps({"status": "ok", "started_at": "2099-01-01T00:00:00+00:00", "wall_s": 100.0}))
    s = sweep_status(out, now=now)
    assert s.counts["running"] == 0 and s.counts["interrupted"] == 2
    assert all(v.finished is None or v.finished <= now for v in s.runs)


def test_a_closed_pipe_is_not_a_traceback(half_done):
    proc = subprocess.Popen([sys.executable, "-m", "suite", "status", str(half_done)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # `| head` that has already gone
    _, err = proc.communicate(timeout=120)
    assert b"Traceback" not in err and proc.returncode == 0, err.decode()


def test_cli_prints_the_view_and_rejects_a_foreign_folder(half_done, tmp_path, capsys):
    assert main(["status", str(half_done)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("smoke: 8 runs: 4 done, 0 running, 0 interrupted, 4 pending")
    assert "a run takes" in out and "eta none: no run is running" in out and "preln" in out
    assert main(["status", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no ablation.yaml" in err
    assert main(["status", str(half_done), "--watch", "0"]) == 2


def test_a_damaged_shared_or_unreadable_folder_is_never_a_traceback(half_done, tmp_path, capsys, monkeypatch):
    """A summary whose status no run writes (unhashable), an error holding escape sequences, run ids no run has,
    and a folder that cannot be read (someone else's: a PermissionError)."""
    import shutil

    from suite.sweep import claims

    out = Path(shutil.copytree(half_done, tmp_path / "out"))
    seed1 = [r for r in resolve_runs(load_ablation(SMOKE).runs, None, "cpu") if r.seed == 1]
    for run, summary in zip(seed1, [{"status": ["ok"]}, {"status": "error", "error": "\x1b[31mRED\x1b]0;t\x07\nfake"}]):
        (out / "runs" / run.run_id).mkdir(parents=True)
        (out / "runs" / run.run_id / "summary.json").write_text(json.dumps(summary))
    with pytest.warns(Warning, match="'status' is \"\\['ok'\\]\", not one of ok"):
        assert main(["status", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "5 done" in shown and "\x1b" not in shown and "\nfake" not in shown
    assert "\\x1b[31mRED\\x1b]0;t\\x07\\nfake" in shown  # the error on its one line, its controls as escapes
    ids = json.loads((out / "run_ids.json").read_text())
    (out / "run_ids.json").write_text(json.dumps(["x" * 300] * len(ids)))  # File name too long, as a folder
    with pytest.warns(Warning, match="'status' is"):
        assert main(["status", str(out)]) == 0 and "5 done" in capsys.readouterr().out

    def denied(path, *args):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(claims, "dead", denied)
    (out / "claims").mkdir(exist_ok=True)
    (out / "claims" / "a.json").write_text("{}")
    assert main(["status", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read " in err and "Permission denied" in err


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



def test_a_pack_member_without_a_claim_of_its_own_is_running_while_its_pack_claim_lives(half_done, tmp_path):
    """A pack is claimed under its first run's id alone: the second member showed as "interrupted, worker gone"
    while it trained (an outside review, --pack 2). With no live claim left in the folder it is gone."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(half_done, out)
    head, member = [r for r in resolve_runs(load_ablation(SMOKE).runs, None, "cpu") if r.seed == 1][:2]
    for run in (head, member):
        (out / "runs" / run.run_id).mkdir(parents=True)
        (out / "runs" / run.run_id / "metrics.jsonl").write_text(json.dumps({"kind": "train", "step": 3}) + "\n")
    hold(out, head.run_id, os.getpid())
    states = {v.folder: v.state for v in sweep_status(out).runs}
    assert states[head.run_id] == states[member.run_id] == "running"
    hold(out, head.run_id, gone_pid())
    states = {v.folder: (v.state, v.worker_gone) for v in sweep_status(out).runs}
    assert states[head.run_id] == states[member.run_id] == ("interrupted", True)


def test_a_sweep_larger_than_the_default_run_limit_still_has_a_status(half_done, monkeypatch):
    """suite run --max-runs accepted its size; suite status read the folder's own ablation.yaml under the default
    limit, and refused it with a hint to pass a flag status has not got."""
    from suite.sweep import spec

    monkeypatch.setattr(spec, "MAX_RUNS", 3)  # the smoke sweep's 8 runs are now "too many" by default
    assert len(sweep_status(half_done).runs) == 8


def test_a_committed_results_folder_reads_its_runs_from_runs_csv(capsys):
    """results/default keeps runs.csv, not its run folders: status said 40 pending and 'run suite run again'."""
    root = Path(__file__).resolve().parents[2] / "results" / "default"
    s = sweep_status(root)
    assert dict(s.counts) == {"done": 40} and s.statuses["ok"] == 40 and s.from_csv == 40
    assert main(["status", str(root)]) == 0
    out = capsys.readouterr().out
    assert "40 done" in out and "only a row of runs.csv" in out and "would train them again" in out
