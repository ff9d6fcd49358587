"""Executors: take the expanded runs of an ablation and bring each to a final ``summary.json``.

Two backends share one run function (:func:`execute`, which calls :func:`suite.train.train`):

- ``local``: long-lived worker processes (``spawn``), each fed one run at a time over its own pipe,
  so the parent always knows which run a worker holds. A worker that dies (segfault, ``os._exit``,
  OOM kill) has its run recorded as ``error`` by the parent and is replaced; the sweep goes on.
  Workers ignore SIGINT (the parent decides how to stop) and die with the parent, even on SIGKILL.
- ``ray``: one Ray task per run (``num_gpus=1``, or ``num_cpus=threads`` on CPU); tasks write into
  the shared results folder themselves.

Resuming needs no bookkeeping: a run is done when ``runs/<run_id>/summary.json`` exists (written
atomically, last); anything else is run (again) next time.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any, Callable, Iterator

import yaml

from suite import store
from suite.spec import Ablation, Run

# Test hook, read by workers only: `SUITE_TEST_CRASH_RUN=<run_id>` makes the worker that picks up
# that run die with os._exit(3), the only way to test worker death across processes.
CRASH_ENV = "SUITE_TEST_CRASH_RUN"
RESULT_KEYS = ("status", "test_acc", "diverged_step", "diverged_reason", "error", "wall_s")


class RunnerError(Exception):
    """A user error found before any run starts (busy or foreign folder, no GPU, no Ray)."""


def run_dir(out: Path, run: Run) -> Path:
    return Path(out) / "runs" / run.run_id


# ----------------------------------------------------------------------------- the results folder


@contextlib.contextmanager
def prepare_out(out: Path, ablation: Ablation) -> Iterator[None]:
    """Check that ``out`` belongs to this ablation, lock it, and write ``ablation.yaml``.

    The exclusive lock is held for the sweep's lifetime, so two sweeps never run the same runs at
    once; the OS drops it when the process dies, even by SIGKILL.

    Raises:
        RunnerError: ``out`` holds another ablation (two ablations never share a folder), or another
            ``suite run`` is using it.
    """
    out = Path(out)
    check_out(out, ablation)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "a") as lock:
        try:
            import fcntl

            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # no fcntl (Windows): no lock, the rest works
            pass
        except OSError:
            raise RunnerError(f"{out}: another `suite run` is writing here; wait for it or pass --out DIR") from None
        text = yaml.safe_dump(ablation.resolved, sort_keys=False)
        marker = out / "ablation.yaml"
        if not marker.exists() or marker.read_text() != text:  # a rerun with nothing to do writes nothing
            store.atomic_write_text(marker, text)
        yield


def check_out(out: Path, ablation: Ablation) -> None:
    """Raise :class:`RunnerError` unless ``out`` is new or holds this ablation (reads only)."""
    marker = out / "ablation.yaml"
    if marker.exists():
        try:
            other = (yaml.safe_load(marker.read_text()) or {}).get("name")
        except (yaml.YAMLError, AttributeError):
            other = None
        if other != ablation.name:
            raise RunnerError(f"{out}: holds the runs of ablation '{other}' (see {marker}), not "
                              f"'{ablation.name}'; pass --out DIR to write elsewhere")
    elif (out / "runs").is_dir() and any((out / "runs").iterdir()):
        raise RunnerError(f"{out}: has runs but no ablation.yaml, so they are not from '{ablation.name}'; "
                          f"pass --out DIR to write elsewhere")


def split_done(runs: list[Run], out: Path, retry_errors: bool) -> tuple[list[Run], dict[str, dict]]:
    """Runs still to do, and the summaries of those already finished (skipped this time).

    ``ok`` / ``diverged`` / ``failed`` are final; ``error`` is final unless ``retry_errors``.
    """
    todo, done = [], {}
    for run in runs:
        summary = store.read_summary(run_dir(out, run))
        status = summary.get("status") if summary else None
        if status in store.FINAL_STATUSES or (status == "error" and not retry_errors):
            done[run.run_id] = summary
        else:
            todo.append(run)
    return todo, done


# ----------------------------------------------------------------------------- one run


def clear_stale(out: Path, run: Run) -> None:
    """Drop the old ``error`` summary of a run about to be retried, so that if its process dies
    before training starts, :func:`record_lost` does not mistake that summary for a new one."""
    (run_dir(out, run) / store.SUMMARY).unlink(missing_ok=True)


def execute(cfg, out_dir: str, extra: dict[str, Any]) -> dict[str, Any]:
    """Train one run into ``out_dir`` (always writes its summary); returns the headline results."""
    if os.environ.get(CRASH_ENV) == store.run_id(cfg):
        os._exit(3)
    from suite.train import train

    summary = train(cfg, out_dir, progress=False, extra=extra)
    return {k: summary.get(k) for k in RESULT_KEYS}


def record_lost(run: Run, out: Path, message: str, wall_s: float, device: str) -> dict[str, Any]:
    """Write an ``error`` summary for a run whose process died before it could write one.

    Same shape as :func:`suite.train.train`'s summary. If the run did write its summary before
    dying, that one is kept.
    """
    folder = run_dir(out, run)
    existing = store.read_summary(folder)
    if existing is not None:
        return {k: existing.get(k) for k in RESULT_KEYS}
    trains = [m for m in store.read_metrics(folder) if m.get("kind") == "train"] if folder.exists() else []
    summary = store.empty_summary(run.cfg, {**run.extra, "seed": run.seed})
    summary.update(error=message, steps_done=trains[-1]["step"] if trains else 0,
                   **store.provenance(device, name=device), wall_s=round(wall_s, 3))
    store.write_json(folder / store.SUMMARY, summary)
    return {k: summary.get(k) for k in RESULT_KEYS}


# ----------------------------------------------------------------------------- local backend

Report = Callable[[Run, dict[str, Any]], None]


def _worker_main(conn, env: dict[str, str], parent_pid: int) -> None:
    """A worker process: set the environment before torch loads, then run what the parent sends."""
    os.environ.update(env)  # CUDA_VISIBLE_DEVICES / OMP_NUM_THREADS must precede `import torch`
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the parent stops us
    _die_with_parent(parent_pid)
    import suite.train  # noqa: F401  (load torch now, while the parent is still busy)

    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        conn.send(execute(*task))


def _die_with_parent(parent_pid: int) -> None:
    """Exit when the parent dies, even by SIGKILL: a killed sweep must not leave workers behind."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

    def watch() -> None:  # portable fallback, and covers a parent that died before prctl
        while os.getppid() == parent_pid:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


