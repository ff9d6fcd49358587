"""A sweep's results as pandas DataFrames, for notebooks (``from suite import load_runs, load_metrics``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from suite import store
from suite.results import load_runs as summaries


def load_runs(folder: str | Path) -> pd.DataFrame:
    """The run summaries under ``folder`` (e.g. ``results/<ablation>``) as a pandas DataFrame.

    One row per ``summary.json`` (read by :func:`suite.results.load_runs`: damaged summaries are
    skipped with a warning); columns are the summary's keys (``run_id``, ``variant``, ``seed``,
    ``status``, ``test_acc``, every dotted config key such as ``model.depth``...) plus ``run_dir``,
    the run folder relative to ``folder``.

    Raises:
        AnalysisError: no such folder, no usable summary, or runs of more than one ablation.
    """
    return pd.DataFrame(summaries(folder))


def load_metrics(run_dir: str | Path) -> pd.DataFrame:
    """One run's ``metrics.jsonl`` as a pandas DataFrame: one row per record, ``kind`` says which
    (``train``: ``step``, ``loss``, ``lr``...; ``eval``: accuracies), a record's missing keys are NaN.

    Raises:
        CorruptFile: a damaged line before the last one (a cut-off last line is skipped with a warning).
    """
    return pd.DataFrame(store.read_metrics(Path(run_dir)))
