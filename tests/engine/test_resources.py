"""train.deterministic: the CUDA determinism flags, set by the run and not part of its id."""

from __future__ import annotations

import os

import pytest
import torch

from suite import store
from suite.config import load_config
from suite.engine import train

TINY = ["data.name=synthetic", "data.synthetic_train=32", "data.synthetic_test=16", "data.synthetic_img_size=8",
        "model.patch_size=4", "model.dim=16", "model.heads=2", "model.depth=1", "train.steps=2",
        "train.batch_size=16", "train.log_every=1", "train.eval_every=0", "device=cpu"]


@pytest.fixture
def torch_flags(monkeypatch):
    """Whatever the test sets, the process gets torch's flags and the environment back."""
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    saved = (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.deterministic,
             torch.backends.cudnn.benchmark)
    yield
    torch.use_deterministic_algorithms(saved[0])
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved[1:]


def test_a_deterministic_run_sets_the_flags_and_the_next_run_clears_them(tmp_path, torch_flags):
    torch.backends.cudnn.benchmark = True
    assert train(load_config(None, [*TINY, "train.deterministic=true"]), tmp_path / "on")["error"] is None
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert torch.are_deterministic_algorithms_enabled()
    assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    # A sweep worker runs many runs in one process: one that did not ask gets torch's defaults back.
    assert train(load_config(None, TINY), tmp_path / "off")["error"] is None
    assert not torch.are_deterministic_algorithms_enabled() and not torch.backends.cudnn.deterministic


def test_an_existing_cublas_workspace_setting_is_kept(tmp_path, torch_flags, monkeypatch):
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    assert train(load_config(None, [*TINY, "train.deterministic=true"]), tmp_path)["error"] is None
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"


def test_deterministic_does_not_change_the_run_id():
    """Like device and threads it changes only the order of float reductions: the run ids of every
    committed result stay as they are."""
    assert store.run_id(load_config(None, [*TINY, "train.deterministic=true"])) == store.run_id(load_config(None, TINY))
    assert "train.deterministic" in store.EXECUTION_KEYS
