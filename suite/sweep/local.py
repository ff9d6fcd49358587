"""The local launcher: N :class:`~suite.sweep.worker.Worker` processes here, forked in milliseconds from a fork server
that imported torch once (docs/backends/local.md). Workers and server ignore SIGINT (the parent decides), the server
never acts on SIGTERM, workers die with the parent even on SIGKILL, and SIGTERM makes each run checkpoint and end."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import multiprocessing.reduction
import multiprocessing.resource_tracker
import os
import signal
import sys
import threading
import time
from pathlib import Path

from suite import store
from suite.sweep import claims, plan
from suite.sweep.folder import RunnerError
from suite.sweep.guard import unguarded_call
from suite.sweep.launcher import Backend, Placement, devices
from suite.sweep.options import SweepOptions
from suite.sweep.spec import Run
from suite.sweep.worker import Worker, signal_handlers

DISK_FULL_EXIT = 28  # a worker's exit status when it found no space left (ENOSPC)
SERVER_BLOCKS = {signal.SIGINT, signal.SIGTERM}  # what the fork server never acts on (_start_server)


# What the fork server imports once: server first (the collector off meanwhile); torch._dynamo because building an
# optimizer imports it (seconds); this module because each worker unpickles its target from it (pandas: 0.35 s a worker)
PRELOAD = ["suite.sweep.server", "suite.engine.loop", "torch._dynamo", "suite.sweep.local"]


def _main(worker: Worker, index: int, parent_pid: int, environ: dict[str, str], stdio: tuple) -> None:
    gc.freeze()  # the server's modules (torch's): never scanned by this worker's collections, nor their pages copied
    gc.enable()  # off in the server (suite.sweep.server)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # blocked in the fork server (_start_server): not in what a run starts
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _die_with_parent(parent_pid)
    os.environ.clear()
    os.environ.update(environ)
    sys.stdout.flush(), sys.stderr.flush()
    for target, fd in zip((1, 2), stdio):
        if fd is not None and (inherited := fd.detach()) != target:
            os.dup2(inherited, target)
            os.close(inherited)
    counts = worker(index)
    if counts["disk_full"]:
        sys.exit(DISK_FULL_EXIT)


def _die_with_parent(parent_pid: int) -> None:
    """Exit when the parent dies, even by SIGKILL: a killed sweep must not leave workers behind."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

    def watch() -> None:  # portable fallback, and covers a parent that died before prctl
        own_parent = os.getppid()
        while os.getppid() == own_parent and claims.alive(parent_pid):
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


class _Stdio:
    """The parent's standard output and error as they are when a worker starts, pickled as descriptors."""

    def __reduce__(self):
        fds = []
        for fd in (1, 2):
            try:
                os.fstat(fd)
                fds.append(multiprocessing.reduction.DupFd(fd))
            except OSError:
                fds.append(None)
        return tuple, (fds,)


def _start_server() -> None:
    """Start the fork server with SIGINT and SIGTERM blocked (a group-wide signal would kill it and its workers before
    their runs checkpoint); workers inherit the mask; a SIGINT that came meanwhile is raised again here."""
    multiprocessing.resource_tracker.ensure_running()  # first: it unblocks SIGINT when it has started its own
    if not hasattr(signal, "pthread_sigmask"):
        multiprocessing.forkserver.ensure_running()
        return
    came: list[int] = []
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, SERVER_BLOCKS)
    try:
        with signal_handlers({sig: lambda signum, frame: came.append(signum) for sig in SERVER_BLOCKS}):
            multiprocessing.forkserver.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    for signum in dict.fromkeys(came):
        signal.raise_signal(signum)  # to the handler that was there before: KeyboardInterrupt in a sweep


def source_stamp() -> int:
    """The newest modification time (ns) of the suite's source files."""
    return max(f.stat().st_mtime_ns for f in Path(__file__).resolve().parents[1].rglob("*.py"))


_served_stamp: int | None = None  # source_stamp() when the fork server was last asked for


def _context() -> multiprocessing.context.BaseContext:
    """The fork server's context; spawn where there is none, or once the suite's source changed since the server
    started (it keeps the code it imported, and Python has no public way to stop it)."""
    global _served_stamp
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    stamp = source_stamp()
    if _served_stamp not in (None, stamp):
        return multiprocessing.get_context("spawn")
    _served_stamp = stamp
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)  # takes effect when the server starts
    return ctx


