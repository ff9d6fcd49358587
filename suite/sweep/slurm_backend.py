"""The Slurm backend: a job array of long-lived workers, submitted through submitit.

``suite run FILE --backend slurm`` submits ``--workers`` array tasks (at most
``--slurm-array-parallelism`` at once), each a :class:`~suite.sweep.slurm_worker.SlurmWorker` that
pulls runs from the results folder until none is left. The folder must be on a file system every
node sees at the same path; it is the only channel between the parent and the workers.

The parent then watches the folder and reports each run as its summary appears. It may leave at any
time (``--slurm-detach``, or Ctrl-C): the jobs go on, and ``suite run`` again attaches to them, or,
once they have all ended, submits a new array for what is left (the claims of the ended jobs are
dropped first: their holders are dead). A run that no worker finishes in :data:`ROUNDS` submissions
of one ``suite run`` is recorded as ``error``.

``--slurm-cluster local`` runs the same code through submitit's local executor: real worker
processes on this machine, the same pickled workers, claims and requeue, without ``sbatch``. The
tests use it; so can anyone trying a sweep before sending it to a cluster.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from suite import store
from suite.sweep import claims
from suite.sweep.folder import RunnerError, clear_stale, run_dir
from suite.sweep.local import Report
from suite.sweep.spec import Run
from suite.sweep.task import RESULT_KEYS, record_lost

SUBMISSION = "submission.json"
ROUNDS = 3  # submissions in a row that finish no run before the runs left are recorded as error
MAX_TIMEOUTS = 100  # requeues after a time-out that submitit allows one worker job (preemptions are not counted)
LIVE_STATES = {"PENDING", "RUNNING", "REQUEUED", "CONFIGURING", "COMPLETING", "SUSPENDED", "RESIZING",
               "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING", "STAGE_OUT", "UNKNOWN"}


class Detached(Exception):
    """The parent stops watching; the jobs go on. ``str()`` says how to follow them; ``code`` is the exit status."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclasses.dataclass
class SlurmOptions:
    """What ``suite run --backend slurm`` submits (the ``--slurm-*`` options)."""

    cluster: str = "slurm"  # or "local": submitit's local executor (processes on this machine)
    partition: str | None = None
    time_min: int = 240  # each array task's time limit; a requeue starts a new one
    gpus_per_job: int = 1
    array_parallelism: int = 64
    sbatch: dict[str, str] = dataclasses.field(default_factory=dict)  # passed to sbatch as --KEY=VALUE
    lease_s: float = 600.0
    detach: bool = False
    poll_s: float = 10.0
    signal_delay_s: int = 120  # SIGUSR2 this long before the time limit: time to checkpoint


def check_available(opts: SlurmOptions) -> None:
    """Raise :class:`RunnerError` before anything is written when the backend cannot submit here."""
    try:
        import submitit  # noqa: F401
    except ImportError:
        raise RunnerError("--backend slurm needs submitit: pip install -e '.[slurm]'") from None
    if opts.cluster == "slurm" and not (shutil.which("sbatch") and shutil.which("srun")):
        raise RunnerError("--backend slurm: no `sbatch` / `srun` here; run `suite run` on the cluster's login node, or pass "
                          "--slurm-cluster local to run the same workers on this machine")


def run_slurm(todo: list[Run], out: Path, report: Report, *, opts: SlurmOptions, workers: int, threads: int,
              notify: Callable[[str], None] = lambda line: None) -> None:
    """Bring every run of ``todo`` to a summary through Slurm job arrays (see the module docstring).

    ``notify`` receives a line for each submission (job ids, where the logs are) and attachment.

    Raises:
        Detached: ``--slurm-detach`` after submitting, or Ctrl-C while watching; the jobs go on.
        RunnerError: the submission failed (sbatch refused it).
    """
    out = Path(out).resolve()
    pending = {r.run_id: r for r in todo}
    jobs = _attach(out, opts)
    if jobs:
        notify(f"attached to {len(jobs)} Slurm jobs still running from an earlier `suite run` ({_ids(jobs)})")
    else:
        for run in todo:  # an error run being retried must not count as finished
            clear_stale(out, run)
    left_at_submit = len(pending)
    fruitless = 0  # submissions in a row whose workers all ended without finishing a run
    try:
        while True:
            _collect(out, pending, report)
            if not pending:
                return
            if not jobs or all(_ended(j) for j in jobs):
                if jobs:
                    fruitless = 0 if len(pending) < left_at_submit else fruitless + 1
                if fruitless == ROUNDS:
                    _give_up(out, pending, report, opts)
                    return
                claims.clear(out, list(pending))  # every worker of ours has ended: their claims are dead
                jobs = _submit(out, list(pending.values()), opts, workers=min(workers, len(pending)),
                               threads=threads)
                left_at_submit = len(pending)
                notify(f"submitted {len(jobs)} {'local ' if opts.cluster == 'local' else ''}Slurm workers for "
                       f"{len(pending)} runs: {_ids(jobs)} (logs in {out / 'slurm'})")
                if opts.detach:
                    raise Detached(f"detached: the jobs go on; watch them with `suite status {out}`, and run the "
                                   f"same `suite run` again to collect what they finish", 0)
            time.sleep(opts.poll_s)
    except KeyboardInterrupt:
        raise Detached(f"stopped watching: {len(jobs)} Slurm jobs go on ({_cancel_hint(jobs, opts)}); "
                       f"`suite status {out}` shows them, the same `suite run` again collects them", 130) from None


def _collect(out: Path, pending: dict[str, Run], report: Report) -> None:
    for run_id in list(pending):
        summary = store.read_summary(run_dir(out, pending[run_id]))
        if summary is not None:
            report(pending.pop(run_id), {k: summary.get(k) for k in RESULT_KEYS})


