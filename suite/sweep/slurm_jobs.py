"""The Slurm backend's record in a results folder: ``slurm/submission.json`` (the last job array submitted) and which
of its jobs still run; read by every backend (to attach, or to refuse to run beside them) and ``suite status``."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from suite import store
from suite.sweep.claims import alive, same_process

SUBMISSION = "submission.json"
LIVE_STATES = {"PENDING", "RUNNING", "REQUEUED", "CONFIGURING", "COMPLETING", "SUSPENDED", "RESIZING",
               "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING", "STAGE_OUT", "UNKNOWN"}


def live_jobs(out: Path) -> list[Any]:
    """The jobs of the last submission into ``out`` still queued or running."""
    record = read_submission(out)
    if record is None:
        return []
    if record["cluster"] == "local":  # the local executor's job id is the pid of its process
        started = record.get("started") if isinstance(record.get("started"), dict) else {}
        jobs = [_Pid(j, started.get(j)) for j in record["jobs"] if j.isdigit()]
        return [j for j in jobs if not j.done()]
    if shutil.which("sacct") is None and shutil.which("squeue") is None:
        return []
    import submitit

    jobs = [submitit.SlurmJob(folder=Path(out) / "slurm" / j.split("_")[0], job_id=j) for j in record["jobs"]]
    return [j for j in jobs if not ended(j)]


def read_submission(out: Path) -> dict[str, Any] | None:
    """``slurm/submission.json`` of ``out``, or None when there is none or it cannot be read."""
    try:
        record = store.read_json(Path(out) / "slurm" / SUBMISSION)
        record["cluster"], record["jobs"] = str(record["cluster"]), [str(j) for j in record["jobs"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return record


class _Pid:
    """A job of the local executor: a process of this host, the job only while its pid is not reused."""

    def __init__(self, job_id: str, started: str | None = None) -> None:
        self.job_id, self.started = job_id, started

    def done(self) -> bool:
        pid = int(self.job_id)
        if self.started is not None:
            return not same_process(pid, self.started)
        if not alive(pid):
            return True
        try:  # a submission.json written without start times: the job runs submitit's local runner
            return b"submitit" not in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False


def ended(job: Any) -> bool:
    """Whether ``job`` (a submitit job, or a local executor's :class:`_Pid`) is no longer queued or running."""
    try:
        if isinstance(job, _Pid) or type(job).__name__ == "LocalJob":
            return job.done()
        return job.state.split()[0].upper() not in LIVE_STATES
    except Exception:  # noqa: BLE001  (sacct unreachable for a moment: count the job as live)
        return False
