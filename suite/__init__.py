"""layerscale-suite: when does LayerScale let a Vision Transformer train stably at depth, and what does it cost?

The Python API, for notebooks (the command line is ``suite``; both do the same work)::

    from suite import SweepOptions, analyze, load_metrics, load_runs, run_sweep

    sweep = run_sweep("ablations/smoke.yaml", "results/smoke", SweepOptions(workers=2, device="cpu"))
    runs = load_runs("results/smoke")            # one row per run summary (pandas)
    curve = load_metrics("results/smoke/runs/" + runs.run_id[0])  # one row per metrics record
    table = analyze("results/smoke", figures=False)  # writes tables/, returns the per-group summary

Names load on first use, so ``import suite`` does not import torch. Modules: ``config.py`` (the typed run config),
``registry.py`` (names a user can choose), ``store.py`` (the results layout), ``results.py`` (runs read back and
scored), ``grouping.py`` (which runs form an arm), ``files.py`` (results files read untrusted), ``interrupt.py`` (a
caught Ctrl-C's exit status), ``learned.py`` (did a run learn), ``declared.py`` (an ablation's ``primary:``); packages
``data/``, ``models/``, ``engine/`` (one run), ``sweep/`` (many runs), ``analysis/``, ``bench/`` and ``cli/`` (the
``suite`` command, also ``python -m suite`` through ``__main__.py``).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"
__all__ = ["SweepOptions", "analyze", "load_metrics", "load_runs", "run_sweep"]

_LAZY = {"run_sweep": "suite.sweep.sweep", "SweepOptions": "suite.sweep.sweep", "analyze": "suite.analysis.analyze",
         "load_runs": "suite.sweep.results", "load_metrics": "suite.sweep.results"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'suite' has no attribute '{name}'")