def _give_up(out: Path, pending: dict[str, Run], report: Report, opts: SlurmOptions) -> None:
    for run in list(pending.values()):
        message = (f"no Slurm worker finished any run in {ROUNDS} submissions in a row (killed or failing each "
                   f"time); see the workers' logs in {out / 'slurm'}")
        report(pending.pop(run.run_id), record_lost(run, out, message, 0.0, "slurm"))


def _submit(out: Path, runs: list[Run], opts: SlurmOptions, *, workers: int, threads: int) -> list[Any]:
    import submitit

    from suite.sweep.slurm_worker import SlurmWorker

    folder = out / "slurm"
    if opts.cluster == "local":  # the local executor directly: AutoExecutor does not pass it the signal delay
        executor = submitit.LocalExecutor(folder=folder / "%j", max_num_timeout=MAX_TIMEOUTS)
        executor.update_parameters(timeout_min=opts.time_min, gpus_per_node=opts.gpus_per_job, tasks_per_node=1,
                                   nodes=1, signal_delay_s=opts.signal_delay_s)
    else:
        executor = submitit.AutoExecutor(folder=folder / "%j", cluster="slurm", slurm_max_num_timeout=MAX_TIMEOUTS)
        params: dict[str, Any] = dict(
            timeout_min=opts.time_min, gpus_per_node=opts.gpus_per_job, cpus_per_task=threads, tasks_per_node=1,
            nodes=1, name=f"suite-{out.name}", slurm_array_parallelism=opts.array_parallelism,
            slurm_signal_delay_s=opts.signal_delay_s, slurm_additional_parameters=dict(opts.sbatch))
        if opts.partition:
            params["slurm_partition"] = opts.partition
        executor.update_parameters(**params)
    worker = SlurmWorker(str(out), [(r.run_id, r.label, r.cfg, r.extra) for r in runs], opts.lease_s, threads,
                         grace_s=max(5.0, opts.signal_delay_s - 30.0))
    try:
        jobs = executor.map_array(worker, list(range(workers)))
    except (OSError, subprocess.CalledProcessError, submitit.core.utils.FailedJobError) as err:
        detail = getattr(err, "stderr", None) or getattr(err, "output", None) or err
        if isinstance(detail, bytes):
            detail = detail.decode(errors="replace")
        last = (str(detail).strip().splitlines() or [type(err).__name__])[-1][:300]
        raise RunnerError(f"--backend slurm: sbatch refused the job array ({last}); check --slurm-partition, "
                          f"--slurm-time and --slurm-opt") from None
    record = {"cluster": opts.cluster, "folder": str(folder), "jobs": [j.job_id for j in jobs], "lease_s": opts.lease_s,
              "runs": [r.run_id for r in runs], "submitted_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    store.write_json(folder / SUBMISSION, record)
    return jobs


def live_jobs(out: Path) -> list[str]:
    """Ids of the jobs of the last Slurm submission into ``out`` still queued or running (another
    backend must not run the same runs beside them: it does not take claims)."""
    return [j.job_id for j in _attach(Path(out), SlurmOptions())]


def read_submission(out: Path) -> dict[str, Any] | None:
    """``slurm/submission.json`` of ``out`` (``cluster``, ``jobs`` as strings, ``lease_s``,
    ``submitted_at``), or None when there is none or it cannot be read."""
    try:
        record = json.loads((Path(out) / "slurm" / SUBMISSION).read_text(encoding="utf-8"))
        record["cluster"], record["jobs"] = str(record["cluster"]), [str(j) for j in record["jobs"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return record


def _attach(out: Path, opts: SlurmOptions) -> list[Any]:
    """The jobs of the last submission into ``out`` that are still pending or running, if any."""
    record = read_submission(out)
    if record is None:
        return []
    cluster, ids = record["cluster"], record["jobs"]
    if cluster == "local":
        live = [_LocalProcess(j) for j in ids]
        return [j for j in live if not j.done()]
    if shutil.which("sacct") is None and shutil.which("squeue") is None:
        return []
    import submitit

    jobs = [submitit.SlurmJob(folder=out / "slurm" / j.split("_")[0], job_id=j) for j in ids]
    return [j for j in jobs if not _ended(j)]


class _LocalProcess:
    """A job of submitit's local executor found in a submission record: its id is the pid of the process
    that runs it."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id

    def done(self) -> bool:
        try:
            pid = int(self.job_id)
            os.kill(pid, 0)
        except (ValueError, ProcessLookupError, PermissionError):
            return True
        stat = Path(f"/proc/{pid}/stat")
        with contextlib.suppress(OSError):
            return stat.read_text().split(")")[-1].split()[0] == "Z"
        return False


def _ended(job: Any) -> bool:
    try:
        if isinstance(job, _LocalProcess) or type(job).__name__ == "LocalJob":
            return job.done()
        return job.state.split()[0].upper() not in LIVE_STATES
    except Exception:  # noqa: BLE001  (sacct unreachable for a moment: count the job as live)
        return False


def _ids(jobs: list[Any]) -> str:
    ids = [j.job_id for j in jobs]
    return ", ".join(ids[:4]) + (f" ... ({len(ids)})" if len(ids) > 4 else "")


def _cancel_hint(jobs: list[Any], opts: SlurmOptions) -> str:
    if opts.cluster == "local":
        return "kill " + " ".join(j.job_id for j in jobs[:8])
    arrays = sorted({j.job_id.split("_")[0] for j in jobs})
    return "scancel " + " ".join(arrays[:8])
