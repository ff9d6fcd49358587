"""Where a sweep's runs execute: the GPUs visible here, what ``device: auto`` means, and each run's
precision resolved for that device (which names its run folder)."""

from __future__ import annotations

import dataclasses
import os
from typing import Callable

from suite import store
from suite.config import resolve_precision
from suite.sweep.folder import RunnerError
from suite.sweep.spec import Run


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
