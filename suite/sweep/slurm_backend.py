"""The Slurm launcher: a job array of :class:`~suite.sweep.worker.Worker` s through submitit, going on when the parent
leaves (``suite run`` again attaches; docs/backends/slurm.md). Every node must see the results folder at one path, and
no one else may write to it: submitit unpickles ``<out>/slurm/`` unrestricted (results/README.md, Security)."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import shutil
import signal
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from suite import store
from suite.sweep.claims import process_start
from suite.sweep.folder import RunnerError
from suite.sweep.launcher import Backend, Detached, Placement, devices
from suite.sweep.options import SweepOptions
from suite.sweep.spec import Run
from suite.sweep.slurm_jobs import SUBMISSION, ended, live_jobs
from suite.sweep.worker import Worker, signal_handlers

MAX_TIMEOUTS = 100  # requeues after a time-out that submitit allows one worker job (preemptions are not counted)


def check_available(cluster: str) -> None:
    """Raise :class:`RunnerError` before anything is written when the backend cannot submit here."""
    if importlib.util.find_spec("submitit") is None:
        raise RunnerError("--backend slurm needs submitit: pip install -e '.[slurm]'") from None
    if cluster == "slurm" and not (shutil.which("sbatch") and shutil.which("srun")):
        raise RunnerError("--backend slurm: no `sbatch` / `srun` here; run `suite run` on the cluster's login node, or pass "
                          "--slurm-cluster local to run the same workers on this machine")


class SlurmLauncher:
    """Submits, attaches to and watches the worker jobs of one sweep (``opts``: the sweep's options)."""

    def __init__(self, out: Path, opts: Any, threads: int, gpus_per_job: int) -> None:
        self.out, self.opts, self.threads, self.gpus, self.jobs = Path(out).resolve(), opts, threads, gpus_per_job, []

    def attach(self) -> int:
        self.jobs = live_jobs(self.out)
        return len(self.jobs)

    def running(self) -> bool:
        return any(not ended(j) for j in self.jobs)

    def wait(self, seconds: float) -> None:
        time.sleep(seconds)

    def start(self, worker: Worker, n: int) -> str:
        """Submit ``n`` array tasks; the line to show. Detached for --slurm-detach, RunnerError if sbatch refuses."""
        import submitit

        opts, folder = self.opts, self.out / "slurm"
        if opts.slurm_cluster == "local":  # the local executor directly: AutoExecutor does not pass it the signal delay
            executor = submitit.LocalExecutor(folder=folder / "%j", max_num_timeout=MAX_TIMEOUTS)
            executor.update_parameters(timeout_min=opts.slurm_time, gpus_per_node=self.gpus, tasks_per_node=1,
                                       nodes=1, signal_delay_s=opts.slurm_signal_delay)
        else:
            executor = submitit.AutoExecutor(folder=folder / "%j", cluster="slurm", slurm_max_num_timeout=MAX_TIMEOUTS)
            params: dict[str, Any] = dict(
                timeout_min=opts.slurm_time, gpus_per_node=self.gpus, cpus_per_task=self.threads, tasks_per_node=1,
                nodes=1, name=f"suite-{self.out.name}", slurm_array_parallelism=opts.slurm_array_parallelism,
                slurm_signal_delay_s=opts.slurm_signal_delay, slurm_additional_parameters=sbatch_options(opts.slurm_opt))
            if opts.slurm_partition:
                params["slurm_partition"] = opts.slurm_partition
            executor.update_parameters(**params)
        try:
            with _jobs_ignore_ctrl_c(opts.slurm_cluster == "local"):
                self.jobs = executor.map_array(worker, list(range(n)))
        except (OSError, subprocess.CalledProcessError, submitit.core.utils.FailedJobError) as err:
            detail = getattr(err, "stderr", None) or getattr(err, "output", None) or err
            if isinstance(detail, bytes):
                detail = detail.decode(errors="replace")
            last = (str(detail).strip().splitlines() or [type(err).__name__])[-1][:300]
            raise RunnerError(f"--backend slurm: sbatch refused the job array ({last}); check --slurm-partition, "
                              f"--slurm-time and --slurm-opt") from None
        local = opts.slurm_cluster == "local"  # a job id is a pid: record when it started, to know it again
        store.write_json(folder / SUBMISSION, {
            "cluster": opts.slurm_cluster, "folder": str(folder), "jobs": [j.job_id for j in self.jobs],
            "started": {j.job_id: process_start(int(j.job_id)) for j in self.jobs if local and j.job_id.isdigit()},
            "lease_s": worker.lease_s, "runs": [r.run_id for p in worker.packs for r in p],
            "submitted_at": datetime.now(timezone.utc).isoformat(timespec="seconds")})
        line = (f"submitted {n} {'local ' if opts.slurm_cluster == 'local' else ''}Slurm workers for "
                f"{sum(map(len, worker.packs))} runs: {_ids(self.jobs)} (logs in {folder})")
        if opts.slurm_detach:
            raise Detached(f"{line}; detached: the jobs go on; watch them with `suite status {self.out}`, and run "
                           f"the same `suite run` again to collect what they finish", 0)
        return line

    def stop(self) -> None:
        """Ctrl-C: the jobs go on without us."""
        raise Detached(f"stopped watching: {len(self.jobs)} Slurm jobs go on ({self._cancel_hint()}); "
                       f"`suite status {self.out}` shows them, the same `suite run` again collects them", 130)

    def close(self) -> None:
        pass

    def exit_of(self, pid: int | None) -> str | None:
        return None  # sacct knows, per job: `suite status` shows it

    def _cancel_hint(self) -> str:
        if self.opts.slurm_cluster == "local":
            return "kill " + " ".join(j.job_id for j in self.jobs[:8])
        return "scancel " + " ".join(sorted({j.job_id.split("_")[0] for j in self.jobs})[:8])


class SlurmBackend(Backend):
    """``--backend slurm``: a job array through submitit; ``--slurm-cluster local``: the same on this machine."""

    name = "slurm"

    def check(self, opts: SweepOptions) -> None:
        sbatch_options(opts.slurm_opt)
        check_available(opts.slurm_cluster)
        if opts.runs_per_gpu is not None:
            raise RunnerError("--runs-per-gpu: not for --backend slurm (each worker job holds its own GPU); "
                              "use --slurm-gpus-per-job and --workers")

    def settle(self, opts: SweepOptions) -> SweepOptions:
        """GPUs per job: 1 unless ``--device cpu``; the local executor's jobs get this machine's, if any."""
        if opts.slurm_gpus_per_job is not None:
            return opts
        from suite.sweep import plan

        gpus = opts.device != "cpu" and (opts.slurm_cluster != "local" or bool(plan.visible_gpus()))
        return dataclasses.replace(opts, slurm_gpus_per_job=int(gpus))

    def auto_device(self, opts: SweepOptions) -> str:
        return "cuda" if opts.slurm_gpus_per_job else "cpu"  # the workers' nodes, not this login node, decide

    def runs_here(self, opts: SweepOptions) -> bool:
        return opts.slurm_cluster == "local"

    def refuse_beside(self, out: Path) -> None:
        pass  # the Slurm backend attaches to its own live jobs

    def place(self, out: Path, todo: list[Run], opts: SweepOptions) -> Placement:
        """Raises RunnerError: ``cuda`` for jobs given no GPU (``--slurm-gpus-per-job 0``)."""
        if "cuda" in devices(todo, opts) and not opts.slurm_gpus_per_job:
            what = "--device cuda" if opts.device else "device cuda"
            raise RunnerError(f"{what}: --slurm-gpus-per-job 0 gives the worker jobs no GPU; pass "
                              f"--slurm-gpus-per-job 1 or --device cpu")
        threads = opts.threads or 1
        local = opts.slurm_cluster == "local"
        # A cluster's shared file system and sacct are looked at every 10 s; the local executor's local disk at once.
        return Placement(SlurmLauncher(out, opts, threads, opts.slurm_gpus_per_job),
                         opts.workers or opts.slurm_array_parallelism, threads,
                         "cuda" if opts.slurm_gpus_per_job else "cpu", None, poll_s=0.5 if local else 10.0,
                         grace_s=max(5.0, opts.slurm_signal_delay - 30.0))


def _jobs_ignore_ctrl_c(local: bool) -> contextlib.AbstractContextManager[bool]:
    """The local executor's jobs start with SIGINT ignored: a terminal's Ctrl-C leaves them running, as on a cluster."""
    return signal_handlers({signal.SIGINT: signal.SIG_IGN} if local else {})


def sbatch_options(items: list[str]) -> dict[str, str]:
    """``--slurm-opt KEY=VALUE`` items as sbatch's ``{key: value}``; RunnerError for an item not ``KEY=VALUE``."""
    sbatch = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("-")
        if not sep or not key:
            raise RunnerError(f"--slurm-opt {item}: expected KEY=VALUE (an sbatch option without its --), "
                              f"e.g. --slurm-opt account=myproj")
        sbatch[key.replace("-", "_")] = value
    return sbatch


def _ids(jobs: list[Any]) -> str:
    ids = [j.job_id for j in jobs]
    return ", ".join(ids[:4]) + (f" ... ({len(ids)})" if len(ids) > 4 else "")
