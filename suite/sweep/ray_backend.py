"""The Ray launcher: N Ray tasks, each a :class:`~suite.sweep.worker.Worker` pulling runs from the
results folder (which every node must see at the same path).

Each task reserves ``num_gpus = 1 / --runs-per-gpu``, or ``num_cpus = --threads`` on CPU. A task whose
process dies leaves a dead claim that another worker takes over (the lost-run rule of
:mod:`suite.sweep.worker`). On Ctrl-C the tasks are cancelled; the next ``suite run`` resumes their runs.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

from suite import store
from suite.sweep.folder import RunnerError
from suite.sweep.worker import Worker


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


def _main(worker: Worker, index: int) -> dict:
    return worker(index)


class RayLauncher:
    """Starts, watches and cancels the worker tasks of one sweep (Ray already joined by :func:`connect`)."""

    def __init__(self, resources: dict[str, float]) -> None:
        self.resources, self.refs = resources, []

    def attach(self) -> int:
        return 0

    def capacity(self) -> int:
        """How many worker tasks the cluster runs at once."""
        import ray

        (kind, share), = self.resources.items()
        return max(1, int(ray.cluster_resources().get("GPU" if kind == "num_gpus" else "CPU", 1) / share))

    def start(self, worker: Worker, n: int) -> str | None:
        import ray

        task = ray.remote(max_retries=0, **self.resources)(_main)  # a dead task's runs are taken over instead
        self.refs = [task.remote(worker, i) for i in range(n)]
        return None

    def running(self) -> bool:
        import ray

        ready, busy = ray.wait(self.refs, num_returns=len(self.refs), timeout=0)
        for ref in ready:
            try:
                full = ray.get(ref)["disk_full"]
            except ray.exceptions.RayError:  # the task died: its claims are dead
                continue
            if full:
                raise store.DiskFull(full)
        return bool(busy)

    def stop(self) -> None:
        import ray

        for ref in self.refs:
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001  (already finished)
                pass

    def close(self) -> None:
        import ray

        self.stop()
        ray.shutdown()
