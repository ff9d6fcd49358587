"""The Slurm backend, through submitit's local executor: real worker processes, the same pickled workers,
claims and requeue as on a cluster; only `sbatch` is not called."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from suite.cli import main
from suite.sweep import claims

pytest.importorskip("submitit")

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "ablations" / "smoke.yaml"
ARGS = ["--device", "cpu", "--threads", "1"]
SLURM = ["--backend", "slurm", "--slurm-cluster", "local", "--slurm-poll", "0.3"]
# Differ between runs of one config by design (timing, provenance, how it got there).
VOLATILE = {"wall_s", "step_time_ms", "throughput", "peak_mem_mb", "hostname", "started_at", "timing_cpu_util",
            "timing_load1", "timing_cores", "timing_contended", "resumed_at", "git_commit", "device_name"}


def summaries(out: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted((out / "runs").glob("*/summary.json"))}


def comparable(found: dict[str, dict]) -> dict[str, dict]:
    return {rid: {k: v for k, v in s.items() if k not in VOLATILE} for rid, s in found.items()}


def events(out: Path) -> list[dict]:
    lines = [line for p in (out / "workers").glob("*.jsonl") for line in p.read_text().splitlines()]
    return sorted((json.loads(line) for line in lines), key=lambda e: e["t"])


def slow_ablation(tmp_path: Path, steps: int = 400) -> Path:
    path = tmp_path / "slow.yaml"  # 2 runs of a tiny model, long enough that a signal lands inside one
    path.write_text(f"name: smoke\nextends: {SMOKE}\nbase: {{model.dim: 8, train.steps: {steps}}}\n"
                    f"grid: {{model.depth: [1]}}\nseeds: 1\n")
    return path


def reference(tmp_path: Path, ablation: Path, run_id: str) -> Path:
    """``run_id`` of ``ablation`` trained in this process, uninterrupted, as a worker would (cpu, 1 thread)."""
    import copy
    import dataclasses

    from suite.sweep.plan import resolve_runs
    from suite.sweep.spec import load_ablation
    from suite.sweep.worker import execute

    (run,) = [r for r in resolve_runs(load_ablation(ablation).runs, "cpu", "cpu") if r.run_id == run_id]
    cfg = copy.deepcopy(run.cfg)
    cfg.device, cfg.train.threads = "cpu", 1
    execute([dataclasses.replace(run, cfg=cfg)], tmp_path / "ref")
    return tmp_path / "ref" / "runs" / run_id


def _kill_when(out: Path, predicate, sig: int, deadline_s: float = 90) -> threading.Thread:
    """In the background: once some claimed run's metrics are being written, send ``sig`` to the worker
    process holding it (its pid is in the claim); records the run id in ``thread.victim``."""

    def watch() -> None:
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            for path in (out / claims.CLAIMS).glob("*.json") if (out / claims.CLAIMS).is_dir() else []:
                run_id = path.stem
                metrics = out / "runs" / run_id / "metrics.jsonl"
                try:
                    owner = json.loads(path.read_text())["owner"]
                except (OSError, ValueError, KeyError):
                    continue
                if metrics.exists() and predicate(metrics):
                    thread.victim = run_id
                    os.kill(int(owner.rsplit(":", 1)[1]), sig)
                    return
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.victim = None
    thread.start()
    return thread


def _steps_logged(metrics: Path) -> int:
    return sum(1 for line in metrics.read_text().splitlines() if '"kind": "train"' in line)


def test_a_killed_worker_loses_no_run_and_trains_none_twice(tmp_path, capsys):
    """The killed worker's claim is dead at once (its process is gone); the lease only bounds a live worker's stalled
    heartbeat, and 2 s of stall on a busy machine would hand a live run to the other worker (trained twice)."""
    out, ablation = tmp_path / "out", slow_ablation(tmp_path)
    killer = _kill_when(out, lambda m: _steps_logged(m) >= 2, signal.SIGKILL)
    code = main(["run", str(ablation), "--out", str(out), "--workers", "2", "--slurm-lease", "5", *SLURM, *ARGS])
    killer.join(timeout=5)
    assert code == 0 and killer.victim is not None
    printed = capsys.readouterr().out
    assert "submitted 2 local Slurm workers for 2 runs" in printed and "2 runs: 2 ok" in printed
    log = events(out)
    finished = [e["run_id"] for e in log if e["event"] == "finish"]
    assert sorted(finished) == sorted(summaries(out))  # every run once, the killed one by someone else
    starts = [e for e in log if e["event"] == "start" and e["run_id"] == killer.victim]
    assert len(starts) == 2 and starts[0]["owner"] != starts[1]["owner"]
    assert not list((out / claims.CLAIMS).glob("*.json"))  # every claim released
    record = json.loads((out / "slurm" / "submission.json").read_text())
    assert record["cluster"] == "local" and len(record["jobs"]) == 2 and len(record["runs"]) == 2
    ref = reference(tmp_path, ablation, killer.victim)
    assert comparable({0: summaries(out)[killer.victim]}) == comparable({0: json.loads((ref / "summary.json").read_text())})


def test_a_preempted_worker_checkpoints_is_requeued_and_resumes_its_run(tmp_path):
    out, ablation = tmp_path / "out", slow_ablation(tmp_path)
    sig = signal.SIGUSR2  # what Slurm sends (through submitit) before preempting a job
    preempter = _kill_when(out, lambda m: _steps_logged(m) >= 2, sig)
    code = main(["run", str(ablation), "--out", str(out), "--workers", "1", *SLURM, *ARGS])
    preempter.join(timeout=5)
    assert code == 0 and preempter.victim is not None
    found = summaries(out)
    assert len(found) == 2 and {s["status"] for s in found.values()} == {"ok"}
    stops = [e for e in events(out) if e["event"] == "stop"]
    assert [e["reason"] for e in stops] == ["preempted"]  # the run in progress when the signal came
    victim = stops[0]["run_id"]
    assert found[victim]["resumed_at"], "the requeued worker started the run again from step 0"
    ref = reference(tmp_path, ablation, victim)  # resumed bit-identically
    assert comparable({0: found[victim]}) == comparable({0: json.loads((ref / "summary.json").read_text())})
    assert (out / "runs" / victim / "metrics.jsonl").read_text() == (ref / "metrics.jsonl").read_text()
    assert not (out / "runs" / victim / "checkpoint.pt").exists()


def test_detach_then_run_again_attaches_and_collects(tmp_path, capsys):
    out = tmp_path / "out"
    ablation = slow_ablation(tmp_path, steps=60)
    assert main(["run", str(ablation), "--out", str(out), "--workers", "1", "--slurm-detach", *SLURM, *ARGS]) == 0
    err = capsys.readouterr().err
    assert "detached: the jobs go on" in err and f"suite status {out}" in err
    assert main(["run", str(ablation), "--out", str(out), "--workers", "1", *SLURM, *ARGS]) == 0
    printed = capsys.readouterr().out
    made = re.search(r"2 runs: (\d) ok, 0 diverged, 0 failed, 0 error this call; (\d) skipped", printed)
    assert made and int(made.group(1)) + int(made.group(2)) == 2, printed  # the jobs may have finished all
    if "attached to" in printed:  # unless the workers had finished everything before we looked
        assert "submitted" not in printed
    assert sorted(e["run_id"] for e in events(out) if e["event"] == "finish") == sorted(summaries(out))


def test_ctrl_c_in_a_terminal_stops_the_watching_and_the_local_jobs_go_on(tmp_path):
    """Ctrl-C in a terminal signals the whole foreground process group, the local executor's jobs
    included: they used to die with a KeyboardInterrupt traceback each while `suite run` said they go on."""
    out, ablation = tmp_path / "out", slow_ablation(tmp_path)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    err_path = tmp_path / "stderr.txt"  # a file, not a pipe: the jobs inherit it and outlive the parent
    with open(err_path, "w") as err, open(tmp_path / "stdout.txt", "w") as printed:
        proc = subprocess.Popen([sys.executable, "-m", "suite", "run", str(ablation), "--out", str(out), "--workers",
                                 "1", *SLURM, *ARGS], env=env, stdout=printed, stderr=err, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not any(_steps_logged(m) >= 2 for m in out.glob("runs/*/metrics.jsonl")):
            assert proc.poll() is None and time.monotonic() < deadline, err_path.read_text()
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        assert proc.wait(timeout=60) == 130
        assert "Slurm jobs go on" in err_path.read_text()
        jobs = [int(j) for j in json.loads((out / "slurm" / "submission.json").read_text())["jobs"]]
        deadline = time.monotonic() + 120
        while any(claims.alive(j) for j in jobs):  # the jobs go on without the parent, to the end
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert "Traceback" not in err_path.read_text()
        found = summaries(out)
        assert len(found) == 2 and {s["status"] for s in found.values()} == {"ok"}, "the jobs died"
    finally:
        with contextlib.suppress(ProcessLookupError):  # the parent, the jobs and their workers: one process group
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_slurm_user_errors_are_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch here
    out = tmp_path / "out"
    assert main(["run", str(SMOKE), "--out", str(out), "--backend", "slurm", *ARGS]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no `sbatch` / `srun` here" in err and "--slurm-cluster local" in err
    assert not out.exists()
    assert main(["run", str(SMOKE), "--out", str(out), "--backend", "slurm", "--slurm-opt", "account", *ARGS]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--slurm-opt account: expected KEY=VALUE" in err
    assert main(["run", str(SMOKE), "--out", str(out), "--backend", "slurm", "--slurm-time", "0", *ARGS]) == 2
    assert "--slurm-time 0: must be >= 1" in capsys.readouterr().err


def test_another_backend_will_not_run_beside_live_slurm_jobs(tmp_path, capsys):
    out = tmp_path / "out"
    (out / "slurm").mkdir(parents=True)
    (out / "ablation.yaml").write_text("name: smoke\n")
    # A submission whose job is alive (this very process stands in for the local executor's job).
    pid = str(os.getpid())
    (out / "slurm" / "submission.json").write_text(json.dumps({"cluster": "local", "jobs": [pid],
                                                               "started": {pid: claims.process_start(os.getpid())}}))
    assert main(["run", str(SMOKE), "--out", str(out), "--only", "seed=0", *ARGS]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Slurm jobs" in err and "--backend slurm to attach" in err
    assert not (out / "runs").exists()


def test_a_job_pid_that_now_belongs_to_another_process_is_not_a_live_job(tmp_path):
    """A submission.json naming a pid that another process holds now (the job ended, the pid was reused):
    --backend slurm waited for it forever and --backend local refused to run forever."""
    from suite.sweep.slurm_backend import live_jobs

    pid = str(os.getpid())
    started = claims.process_start(os.getpid())
    (tmp_path / "slurm").mkdir()

    def submission(**record) -> list[str]:
        (tmp_path / "slurm" / "submission.json").write_text(json.dumps({"cluster": "local", "jobs": [pid], **record}))
        return [j.job_id for j in live_jobs(tmp_path)]

    assert submission(started={pid: started}) == [pid]  # the job itself
    assert submission(started={pid: started + "0"}) == []  # another process, started at another time
    assert submission() == []  # no start time recorded: this process is not submitit's local job runner


def test_a_run_that_reaches_no_step_boundary_is_abandoned_after_the_grace_time():
    """SIGUSR2 while a run is busy (an evaluation, a compilation) that never reaches a step boundary:
    the worker arms a timer of ``grace_s``, whose alarm abandons the run (Preempted) before the scheduler
    kills the process. The timer is read back and the alarm handler called: no waiting on the clock."""
    from suite.sweep.worker import Preempted, Worker

    worker = Worker("unused", [], grace_s=30)
    worker._preempted, worker._in_run, worker._signum = False, True, None
    previous = worker._take_signals()
    try:
        os.kill(os.getpid(), signal.SIGUSR2)
        assert worker._preempted and worker._signum == signal.SIGUSR2
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < remaining <= 30
        with pytest.raises(Preempted):
            signal.getsignal(signal.SIGALRM)(signal.SIGALRM, None)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for s, handler in previous.items():
            signal.signal(s, handler)


def test_a_second_stop_signal_that_lands_inside_the_first_ones_handler_does_not_hang_the_worker():
    """`timeout` and Slurm signal the whole group, then the parent signals each worker again: the second
    SIGTERM landed while the first one's handler held an Event's lock, and the worker hung until the parent
    killed it 95 s later, its run not checkpointed (1 sweep in 25 under load). Here the second signal comes at
    each line the first handler runs in turn; a watchdog (SIGUSR1, 2 s) turns a hang into a failure."""
    from suite.sweep.worker import Worker

    def watchdog(signum, frame):
        raise TimeoutError("the handler hung on a second signal")

    worker = Worker("unused", [], grace_s=30)
    worker._in_run = True
    previous = worker._take_signals()
    previous_usr1 = signal.signal(signal.SIGUSR1, watchdog)
    handler = signal.getsignal(signal.SIGTERM)

    def first_signal(nested_at: int) -> int:
        worker._preempted, worker._signum, lines = False, None, [0]

        def trace(frame, event, arg):
            if event == "line":
                lines[0] += 1
                if lines[0] == nested_at:
                    handler(signal.SIGUSR2, None)  # the second signal, at this line of the first one's handler
            return trace

        timer = threading.Timer(2, os.kill, (os.getpid(), signal.SIGUSR1))
        timer.start()
        sys.settrace(trace)
        try:
            handler(signal.SIGTERM, None)
        finally:
            sys.settrace(None)
            timer.cancel()
        return lines[0]

    try:
        for at in range(1, first_signal(0) + 1):
            first_signal(at)
            assert worker._preempted and worker._signum in (signal.SIGTERM, signal.SIGUSR2), at  # whichever came first
            remaining, _ = signal.getitimer(signal.ITIMER_REAL)
            assert 29 < remaining <= 30, at  # the grace period is running
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGUSR1, previous_usr1)
        for s, h in previous.items():
            signal.signal(s, h)
