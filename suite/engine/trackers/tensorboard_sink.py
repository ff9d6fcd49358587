"""TensorBoard: event files in ``<run folder>/tensorboard/`` (``tensorboard --logdir results/<name>/runs``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from suite.engine.trackers import config_of

FOLDER = "tensorboard"


class TensorBoardSink:
    def __init__(self, run_dir: Path, summary: dict[str, Any]) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(run_dir / FOLDER), flush_secs=30)
        config = "\n".join(f"    {k}: {v}" for k, v in config_of(summary).items())  # indented: Markdown code
        self.writer.add_text("config", config, 0)

    def log(self, step: int, values: dict[str, float]) -> None:
        for key, value in values.items():
            self.writer.add_scalar(key, value, step)

    def finish(self, summary: dict[str, Any]) -> None:
        status = summary.get("status")
        self.writer.add_text("status", f"{status}" + (f": {summary.get('error')}" if summary.get("error") else ""),
                             int(summary.get("steps_done") or 0))
        self.abort()

    def abort(self) -> None:
        self.writer.flush()
        self.writer.close()


def open_sink(run_dir: Path, summary: dict[str, Any]) -> TensorBoardSink:
    return TensorBoardSink(run_dir, summary)
