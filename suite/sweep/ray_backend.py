"""The Ray backend: one Ray task per run (``num_gpus=1``, or ``num_cpus=threads`` on CPU).

Tasks write into the shared results folder themselves, through the same :func:`execute` as the
local backend.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

from suite.sweep.folder import RunnerError, clear_stale, run_dir
from suite.sweep.local import Report
from suite.sweep.spec import Run
from suite.sweep.task import check_result, execute, record_lost


def connect(address: str | None, timeout: float = 30.0) -> None:
    """Join the Ray cluster at ``address`` (or start a local one), within ``timeout`` seconds.

    Called before anything is written into the results folder, so a wrong address leaves no trace.

    Raises:
        RunnerError: Ray is not installed, the address is malformed, nothing answers there, or Ray
            does not connect in time.
    """
    try:
        import ray
    except ImportError:
        raise RunnerError("--backend ray needs Ray: pip install -e '.[ray]'") from None
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no telemetry unless the user opts in
    deadline = time.monotonic() + timeout
    if address:
        host, _, port = address.rpartition(":")
        if not port.isdigit() or not host:
            raise RunnerError(f"--ray-address {address}: expected HOST:PORT, e.g. 10.0.0.1:6379")
        # Ray itself retries an unreachable address for minutes without a word: probe the port first.
        while True:
            try:
                socket.create_connection((host, int(port)), timeout=max(0.1, min(2.0, deadline - time.monotonic()))).close()
                break
            except OSError as err:
                if time.monotonic() >= deadline:
                    raise RunnerError(f"--ray-address {address}: nothing answers there after {timeout:g} s "
                                      f"({err.strerror or err}); start the cluster with `ray start --head`, pass the "
                                      f"address it prints, or raise --ray-timeout") from None
                time.sleep(0.5)
    where = f"--ray-address {address}" if address else "a local Ray instance"
    # ray.init must run in the main thread (started elsewhere, its node dies a minute later), so the
    # time limit is an alarm there rather than a thread we could abandon.
    alarm = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    if alarm:
        def give_up(signum, frame):
            raise TimeoutError

        previous = signal.signal(signal.SIGALRM, give_up)
        signal.setitimer(signal.ITIMER_REAL, max(0.1, deadline - time.monotonic()))
    try:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(include_dashboard=False, log_to_driver=False)
    except TimeoutError:
        raise RunnerError(f"{where}: Ray did not connect within {timeout:g} s; check the address (a Ray head "
                          f"prints it), or raise --ray-timeout") from None
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise RunnerError(f"{where}: cannot connect to Ray ({str(err).splitlines()[0]}); pass the address "
                          f"`ray start --head` printed, and set RAY_AUTH_MODE=token here if the cluster uses "
                          f"token authentication") from None
    finally:
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


def task_resources(gpu: bool, threads: int, runs_per_gpu: int = 1) -> dict[str, float]:
    """What one run's Ray task reserves: a share of a GPU, or ``threads`` CPUs."""
    return {"num_gpus": 1 / runs_per_gpu} if gpu else {"num_cpus": threads}


def run_ray(todo: list[Run], out: Path, report: Report, *, address: str | None, device: str,
            threads: int, runs_per_gpu: int = 1) -> None:
    """Run ``todo`` as Ray tasks; ``out`` must be a folder every node sees at the same path.

    Args:
        address: a running cluster (``ray start --head`` prints it); ``None`` starts a local one.
            Already connected by :func:`connect` when called from ``suite run``.
        device: ``cpu``, ``cuda``, or ``auto`` (GPU tasks if the cluster has GPUs).
        threads: CPUs each CPU task reserves (and its torch threads).
        runs_per_gpu: GPU tasks share a GPU this many at a time (``num_gpus = 1 / runs_per_gpu``).

    Raises:
        RunnerError: Ray is not installed, or the cluster cannot be reached.
    """
    connect(address)
    import ray

    pending: dict[Any, tuple[Run, float]] = {}
    try:
        gpu = device == "cuda" or (device == "auto" and ray.cluster_resources().get("GPU", 0) > 0)
        if device == "cuda" and not ray.cluster_resources().get("GPU", 0):
            raise RunnerError("--device cuda: the Ray cluster has no GPUs; use --device cpu or auto")
        resources = task_resources(gpu, threads, runs_per_gpu)
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
                report(run, check_result(result))
    finally:
        for ref in pending:  # left over only after Ctrl-C or an error: stop them
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        ray.shutdown()
