"""TensorBoard: event files in ``<results folder>/tensorboard/<run name>/`` (for ``suite train``, ``DIR/``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from suite import files
from suite.engine.trackers import config_of, experiment_folder, run_name
from suite.engine.trackers.wandb_sink import SUMMARY_KEYS

FOLDER = "tensorboard"


def log_dir(run_dir: Path, summary: dict[str, Any]) -> Path:
    """Where the run's event files go (the sweep-wide folder must not be a link out of the results)."""
    return files.no_link(experiment_folder(run_dir) / FOLDER) / run_name(summary, run_dir)


class TensorBoardSink:
    def __init__(self, run_dir: Path, summary: dict[str, Any]) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(log_dir(run_dir, summary)), flush_secs=30)
        config = "\n".join(f"    {k}: {v}" for k, v in config_of(summary).items())  # indented: Markdown code
        self.writer.add_text("config", config, 0)

    def log(self, step: int, values: dict[str, float]) -> None:
        for key, value in values.items():
            self.writer.add_scalar(key, value, step)

    def finish(self, summary: dict[str, Any]) -> None:
        status, step = summary.get("status"), int(summary.get("steps_done") or 0)
        self.writer.add_text("status", f"{status}" + (f": {summary.get('error')}" if summary.get("error") else ""), step)
        for key in SUMMARY_KEYS:  # the headline numbers, as MLflow's summary/<key>
            value = summary.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.writer.add_scalar(f"summary/{key}", value, step)
        self.abort()

    def abort(self) -> None:
        self.writer.flush()
        self.writer.close()
