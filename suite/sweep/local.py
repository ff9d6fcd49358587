"""The local launcher: N worker processes (``spawn``) on this machine, each a :class:`~suite.sweep.worker.Worker`.

Workers ignore SIGINT (Ctrl-C reaches the whole process group; the parent decides how to stop)
and die with the parent, even on SIGKILL. On Ctrl-C or SIGTERM the parent sends each worker
SIGTERM: a worker's run checkpoints at its next step and the next ``suite run`` resumes it.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time

from suite import store
from suite.sweep.worker import Worker

DISK_FULL_EXIT = 28  # a worker's exit status when it found no space left (ENOSPC)


def _main(worker: Worker, index: int, parent_pid: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent_pid)
    counts = worker(index)
    if counts["disk_full"]:
        sys.exit(DISK_FULL_EXIT)


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


class LocalLauncher:
    """Starts, watches and stops the worker processes of one sweep."""

    def __init__(self, out) -> None:
        self.out, self.procs = out, []

    def attach(self) -> int:
        return 0  # workers of an earlier `suite run` died with it

    def start(self, worker: Worker, n: int) -> str | None:
        ctx = multiprocessing.get_context("spawn")  # fork would copy the parent's threads and locks
        # Not daemons: a daemon may not start children, and a run's DataLoader workers are children.
        self.procs = [ctx.Process(target=_main, args=(worker, i, os.getpid())) for i in range(n)]
        for p in self.procs:
            p.start()
        self.grace_s = worker.grace_s
        return None

    def running(self) -> bool:
        if any(p.exitcode == DISK_FULL_EXIT for p in self.procs):
            raise store.DiskFull(self.out)
        return any(p.is_alive() for p in self.procs)

    def exit_of(self, pid: int | None) -> str | None:
        """How worker process ``pid`` ended (``exit code 3``, ``killed by signal 9``); None while it runs."""
        code = next((p.exitcode for p in self.procs if p.pid == pid), None)
        return None if not code else f"exit code {code}" if code > 0 else f"killed by signal {-code}"

    def stop(self) -> None:
        """SIGTERM (each run checkpoints at its next step), then SIGKILL for a worker stuck past its grace time."""
        for p in self.procs:
            if p.is_alive():
                p.terminate()
        deadline = time.monotonic() + getattr(self, "grace_s", 0) + 5
        for p in self.procs:
            p.join(max(0.1, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join()

    close = stop
