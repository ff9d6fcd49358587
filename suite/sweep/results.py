"""A sweep's results as pandas DataFrames, for notebooks (``from suite import load_runs, load_metrics``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from suite import store
from suite.results import run_records


def load_runs(folder: str | Path) -> pd.DataFrame:
    """The run summaries under ``folder`` as a DataFrame, one row per ``summary.json`` (damaged ones skipped
    with a warning): its keys, dotted config keys such as ``model.depth`` among them, plus ``run_dir``
    relative to ``folder``. A folder shared or committed without its run folders is read from its
    ``runs.csv``, as ``suite analyze`` reads it. Raises :class:`~suite.results.AnalysisError` for no such
    folder, no usable summary or row, or runs of more than one ablation."""
    return pd.DataFrame(run_records(folder, from_csv=True))


def load_metrics(run_dir: str | Path) -> pd.DataFrame:
    """One run's ``metrics.jsonl`` as a DataFrame, one row per record (``kind``: ``train`` or ``eval``; a
    record's missing keys are NaN). Raises :class:`~suite.store.CorruptFile` for a damaged line before the
    last (a cut-off last line is skipped with a warning)."""
    return pd.DataFrame(store.read_metrics(Path(run_dir)))
