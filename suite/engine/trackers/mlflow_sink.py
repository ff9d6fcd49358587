"""MLflow: one MLflow run per suite run, in an experiment named after the ablation (docs/trackers.md); without
``MLFLOW_TRACKING_URI``, a file store ``<results folder>/mlruns``. ``HTTP_DEFAULTS``: a server down fails fast."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from suite.engine.trackers import config_of, experiment_folder, run_name
from suite.engine.trackers.wandb_sink import SUMMARY_KEYS

FOLDER = "mlruns"
MAX_PARAM = 500  # MLflow's limit on a parameter value's length
HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "10", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
                 "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}  # read by MLflow at each request


def tracking_uri(run_dir: Path) -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or (experiment_folder(run_dir) / FOLDER).as_uri()


class MlflowSink:
    def __init__(self, run_dir: Path, summary: dict[str, Any]) -> None:
        uri = tracking_uri(run_dir)
        if uri.startswith("file:"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        for key, value in HTTP_DEFAULTS.items():
            os.environ.setdefault(key, value)
        from mlflow.entities import Param, RunTag
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=uri)
        name = str(summary.get("ablation") or "suite-train")
        experiment = self.client.get_experiment_by_name(name)
        if experiment is not None:
            experiment_id = experiment.experiment_id
        else:
            try:
                experiment_id = self.client.create_experiment(name)
            except MlflowException:  # another worker created it first
                experiment_id = self.client.get_experiment_by_name(name).experiment_id
        tags = {"run_id": summary.get("run_id"), "variant": summary.get("variant"), "seed": summary.get("seed")}
        self.run_id = self.client.create_run(experiment_id, run_name=run_name(summary, run_dir),
                                             tags={k: str(v) for k, v in tags.items() if v is not None}).info.run_id
        params = [Param(k, str(v)[:MAX_PARAM]) for k, v in config_of(summary).items()]
        for i in range(0, len(params), 100):  # MLflow takes at most 100 params per batch
            self.client.log_batch(self.run_id, params=params[i:i + 100])
        self._tag = RunTag

    def log(self, step: int, values: dict[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, step) for k, v in values.items()]  # `train/loss`, as every sink names it
        for i in range(0, len(metrics), 1000):
            self.client.log_batch(self.run_id, metrics=metrics[i:i + 1000])

    def finish(self, summary: dict[str, Any]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        step = int(summary.get("steps_done") or 0)
        numbers = [Metric(f"summary/{k}", float(summary[k]), now, step) for k in SUMMARY_KEYS
                   if isinstance(summary.get(k), (int, float)) and not isinstance(summary.get(k), bool)]
        tags = [self._tag("status", str(summary.get("status")))]
        if summary.get("error"):
            tags.append(self._tag("error", str(summary["error"])[:5000]))
        self.client.log_batch(self.run_id, metrics=numbers, tags=tags)
        self.client.set_terminated(self.run_id, "FAILED" if summary.get("status") == "error" else "FINISHED")

    def abort(self) -> None:
        self.client.set_terminated(self.run_id, "KILLED")
