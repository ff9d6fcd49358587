"""torch.compile in a long-lived worker: every run compiled, never a silent fall-back to eager."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch import nn

from suite.engine.compiled import compile_for_run


def test_many_runs_in_one_process_are_each_compiled():
    """Twelve model shapes one after another in one process (more than dynamo's recompile limit of
    8): each is compiled, because each run starts from empty caches."""
    from torch._dynamo.utils import counters

    for width in range(1, 13):
        counters.clear()
        model = compile_for_run(nn.Linear(width, 3), backend="eager")
        assert model(torch.ones(2, width)).shape == (2, 3)
        assert counters["stats"]["unique_graphs"] == 1, width  # 0 would mean it ran eagerly


def test_a_run_past_the_recompile_limit_fails_instead_of_running_eagerly():
    model = compile_for_run(nn.Linear(4, 3), backend="eager", dynamic=False)
    limit = torch._dynamo.config.recompile_limit
    with pytest.raises(Exception, match="(?i)recompile|cache.*limit"):
        for batch in range(1, limit + 3):  # each batch size is a new static shape
            model(torch.ones(batch, 4))
