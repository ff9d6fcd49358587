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


def test_regional_compilation_shares_one_graph_across_blocks():
    from torch._dynamo.utils import counters

    from suite.config import load_config
    from suite.models import build_model

    cfg = load_config(None, ["model.depth=5", "model.dim=16", "model.heads=2", "model.img_size=8", "model.in_chans=1",
                             "model.num_classes=3", "model.patch_size=4", "model.residual=layerscale",
                             "data.name=synthetic", "data.synthetic_img_size=8", "data.synthetic_channels=1",
                             "data.synthetic_classes=3"])
    torch.manual_seed(0)
    model = build_model(cfg.model)
    x = torch.randn(2, 1, 8, 8)
    eager = model(x)
    counters.clear()
    compiled = compile_for_run(model, backend="eager")
    assert compiled is model  # compiled in place, block by block
    assert torch.allclose(compiled(x), eager)
    assert counters["stats"]["unique_graphs"] == 1  # one graph for five blocks


def test_training_with_compile_matches_eager(tmp_path):
    """A real (inductor) compiled run: the same losses as eager to float tolerance, the same status."""
    from suite import store
    from suite.config import load_config
    from suite.engine import train

    # test_probes' compiled run has this shape and scheme: the graph inductor compiles first (from a cold cache in
    # CI) is read back from its cache by the other
    items = ["model.residual=layerscale", "data.name=synthetic", "data.synthetic_train=64", "data.synthetic_test=32",
             "data.synthetic_img_size=8", "model.patch_size=4", "model.dim=16", "model.heads=2", "model.depth=2",
             "train.steps=6", "train.batch_size=16", "train.log_every=2", "train.eval_every=0", "train.warmup_steps=1",
             "device=cpu", "train.lr=1e-3"]
    eager = train(load_config(None, items), tmp_path / "eager")
    compiled = train(load_config(None, [*items, "train.compile=default"]), tmp_path / "compiled")
    assert compiled["error"] is None and compiled["status"] == eager["status"]
    losses = [[m["loss"] for m in store.read_metrics(tmp_path / d) if m["kind"] == "train" and m["loss"]]
              for d in ("eager", "compiled")]
    assert losses[1] == pytest.approx(losses[0], rel=1e-4)


def test_linear_drop_path_compiles_each_block_without_hitting_the_limit():
    """Under the linear schedule each block's drop rate is a constant of its graph: 12 blocks, 12
    compilations, which the per-run limit allows (dynamo's default of 8 would fail the run)."""
    from suite.config import load_config
    from suite.models import build_model

    cfg = load_config(None, ["model.depth=12", "model.dim=16", "model.heads=2", "model.img_size=8", "model.in_chans=1",
                             "model.num_classes=3", "model.patch_size=4", "model.drop_path=0.1",
                             "data.name=synthetic", "data.synthetic_img_size=8", "data.synthetic_channels=1",
                             "data.synthetic_classes=3"])
    model = compile_for_run(build_model(cfg.model), backend="eager")
    model.train()
    model(torch.randn(2, 1, 8, 8)).sum().backward()
    model.eval()
    model(torch.randn(2, 1, 8, 8))
