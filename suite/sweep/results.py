"""A sweep's results as pandas DataFrames, for notebooks (``from suite import load_runs, load_metrics``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from suite import store
from suite.results import run_records


def load_runs(folder: str | Path) -> pd.DataFrame:
    """One row per run under ``folder`` (or in its ``runs.csv``), as ``suite analyze`` reads them (AnalysisError)."""
    return pd.DataFrame(run_records(folder, from_csv=True))


def load_metrics(run_dir: str | Path) -> pd.DataFrame:
    """One run's ``metrics.jsonl``, a row per record (missing keys NaN); CorruptFile for a damaged line but the last."""
    return pd.DataFrame(store.read_metrics(Path(run_dir)))
