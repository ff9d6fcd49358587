"""layerscale-suite: when does LayerScale let a Vision Transformer train stably at depth, and what does it cost?

The Python API, for notebooks (the command line is ``suite``; both do the same work)::

    from suite import SweepOptions, analyze, load_metrics, load_runs, run_sweep

    sweep = run_sweep("ablations/smoke.yaml", "results/smoke", SweepOptions(workers=2, device="cpu"))
    runs = load_runs("results/smoke")            # one row per run summary (pandas)
    curve = load_metrics("results/smoke/runs/" + runs.run_id[0])  # one row per metrics record
    table = analyze("results/smoke", figures=False)  # writes tables/, returns the per-group summary

Names load on first use (module ``__getattr__``), so ``import suite`` and ``suite --help`` stay fast
and do not import torch.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

__version__ = "0.1.0"
__all__ = ["SweepOptions", "analyze", "load_metrics", "load_runs", "run_sweep"]

_LAZY = {"run_sweep": "suite.sweep.sweep", "SweepOptions": "suite.sweep.sweep", "analyze": "suite.analysis.analyze"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'suite' has no attribute '{name}'")


def load_runs(folder: str | Path):
    """The run summaries under ``folder`` (e.g. ``results/<ablation>``) as a pandas DataFrame.

    One row per ``summary.json`` (read by :func:`suite.analysis.load.load_runs`: damaged summaries are
    skipped with a warning); columns are the summary's keys (``run_id``, ``variant``, ``seed``,
    ``status``, ``test_acc``, every dotted config key such as ``model.depth``...) plus ``run_dir``,
    the run folder relative to ``folder``.

    Raises:
        AnalysisError: no such folder, no usable summary, or runs of more than one ablation.
    """
    import pandas as pd

    from suite.analysis.load import load_runs as summaries

    return pd.DataFrame(summaries(folder))


def load_metrics(run_dir: str | Path):
    """One run's ``metrics.jsonl`` as a pandas DataFrame: one row per record, ``kind`` says which
    (``train``: ``step``, ``loss``, ``lr``...; ``eval``: accuracies), a record's missing keys are NaN.

    Raises:
        CorruptFile: a damaged line before the last one (a cut-off last line is skipped with a warning).
    """
    import pandas as pd

    from suite import store

    return pd.DataFrame(store.read_metrics(Path(run_dir)))
