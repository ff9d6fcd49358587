"""The sweep as a library call: :func:`run_sweep` brings every run of an ablation to a summary.

``suite run`` is this function plus printing; so is ``suite bench --throughput``. A run whose worker
dies is taken over by another (:mod:`suite.sweep.worker`); when every worker has ended and runs are
left, new workers start, and after :data:`ROUNDS` rounds of workers that finish no run (workers that
cannot even start) the runs left are recorded as ``error``.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import dataclasses
import importlib.util
import os
import signal
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

from suite import store
from suite.sweep import claims, folder
from suite.sweep.folder import RunnerError
from suite.sweep.spec import Ablation, Run, SpecError, load_ablation, parse_only, select
from suite.sweep.worker import RESULT_KEYS, Worker, group, record_lost

ROUNDS = 3  # rounds of workers in a row that finish no run before the runs left are recorded as error


@dataclasses.dataclass
class SweepOptions:
    """How to run a sweep; ``suite run``'s flags are these fields (``--slurm-time`` is ``slurm_time``)."""

    backend: str = "local"  # local worker processes, "ray" tasks, or a "slurm" job array through submitit
    workers: int | None = None  # default: one per GPU (times runs_per_gpu) locally, as many as fit on Ray,
    #                             one per pack up to slurm_array_parallelism on Slurm
    threads: int | None = None  # torch CPU threads per worker; default cores // workers locally, else 1
    device: str | None = None  # overrides every run's device: cpu, cuda or auto
    pack: int = 1  # train up to this many runs that differ only in seed (lr, weight decay, LayerScale init) as one model
    runs_per_gpu: int | None = None  # workers sharing each GPU (local), num_gpus = 1/K per Ray task
    lease: float = 600.0  # seconds: a claim not renewed for this long belongs to a dead worker
    attempts: int = 3  # claims a run may have (its workers died) before it is recorded as error
    poll: float | None = None  # seconds between looks at the folder; None: 10 on Slurm, 0.5 elsewhere
    max_runs: int | None = None  # refuse an ablation of more runs (None: spec.MAX_RUNS)
    only: list[str] = dataclasses.field(default_factory=list)  # key=value[,key=value] filters (--only)
    retry_errors: bool = False  # run again the runs whose status is error
    rerun_stale: bool = False  # run again finished runs that another git commit made
    dry_run: bool = False  # resolve and split, run nothing
    kind: str = "train"  # or "propagation" (suite propagate)
    ray_address: str | None = None  # a Ray cluster to join; None starts a local one
    ray_timeout: float = 30.0
    slurm_cluster: str = "slurm"  # or "local": submitit's local executor (processes on this machine)
    slurm_partition: str | None = None
    slurm_time: int = 240  # minutes: each array task's time limit; a requeue starts a new one
    slurm_gpus_per_job: int | None = None  # default: 1, or 0 with device cpu (local cluster: 1 if this machine has one)
    slurm_array_parallelism: int = 64
    slurm_opt: list[str] = dataclasses.field(default_factory=list)  # sbatch KEY=VALUE options
    slurm_detach: bool = False  # return after submitting; the jobs go on
    slurm_signal_delay: int = 120  # seconds: SIGUSR2 this long before the time limit, time to checkpoint


@dataclasses.dataclass
class Sweep:
    """What :func:`run_sweep` found and did."""

    name: str
    out: Path
    ablation: Ablation
    runs: list[Run]  # every selected run
    todo: list[Run]  # those that had no final summary
    done: dict[str, dict]  # run id -> summary of the runs skipped as done
    other: dict[str, int]  # git commit -> finished runs another version of the suite made
    results: dict[str, dict] = dataclasses.field(default_factory=dict)  # run id -> result, finished this time
    stopped: str | None = None  # why the sweep ended before every run had a summary (Ctrl-C, detached)
    code: int = 0  # the exit status `suite run` gives: 0, or 130 after Ctrl-C

    def counts(self) -> collections.Counter:
        """Runs per status, done before and finished now."""
        counts = collections.Counter({s: 0 for s in store.STATUSES})
        counts.update(s.get("status") or "error" for s in [*self.done.values(), *self.results.values()])
        return counts


