"""The Ray launcher: N Ray tasks, each a :class:`~suite.sweep.worker.Worker` pulling runs from the results folder
(every node must see it at the same path); Ctrl-C cancels them (docs/backends/ray.md). Ray's pickles never touch the
results folder (results/README.md, Security)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import time
import warnings
from pathlib import Path
from typing import Mapping

from suite import store
from suite.sweep.folder import RunnerError
from suite.sweep.launcher import Backend, Placement, devices
from suite.sweep.options import SweepOptions
from suite.sweep.spec import Run
from suite.sweep.worker import Worker, signal_handlers


def init_address(address: str | None, environ: Mapping[str, str]) -> tuple[str, str | None]:
    """(the address for ``ray.init``, a note or None). Without ``--ray-address``, ``"local"``: ``address=None`` would
    join ``RAY_ADDRESS``'s cluster or the last ``ray start`` here (docs/backends/ray.md)."""
    if address:
        return address, None
    named = environ.get("RAY_ADDRESS", "").strip()
    note = (f"RAY_ADDRESS={named} ignored: starting a private Ray instance; pass --ray-address {named} to join "
            f"that cluster" if named else None)
    return "local", note


def connect(address: str | None, timeout: float = 30.0) -> None:
    """Join the Ray cluster at ``address`` (or start a private one) within ``timeout`` seconds; else RunnerError."""
    try:
        import ray
    except ImportError:
        raise RunnerError("--backend ray needs Ray: pip install -e '.[ray]'") from None
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no telemetry unless the user opts in
    target, note = init_address(address, os.environ)
    if note:
        warnings.warn(note, store.SuiteWarning, stacklevel=2)
    where = f"--ray-address {address}" if address else "a local Ray instance"
    hint = "pass the address `ray start --head` printed, or raise --ray-timeout"
    if address:  # Ray retries an unreachable address for minutes without a word: probe the port first
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=timeout).close()
        except (OSError, ValueError) as err:
            raise RunnerError(f"{where}: nothing answers there ({err}); {hint}") from None

    def give_up(signum, frame):
        raise TimeoutError

    # ray.init must run in the main thread (its node dies otherwise), so the time limit is an alarm.
    with signal_handlers({signal.SIGALRM: give_up}) as alarm:
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            ray.init(address=target, log_to_driver=False, **({} if address else {"include_dashboard": False}))
        except TimeoutError:
            raise RunnerError(f"{where}: Ray did not connect within {timeout:g} s; {hint}") from None
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise RunnerError(f"{where}: cannot connect to Ray ({str(err).splitlines()[0]}); {hint}, and set "
                              f"RAY_AUTH_MODE=token here if the cluster uses token authentication") from None
        finally:
            if alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)


def has_gpus() -> bool:
    import ray

    return ray.cluster_resources().get("GPU", 0) > 0


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

    def start(self, worker: Worker, n: int) -> None:
        import ray

        task = ray.remote(max_retries=0, **self.resources)(_main)  # a dead task's runs are taken over instead
        self.refs = [task.remote(worker, i) for i in range(n)]

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

    def wait(self, seconds: float) -> None:
        time.sleep(seconds)

    def stop(self) -> None:
        import ray

        for ref in self.refs:
            with contextlib.suppress(Exception):  # already finished
                ray.cancel(ref, force=True)

    def close(self) -> None:
        import ray

        self.stop()
        ray.shutdown()

    def exit_of(self, pid: int | None) -> str | None:
        return None  # a task's process is the cluster's


class RayBackend(Backend):
    """``--backend ray``: Ray tasks on a private instance here, or on the cluster ``--ray-address`` names."""

    name = "ray"

    def check(self, opts: SweepOptions) -> None:
        if importlib.util.find_spec("ray") is None:  # fail before writing anything
            raise RunnerError("--backend ray needs Ray: pip install -e '.[ray]'")

    def auto_device(self, opts: SweepOptions) -> str:
        connect(opts.ray_address, opts.ray_timeout)
        return "cuda" if has_gpus() else "cpu"

    def runs_here(self, opts: SweepOptions) -> bool:
        return opts.ray_address is None  # the private instance's tasks are processes of this machine

    def place(self, out: Path, todo: list[Run], opts: SweepOptions) -> Placement:
        """Raises RunnerError: Ray does not connect, or ``cuda`` on a cluster without GPUs."""
        connect(opts.ray_address, opts.ray_timeout)
        wanted = devices(todo, opts)
        if "cuda" in wanted and not has_gpus():
            raise RunnerError("--device cuda: the Ray cluster has no GPUs; use --device cpu or auto")
        threads = opts.threads or 1
        gpu = has_gpus() and wanted != {"cpu"}
        launcher = RayLauncher({"num_gpus": 1 / (opts.runs_per_gpu or 1)} if gpu else {"num_cpus": threads})
        return Placement(launcher, opts.workers or launcher.capacity(), threads, "cuda" if gpu else "cpu")