class _Worker:
    """One worker process and the run it is holding (``None`` when idle)."""

    def __init__(self, ctx, env: dict[str, str], device: str) -> None:
        self.env, self.device = env, device
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, env, os.getpid()), daemon=True)
        self.proc.start()
        child.close()
        self.run: Run | None = None
        self.started = 0.0

    def assign(self, run: Run, out: Path) -> None:
        self.run, self.started = run, time.perf_counter()
        clear_stale(out, run)
        with contextlib.suppress(OSError):  # a worker dead already: poll() records it with this run
            self.conn.send((run.cfg, str(run_dir(out, run)), run.extra))

    def poll(self) -> tuple[str, Any]:
        """``("result", dict)``, ``("died", exitcode)`` or ``("busy", None)``."""
        for _ in range(2):  # a worker may send its result and then die: read the pipe first
            if self.conn.poll():
                try:
                    return "result", self.conn.recv()
                except (EOFError, OSError):
                    break
            if self.proc.is_alive():
                return "busy", None
        self.proc.join(1)
        return "died", self.proc.exitcode

    def stop(self, now: bool) -> None:
        if now:
            self.proc.terminate()
        else:
            with contextlib.suppress(OSError):
                self.conn.send(None)
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


def run_local(todo: list[Run], out: Path, report: Report, *, workers: int, gpus: list[str],
              threads: int) -> None:
    """Run ``todo`` in ``workers`` processes; each finished run is passed to ``report``.

    Args:
        gpus: visible GPU ids; worker i gets ``CUDA_VISIBLE_DEVICES=gpus[i % len(gpus)]``.
            Empty: CPU only, ``CUDA_VISIBLE_DEVICES`` is emptied.
        threads: ``OMP_NUM_THREADS`` for each worker (the configs carry ``train.threads``).

    Raises:
        KeyboardInterrupt: after stopping every worker; unfinished runs keep no summary.
    """
    ctx = multiprocessing.get_context("spawn")  # fork would copy the parent's threads and locks

    def start(slot: int) -> _Worker:
        gpu = gpus[slot % len(gpus)] if gpus else ""
        env = {"CUDA_VISIBLE_DEVICES": gpu, "OMP_NUM_THREADS": str(threads)}
        return _Worker(ctx, env, f"cuda:{gpu}" if gpus else "cpu")

    queue = collections.deque(todo)
    pool: list[_Worker | None] = [start(i) for i in range(min(workers, len(todo)))]
    interrupted = True
    try:
        while queue or any(w and w.run for w in pool):
            for w in pool:
                if w and w.run is None and queue:
                    w.assign(queue.popleft(), out)
            busy = [w for w in pool if w and w.run is not None]
            wait([x for w in busy for x in (w.conn, w.proc.sentinel)], timeout=5)
            for i, w in enumerate(pool):
                if w is None or w.run is None:
                    continue
                state, value = w.poll()
                if state == "busy":
                    continue
                run, wall, w.run = w.run, time.perf_counter() - w.started, None
                if state == "died":
                    how = f"killed by signal {-value}" if value is not None and value < 0 else f"exit code {value}"
                    value = record_lost(run, out, f"worker process died with {how}", wall, w.device)
                    # A replacement takes the dead worker's slot (and GPU), if there is work left for it.
                    pool[i] = start(i) if queue else None
                report(run, value)
        interrupted = False
    finally:
        for w in pool:
            if w is not None:
                w.stop(now=interrupted)


