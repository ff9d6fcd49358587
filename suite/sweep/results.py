"""A sweep's results as pandas DataFrames, for notebooks (``from suite import load_runs, load_metrics``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from suite import store
from suite.results import run_records


def load_runs(folder: str | Path) -> pd.DataFrame:
    """The run summaries under ``folder`` (or its ``runs.csv``) as a DataFrame, one row per run, as ``suite analyze``
    reads them. Raises :class:`~suite.results.AnalysisError` (no usable run, or several ablations)."""
    return pd.DataFrame(run_records(folder, from_csv=True))


def load_metrics(run_dir: str | Path) -> pd.DataFrame:
    """One run's ``metrics.jsonl`` as a DataFrame, one row per record (missing keys NaN). Raises
    :class:`~suite.store.CorruptFile` for a damaged line before the last."""
    return pd.DataFrame(store.read_metrics(Path(run_dir)))