Report = Callable[[Sweep, Run, dict], None]


def run_sweep(ablation: str | Path | dict | Ablation, out: str | Path | None = None,
              options: SweepOptions | None = None, report: Report | None = None,
              notify: Callable[[str], None] = lambda line: None) -> Sweep:
    """Bring every selected run of ``ablation`` to a summary in ``out``; a rerun resumes.

    Args:
        ablation: an ablation file, its content as a dict, or a loaded :class:`Ablation`.
        out: the results folder (default ``results/<name>``).
        options: backend, workers, filters... (:class:`SweepOptions`).
        report: called as ``report(sweep, run, result)`` when a run gets its summary; ``result`` holds
            ``status``, ``test_acc``, ``error``, ``wall_s``...
        notify: receives the lines a backend has for the user (Slurm job ids).

    Returns:
        The :class:`Sweep`; ``stopped`` says why when it ended early (Ctrl-C stops the workers, their
        runs checkpoint and resume next time).

    Raises:
        ConfigError: a bad ablation or option (``SpecError``, ``RunnerError``: one line each).
        DiskFull: no space left; finished runs stay intact.
    """
    opts = options or SweepOptions()
    _check(opts)
    if not isinstance(ablation, Ablation):
        ablation = load_ablation(ablation, max_runs=opts.max_runs)
    filters = parse_only(opts.only, ablation)
    out = Path(out) if out else Path("results") / ablation.name
    folder.check_out(out, ablation)
    from suite.sweep.plan import auto_device, resolve_runs

    every = [dataclasses.replace(r, kind=opts.kind) for r in ablation.runs]
    if opts.backend == "slurm" and not opts.dry_run:  # the workers' nodes, not this login node, decide `auto`
        opts = dataclasses.replace(opts, slurm_gpus_per_job=_gpus_per_job(opts))
        every = resolve_runs(every, opts.device, "cuda" if opts.slurm_gpus_per_job else "cpu")
    else:  # a dry run asks no Ray cluster
        backend = "local" if opts.dry_run else opts.backend
        every = resolve_runs(every, opts.device, lambda: auto_device(backend, opts.ray_address, opts.ray_timeout))
    runs = [r for r, raw in zip(every, ablation.runs) if select([raw], filters)]
    if not runs:
        raise SpecError([f"--only: {' | '.join(opts.only)}: matches none of the {len(ablation.runs)} runs; "
                         f"list them with --dry-run"])
    todo, done, other = folder.split_done(runs, out, opts.retry_errors, opts.rerun_stale, store.git_commit())
    sweep = Sweep(ablation.name, out, ablation, runs, todo, done, other)
    if other:
        made = ", ".join(f"{sha[:10]}: {n}" for sha, n in sorted(other.items(), key=lambda kv: -kv[1]))
        what = ("they will be run again (--rerun-stale)" if opts.rerun_stale else
                "their results are kept; pass --rerun-stale to run them again with this code")
        warnings.warn(f"{sum(other.values())} finished runs were made by other versions of the suite ({made}); "
                      f"{what}", store.SuiteWarning, stacklevel=2)
    if opts.dry_run or not todo:  # nothing to run: write nothing, so a read-only results folder is fine
        return sweep
    if opts.backend != "slurm":
        from suite.sweep.slurm_backend import live_jobs

        busy = [j.job_id for j in live_jobs(out)]
        if busy:
            raise RunnerError(f"{out}: Slurm jobs {', '.join(busy[:4])} are still working on these runs; "
                              f"wait for them, cancel them, or pass --backend slurm to attach to them")
    worker, launcher, n = _plan(sweep, opts)
    from suite.sweep.slurm_backend import Detached

    with folder.prepare_out(out, ablation, [r.run_id for r in every]), _interrupts():
        try:
            _drive(sweep, worker, launcher, n, report, notify)
        except Detached as left:
            sweep.stopped, sweep.code = str(left), left.code
        except KeyboardInterrupt:
            sweep.stopped, sweep.code = "interrupted", 130
    return sweep


