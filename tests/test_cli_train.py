"""`suite train` as a newcomer and a sweep meet it: --out into a sweep's run folder is refused in one line."""

from __future__ import annotations

import fcntl
import json

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


@pytest.mark.parametrize("out", ["results/train/abc", "runs", "my/runs/x"])
def test_other_folders_are_not_a_sweeps(tmp_path, monkeypatch, out):
    monkeypatch.chdir(tmp_path)
    assert sweep_owner(out) is None
