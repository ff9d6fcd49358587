"""Weights & Biases: one W&B run per attempt of a suite run (a resumed run continues it), grouped by ablation, the
variant as job type (docs/trackers.md); quiet unless the user set otherwise (:data:`QUIET`)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from suite import store
from suite.engine.trackers import config_of, run_name

ID_FILE = "wandb_id"  # the W&B run id of this run folder's current attempt

QUIET = {"WANDB_SILENT": "true", "WANDB_CONSOLE": "off", "WANDB_INIT_TIMEOUT": "30"}  # each unless set
SUMMARY_KEYS = ("status", "test_acc", "best_test_acc", "val_acc", "best_val_acc", "final_train_loss",
                "diverged_step", "diverged_reason", "failed_reason", "steps_done", "step_time_ms", "throughput",
                "peak_mem_mb", "num_params", "error")


class WandbSink:
    def __init__(self, run_dir: Path, summary: dict[str, Any]) -> None:
        for key, value in QUIET.items():
            os.environ.setdefault(key, value)
        import wandb

        id_file = run_dir / ID_FILE
        run_id = store.read_text(id_file).strip() if summary.get("resumed_at") and id_file.is_file() else ""
        if not run_id:
            run_id = f"{summary.get('run_id')}-{secrets.token_hex(3)}"
            store.atomic_write_text(id_file, run_id + "\n")
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "layerscale-suite"), dir=str(run_dir),
                              group=summary.get("ablation") or None, job_type=summary.get("variant") or None,
                              name=run_name(summary, run_dir), id=run_id, resume="allow", config=config_of(summary),
                              reinit="create_new")

    def log(self, step: int, values: dict[str, float]) -> None:
        self.run.log(values, step=step)

    def finish(self, summary: dict[str, Any]) -> None:
        for key in SUMMARY_KEYS:
            if summary.get(key) is not None:
                self.run.summary[key] = summary[key]
        self.run.finish(exit_code=0 if summary.get("status") != "error" else 1)

    def abort(self) -> None:
        self.run.finish(exit_code=1)
