"""`suite train` as a newcomer and a sweep meet it: --out into a sweep's run folder is refused in one line."""

from __future__ import annotations

import fcntl

import pytest

from suite.cli import main
from suite.cli.train import sweep_owner
from suite.sweep import claims


def refused(capsys, out) -> str:
    """Run `suite train --out OUT` (tiny overrides); assert it refused in one line, created nothing."""
    before = out.exists()
    assert main(["train", "--out", str(out), "train.steps=1", "device=cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: --out ")
    assert out.exists() == before and not (out / "summary.json").exists()
    return err


def test_a_run_folder_a_sweep_is_training_is_refused(tmp_path, capsys):
    root = tmp_path / "sweep"
    root.mkdir()
    with open(root / ".lock", "a") as lock:  # what `suite run` holds for the sweep's lifetime (folder.prepare_out)
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        err = refused(capsys, root / "runs" / "0123456789ab")
        assert "a sweep is training this run" in err and "suite status" in err
    assert sweep_owner(root / "runs" / "0123456789ab") is None  # lock gone, no ablation.yaml: a folder like any


def test_a_run_a_worker_holds_a_live_claim_on_is_refused(tmp_path, capsys):
    """A detached Slurm sweep holds no lock here, but its worker's claim on the run is live."""
    root = tmp_path / "sweep"
    claim = claims.try_claim(root, "0123456789ab", lease_s=600)
    assert claim is not None
    assert "a sweep is training this run" in refused(capsys, root / "runs" / "0123456789ab")
    assert sweep_owner(root / "runs" / "ffffffffffff") is None  # another run's claim says nothing of this one
    claim.release()
    assert sweep_owner(root / "runs" / "0123456789ab") is None


def test_an_idle_sweeps_run_folder_is_refused_too(tmp_path, capsys):
    """Trained by `suite train`, its summary would lack the variant and ablation the analysis groups by."""
    root = tmp_path / "sweep"
    (root / "runs" / "0123456789ab").mkdir(parents=True)
    (root / "ablation.yaml").write_text("name: demo\n")
    err = refused(capsys, root / "runs" / "0123456789ab")
    assert "is a run folder of the sweep in" in err and "records its variant and ablation" in err
    (tmp_path / "mine").symlink_to(root / "runs" / "0123456789ab")  # a link to it is it
    assert "is a run folder of the sweep in" in refused(capsys, tmp_path / "mine")


@pytest.mark.parametrize("out", ["results/train/abc", "runs", "my/runs/x"])
def test_other_folders_are_not_a_sweeps(tmp_path, monkeypatch, out):
    monkeypatch.chdir(tmp_path)
    assert sweep_owner(out) is None


# ----------------------------------------------------------------------------- what `suite train` alone trains


def fake_train(seen):
    def train(cfg, out, progress=None, on_step=None, **kw):
        seen.update(cfg=cfg, progress=progress, on_step=on_step)
        return {"status": "ok", "test_acc": 0.5, "diverged_step": None, "step_time_ms": 1.0}
    return train


def test_no_config_and_no_override_trains_the_cpu_sized_demo_not_the_typed_defaults(tmp_path, monkeypatch, capsys):
    import suite.engine
    from suite.cli.train import DEMO
    from suite.config import RunConfig, load_config

    seen = {}
    monkeypatch.setattr(suite.engine, "train", fake_train(seen))
    assert main(["train", "--out", str(tmp_path / "demo"), "--device", "cpu"]) == 0
    cfg = seen["cfg"]
    assert (cfg.model.residual, cfg.model.depth, cfg.train.steps, cfg.train.threads) == ("layerscale", 12, 200, 1)
    assert cfg.model == load_config(None, list(DEMO)).model  # nothing else changed
    assert "training the CPU-sized demo run" in capsys.readouterr().out
    # The typed defaults, which sweeps' run ids depend on, are not the demo's.
    assert (RunConfig().model.depth, RunConfig().model.residual, RunConfig().train.steps) == (6, "preln", 300)
    assert main(["train", "--out", str(tmp_path / "typed"), "seed=0"]) == 0  # any key=value: the typed defaults
    assert (seen["cfg"].model.depth, seen["cfg"].train.steps, seen["cfg"].train.threads) == (6, 300, None)
    assert "demo" not in capsys.readouterr().out


def test_help_says_what_suite_train_alone_trains_and_how_long(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "With no CONFIG and no key=value, suite train trains a CPU-sized demo run, not the typed defaults" in text
    assert "model.residual=layerscale model.depth=12 train.steps=200 train.threads=1" in text
    assert "results/reference/train_demo.txt" in text


def test_without_a_terminal_progress_is_lines_with_a_bar_on_request(tmp_path, monkeypatch, capsys):
    import suite.engine
    from suite.cli.progress_lines import ProgressLines

    seen = {}
    monkeypatch.setattr(suite.engine, "train", fake_train(seen))
    main(["train", "--out", str(tmp_path / "a"), "seed=1"])  # pytest's stderr is no terminal
    assert isinstance(seen["on_step"].progress, ProgressLines) and seen["progress"] is False
    assert capsys.readouterr().out.startswith("training run ")
    main(["train", "--out", str(tmp_path / "b"), "seed=1", "--progress"])
    assert seen["on_step"].progress is None and seen["progress"] is True
    main(["train", "--out", str(tmp_path / "c"), "seed=1", "--no-progress"])
    assert seen["on_step"].progress is None and seen["progress"] is False
    assert main(["train", "--out", str(tmp_path / "d"), "seed=1", "--progress-every", "0"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: --progress-every 0: must be a number of seconds above 0"]


def test_suite_train_piped_prints_progress_lines_with_the_loss(tmp_path):
    """A real run with stdout and stderr piped (a log file, a batch job): lines, not silence."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "suite", "train", "--out", str(tmp_path / "run"), "--progress-every",
                           "0.001", "data.name=digits", "model.patch_size=4", "model.depth=2", "model.dim=16",
                           "model.heads=2", "train.steps=40", "train.log_every=1", "train.eval_every=0", "device=cpu"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("training run ") and lines[-1].startswith("ok: ")
    progress = [line for line in lines if line.startswith("step ")]
    assert progress[-1].startswith("step 40/40 (100%)") and "steps/s  eta 0m00s" in progress[-1]
    assert any(" loss " in line for line in progress)  # once metrics.jsonl has a logged loss on disk


def test_ctrl_c_saves_the_step_and_the_same_command_resumes_it_to_the_same_result(tmp_path):
    """Ctrl-C ended `suite train` unsaved: the same command began again at step 0 (a fresh-clone walkthrough)."""
    import json
    import signal
    import subprocess
    import sys
    import time

    keys = ["data.name=digits", "model.patch_size=4", "model.depth=2", "model.dim=16", "model.heads=2",
            "train.steps=250", "train.log_every=1", "train.eval_every=0", "train.threads=1", "device=cpu"]

    def train(out):
        return subprocess.Popen([sys.executable, "-m", "suite", "train", "--out", str(out), *keys],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    whole = train(tmp_path / "whole")
    assert whole.wait(300) == 0
    slow = train(tmp_path / "cut")
    metrics = tmp_path / "cut" / "metrics.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not metrics.exists() or metrics.read_text().count('"kind": "train"') < 5):
        time.sleep(0.1)
    slow.send_signal(signal.SIGINT)
    _, err = slow.communicate(timeout=120)
    assert slow.returncode == 130 and "saved its last step; the same command resumes it" in err, err
    assert (tmp_path / "cut" / "checkpoint.pt").exists() and not (tmp_path / "cut" / "summary.json").exists()
    assert train(tmp_path / "cut").wait(300) == 0
    done = [json.loads((tmp_path / d / "summary.json").read_text()) for d in ("whole", "cut")]
    assert done[1]["resumed_at"] and done[0]["test_acc"] == done[1]["test_acc"]
    assert done[0]["final_train_loss"] == done[1]["final_train_loss"]


@pytest.mark.parametrize("argv,said", [
    (["train", "model.depth", "4"], "model.depth: no such file; to set a key write model.depth=4 (no spaces"),
    (["train", "depth=4"], "unknown key 'depth' (did you mean 'model.depth'?)"),
    (["train", "ABLATION"], "an ablation file (it has variants or a grid), not a run config; run it with `suite run"),
    (["run", "RUNCONFIG"], "a run config (model, data, train at the top), not an ablation; train it with `suite train"),
    (["validate", "FOLDER"], "a folder, not a file; name a file in it"),
    (["train", "model.heads=3"], "set model.heads to one of 1, 2, 4, 8, 16, 32, 64, or change model.dim"),
    (["train", "missing.yaml"], "missing.yaml: file not found (looked in "),
    (["run", "ABLATION", "--out", "TRAINED", "--dry-run"], "holds a single run (its config.yaml and summary.json"),
])
def test_a_newcomers_mistakes_are_one_line_that_says_what_to_do(tmp_path, capsys, argv, said):
    """Each said something true but not what to do (a fresh-clone walkthrough): a file not found for
    `model.depth 4`, unknown top-level keys for an ablation given to `suite train`, two lines for a run config given
    to `suite run`; a `suite train` run folder was taken as a sweep's --out."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    (tmp_path / "run.yaml").write_text("model: {depth: 2}\ntrain: {steps: 3}\n")
    (tmp_path / "trained").mkdir()
    (tmp_path / "trained" / "config.yaml").write_text("seed: 0\n")
    names = {"ABLATION": str(root / "ablations" / "smoke.yaml"), "RUNCONFIG": str(tmp_path / "run.yaml"),
             "FOLDER": str(root / "ablations"), "TRAINED": str(tmp_path / "trained")}
    assert main([names.get(a, a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err, err


def test_a_missing_ablation_names_only_what_is_missing(capsys):
    """key=value overrides are optional: `suite run` with nothing names FILE alone (it named key=value as required)."""
    with pytest.raises(SystemExit) as stop:
        main(["run"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("the following arguments are required: FILE (see `suite run --help`)"), err
