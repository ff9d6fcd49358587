"""The local backend: long-lived worker processes (``spawn``), each fed one run at a time.

Each worker has its own pipe, so the parent always knows which run a worker holds. A worker that
dies (segfault, ``os._exit``, OOM kill) has its run recorded as ``error`` by the parent and is
replaced; the sweep goes on. Workers ignore SIGINT (the parent decides how to stop) and die with the
parent, even on SIGKILL.
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
from typing import Any, Callable

from suite import store
from suite.sweep.folder import clear_stale, run_dir
from suite.sweep.spec import Run
from suite.sweep.task import check_result, execute_pack, record_lost

Report = Callable[[Run, dict[str, Any]], None]


def _worker_main(conn, env: dict[str, str], parent_pid: int) -> None:
    """A worker process: set the environment before torch loads, then run what the parent sends."""
    os.environ.update(env)  # CUDA_VISIBLE_DEVICES / OMP_NUM_THREADS must precede `import torch`
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the parent stops us
    _die_with_parent(parent_pid)
    store.one_line_warnings()
    import suite.engine.loop  # noqa: F401  (load torch now, while the parent is still busy)

    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        conn.send(execute_pack(task))


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
    """One worker process and the runs it is holding (one, or a pack; ``None`` when idle)."""

    def __init__(self, ctx, env: dict[str, str], device: str) -> None:
        self.env, self.device = env, device
        self.conn, child = ctx.Pipe()
        # Not a daemon: a daemon may not start children, and a run's DataLoader workers are children.
        # Workers still die with the parent (`_die_with_parent`) and are stopped in `run_local`'s finally.
        self.proc = ctx.Process(target=_worker_main, args=(child, env, os.getpid()), daemon=False)
        self.proc.start()
        child.close()
        self.run: list[Run] | None = None
        self.started = 0.0

    def assign(self, runs: list[Run], out: Path) -> None:
        self.run, self.started = runs, time.perf_counter()
        for run in runs:
            clear_stale(out, run)
        with contextlib.suppress(OSError):  # a worker dead already: poll() records it with these runs
            self.conn.send([(run.cfg, str(run_dir(out, run)), run.extra) for run in runs])

    def poll(self) -> tuple[str, Any]:
        """``("result", [dict, ...])``, ``("died", exitcode)`` or ``("busy", None)``."""
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


def gpu_for(slot: int, gpus: list[str]) -> str:
    """The GPU of worker ``slot``: round robin, so ``K x len(gpus)`` workers put K on each GPU
    (``--runs-per-gpu K``); ``""`` (no GPU) when there are none."""
    return gpus[slot % len(gpus)] if gpus else ""


def run_local(todo: list[Run], out: Path, report: Report, *, workers: int, gpus: list[str],
              threads: int, pack: int = 1) -> None:
    """Run ``todo`` in ``workers`` processes; each finished run is passed to ``report``.

    Args:
        gpus: visible GPU ids; worker i gets ``CUDA_VISIBLE_DEVICES=gpus[i % len(gpus)]``.
            Empty: CPU only, ``CUDA_VISIBLE_DEVICES`` is emptied.
        threads: ``OMP_NUM_THREADS`` for each worker (the configs carry ``train.threads``).
        pack: train up to this many runs that differ only in seed (lr, weight decay, LayerScale
            init) as one stacked model in one worker (:func:`suite.sweep.packs.group`).

    Raises:
        KeyboardInterrupt: after stopping every worker; unfinished runs keep no summary.
    """
    ctx = multiprocessing.get_context("spawn")  # fork would copy the parent's threads and locks

    def start(slot: int) -> _Worker:
        gpu = gpu_for(slot, gpus)
        env = {"CUDA_VISIBLE_DEVICES": gpu, "OMP_NUM_THREADS": str(threads)}
        return _Worker(ctx, env, f"cuda:{gpu}" if gpus else "cpu")

    from suite.sweep.packs import group

    queue = collections.deque(group(todo, pack))
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
                runs, wall, w.run = w.run, time.perf_counter() - w.started, None
                if state == "died":
                    how = f"killed by signal {-value}" if value is not None and value < 0 else f"exit code {value}"
                    value = [record_lost(run, out, f"worker process died with {how}", wall, w.device) for run in runs]
                    # A replacement takes the dead worker's slot (and GPU), if there is work left for it.
                    pool[i] = start(i) if queue else None
                for run, result in zip(runs, value):
                    report(run, check_result(result))
        interrupted = False
    finally:
        for w in pool:
            if w is not None:
                w.stop(now=interrupted)