def _check(opts: SweepOptions) -> None:
    from suite.cli.checks import at_least

    problem = (at_least(opts, 1, "workers", "threads", "max_runs", "slurm_time", "slurm_array_parallelism",
                        "runs_per_gpu", "pack", "attempts")
               or at_least(opts, 0, "slurm_gpus_per_job") or at_least(opts, 0.1, "ray_timeout", "poll")
               or at_least(opts, 1.0, "lease"))
    if problem:
        raise SpecError([problem])
    if opts.backend not in ("local", "ray", "slurm"):
        raise RunnerError(f"--backend {opts.backend}: unknown; use local, ray or slurm")
    if opts.backend == "slurm":
        from suite.sweep.slurm_backend import check_available, sbatch_options

        sbatch_options(opts.slurm_opt)
        check_available(opts.slurm_cluster)
    if opts.backend == "ray" and importlib.util.find_spec("ray") is None:  # fail before writing anything
        raise RunnerError("--backend ray needs Ray: pip install -e '.[ray]'")
    if opts.runs_per_gpu is not None and opts.backend == "slurm":
        raise RunnerError("--runs-per-gpu: not for --backend slurm (each worker job holds its own GPU); "
                          "use --slurm-gpus-per-job and --workers")
    if opts.runs_per_gpu is not None and opts.backend == "local" and opts.workers is not None:
        raise RunnerError("--runs-per-gpu and --workers: pass one of them (--runs-per-gpu K starts K workers per GPU)")


def _gpus_per_job(opts: SweepOptions) -> int:
    if opts.slurm_gpus_per_job is not None:
        return opts.slurm_gpus_per_job
    if opts.device == "cpu":
        return 0
    from suite.sweep.plan import visible_gpus  # the local executor's jobs get this machine's GPUs, if any

    return 1 if opts.slurm_cluster != "local" or visible_gpus() else 0