def _started() -> multiprocessing.context.BaseContext:
    """:func:`_context`, its fork server started (it imports in the background: ``suite run`` plans meanwhile)."""
    ctx = _context()
    if ctx.get_start_method() == "forkserver":
        _start_server()
    return ctx


class LocalLauncher:
    """Starts, watches and stops the worker processes of one sweep."""

    def __init__(self, out) -> None:
        self.out, self.procs = out, []

    def attach(self) -> int:
        return 0  # workers of an earlier `suite run` died with it

    def start(self, worker: Worker, n: int) -> str | None:
        ctx = _started()  # never a plain fork of this process: it would copy its threads and locks
        # Not daemons: a daemon may not start children, and a run's DataLoader workers are children.
        self.procs = [ctx.Process(target=_main, args=(worker, i, os.getpid(), dict(os.environ), _Stdio()))
                      for i in range(n)]
        self.grace_s = worker.grace_s
        for p in self.procs:  # a Ctrl-C here leaves the rest unstarted: stop() skips them
            p.start()
        return None

    def running(self) -> bool:
        if any(p.exitcode == DISK_FULL_EXIT for p in self.procs):
            raise store.DiskFull(self.out)
        return any(p.is_alive() for p in self.procs)

    def wait(self, seconds: float) -> None:
        alive = [p.sentinel for p in self.procs if p.pid is not None and p.exitcode is None]
        if alive:
            multiprocessing.connection.wait(alive, seconds)  # returns as soon as one of them ends
        else:
            time.sleep(seconds)

    def exit_of(self, pid: int | None) -> str | None:
        """How worker process ``pid`` ended (``exit code 3``, ``killed by signal 9``); None while it runs."""
        code = next((p.exitcode for p in self.procs if p.pid == pid), None)
        return None if not code else f"exit code {code}" if code > 0 else f"killed by signal {-code}"

    def stop(self) -> None:
        """SIGTERM (each run checkpoints at its next step), then SIGKILL for a worker stuck past its grace time."""
        started = [p for p in self.procs if p.pid is not None]  # not those a Ctrl-C kept from starting
        for p in started:
            if p.is_alive():
                p.terminate()
        deadline = time.monotonic() + getattr(self, "grace_s", 0) + 5
        for p in started:
            p.join(max(0.1, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join()

    close = stop


class LocalBackend(Backend):
    """``--backend local``: worker processes on this machine, one per GPU by default (else 1)."""

    name = "local"

    def check(self, opts: SweepOptions) -> None:
        if opts.runs_per_gpu is not None and opts.workers is not None:
            raise RunnerError("--runs-per-gpu and --workers: pass one of them (--runs-per-gpu K starts K workers "
                              "per GPU)")

    def auto_device(self, opts: SweepOptions) -> str:
        return "cuda" if plan.visible_gpus() else "cpu"

    def runs_here(self, opts: SweepOptions) -> bool:
        return True

    def place(self, out: Path, todo: list[Run], opts: SweepOptions) -> Placement:
        """Raises RunnerError: ``cuda`` or ``--runs-per-gpu`` without a GPU, or a script each worker would rerun."""
        if where := unguarded_call():
            raise RunnerError(f"run_sweep: called by {where} outside `if __name__ == \"__main__\":`; each local "
                              f"worker imports that script again, which would start the sweep again; put the call "
                              f"under `if __name__ == \"__main__\":` (docs/ablations.md#from-python-run_sweep)")
        wanted = devices(todo, opts)
        gpus = plan.visible_gpus() if wanted != {"cpu"} else []
        if "cuda" in wanted and not gpus:
            raise RunnerError("--device cuda: torch sees no CUDA device; use --device cpu or auto")
        if opts.runs_per_gpu and not gpus:
            raise RunnerError("--runs-per-gpu: torch sees no GPU here (or --device cpu); use --workers N for runs "
                              "on the CPU")
        workers = opts.workers or max(1, len(gpus)) * (opts.runs_per_gpu or 1)
        _started()  # the fork server imports torch now, while the sweep plans and measures its estimate
        return Placement(LocalLauncher(out), workers, opts.threads, "cuda" if gpus else "cpu", gpus)
