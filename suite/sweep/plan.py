"""Where a sweep's runs execute: the GPUs visible here, what ``device: auto`` means, and each run's
``train.precision: auto`` resolved for that device, once, into the config whose id names its folder."""

from __future__ import annotations

import dataclasses
import os
from typing import Callable

from suite import store
from suite.config import ConfigError, resolve_precision
from suite.sweep.folder import RunnerError
from suite.sweep.spec import Run


def resolve_runs(runs: list[Run], device: str | None, auto: str | Callable[[], str]) -> list[Run]:
    """Each run with ``train.precision: auto`` made concrete for where it executes, and its run id computed from that
    (``auto``: the device type, or a function giving it). RunnerError where two runs become one."""
    out, seen = [], {}
    for run in runs:
        where = "cpu" if run.kind == "propagation" else device or run.cfg.device  # propagation: fp32 everywhere
        if run.cfg.train.precision in ("auto", "fp16") and where == "auto" and callable(auto):  # fp16: CUDA only
            auto = auto()
        # propagation is measured in fp32 (suite.engine.propagation refuses other precisions itself)
        try:
            cfg = run.cfg if run.kind == "propagation" and run.cfg.train.precision != "auto" else \
                resolve_precision(run.cfg, auto if where == "auto" else where)
        except ConfigError as err:  # fp16 where it is not offered
            raise RunnerError(f"run '{run.label}': {err}") from None
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
