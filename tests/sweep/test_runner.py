"""The sweep runner, for real: worker processes, resume, retries, interrupts, worker death, Ray."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from suite import store
from suite.cli import main
from suite.sweep.worker import CRASH_ENV, SLOW_STEP_ENV
from suite.sweep.plan import resolve_runs
from suite.sweep.spec import load_ablation

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "ablations" / "smoke.yaml"
ARGS = ["--device", "cpu", "--threads", "1"]  # one thread: CPU results are bitwise reproducible


def cpu_runs(path: Path) -> list:
    """The ablation's runs as a sweep on the CPU names them (precision `auto` resolved to fp32)."""
    return resolve_runs(load_ablation(path).runs, "cpu", "cpu")


def summaries(out: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted((out / "runs").glob("*/summary.json"))}


def snapshot(out: Path) -> dict[str, int]:
    """Every file under ``out`` with its modification time: "writes nothing" means this is unchanged."""
    return {str(p): p.stat().st_mtime_ns for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def smoke_out(tmp_path_factory) -> Path:
    """One real sweep of ablations/smoke.yaml with two workers, shared by the tests that read it."""
    out = tmp_path_factory.mktemp("smoke") / "out"
    assert main(["run", str(SMOKE), "--out", str(out), "--workers", "2", *ARGS]) == 0
    return out


def test_sweep_writes_every_summary_with_ablation_variant_seed(smoke_out):
    runs = {r.run_id: r for r in cpu_runs(SMOKE)}
    found = summaries(smoke_out)
    assert set(found) == set(runs)
    for run_id, s in found.items():
        assert s["run_id"] == run_id and s["ablation"] == "smoke"
        assert (s["variant"], s["seed"], s["model.depth"]) == (runs[run_id].variant, runs[run_id].seed,
                                                               runs[run_id].cfg.model.depth)
        assert s["status"] == "ok" and s["train.threads"] == 1 and s["device"] == "cpu"
    assert "name: smoke" in (smoke_out / "ablation.yaml").read_text()


def test_rerun_skips_everything_and_writes_nothing(smoke_out, capsys):
    before = snapshot(smoke_out)
    assert main(["run", str(SMOKE), "--out", str(smoke_out), *ARGS]) == 0  # no worker started: it would log in workers/
    assert ("8 runs: 0 ok, 0 diverged, 0 failed, 0 error this call; 8 skipped (already done: 8 ok) in"
            in capsys.readouterr().out)
    assert snapshot(smoke_out) == before


def test_dry_run_shows_what_is_done(smoke_out, capsys):
    assert main(["run", str(SMOKE), "--out", str(smoke_out), "--dry-run", "--only", "variant=preln"]) == 0
    out = capsys.readouterr().out
    assert out.count("done (ok)") == 4
    assert out.strip().endswith(f"4 of 8 runs (2 variants x 2 grid points x 2 seeds - 0 excluded) selected: "
                                f"4 already done, 0 to run -> {smoke_out}")


def test_changed_hyperparameter_makes_new_runs_and_keeps_old(smoke_out, tmp_path, capsys):
    changed = tmp_path / "smoke.yaml"
    changed.write_text(SMOKE.read_text().replace("lr: 3.0e-3", "lr: 1.0e-3"))
    with pytest.warns(store.SuiteWarning, match=r"8 run folders are not runs of this file as it is now .*`suite "
                                                r"analyze` reads them too"):  # it said nothing of them
        assert main(["run", str(changed), "--out", str(smoke_out), "--dry-run"]) == 0  # same name: allowed
    assert "0 already done, 8 to run" in capsys.readouterr().out


def test_folder_of_another_ablation_is_refused(smoke_out, tmp_path, capsys):
    other = tmp_path / "other.yaml"
    other.write_text(SMOKE.read_text().replace("name: smoke", "name: other"))
    before = snapshot(smoke_out)
    assert main(["run", str(other), "--out", str(smoke_out), *ARGS]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds the runs of ablation 'smoke'" in err and "--out" in err
    assert snapshot(smoke_out) == before


def test_worker_death_is_an_error_run_and_retry_errors_reruns_only_it(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    runs = [r for r in cpu_runs(SMOKE) if r.seed == 0]
    victim = runs[0]  # with one worker, the other three runs need the replacement worker
    monkeypatch.setenv(CRASH_ENV, victim.run_id)
    assert main(["run", str(SMOKE), "--out", str(out), "--only", "seed=0", "--workers", "1", "--attempts", "1",
                 *ARGS]) == 0
    captured = capsys.readouterr()
    assert "3 ok, 0 diverged, 0 failed, 1 error this call; 0 skipped" in captured.out and "--retry-errors" in captured.err
    # what it is doing, before the first run ends
    assert captured.out.startswith("starting 1 worker; 4 runs, under a minute of training steps by suite cost's "), captured.out
    assert "of training steps by suite cost's estimate (" in captured.out.splitlines()[0]
    found = summaries(out)
    assert set(found) == {r.run_id for r in runs}
    dead = found[victim.run_id]
    # The first worker died on it; the next trained the other runs, then found its one attempt spent.
    assert dead["status"] == "error" and dead["error"].startswith("no worker finished this run in 1 attempts")
    log = sorted((json.loads(line) for p in (out / "workers").glob("*.jsonl") for line in p.read_text().splitlines()),
                 key=lambda e: e["t"])
    assert [(e["event"], e.get("attempt")) for e in log if e["run_id"] == victim.run_id] == [("start", 1), ("error", None)]
    assert (dead["ablation"], dead["variant"], dead["seed"], dead["model.depth"]) == (
        "smoke", victim.variant, 0, victim.cfg.model.depth)
    assert set(found[runs[1].run_id]) <= set(dead)  # same summary shape as a trained run

    monkeypatch.delenv(CRASH_ENV)
    before = snapshot(out)
    assert main(["run", str(SMOKE), "--out", str(out), "--only", "seed=0", *ARGS]) == 0
    assert snapshot(out) == before  # error runs are not retried by default

    assert main(["run", str(SMOKE), "--out", str(out), "--only", "seed=0", "--retry-errors", *ARGS]) == 0
    assert "4 runs: 1 ok, 0 diverged, 0 failed, 0 error this call; 3 skipped (already done: 3 ok)" in \
        capsys.readouterr().out
    after = snapshot(out)
    changed = {Path(p).parent.name for p in after if after[p] != before.get(p)} - {"out", "workers"}
    assert changed == {victim.run_id}

def test_a_run_whose_workers_died_every_round_says_so(tmp_path):
    from suite.sweep import claims
    from suite.sweep.local import LocalLauncher
    from suite.sweep.sweep import _lost_reason

    class Ended:  # a worker process that called os._exit(3)
        pid, exitcode = 4242, 3

    launcher = LocalLauncher(tmp_path)
    launcher.procs = [Ended()]
    assert _lost_reason(tmp_path, launcher, "r").startswith("no worker finished any run in 3 rounds")  # none started
    store.write_json(claims.claim_path(tmp_path, "r"), {"attempt": 3, "pid": 4242})
    assert _lost_reason(tmp_path, launcher, "r").startswith("worker died 3 times on this run (last: exit code 3); see")


def test_attempts_above_three_are_all_tried_when_the_run_is_the_only_one_left(tmp_path, monkeypatch, capsys):
    """The driver gave up after 3 rounds of workers that finished nothing, so --attempts 5 gave a lone run 3 tries."""
    out, victim = tmp_path / "out", cpu_runs(SMOKE)[0]
    monkeypatch.setenv(CRASH_ENV, victim.run_id)
    assert main(["run", str(SMOKE), "--out", str(out), "--only", "variant=preln,model.depth=1,seed=0", "--workers", "1",
                 "--attempts", "5", *ARGS]) == 1  # every run ended in error
    error = summaries(out)[victim.run_id]["error"]
    assert error.startswith("worker died 5 times on this run (last: exit code 3)"), error
    starts = [line for p in (out / "workers").glob("*.jsonl") for line in p.read_text().splitlines()]
    assert len(starts) == 5  # one start event per attempt, each worker dying on it


class _Echo:
    """A stand-in worker: says what it sees and where its output goes, then ends."""

    grace_s = 1.0

    def __call__(self, index: int) -> dict:
        print(f"worker {index} sees {os.environ.get('SUITE_TEST_ECHO')} in pid {os.getpid()} "
              f"(collector on: {gc.isenabled()}, {gc.get_freeze_count()} frozen) forked by {os.getppid()}", flush=True)
        return {"disk_full": None}


def _echo(tmp_path: Path, n: int) -> list[int]:
    from suite.sweep.local import LocalLauncher

    launcher = LocalLauncher(tmp_path)
    launcher.start(_Echo(), n)
    for p in launcher.procs:
        p.join(60)
    assert [p.exitcode for p in launcher.procs] == [0] * n
    return [p.pid for p in launcher.procs]


def test_a_worker_takes_the_environment_and_output_its_parent_has_when_it_starts(tmp_path, capfd, monkeypatch):
    """Workers fork from a server started by the first sweep of a process; a later sweep's workers
    still see the environment and write to the standard output of the moment they start."""
    monkeypatch.delenv("SUITE_TEST_ECHO", raising=False)
    first = _echo(tmp_path, 1)
    assert f"worker 0 sees None in pid {first[0]}" in capfd.readouterr().out
    monkeypatch.setenv("SUITE_TEST_ECHO", "later")
    saved = os.dup(1)
    with open(tmp_path / "later.txt", "w") as later:  # the output of this moment: a file the server never had
        os.dup2(later.fileno(), 1)
        try:
            second = _echo(tmp_path, 2)
        finally:
            os.dup2(saved, 1)
            os.close(saved)
    out = (tmp_path / "later.txt").read_text()
    assert all(f"worker {i} sees later in pid {pid}" in out for i, pid in enumerate(second)), out


def test_a_worker_collects_garbage_without_scanning_what_the_server_imported(tmp_path, capfd):
    """The fork server imports torch with the collector off (its full passes there freed nothing and took 0.5 s of
    the server's 3 s); a worker turns it on again, with the objects it was forked with frozen out of its passes."""
    _echo(tmp_path, 1)
    line = next(line for line in capfd.readouterr().out.splitlines() if "forked by" in line)
    frozen = int(line.split("collector on: True, ")[1].split(" frozen")[0])
    assert frozen > 10_000, line


def test_a_sweep_after_the_suite_s_source_changed_spawns_its_workers(tmp_path, capfd, monkeypatch):
    """A notebook that edits the suite between two sweeps must not run the old code in the second: the fork
    server keeps the code it imported, so the workers are spawned by this process instead."""
    from suite.sweep import local

    def servers(n: int) -> set[str]:
        _echo(tmp_path, n)
        return {line.rsplit(" ", 1)[1] for line in capfd.readouterr().out.splitlines() if "forked by" in line}

    first = servers(1)
    assert servers(2) == first and len(first) == 1  # the same server serves the next sweep
    saved = local._served_stamp + 1  # as if a file of the suite was saved
    monkeypatch.setattr(local, "source_stamp", lambda: saved)
    assert servers(1) == {str(os.getpid())} == servers(2)


def test_runs_whose_data_goes_through_dataloader_workers_train_in_a_sweep(tmp_path, capsys):
    """Sweep workers may start children: data that is not held on the device is read by DataLoader
    worker processes (daemon workers could not start them: "daemonic processes are not allowed to have children")."""
    ablation = tmp_path / "loader.yaml"
    ablation.write_text(SMOKE.read_text().replace("synthetic_classes: 4}",
                                                  "synthetic_classes: 4, device_max_mb: 0, num_workers: 1}")
                        .replace("steps: 30", "steps: 4").replace("dim: 32", "dim: 8"))  # one epoch: one loader
    out = tmp_path / "out"
    assert main(["run", str(ablation), "--out", str(out), "--only", "seed=0,model.depth=1,variant=preln",
                 "--workers", "1", *ARGS]) == 0
    found = summaries(out)
    assert len(found) == 1 and {s["status"] for s in found.values()} <= {"ok", "failed"}, capsys.readouterr()
    assert {s["data.num_workers"] for s in found.values()} == {1}


STEPS = 400  # runs long enough that a signal sent at a run's second step lands while it is in flight


def _start(out: Path, cwd: Path) -> subprocess.Popen:
    slow = cwd / "slow.yaml"  # same name, longer runs
    slow.write_text(f"name: smoke\nextends: {SMOKE}\nbase: {{model.dim: 8, train.steps: {STEPS}}}\nseeds: 1\n")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop(CRASH_ENV, None)
    return subprocess.Popen([sys.executable, "-m", "suite", "run", str(slow), "--out", str(out), "--workers", "1",
                             *ARGS], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def _wait_for_summaries(out: Path, n: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while len(summaries(out)) < n if (out / "runs").exists() else True:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "timed out waiting for a run to finish"
        time.sleep(0.1)


def _in_flight(out: Path, proc: subprocess.Popen, timeout: float = 120) -> str:
    """The id of a run without a summary that has logged two steps (waits for one)."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "timed out waiting for a run to start"
        for run_dir in (out / "runs").iterdir() if (out / "runs").is_dir() else []:
            metrics = run_dir / store.METRICS
            if not (run_dir / store.SUMMARY).exists() and metrics.exists() and \
                    metrics.read_text().count('"kind": "train"') >= 2:
                return run_dir.name
        time.sleep(0.05)


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid``: the workers are the fork server's children, not the sweep's."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    children = [int(x) for x in path.read_text().split()] if path.exists() else []
    return children + [d for c in children for d in _descendants(c)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")  # a zombie is dead too
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def _check_clean(out: Path, killed: bool = False) -> None:
    """No half-written file: every summary is complete JSON with a final status, no temp files.

    After a SIGKILL a temp file may remain, but only in the folder of a run that did not finish: the
    kill can land inside any write, and the run's next owner removes it when it opens the folder."""
    temps = list(out.rglob("*.tmp"))
    if killed:
        temps = [t for t in temps if t.parent.parent != out / "runs" or (t.parent / store.SUMMARY).exists()]
    assert not temps
    for s in summaries(out).values():
        assert s["status"] in store.STATUSES and s["wall_s"] is not None


def test_ctrl_c_then_sigkill_then_rerun_finishes_each_run_exactly_once(tmp_path, capsys):
    out = tmp_path / "out"
    proc = _start(out, tmp_path)
    _wait_for_summaries(out, 1, proc)
    victim = _in_flight(out, proc)
    proc.send_signal(signal.SIGINT)  # to the parent only, like `kill -INT`; a terminal would signal the group
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "interrupted:" in err and "Traceback" not in err
    _check_clean(out)
    first = snapshot(out)
    n_first = len(summaries(out))
    # The run in flight was stopped at a step and checkpointed (preempted), not finished.
    assert victim not in summaries(out) and (out / "runs" / victim / store.CHECKPOINT).exists()
    assert not list((out / "claims").glob("*.json"))  # its worker released its claim

    proc = _start(out, tmp_path)
    _wait_for_summaries(out, n_first + 1, proc)
    workers = _descendants(proc.pid)
    assert len(workers) >= 2  # the worker, and the fork server it came from (or Python's resource tracker)
    os.kill(proc.pid, signal.SIGKILL)  # the parent only: its workers must notice and exit by themselves
    proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [w for w in workers if _alive(w)], "workers outlived a SIGKILLed parent"
    with_kill = len(summaries(out))
    _check_clean(out, killed=True)

    # The rerun is the point, not its process: this one finishes what is left.
    assert main(["run", str(tmp_path / "slow.yaml"), "--out", str(out), "--workers", "1", *ARGS]) == 0
    assert f"error this call; {with_kill} skipped (already done: {with_kill} ok)" in capsys.readouterr().out
    _check_clean(out)
    assert len(summaries(out)) == 4 and summaries(out)[victim]["resumed_at"]
    final = snapshot(out)
    assert all(final[p] == t for p, t in first.items() if p.endswith("summary.json"))  # never redone
    for run_dir in (out / "runs").iterdir():
        steps = [m["step"] for m in store.read_metrics(run_dir) if m["kind"] == "train"]
        assert steps == sorted(set(steps)) and steps[-1] == STEPS  # one clean log per run, no repeats


def _group_alive(pgid: int) -> list[int]:
    """The processes of process group ``pgid`` that are not zombies."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(stat.parent.name))
    return alive


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("to", ["group", "parent"])
def test_ctrl_c_while_the_workers_start_is_one_line_and_exit_130(tmp_path, to):
    """Ctrl-C (a terminal signals the whole process group; `kill -INT` the parent) as soon as `suite run`
    says it starts its workers, while their fork server imports torch: it was a KeyboardInterrupt
    traceback from the server and `AssertionError: can only join a started process` from the parent."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop(CRASH_ENV, None)
    proc = subprocess.Popen([sys.executable, "-m", "suite", "run", str(SMOKE), "--out", str(tmp_path / "out"),
                             "--workers", "2", *ARGS], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        first = proc.stdout.readline()
        assert first.startswith("starting 2 workers; 8 runs, under a minute of training steps by suite cost's estimate"), \
            first + proc.stderr.read()
        (os.killpg if to == "group" else os.kill)(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err
        assert err.startswith("interrupted: ") and err.count("\n") == 1 and "Traceback" not in err, err
        assert "error this call; 0 skipped; " in err and "run the same command again to finish them" in err
        deadline = time.monotonic() + 15  # the fork server and any worker end with the parent
        while _group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _group_alive(proc.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="blocks SIGINT with pthread_sigmask")
def test_a_ctrl_c_while_the_fork_server_starts_is_delivered_after_it_even_with_other_threads():
    """SIGINT is blocked in the thread that starts the fork server; a kill(2) to the process may then
    go to any other thread (torch's pool has some by then). It was taken there while SIGINT was set to
    SIG_IGN for the server's sake, and lost: the sweep ran to the end, exit 0."""
    script = ("import multiprocessing.forkserver, os, signal, threading, time\n"
              "import suite.sweep.local as local\n"
              "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
              "threading.Thread(target=threading.Event().wait, daemon=True).start()  # SIGINT not blocked there\n"
              "def starting():\n"
              "    os.kill(os.getpid(), signal.SIGINT)\n"
              "    time.sleep(0.5)\n"
              "multiprocessing.forkserver.ensure_running = starting\n"
              "try:\n"
              "    local._start_server()\n"
              "    time.sleep(2)\n"
              "    print('lost')\n"
              "except KeyboardInterrupt:\n"
              "    print('delivered')\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout.split() == ["delivered"], proc.stdout + proc.stderr


def test_runs_made_by_another_commit_are_reported_and_rerun_on_request(smoke_out, tmp_path, capsys):
    out = tmp_path / "copy"
    shutil.copytree(smoke_out, out)
    path = sorted((out / "runs").glob("*/summary.json"))[0]
    old = json.loads(path.read_text())
    path.write_text(json.dumps({**old, "git_commit": "0123456789abcdef+dirty"}))
    with pytest.warns(store.SuiteWarning, match=r"1 finished runs were made by other versions of the suite "
                                                r"\(0123456789: 1\); .*pass --rerun-stale"):
        assert main(["run", str(SMOKE), "--out", str(out), "--dry-run"]) == 0
    with pytest.warns(store.SuiteWarning, match="they will be run again"):
        assert main(["run", str(SMOKE), "--out", str(out), "--rerun-stale", *ARGS]) == 0
    again = json.loads(path.read_text())
    assert again["git_commit"].removesuffix("+dirty") == store.git_commit().removesuffix("+dirty")
    with warnings.catch_warnings():
        warnings.simplefilter("error", store.SuiteWarning)  # no warning now
        assert main(["run", str(SMOKE), "--out", str(out), "--dry-run"]) == 0


def test_runs_per_gpu_starts_k_workers_on_each_gpu(monkeypatch):
    from suite.sweep import plan as plan_module
    from suite.sweep.sweep import Sweep, SweepOptions, _plan

    runs = cpu_runs(SMOKE)
    monkeypatch.setattr(plan_module, "visible_gpus", lambda: ["0", "1"])
    sweep = Sweep("smoke", Path("unused"), None, runs, runs, {}, {})
    worker, _, n = _plan(sweep, SweepOptions(device="cuda", runs_per_gpu=3))
    assert n == 6 and worker.gpus == ["0", "1"]
    assert sorted(worker.gpus[i % len(worker.gpus)] for i in range(n)) == ["0", "0", "0", "1", "1", "1"]


def test_runs_per_gpu_without_a_gpu_is_one_line(tmp_path, capsys):
    assert main(["run", str(SMOKE), "--out", str(tmp_path / "out"), "--runs-per-gpu", "2", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--runs-per-gpu: torch sees no GPU" in err and not (tmp_path / "out").exists()


def test_a_worker_that_meets_a_raw_disk_full_error_stops_cleanly(tmp_path, monkeypatch):
    """ENOSPC that no write wrapped (a metrics flush in a pack's cleanup): the worker reports a full disk,
    as for DiskFull, instead of dying with a traceback printed before the sweep's clean disk-full line."""
    import errno

    import torch

    from suite.sweep import worker as worker_module

    def full(runs, out, on_step=None, width=0, packed=False):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(worker_module, "execute", full)
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))  # the worker sets it
    threads = torch.get_num_threads()
    try:
        counts = worker_module.Worker(str(tmp_path), [cpu_runs(SMOKE)[:2]], poll_s=0.01)(0)
    finally:
        torch.set_num_threads(threads)
    assert counts["disk_full"] == str(tmp_path) and counts["trained"] == 0


def test_a_worker_whose_claim_is_taken_over_mid_run_writes_no_summary(tmp_path, monkeypatch):
    """Another worker takes the claim over while the run trains (its heartbeat has not noticed yet): the
    run's result is dropped right before its summary, and the worker counts it as lost."""
    import warnings

    import torch

    from suite.sweep import claims
    from suite.sweep import worker as worker_module

    real_execute = worker_module.execute

    def stolen(runs, out, on_step=None, width=0, packed=False):
        path = claims.claim_path(out, runs[0].run_id)
        path.write_text(json.dumps({**json.loads(path.read_text()), "token": "theirs"}))  # taken over
        return real_execute(runs, out, on_step=on_step)

    monkeypatch.setattr(worker_module, "execute", stolen)
    monkeypatch.setenv("OMP_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
    (run,) = [r for r in cpu_runs(SMOKE) if (r.variant, r.cfg.model.depth, r.seed) == ("preln", 1, 0)]
    threads = torch.get_num_threads()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            counts = worker_module.Worker(str(tmp_path), [[run]], poll_s=0.01)(0)
    finally:
        torch.set_num_threads(threads)
    assert counts["lost"] == 1 and counts["trained"] == 0
    assert not (tmp_path / "runs" / run.run_id / "summary.json").exists()
    assert any("result dropped" in str(w.message) for w in caught)


def test_a_sweep_whose_largest_run_cannot_fit_in_memory_is_refused_before_anything_is_written(tmp_path, capsys,
                                                                                                monkeypatch):
    from suite.engine import resources

    monkeypatch.setattr(resources, "available_memory", lambda device: 1e3)  # a machine with 1 kB
    out = tmp_path / "out"
    assert main(["run", str(SMOKE), "--out", str(out), *ARGS]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "depth=2" in err[0] and "needs at least" in err[0]  # the largest run is named
    assert not out.exists()
    assert main(["run", str(SMOKE), "--out", str(out), "--dry-run", *ARGS]) == 0  # a dry run allocates nothing


@pytest.mark.skipif(not hasattr(os, "killpg") or shutil.which("timeout") is None, reason="signals a process group")
@pytest.mark.parametrize("how, workers", [("killpg", 1), ("timeout", 2)])
def test_sigterm_to_the_whole_group_checkpoints_every_run_in_flight_and_the_next_run_resumes_it(tmp_path, how, workers,
                                                                                                capsys):
    """Slurm's time limit and `timeout` signal the whole process group: the fork server died of it and took
    its workers with it (their parent-death signal), so the runs in flight left no checkpoint. Each step
    lasts 0.3 s (SLOW_STEP_ENV), so the signal lands mid-step on any machine: a fast step cannot win the race.
    ``timeout``: the signal it sends when its time is up (to the command, then to its own group), sent early."""
    ablation = tmp_path / "long.yaml"
    ablation.write_text(SMOKE.read_text().replace("steps: 30", "steps: 200").replace("model.depth: [1, 2]",
                                                                                      "model.depth: [1]")
                        .replace("seeds: 2", f"seeds: {workers}"))
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop(CRASH_ENV, None)
    env[SLOW_STEP_ENV] = "0.3"
    command = [sys.executable, "-m", "suite", "run", str(ablation), "--out", str(out), "--workers", str(workers),
               "--only", "variant=preln", *ARGS]
    proc = subprocess.Popen((["timeout", "600"] if how == "timeout" else []) + command, cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # until every run has logged a few steps
            logs = sorted(out.glob("runs/*/metrics.jsonl"))
            if len(logs) == workers and all(p.read_text().count('"kind": "train"') >= 3 for p in logs):
                break
            time.sleep(0.1)
        else:
            pytest.fail("the runs never started: " + proc.stderr.read())
        if how == "timeout":
            proc.send_signal(signal.SIGTERM)  # timeout passes it on to the command and to its group
        else:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=120)
        folders = [p.parent for p in logs]
        for folder in folders:
            assert (folder / "checkpoint.pt").is_file() and not (folder / "summary.json").exists()
        events = [json.loads(line) for p in (out / "workers").glob("*.jsonl") for line in p.read_text().splitlines()]
        assert [e.get("reason") for e in events if e["event"] == "stop"] == ["preempted"] * workers
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    capsys.readouterr()
    assert main(["run", str(ablation), "--out", str(out), "--only", "variant=preln", "--dry-run", *ARGS]) == 0
    assert capsys.readouterr().out.count("to resume (from step") == workers  # not listed as plain "to run"
    assert main(["run", str(ablation), "--out", str(out), "--workers", str(workers), "--only", "variant=preln",
                 *ARGS]) == 0
    for folder in folders:
        summary = json.loads((folder / "summary.json").read_text())
        assert summary["status"] in ("ok", "failed") and summary["resumed_at"] and summary["resumed_at"][0] > 0


@pytest.mark.parametrize("dry", [["--dry-run"], []])
def test_an_out_inside_a_file_is_refused_in_one_line(tmp_path, capsys, dry):
    """`--out file.yaml/sub`: the dry run planned 8 runs with a bogus 'is a file, not a run folder' warning each,
    and the real one warned before refusing; both now say it once."""
    plain = tmp_path / "notes.txt"
    plain.write_text("mine\n")
    assert main(["run", str(SMOKE), "--out", str(plain / "sub"), *ARGS, *dry]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{plain} is a file, not a folder" in err
    assert plain.read_text() == "mine\n"


def test_a_renamed_variant_is_refused_before_its_done_runs_count_under_the_new_name(tmp_path, capsys):
    """Renaming a variant keeps its run ids, so its runs counted as done while their summaries kept the old name:
    `suite status` showed the new name and `suite analyze` grouped under the old one."""
    out = tmp_path / "out"
    assert main(["run", str(SMOKE), "--out", str(out), "--only", "variant=preln,model.depth=2", *ARGS]) == 0
    renamed = tmp_path / "smoke.yaml"
    renamed.write_text(SMOKE.read_text().replace("\n  preln:", "\n  pre:"))
    assert "\n  pre:" in renamed.read_text()
    capsys.readouterr()
    assert main(["run", str(renamed), "--out", str(out), *ARGS]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ran as variant 'preln', which the ablation now calls 'pre'" in err


def test_a_run_another_sweep_finished_while_this_one_waited_for_the_lock_is_not_run_again(tmp_path, monkeypatch):
    """A second `suite run` counted what was left ~1 s before it took the folder's lock; a first sweep finishing its
    last run in that window had that run's summary deleted as stale and the run trained twice (an outside review,
    two of two tries). The count is made again under the lock."""
    import contextlib

    from suite.sweep import folder

    out, one = tmp_path / "out", ["--only", "variant=preln,model.depth=1,seed=0"]
    assert main(["run", str(SMOKE), "--out", str(out), *one, *ARGS]) == 0
    summary = next((out / "runs").glob("*/summary.json"))
    finished = summary.read_bytes()
    summary.unlink()  # as this sweep counts: not done yet
    real = folder.prepare_out

    @contextlib.contextmanager
    def first_sweep_finishes_meanwhile(*args, **kw):
        summary.write_bytes(finished)
        with real(*args, **kw):
            yield

    monkeypatch.setattr(folder, "prepare_out", first_sweep_finishes_meanwhile)
    assert main(["run", str(SMOKE), "--out", str(out), *one, *ARGS]) == 0
    assert summary.read_bytes() == finished


@pytest.mark.parametrize("flag", ["--rerun-stale", "--retry-errors"])
def test_a_sweep_stopped_midway_keeps_the_old_summaries_of_the_runs_it_had_not_started(smoke_out, tmp_path, flag,
                                                                                     monkeypatch):
    """--rerun-stale and --retry-errors deleted every summary they were to replace before the first worker started,
    so Ctrl-C lost the old results of the runs not yet run again (an outside sweep review). A summary is now replaced
    only when its run starts; until then it is not counted as done, and a later sweep still sees it."""
    from suite import SweepOptions, run_sweep

    monkeypatch.setenv(SLOW_STEP_ENV, "0.05")  # a run takes about a second: the stop lands inside the second run
    out = tmp_path / "copy"
    shutil.copytree(smoke_out, out)
    paths = sorted((out / "runs").glob("*/summary.json"))
    for path in paths:
        old = json.loads(path.read_text())
        edit = {"git_commit": "0123456789abcdef"} if flag == "--rerun-stale" else {"status": "error", "error": "x"}
        path.write_text(json.dumps({**old, **edit}))
    before = {p: p.read_bytes() for p in paths}
    finished = []

    def stop_after_the_first(sweep, run, result):
        finished.append(run.run_id)
        if len(finished) == 1:
            raise KeyboardInterrupt

    opts = SweepOptions(device="cpu", threads=1, workers=1, rerun_stale=flag == "--rerun-stale",
                        retry_errors=flag == "--retry-errors")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", store.SuiteWarning)
        sweep = run_sweep(SMOKE, out, opts, report=stop_after_the_first)
    # Whatever the machine's speed: every run is redone (reported), or untouched, or the one in flight at the stop
    # (its summary cleared, a checkpoint kept). The old code had cleared every summary before the first run.
    assert sweep.code == 130 and len(sweep.todo) == len(paths) and 1 <= len(finished) <= len(paths) - 2
    for run_id in finished:
        redone = out / "runs" / run_id / "summary.json"
        assert json.loads(redone.read_text())["status"] == "ok" and redone.read_bytes() != before[redone]
    rest = [p for p in paths if p.parent.name not in finished]
    in_flight = [p for p in rest if not p.exists()]
    assert len(in_flight) <= 1 and all(p.read_bytes() == before[p] for p in rest if p.exists())
    with warnings.catch_warnings():  # and they are still to do for the next sweep with the flag
        warnings.simplefilter("ignore", store.SuiteWarning)
        again = run_sweep(SMOKE, out, dataclasses.replace(opts, dry_run=True))
    assert len(again.todo) == len(paths) - len(finished)


def test_retry_errors_while_attached_to_live_workers_retries_once_they_end(tmp_path):
    """Attached to an earlier sweep's live workers (Slurm), --retry-errors took each old error summary for a result
    and never ran those runs (an outside sweep review); nor would a worker have, with the run's attempts spent."""
    from suite.sweep import claims, folder
    from suite.sweep.launcher import Placement
    from suite.sweep.sweep import Sweep, _drive
    from suite.sweep.worker import Worker

    out = tmp_path / "out"
    assert main(["run", str(SMOKE), "--out", str(out), "--only", "model.depth=1,seed=0", *ARGS]) == 0
    runs = [r for r in cpu_runs(SMOKE) if r.cfg.model.depth == 1 and r.seed == 0]
    for r in runs:
        r.cfg.train.threads = 1
    path = folder.run_dir(out, runs[0]) / store.SUMMARY
    path.write_text(json.dumps({**json.loads(path.read_text()), "status": "error", "error": "worker died"}))
    store.write_json(claims.claim_path(out, runs[0].run_id), {"attempt": 3, "pid": 4242, "owner": "gone"})
    todo, done, _ = folder.split_done(runs, out, retry_errors=True)
    assert [r.run_id for r in todo] == [runs[0].run_id]

    class Attached:  # the earlier sweep's jobs: alive for one look, then ended
        looks, started = 0, []

        def attach(self):
            return 1

        def running(self):
            self.looks += 1
            return self.looks == 1

        def start(self, worker, n):
            self.started.append([r.run_id for p in worker.packs for r in p])
            worker(0)  # the new worker, here in this process

        def wait(self, seconds):
            pass

        def stop(self):
            pass

        close = stop

        def exit_of(self, pid):
            return None

    sweep = Sweep("smoke", out, None, runs, todo, done, {}, stale=folder.replaced(out, todo))
    launcher = Attached()
    worker = Worker(str(out), [[r] for r in todo], poll_s=0.01, stale=sweep.stale)
    _drive(sweep, worker, Placement(launcher, 1, 1), 1, None, lambda line: None)
    assert launcher.started == [[runs[0].run_id]]
    assert json.loads(path.read_text())["status"] == "ok" and sweep.results[runs[0].run_id]["status"] == "ok"