# ----------------------------------------------------------------------------- Ray backend


def run_ray(todo: list[Run], out: Path, report: Report, *, address: str | None, device: str,
            threads: int) -> None:
    """Run ``todo`` as Ray tasks; ``out`` must be a folder every node sees at the same path.

    Args:
        address: a running cluster (``ray start --head`` prints it); ``None`` starts a local one.
        device: ``cpu``, ``cuda``, or ``auto`` (GPU tasks if the cluster has GPUs).
        threads: CPUs each CPU task reserves (and its torch threads).

    Raises:
        RunnerError: Ray is not installed, or the cluster cannot be reached.
    """
    try:
        import ray
    except ImportError:
        raise RunnerError("--backend ray needs Ray: pip install -e '.[ray]'") from None
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no telemetry unless the user opts in
    try:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(include_dashboard=False, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise RunnerError(f"--ray-address {address}: cannot connect to Ray ({str(err).splitlines()[0]}); "
                          f"pass the address `ray start --head` printed, and set RAY_AUTH_MODE=token here "
                          f"if the cluster uses token authentication") from None
    pending: dict[Any, tuple[Run, float]] = {}
    try:
        gpu = device == "cuda" or (device == "auto" and ray.cluster_resources().get("GPU", 0) > 0)
        if device == "cuda" and not ray.cluster_resources().get("GPU", 0):
            raise RunnerError("--device cuda: the Ray cluster has no GPUs; use --device cpu or auto")
        resources = {"num_gpus": 1} if gpu else {"num_cpus": threads}
        task = ray.remote(max_retries=0, **resources)(execute)  # a crash is recorded, not retried
        for run in todo:
            clear_stale(out, run)
            ref = task.remote(run.cfg, str(run_dir(out, run).resolve()), run.extra)
            pending[ref] = (run, time.perf_counter())
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                run, t0 = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayError as err:
                    message = f"Ray task failed: {type(err).__name__}: {str(err).splitlines()[0]}"
                    result = record_lost(run, out, message[:500], time.perf_counter() - t0, "ray")
                report(run, result)
    finally:
        for ref in pending:  # left over only after Ctrl-C or an error: stop them
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        ray.shutdown()
