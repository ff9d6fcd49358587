"""Experiment trackers (train.log_to), each run for real and read back from the files it wrote."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest

from suite import store
from suite.cli import main
from suite.config import load_config
from suite.engine import train
from suite.engine.trackers import PER_BLOCK_UP_TO, scalars

TINY = {
    "data.name": "synthetic", "data.synthetic_train": 256, "data.synthetic_test": 64,
    "data.synthetic_img_size": 16, "data.synthetic_classes": 4, "model.patch_size": 4, "model.dim": 32,
    "model.heads": 2, "model.depth": 2, "model.residual": "layerscale", "train.steps": 20, "train.eval_every": 10,
    "train.log_every": 5, "train.warmup_steps": 3, "train.lr": 3e-3, "train.batch_size": 32, "device": "cpu",
}
EXTRA = {"ablation": "abl", "variant": "layerscale"}


def tiny(log_to: str, **overrides):
    items = {**TINY, "train.log_to": log_to, **overrides}
    return load_config(None, [f"{k}={v}" for k, v in items.items()])


def train_records(run_dir) -> list[dict]:
    return [r for r in store.read_metrics(run_dir) if r["kind"] == "train" and r["loss"] is not None]


# ----------------------------------------------------------------------------- the scalars


def test_scalars_name_each_record_as_every_sink_shows_it():
    blocks = [{"block": i, "scale_mean": 0.1 * i, "scale_max": None, "attn_ratio": 1.0, "mlp_ratio": 2.0,
               "out_rms": 3.0} for i in range(2)]
    step, values = scalars({"kind": "train", "step": 5, "loss": 1.5, "lr": 1e-3, "grad_norm": None, "blocks": blocks})
    assert step == 5 and values["train/loss"] == 1.5 and "train/grad_norm" not in values  # null: left out
    assert values["blocks/scale_mean/001"] == pytest.approx(0.1) and "blocks/scale_max/000" not in values
    assert scalars({"kind": "eval", "step": 10, "val_loss": 1.0, "val_acc": 0.5, "test_loss": 2.0,
                    "test_acc": 0.25}) == (10, {"val/loss": 1.0, "val/acc": 0.5, "test/loss": 2.0, "test/acc": 0.25})
    assert scalars({"kind": "diverged", "step": 7, "reason": "nonfinite"}) == (7, {"run/diverged": 1.0})


def test_deep_models_send_the_mean_and_max_over_blocks_not_a_series_per_block():
    n = PER_BLOCK_UP_TO + 1  # one block over: no series per block
    # One block's scale is n, the others 0: mean exactly 1 (the median would be 0); block 0's attention
    # ratio is missing, the others 2: mean 2 over the blocks that have one (not 2 (n - 1) / n).
    blocks = [{"block": i, "scale_mean": float(n if i == n - 1 else 0), "scale_max": None,
               "attn_ratio": None if i == 0 else 2.0, "mlp_ratio": None, "out_rms": None} for i in range(n)]
    _, values = scalars({"kind": "train", "step": 1, "loss": 1.0, "lr": 0.1, "grad_norm": 1.0, "blocks": blocks})
    assert values["blocks/scale_mean/mean"] == 1.0 and values["blocks/scale_mean/max"] == n
    assert values["blocks/attn_ratio/mean"] == 2.0 and values["blocks/attn_ratio/max"] == 2.0
    assert not [k for k in values if k.startswith("blocks/scale_max")]  # no block has one
    assert not [k for k in values if k.startswith("blocks/") and k.split("/")[-1].isdigit()]


# ----------------------------------------------------------------------------- each sink, for real


def test_tensorboard_event_file_holds_the_metrics(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    summary = train(tiny("[tensorboard]"), tmp_path / "run", extra=EXTRA)
    assert summary["status"] == "ok" and summary["train.log_to"] == ["tensorboard"]
    (folder,) = (tmp_path / "run" / "tensorboard").iterdir()  # suite train --out DIR: DIR/tensorboard/<run name>
    assert folder.name == f"layerscale-seed0-{summary['run_id']}"
    events = EventAccumulator(str(folder))
    events.Reload()
    loss = events.Scalars("train/loss")
    expected = train_records(tmp_path / "run")
    assert [e.step for e in loss] == [r["step"] for r in expected]
    assert [e.value for e in loss] == pytest.approx([r["loss"] for r in expected], rel=1e-6)
    assert events.Scalars("test/acc")[-1].value == pytest.approx(summary["test_acc"])
    assert events.Scalars("blocks/scale_mean/001")[0].step == 0  # the scales as initialised
    assert "config" in events.Tags()["tensors"] or "config/text_summary" in events.Tags()["tensors"]
    # the headline numbers at the end, as MLflow's summary/<key> (it had only the status)
    assert events.Scalars("summary/test_acc")[-1].value == pytest.approx(summary["test_acc"])
    assert events.Scalars("summary/test_acc")[-1].step == summary["steps_done"]


def test_a_run_folder_named_runs_outside_a_sweep_keeps_its_tracker_files(tmp_path):
    """`suite train --out x/runs/r` put tensorboard/ and mlruns/ in x/, guessed a sweep's from the name alone."""
    from suite.engine.trackers import experiment_folder

    run = tmp_path / "x" / "runs" / "r"
    run.mkdir(parents=True)
    assert experiment_folder(run) == run.resolve()
    (tmp_path / "x" / "ablation.yaml").write_text("name: x\n")
    assert experiment_folder(run) == (tmp_path / "x").resolve()