def _plan(sweep: Sweep, opts: SweepOptions) -> tuple[Worker, Any, int]:
    """The worker (its packs with device and threads set), the launcher and the number of workers.

    Raises:
        RunnerError: a tracker is missing, ``cuda`` was asked for where there is no GPU.
    """
    from suite.engine.trackers import missing
    from suite.sweep.plan import visible_gpus

    todo = sweep.todo
    problem = missing(sorted({name for r in todo for name in r.cfg.train.log_to}))
    if problem:  # before anything is written or submitted
        raise RunnerError(problem)
    devices = {opts.device or r.cfg.device for r in todo}
    gpus = None  # local workers only: Ray and Slurm set CUDA_VISIBLE_DEVICES themselves
    workers, threads, backend = opts.workers, opts.threads, opts.backend
    if backend == "local":
        from suite.sweep.local import LocalLauncher

        gpus = visible_gpus() if devices != {"cpu"} else []
        if "cuda" in devices and not gpus:
            raise RunnerError("--device cuda: torch sees no CUDA device; use --device cpu or auto")
        if opts.runs_per_gpu and not gpus:
            raise RunnerError("--runs-per-gpu: torch sees no GPU here (or --device cpu); use --workers N for runs "
                              "on the CPU")
        workers = workers or max(1, len(gpus)) * (opts.runs_per_gpu or 1)
        launcher: Any = LocalLauncher(sweep.out)
    elif backend == "ray":
        from suite.sweep.ray_backend import RayLauncher, connect, has_gpus

        connect(opts.ray_address, opts.ray_timeout)
        if "cuda" in devices and not has_gpus():
            raise RunnerError("--device cuda: the Ray cluster has no GPUs; use --device cpu or auto")
        threads = threads or 1
        launcher = RayLauncher({"num_gpus": 1 / (opts.runs_per_gpu or 1)} if has_gpus() and devices != {"cpu"}
                               else {"num_cpus": threads})
        workers = workers or launcher.capacity()
    else:
        from suite.sweep.slurm_backend import SlurmLauncher

        threads = threads or 1
        workers = workers or opts.slurm_array_parallelism
        launcher = SlurmLauncher(sweep.out, opts, threads, opts.slurm_gpus_per_job)
    packs = group(todo, opts.pack)
    n = max(1, min(workers, len(packs)))  # fewer packs than workers: the cores are shared by fewer
    threads = threads or max(1, (os.cpu_count() or 1) // n)

    def prepared(run: Run) -> Run:  # execution-only keys: the run id (and so the folder) does not change
        cfg = copy.deepcopy(run.cfg)
        cfg.device = opts.device or cfg.device
        cfg.train.threads = cfg.train.threads or threads
        return dataclasses.replace(run, cfg=cfg)

    slurm = backend == "slurm"
    worker = Worker(str(sweep.out.resolve()), [[prepared(r) for r in pack] for pack in packs], lease_s=opts.lease,
                    attempts=opts.attempts, threads=threads, gpus=gpus, poll_s=opts.poll or (10.0 if slurm else 0.5),
                    grace_s=max(5.0, opts.slurm_signal_delay - 30.0) if slurm else 90.0)
    return worker, launcher, n


def _drive(sweep: Sweep, worker: Worker, launcher: Any, n: int, report: Report | None,
           notify: Callable[[str], None]) -> None:
    """Start workers whenever none is left and runs are; report each summary as it appears."""
    out = sweep.out
    pending = {r.run_id: r for r in sweep.todo}

    def collect() -> None:
        for run_id in list(pending):
            summary = store.read_summary(out / "runs" / run_id)
            if summary is not None:
                run = pending.pop(run_id)
                sweep.results[run_id] = result = {k: summary.get(k) for k in RESULT_KEYS}
                if report is not None:
                    report(sweep, run, result)

    attached = launcher.attach()
    if attached:
        notify(f"attached to {attached} workers still running from an earlier `suite run`")
    else:  # no worker of ours is alive: their claims are dead, and an error run being retried is not finished
        claims.clear(out, [p[0].run_id for p in worker.packs])
        for run in sweep.todo:
            folder.clear_stale(out, run)
    fruitless, left_at_start, started = 0, len(pending), bool(attached)
    try:
        while True:
            collect()
            if pending and not launcher.running():
                collect()  # what the last workers finished just before they ended
                if started:
                    fruitless = 0 if len(pending) < left_at_start else fruitless + 1
                if fruitless == ROUNDS:
                    message = (f"no worker finished any run in {ROUNDS} rounds of workers in a row (each failed "
                               f"or was killed); see {out / 'workers'}")
                    for run in list(pending.values()):
                        record_lost(run, out, message)
                    collect()
                    return
                packs = [p for p in worker.packs if any(r.run_id in pending for r in p)]
                claims.expire(out, [p[0].run_id for p in packs])  # every worker has ended: their claims are dead
                line = launcher.start(dataclasses.replace(worker, packs=packs), min(n, len(packs)))
                started, left_at_start = True, len(pending)
                if line:
                    notify(line)
            if not pending:
                return
            time.sleep(worker.poll_s)
    except KeyboardInterrupt:
        launcher.stop()  # local: workers checkpoint and exit; Ray: cancelled; Slurm: Detached, the jobs go on
        collect()
        raise
    finally:
        launcher.close()


@contextlib.contextmanager
def _interrupts() -> Iterator[None]:
    """SIGTERM stops a sweep as Ctrl-C does; SIGINT raises KeyboardInterrupt even if the shell started
    us with it ignored (a background process of a non-interactive shell, POSIX)."""
    if threading.current_thread() is not threading.main_thread():  # signals can only be set there
        yield
        return
    old = {signal.SIGTERM: signal.signal(signal.SIGTERM, _raise_interrupt),
           signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt
