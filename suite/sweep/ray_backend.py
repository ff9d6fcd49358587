"""The Ray backend: one Ray task per run (``num_gpus=1``, or ``num_cpus=threads`` on CPU).

Tasks write into the shared results folder themselves, through the same :func:`execute` as the
local backend.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

from suite.sweep.folder import RunnerError, clear_stale, run_dir
from suite.sweep.local import Report
from suite.sweep.spec import Run
from suite.sweep.task import execute, record_lost


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