def _wandb_records(run_dir) -> list[dict]:
    """The records of an offline W&B run, read back with W&B's own reader (``wandb leet inspect --json``):
    W&B 0.31 offline writes no ``files/wandb-summary.json`` or ``config.yaml``, only its binary log."""
    proc = subprocess.run([sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(run_dir)],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def test_wandb_offline_run_has_the_config_groups_history_and_summary(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    summary = train(tiny("[wandb]"), tmp_path / "run", extra=EXTRA)
    assert summary["status"] == "ok"
    (run_dir,) = (tmp_path / "run" / "wandb").glob(f"offline-run-*-{summary['run_id']}-*")
    records = _wandb_records(run_dir)

    def of(kind: str) -> list[dict]:
        return [r[kind] for r in records if r["type"] == kind]

    (run,) = of("run")
    assert (run["run_group"], run["job_type"]) == ("abl", "layerscale")
    assert run["run_id"] == (tmp_path / "run" / "wandb_id").read_text().strip()
    assert run["run_id"].startswith(summary["run_id"] + "-")  # a new W&B run per attempt from step 0
    config = run["config"]["update"]
    assert config["model.depth"] == 2 and config["model.residual"] == "layerscale" and config["variant"] == "layerscale"
    history = [h["item"] for h in of("history")]
    expected = train_records(tmp_path / "run")
    assert [h["_step"] for h in history if "train/loss" in h] == [r["step"] for r in expected]
    assert [h["train/loss"] for h in history if "train/loss" in h] == pytest.approx([r["loss"] for r in expected])
    assert [h["_step"] for h in history if "val/acc" in h] == [10, 20]  # train.eval_every=10, train.steps=20
    assert [h["_step"] for h in history if "test/acc" in h] == [20]  # test is measured once, at the end
    summaries = {k: v for s in of("summary") for k, v in s["update"].items()}
    assert summaries["test_acc"] == pytest.approx(summary["test_acc"]) and summaries["status"] == "ok"
    assert [e["exit_code"] for e in of("exit")] == [0]


def test_mlflow_local_store_has_the_run_params_and_metric_history(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    from mlflow.tracking import MlflowClient

    out = tmp_path / "results"
    out.mkdir()
    (out / "ablation.yaml").write_text("name: abl\n")
    summary = train(tiny("[mlflow]"), out / "runs" / "r1", extra=EXTRA)  # laid out as a sweep's run
    assert summary["status"] == "ok"
    client = MlflowClient(tracking_uri=(out / "mlruns").as_uri())  # beside runs/, shared by the sweep
    experiment = client.get_experiment_by_name("abl")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED" and run.data.tags["variant"] == "layerscale"
    assert run.data.tags["run_id"] == summary["run_id"] and run.data.params["model.depth"] == "2"
    history = client.get_metric_history(run.info.run_id, "train/loss")  # named as in every sink
    expected = train_records(out / "runs" / "r1")
    history = sorted((m.step, m.value) for m in history)
    assert [step for step, _ in history] == [r["step"] for r in expected]
    assert [value for _, value in history] == pytest.approx([r["loss"] for r in expected])
    assert run.data.metrics["summary/test_acc"] == pytest.approx(summary["test_acc"])


# ----------------------------------------------------------------------------- failures


def test_a_failing_tracker_is_dropped_with_a_warning_and_the_run_goes_on(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    from suite.engine.trackers import tensorboard_sink

    def broken(self, step, values):
        raise ConnectionError("tracker server unreachable")

    monkeypatch.setattr(tensorboard_sink.TensorBoardSink, "log", broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = train(tiny("[tensorboard]"), tmp_path / "run")
    assert summary["status"] == "ok" and len(train_records(tmp_path / "run")) == 4
    messages = [str(w.message) for w in caught if issubclass(w.category, store.SuiteWarning)]
    assert len(messages) == 1 and "tensorboard failed and is off for this run" in messages[0]


def test_a_missing_tracker_package_is_one_line_naming_the_extra(tmp_path, monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    overrides = [f"{k}={v}" for k, v in {**TINY, "train.log_to": "[wandb]"}.items()]
    assert main(["train", *overrides, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "train.log_to: wandb needs the wandb package" in err and ".[trackers]" in err
    assert not (tmp_path / "run").exists()
    ablation = tmp_path / "a.yaml"
    ablation.write_text("name: a\nbase: {train: {log_to: [wandb], steps: 5}, data: {name: synthetic}, model: {patch_size: 4}}\n"
                        "variants: {ls: {model.residual: layerscale}}\nseeds: 1\n")
    assert main(["run", str(ablation), "--out", str(tmp_path / "sweep"), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ".[trackers]" in err and not (tmp_path / "sweep").exists()


def test_log_to_is_not_part_of_the_run_id():
    assert store.run_id(tiny("[tensorboard, wandb]")) == store.run_id(tiny("[]"))


def _closed_port() -> int:
    import socket

    with socket.socket() as s:  # bound, then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_mlflow_server_that_is_down_costs_a_run_seconds_not_minutes(tmp_path, monkeypatch):
    """MLflow's own defaults (120 s timeout, 7 retries with back-off) held each run ~4 minutes against a
    closed port before the warning; the sink's HTTP defaults make it fail fast, once, with one line."""
    pytest.importorskip("mlflow")
    import time

    from suite.engine.trackers import mlflow_sink

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{_closed_port()}")
    for key in mlflow_sink.HTTP_DEFAULTS:  # the user set none: the sink's defaults apply (and are undone after)
        monkeypatch.setenv(key, "")
        monkeypatch.delenv(key)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = train(tiny("[mlflow]"), tmp_path / "run")
    seconds = time.perf_counter() - t0
    assert summary["status"] == "ok" and seconds < 20, seconds
    messages = [str(w.message) for w in caught if issubclass(w.category, store.SuiteWarning)]
    assert len(messages) == 1 and "mlflow failed and is off for this run" in messages[0]


def test_a_tracker_call_that_hangs_is_dropped_after_the_bound(tmp_path, monkeypatch):
    """A server that swallows packets: no call may hold the run longer than CALL_TIMEOUT_S."""
    pytest.importorskip("tensorboard")
    import threading
    import time

    from suite.engine import trackers
    from suite.engine.trackers import tensorboard_sink

    never = threading.Event()
    monkeypatch.setattr(trackers, "CALL_TIMEOUT_S", 0.5)
    monkeypatch.setattr(tensorboard_sink.TensorBoardSink, "log", lambda self, step, values: never.wait(30))
    # no writer: its open may itself take 0.5 s on a busy machine, and the bound would then test the open, not the log
    monkeypatch.setattr(tensorboard_sink.TensorBoardSink, "__init__", lambda self, run_dir, summary: None)
    monkeypatch.setattr(tensorboard_sink.TensorBoardSink, "abort", lambda self: None)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = train(tiny("[tensorboard]"), tmp_path / "run")
    never.set()
    assert summary["status"] == "ok" and time.perf_counter() - t0 < 15
    messages = [str(w.message) for w in caught if issubclass(w.category, store.SuiteWarning)]
    assert len(messages) == 1 and "tensorboard failed" in messages[0] and "no answer in 0.5 s" in messages[0]


def test_run_names_say_variant_grid_axes_and_seed_and_are_safe_folder_names(tmp_path):
    from suite.engine.trackers import run_name

    out = tmp_path / "sweep"
    (out / "runs" / "abc").mkdir(parents=True)
    (out / "ablation.yaml").write_text("name: a\ngrid: {model.depth: [2, 4], train.lr: [0.001]}\n")
    summary = {"variant": "ls/1 x", "seed": 1, "run_id": "abc", "model.depth": 4, "train.lr": 0.001}
    assert run_name(summary, out / "runs" / "abc") == "ls_1_x-depth=4-lr=0.001-seed1-abc"
    assert run_name(summary, tmp_path / "train") == "ls_1_x-seed1-abc"  # suite train: no grid


def test_wandb_is_quiet_unless_the_user_asked_otherwise(tmp_path, monkeypatch, capfd):
    pytest.importorskip("wandb")
    import os

    monkeypatch.setenv("WANDB_MODE", "offline")
    for key in ("WANDB_SILENT", "WANDB_CONSOLE", "WANDB_INIT_TIMEOUT"):  # unset (and what the sink sets, undone after)
        monkeypatch.setenv(key, "")
        monkeypatch.delenv(key)
    monkeypatch.setenv("WANDB_CONSOLE", "wrap")  # the user's own choice is kept
    assert train(tiny("[wandb]"), tmp_path / "run")["status"] == "ok"
    assert os.environ["WANDB_SILENT"] == "true" and os.environ["WANDB_CONSOLE"] == "wrap"
    captured = capfd.readouterr()
    assert "wandb" not in (captured.out + captured.err).lower()


def test_a_sink_that_opens_after_its_time_is_up_is_not_used(tmp_path, monkeypatch):
    """Open bounded too: a sink whose open answers late (in its own thread) must not join the run then."""
    pytest.importorskip("tensorboard")
    import threading

    from suite.engine import trackers
    from suite.engine.trackers import Trackers, tensorboard_sink

    release, opened = threading.Event(), threading.Event()

    class Late(tensorboard_sink.TensorBoardSink):
        def __init__(self, run_dir, summary):
            release.wait(30)
            super().__init__(run_dir, summary)
            opened.set()

    monkeypatch.setattr(trackers, "CALL_TIMEOUT_S", 0.2)
    monkeypatch.setattr(tensorboard_sink, "TensorBoardSink", Late)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sinks = Trackers(("tensorboard",), tmp_path, {"run_id": "r", "seed": 0})
    release.set()
    assert opened.wait(30) and sinks.sinks == {}
    assert any("no answer in 0.2 s" in str(w.message) for w in caught)
