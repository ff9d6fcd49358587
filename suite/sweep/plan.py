"""How a sweep is executed: devices, worker count, threads per run, and the backend to use."""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import os
from pathlib import Path
from typing import Callable

from suite import store
from suite.config import resolve_precision
from suite.sweep.folder import RunnerError
from suite.sweep.local import Report
from suite.sweep.slurm_backend import SlurmOptions
from suite.sweep.spec import Run

Executor = Callable[[list[Run], Path, Report], None]


def plan(todo: list[Run], *, backend: str = "local", device: str | None = None, workers: int | None = None,
         threads: int | None = None, ray_address: str | None = None,
         ray_timeout: float = 30.0, slurm: SlurmOptions | None = None, runs_per_gpu: int | None = None,
         pack: int = 1, notify: Callable[[str], None] = lambda line: None) -> tuple[list[Run], Executor]:
    """Decide devices, workers and threads for ``todo``.

    Args:
        backend: ``local`` (worker processes), ``ray`` or ``slurm`` (a job array of workers).
        device: overrides every run's device (``cpu``, ``cuda``, ``auto``); None keeps each run's.
        workers: parallel runs on the local backend (default one per visible GPU, else 1); array tasks
            on Slurm (default one per run, at most ``--slurm-array-parallelism``).
        threads: torch CPU threads per run; default cores // busy workers locally, 1 per Ray task or
            Slurm worker (its ``--cpus-per-task``).
        ray_address: a Ray cluster to join; None starts a local one.
        ray_timeout: seconds to wait for Ray to connect (it is joined here, before anything is written).
        slurm: the ``--slurm-*`` options (``backend="slurm"``).
        runs_per_gpu: runs sharing each GPU at once: ``K`` worker processes per visible GPU locally,
            ``num_gpus = 1/K`` per Ray task (small models leave most of a GPU idle; CUDA MPS lets the
            processes' kernels overlap).
        pack: local backend: train up to this many runs that differ only in seed (lr, weight decay,
            LayerScale init) as one stacked model (``suite run --pack N``).
        notify: receives the lines a backend has for the user (the Slurm job ids).

    Returns:
        The runs with their execution keys set (``device``, ``train.threads``: the run ids do not
        change) and a function ``(runs, out, report)`` that executes them.

    Raises:
        RunnerError: Ray (or submitit) is not installed, Ray does not connect, Slurm's commands are not
            here, or ``cuda`` was asked for and torch sees no GPU.
    """
    if backend == "ray" and importlib.util.find_spec("ray") is None:  # fail before writing anything
        raise RunnerError("--backend ray needs Ray: pip install -e '.[ray]'")
    if backend == "slurm":
        from suite.sweep.slurm_backend import check_available, run_slurm

        slurm = slurm or SlurmOptions()
        check_available(slurm)
    from suite.engine.trackers import missing

    problem = missing(sorted({name for r in todo for name in r.cfg.train.log_to}))
    if problem:  # before anything is written or submitted
        raise RunnerError(problem)
    devices = {device or r.cfg.device for r in todo}
    gpus: list[str] = []
    if backend == "local" and todo and devices != {"cpu"}:
        gpus = visible_gpus()
        if "cuda" in devices and not gpus:
            raise RunnerError("--device cuda: torch sees no CUDA device; use --device cpu or auto")
    if pack > 1 and backend != "local":
        raise RunnerError(f"--pack {pack}: only the local backend packs runs so far; drop --pack for --backend {backend}")
    if runs_per_gpu is not None:
        if backend == "slurm":
            raise RunnerError("--runs-per-gpu: not for --backend slurm (each worker job holds its own GPU); "
                              "use --slurm-gpus-per-job and --workers")
        if backend == "local" and not gpus:
            raise RunnerError("--runs-per-gpu: torch sees no GPU here (or --device cpu); use --workers N for runs "
                              "on the CPU")
        if backend == "local" and workers is not None:
            raise RunnerError("--runs-per-gpu and --workers: pass one of them (--runs-per-gpu K starts K workers "
                              "per GPU)")
    if backend == "slurm":
        workers = min(workers or slurm.array_parallelism, max(1, len(todo)))
    workers = workers or max(1, len(gpus)) * (runs_per_gpu or 1)
    busy = max(1, min(workers, len(todo)))  # fewer runs than workers: the cores are shared by fewer
    threads = threads or (1 if backend in ("ray", "slurm") else max(1, (os.cpu_count() or 1) // busy))

    def prepared(run: Run) -> Run:  # execution-only keys: the run id (and so the folder) does not change
        cfg = copy.deepcopy(run.cfg)
        cfg.device = device or cfg.device
        cfg.train.threads = cfg.train.threads or threads
        return dataclasses.replace(run, cfg=cfg)

    todo = [prepared(r) for r in todo]
    if backend == "ray":
        from suite.sweep.ray_backend import connect, run_ray

        connect(ray_address, ray_timeout)
        ray_device = device or (devices.pop() if len(devices) == 1 else "auto")
        return todo, lambda t, out, report: run_ray(t, out, report, address=ray_address, device=ray_device,
                                                     threads=threads, runs_per_gpu=runs_per_gpu or 1)
    if backend == "slurm":
        return todo, lambda t, out, report: run_slurm(t, out, report, opts=slurm, workers=workers, threads=threads,
                                                              notify=notify)
    from suite.sweep.local import run_local

    return todo, lambda t, out, report: run_local(t, out, report, workers=workers, gpus=gpus, threads=threads,
                                                   pack=pack)


def auto_device(backend: str, ray_address: str | None = None, ray_timeout: float = 30.0) -> str:
    """What ``device: auto`` means for this sweep: ``cuda`` when the runs will get GPUs, else ``cpu``.

    Locally that is whether torch sees a GPU here; on Ray, whether the cluster has GPUs (Ray is
    joined to ask, before anything is written).

    Raises:
        RunnerError: Ray is not installed or does not connect.
    """
    if backend == "ray":
        from suite.sweep.ray_backend import connect

        connect(ray_address, ray_timeout)
        import ray

        return "cuda" if ray.cluster_resources().get("GPU", 0) > 0 else "cpu"
    return "cuda" if visible_gpus() else "cpu"


def resolve_runs(runs: list[Run], device: str | None, auto: str | Callable[[], str]) -> list[Run]:
    """Each run with ``train.precision: auto`` made concrete for where it will execute, and its run
    id computed again from that (:func:`suite.config.resolve_precision`).

    Args:
        runs: as expanded from the ablation.
        device: ``--device`` (overrides every run's), or None.
        auto: the device type ``auto`` resolves to (:func:`auto_device`), or a function giving it,
            called only if some run needs it.

    Raises:
        RunnerError: two runs that differ only in ``auto`` against the precision it resolves to
            (``precision: auto`` and ``precision: fp32`` on a CPU) are one run here.
    """
    out, seen = [], {}
    for run in runs:
        where = device or run.cfg.device
        if run.kind == "propagation":  # measured in fp32 on every device
            where = "cpu"
        if run.cfg.train.precision == "auto" and where == "auto" and callable(auto):
            auto = auto()
        cfg = resolve_precision(run.cfg, auto if where == "auto" else where)
        rid = store.run_id(cfg)
        if rid in seen:
            raise RunnerError(f"runs '{seen[rid]}' and '{run.label}' are the same run on this device "
                              f"(train.precision auto resolves to {cfg.train.precision}); drop one of them")
        seen[rid] = run.label
        out.append(dataclasses.replace(run, cfg=cfg, run_id=rid))
    return out


def visible_gpus() -> list[str]:
    """GPU ids for CUDA_VISIBLE_DEVICES, honouring the one this process was started with."""
    import torch

    n = torch.cuda.device_count()
    given = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    return (given or [str(i) for i in range(n)])[:n]
