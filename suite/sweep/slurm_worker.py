"""A Slurm worker: one task of a job array that pulls runs from the results folder until none is left.

Submitted by :mod:`suite.sweep.slurm_backend` through submitit, which pickles this object and calls
it on the node. Every worker gets the whole list of runs; which one trains a run is decided by the
claims (:mod:`suite.sweep.claims`), so workers may start, die and be requeued in any order without a
run being lost or trained twice.

Preemption: submitit sends ``SIGUSR2`` before Slurm preempts or times out the job. The worker then
stops its run at the end of the current step, saves a checkpoint of that step, releases the claim,
and lets submitit requeue the job (:meth:`SlurmWorker.checkpoint`); the requeued worker, or any
other, resumes the run from that checkpoint.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from suite import store
from suite.sweep import claims
from suite.sweep.task import execute

WORKERS = "workers"  # <out>/slurm/workers/<owner>.jsonl: what each worker did, one event per line
RESCAN_S = 5.0  # how often a worker looks again at runs that other workers hold


class SlurmWorker:
    """The function each array task runs: ``worker(index)``.

    Args:
        out: the results folder (the same path on every node).
        runs: ``(run_id, label, cfg, extra)`` of every run to bring to a summary.
        lease_s: a claim not renewed for this long is taken over (its worker is dead).
        threads: torch CPU threads (the job's ``--cpus-per-task``), set before torch loads.
        grace_s: after ``SIGUSR2``, the seconds a run has to reach a step boundary and checkpoint;
            past them the worker is requeued without a checkpoint (keep it under the signal delay).
    """

    def __init__(self, out: str, runs: list[tuple[str, str, Any, dict[str, Any]]], lease_s: float,
                 threads: int = 1, grace_s: float = 90.0) -> None:
        self.out, self.runs, self.lease_s, self.threads = out, runs, lease_s, threads
        self.grace_s = grace_s  # after SIGUSR2, how long a run may take to reach a step boundary
        self.index = 0
        self._preempted = False
        self._in_run = False
        self._submitit_handler: Any = None

    # ------------------------------------------------------------------ submitit's interface

    def __call__(self, index: int) -> dict[str, int]:
        """Train runs until every one has a summary.

        Runs held by other workers are looked at again every few seconds, so that the
        run of a worker that died is taken over once its claim expires; the worker leaves when no
        run is left without a summary.

        Returns:
            Counts: ``trained`` (runs this worker brought to a summary), ``lost`` (runs it had to
            give up because another worker took them over).
        """
        from suite.engine.loop import StopRun

        self.index = index
        os.environ["OMP_NUM_THREADS"] = str(self.threads)  # as the local backend's workers: before torch loads
        import torch

        torch.set_num_threads(self.threads)
        store.one_line_warnings()
        self._take_preemption_signal()
        out = Path(self.out)
        beat = claims.Heartbeat(self.lease_s)
        self._log_path = out / "slurm" / WORKERS / f"{claims.owner_id().replace('/', '_')}.jsonl"
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        counts = {"trained": 0, "lost": 0}
        # Start at a different run in each task, so that the array does not queue on one claim.
        start = index % max(1, len(self.runs))
        left = self.runs[start:] + self.runs[:start]
        try:
            while left:
                waiting = []
                for run_id, label, cfg, extra in left:
                    if self._preempted:  # a run without steps (propagation) finished since the signal
                        self._requeue()
                    folder = out / "runs" / run_id
                    if store.read_summary(folder) is not None:
                        continue
                    claim = claims.try_claim(out, run_id, self.lease_s)
                    if claim is None:  # another worker holds it: look again later
                        waiting.append((run_id, label, cfg, extra))
                        continue
                    try:
                        if store.read_summary(folder) is not None:  # finished between our look and the claim
                            continue
                        self._event("start", run_id, label)
                        beat.hold(claim)
                        self._in_run = True
                        result = execute(cfg, str(folder), extra, on_step=lambda step: self._check(beat))
                        self._in_run = False
                        if result.get("disk_full"):
                            raise store.DiskFull(result["disk_full"])
                        self._event("finish", run_id, label, status=result.get("status"))
                        counts["trained"] += 1
                    except StopRun as stop:
                        self._event("stop", run_id, label, reason=stop.reason)
                        if stop.save:
                            raise  # preempted: requeue below
                        counts["lost"] += 1  # taken over while we were frozen: its new holder goes on
                    except BaseException as err:
                        self._event("stop", run_id, label, reason=type(err).__name__)
                        raise
                    finally:
                        self._in_run = False
                        beat.hold(None)
                        claim.release()
                left = waiting
                if left:  # cheap to look again (a stat per run); a finished sweep must not keep workers idle
                    time.sleep(min(beat.period, RESCAN_S))
        except StopRun as err:
            if err.save:  # preempted: requeue through submitit
                self._requeue()
            raise
        finally:
            beat.close()
        return counts

    def checkpoint(self, index: int | None = None) -> Any:
        """Called by submitit on preemption or time-out: run this worker again after the requeue."""
        import submitit

        return submitit.helpers.DelayedSubmission(SlurmWorker(self.out, self.runs, self.lease_s, self.threads,
                                                              self.grace_s),
                                                  self.index if index is None else index)

    # ------------------------------------------------------------------ preemption

    def _take_preemption_signal(self) -> None:
        """Put our handler in front of submitit's: a run in progress first stops at a step boundary."""
        import submitit

        sig = submitit.JobEnvironment._usr_sig()
        self._submitit_handler = signal.getsignal(sig)
        self._signal = sig

        def on_signal(signum, frame):
            self._preempted = True
            if not self._in_run:  # between runs: nothing to save, requeue now
                self._requeue()
            # A run that reaches no step boundary in time (a long evaluation, a compilation) is
            # requeued without a checkpoint before Slurm kills the job: it is then taken over.
            if hasattr(signal, "setitimer"):
                signal.signal(signal.SIGALRM, lambda s, f: self._requeue())
                signal.setitimer(signal.ITIMER_REAL, self.grace_s)

        signal.signal(sig, on_signal)

    def _check(self, beat: claims.Heartbeat) -> None:
        from suite.engine.loop import StopRun

        if beat.lost.is_set():
            raise StopRun("claim lost: another worker took this run over", save=False)
        if self._preempted:
            raise StopRun("preempted", save=True)

    def _requeue(self) -> None:
        """Hand over to submitit's handler: it calls :meth:`checkpoint`, requeues and exits."""
        handler = self._submitit_handler
        if callable(handler):
            handler(self._signal, None)
        os._exit(1)  # no submitit handler (called outside a job): just go

    # ------------------------------------------------------------------ log

    def _event(self, event: str, run_id: str, label: str, **fields: Any) -> None:
        line = store.metrics_line({"t": round(time.time(), 3), "event": event, "run_id": run_id, "label": label,
                                   "owner": claims.owner_id(), **fields})
        with open(self._log_path, "a", encoding="utf-8") as f:
            f.write(line)
