"""The one sweep worker every backend runs: a process pulling runs from the results folder until none is left; the
claims let workers start, die and be requeued in any order without a run lost or trained twice, and on preemption
(SIGTERM / SIGUSR2) a run checkpoints at its next step (docs/backends/local.md)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from suite import files, store
from suite.sweep import claims
from suite.sweep.folder import clear_stale, finished, run_dir
from suite.sweep.spec import Run

WORKERS = "workers"
# Test hook: the worker that picks up run <run_id> dies with os._exit(3) (worker death across processes).
CRASH_ENV = "SUITE_TEST_CRASH_RUN"
# Test hook: seconds the worker sleeps after each step, so that a test's signal lands mid-step on any machine.
SLOW_STEP_ENV = "SUITE_TEST_STEP_SECONDS"
RESULT_KEYS = ("status", "test_acc", "diverged_step", "diverged_reason", "error", "wall_s", "stream_growth",
               "grad_ratio")


class Preempted(BaseException):
    """The worker was told to stop (SIGTERM / SIGUSR2) and its run could not checkpoint in time."""


def group(todo: list[Run], size: int) -> list[list[Run]]:
    """``todo`` as packs of at most ``size`` runs that may share one (:mod:`suite.engine.pack`), the rest alone."""
    if size <= 1:
        return [[run] for run in todo]
    from suite.engine.pack import pack_key, packable

    open_packs: dict[str, list[Run]] = {}
    out: list[list[Run]] = []
    for run in todo:
        if run.kind != "train" or packable(run.cfg) is not None:
            out.append([run])
            continue
        current = open_packs.get(pack_key(run.cfg))
        if current is None or len(current) == size:
            current = open_packs[pack_key(run.cfg)] = []
            out.append(current)
        current.append(run)
    return out


def pack_widths(packs: list[list[Run]]) -> dict[str, int]:
    """Each pack's rows, by its first run's id: the largest pack of its shape, to which a compiled pack of fewer runs is
    padded with inert copies, so that a shape compiles once per worker."""
    from suite.engine.pack import pack_key

    keys = [pack_key(p[0].cfg) if p[0].kind == "train" else "" for p in packs]
    largest: dict[str, int] = {}
    for key, p in zip(keys, packs):
        largest[key] = max(largest.get(key, 0), len(p))
    return {p[0].run_id: largest[key] for key, p in zip(keys, packs)}


@contextlib.contextmanager
def signal_handlers(handlers: dict[int, Any]) -> Iterator[bool]:
    """``handlers`` ({signal: handler}) for the block, restored after; yields whether set (main thread only)."""
    main = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, handler) for sig, handler in handlers.items()} if main else {}
    try:
        yield main
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def record_lost(run: Run, out: Path, message: str) -> dict[str, Any]:
    """Write an ``error`` summary for a run no worker could finish (a summary it did write is kept); its results."""
    folder = run_dir(out, run)
    summary = store.read_summary(folder)
    if summary is None:
        try:
            trains = [m for m in store.read_metrics(folder) if m.get("kind") == "train"]
        except store.CorruptFile:  # the run is lost either way; its error summary must still be written
            trains = []
        summary = store.empty_summary(run.cfg, {**run.extra, "seed": run.seed})
        summary.update(error=message, steps_done=trains[-1]["step"] if trains else 0,
                       **store.provenance("cpu", name="-"), wall_s=0.0)
        store.write_json(folder / store.SUMMARY, summary)
    return {k: summary.get(k) for k in RESULT_KEYS}


@dataclasses.dataclass
class Worker:
    """What every worker runs: ``Worker(...)(index)``; see the module docstring."""

    out: str  # the results folder, the same path for every worker
    packs: list[list[Run]]  # every pack still to bring to summaries
    lease_s: float = 600.0  # a claim not renewed for this long is dead
    attempts: int = 3  # claims a pack may have before its runs are recorded as error
    threads: int = 1  # torch CPU threads (OMP_NUM_THREADS, set before torch loads)
    gpus: list[str] | None = None  # worker i sees gpus[i % len] ([]: none); None: the scheduler decides
    grace_s: float = 90.0  # after a preemption signal, how long a run may take to reach a step
    poll_s: float = 5.0  # how often to look again at packs other workers hold
    pack: int = 1  # --pack: above 1, every packable run trains in a pack, alone if need be (pack_widths: its rows)
    stale: dict[str, str] = dataclasses.field(default_factory=dict)  # summaries to replace (folder.replaced)

    def __call__(self, index: int = 0) -> dict[str, Any]:
        """Train packs until every run has a summary or told to stop; counts ``trained``, ``lost`` (taken over while
        frozen), ``preempted`` and ``disk_full`` (the path that had no space left, or None)."""
        self.index = index
        os.environ["OMP_NUM_THREADS"] = str(self.threads)  # for torch if not loaded yet, and for child processes
        if self.gpus is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = self.gpus[index % len(self.gpus)] if self.gpus else ""
        import torch

        torch.set_num_threads(self.threads)
        store.one_line_warnings()
        out = Path(self.out)
        self._log = out / WORKERS / f"{claims.owner_id().replace('/', '_')}.jsonl"
        store.no_link(self._log.parent).mkdir(parents=True, exist_ok=True)
        self._preempted, self._in_run, self._signum = False, False, None
        self._widths = pack_widths(self.packs) if self.pack > 1 else {}
        self.beat = claims.Heartbeat(self.lease_s)
        previous = self._take_signals()
        counts: dict[str, Any] = {"trained": 0, "lost": 0, "preempted": False, "disk_full": None}
        start = index % max(1, len(self.packs))  # each worker starts elsewhere: no queue on one claim
        left, take_over = self.packs[start:] + self.packs[:start], False
        try:
            while left and not self._preempted:
                waiting = []
                for pack in left:
                    if self._preempted:
                        break
                    if all(finished(out, r, self.stale) is not None for r in pack):
                        continue
                    # First pass: free packs only; a dead worker's pack is taken over after them.
                    claim = claims.try_claim(out, pack[0].run_id, self.lease_s, take_over)
                    if claim is None:
                        waiting.append(pack)
                        continue
                    try:
                        self._train(pack, claim, counts)
                    finally:
                        self.beat.hold(None)
                        claim.release()
                left, take_over = waiting, True
                if left:  # cheap to look again (a stat per pack)
                    self._nap(self.poll_s)
        except Preempted:
            pass
        except store.DiskFull as err:
            counts["disk_full"] = str(err.path)
        except OSError as err:  # ENOSPC from a write no one wrapped: the same clean stop, not a traceback
            if not store.no_space(err):
                raise
            counts["disk_full"] = str(out)
        finally:
            self.beat.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if hasattr(signal, "setitimer") and previous:
                signal.setitimer(signal.ITIMER_REAL, 0)
        counts["preempted"] = self._preempted
        handler = previous.get(self._signum)
        if self._preempted and type(getattr(handler, "__self__", None)).__module__.startswith("submitit"):
            handler(self._signum, None)  # submitit's: calls checkpoint(), requeues the job and exits
        return counts

    def checkpoint(self, *args: Any) -> Any:
        """Called by submitit on preemption or time-out: run this worker again after the requeue."""
        import submitit

        return submitit.helpers.DelayedSubmission(dataclasses.replace(self), self.index)

    def _train(self, pack: list[Run], claim: claims.Claim, counts: dict[str, Any]) -> None:
        from suite.engine.lifecycle import StopRun, summary_guard

        out = Path(self.out)
        todo = [r for r in pack if finished(out, r, self.stale) is None]  # finished since we looked
        if not todo:
            return
        if claim.attempt > self.attempts:
            message = (f"no worker finished this run in {self.attempts} attempts (each worker died or stopped "
                       f"answering); see {out / WORKERS}")
            for run in todo:
                record_lost(run, out, message)
            self._event("error", todo, attempts=self.attempts)
            return
        for run in todo:  # only now: a sweep stopped before this run started keeps its old summary
            clear_stale(out, run)
        self._event("start", todo, attempt=claim.attempt)
        self.beat.hold(claim)
        self._in_run = True

        def still_ours() -> str | None:  # right before each summary: a run may end between two heartbeats
            try:
                lost = self.beat.lost.is_set() or not claim.held()
            except OSError:  # the claim cannot be read just now: unknown, not lost (as at a heartbeat)
                lost = False
            return "claim lost: another worker took this run over" if lost else None

        try:
            with summary_guard(still_ours):
                execute(todo, out, on_step=self._check, width=self._widths.get(pack[0].run_id, 0),
                        packed=self.pack > 1)
            self._event("finish", todo)
            counts["trained"] += len(todo)
        except StopRun as stop:
            self._event("stop", todo, reason=stop.reason)
            if stop.save:
                raise Preempted from None
            counts["lost"] += 1  # taken over while we were frozen: its new holder goes on
        finally:
            self._in_run = False

    def _check(self, step: int) -> None:
        """After every step of a run: stop it if its claim was lost or the worker is preempted."""
        from suite.engine.lifecycle import StopRun

        if os.environ.get(SLOW_STEP_ENV):
            time.sleep(float(os.environ[SLOW_STEP_ENV]))
        if self.beat.lost.is_set():
            raise StopRun("claim lost: another worker took this run over", save=False)
        if self._preempted:
            raise StopRun("preempted", save=True)

    def _nap(self, seconds: float) -> None:
        """Sleep ``seconds``, or until preempted: the flag is polled, as a signal handler may take no lock."""
        end = time.monotonic() + seconds
        while not self._preempted and (left := end - time.monotonic()) > 0:
            time.sleep(min(left, 0.05))

    def _take_signals(self) -> dict[int, Any]:
        """SIGTERM / SIGUSR2 preempt the worker; returns the handlers they replace (restored at the end)."""
        if threading.current_thread() is not threading.main_thread():
            return {}
        sigs = [signal.SIGTERM] + [s for s in [getattr(signal, "SIGUSR2", None)] if s is not None]
        previous = {s: signal.getsignal(s) for s in sigs}

        def give_up(signum, frame):
            raise Preempted

        def on_signal(signum, frame):
            # No lock in here (an Event's was): the group's SIGTERM and then the parent's ran this again inside the
            # first call, while it held the lock, and the worker hung until the parent killed it (run not saved).
            if self._preempted:  # the first signal started the grace period; a later one changes nothing
                return
            self._preempted, self._signum = True, signum
            if self._in_run and hasattr(signal, "setitimer"):
                # A run that reaches no step boundary in time is abandoned before the scheduler kills the process.
                previous.setdefault(signal.SIGALRM, signal.getsignal(signal.SIGALRM))
                signal.signal(signal.SIGALRM, give_up)
                signal.setitimer(signal.ITIMER_REAL, self.grace_s)

        for sig in sigs:
            signal.signal(sig, on_signal)
        if hasattr(signal, "pthread_sigmask"):  # a local worker starts with SIGTERM blocked (local._start_server)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, sigs)
        return previous

    def _event(self, event: str, runs: list[Run], **fields: Any) -> None:
        line = store.metrics_line({"t": round(time.time(), 3), "event": event, "run_id": runs[0].run_id,
                                   "runs": [r.run_id for r in runs], "label": runs[0].label,
                                   "owner": claims.owner_id(), **fields})
        with contextlib.suppress(OSError), files.open_append(self._log) as f:  # a log, not a result
            f.write(line)


def execute(runs: list[Run], out: Path, on_step=None, width: int = 0, packed: bool = False) -> list[dict[str, Any]]:
    """Train ``runs`` (one run or a pack), or measure a propagation run; each writes its summary (none on DiskFull).
    ``packed``: a packable run trains in a pack even alone (under ``--pack`` every run of a cell runs on one engine)."""
    if os.environ.get(CRASH_ENV) in {r.run_id for r in runs}:
        os._exit(3)
    dirs = [str(run_dir(out, r)) for r in runs]
    run = runs[0]
    if len(runs) == 1 and packed:  # alone under --pack: in a pack of one if it could share one
        from suite.engine.pack import packable

        packed = run.kind == "train" and packable(run.cfg) is None
    if len(runs) > 1 or packed:
        from suite.engine.pack import train_pack

        return train_pack([r.cfg for r in runs], dirs, [r.extra for r in runs], on_step=on_step, width=width)
    if run.kind == "propagation":
        from suite.engine.propagation import propagate

        return [propagate(run.cfg, dirs[0], extra=run.extra)]
    from suite.engine import train

    return [train(run.cfg, dirs[0], progress=False, extra=run.extra, on_step=on_step)]
