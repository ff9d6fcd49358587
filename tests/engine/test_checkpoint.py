"""suite.engine.checkpoint's refusals: a checkpoint resumes only the run that wrote it, into the optimizer layout it
was written from (AdamW maps its state by position, so a permuted layout with the same sizes would load)."""

import pytest
import torch
from torch import nn

from suite.engine.checkpoint import CheckpointError, RunState, load, save


class Two(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Parameter(torch.randn(2, 3)), nn.Parameter(torch.randn(3, 2))


def written(tmp_path):
    model = Two()
    optimizer = torch.optim.AdamW([model.a, model.b])
    (model.a.sum() + model.b.sum()).backward()
    optimizer.step()
    path = tmp_path / "checkpoint.pt"
    save(path, "r1", model, optimizer, RunState())
    return path, model


def test_a_checkpoint_resumes_the_run_that_wrote_it(tmp_path):
    path, model = written(tmp_path)
    assert load(path, "r1", model, torch.optim.AdamW([model.a, model.b])).step == 0


def test_another_runs_checkpoint_is_refused(tmp_path):
    path, model = written(tmp_path)
    with pytest.raises(CheckpointError, match="written by run 'r1', not by this run"):
        load(path, "r2", model, torch.optim.AdamW([model.a, model.b]))


def test_an_optimizer_of_another_layout_with_the_same_sizes_is_refused(tmp_path):
    path, model = written(tmp_path)
    with pytest.raises(CheckpointError, match=r"does not fit this run's model or optimizer .*has shape \(2, 3\)"):
        load(path, "r1", model, torch.optim.AdamW([model.b, model.a]))
