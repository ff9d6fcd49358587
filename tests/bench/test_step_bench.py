"""pytest-benchmark: one training step of every residual scheme and of timm's ViT (``make bench``).

Absolute times per arm at the ViT-Ti shape (8x8 patches + class token, batch 4, CPU, one thread),
saved by ``--benchmark-autosave`` under ``.benchmarks/`` and compared with the last saved run by
``--benchmark-compare``. Overhead *ratios* with intervals come from ``suite bench`` (interleaved A/B
rounds), which is robust to a machine whose speed drifts between these sequential benchmarks.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from suite.bench.arms import BenchShape, arm_names, build_arm
from suite.config import TrainConfig
from suite.engine.optim import build_optimizer

pytestmark = pytest.mark.bench

SHAPE = BenchShape(depth=12, dim=192, heads=3, tokens=65, batch=4)


@pytest.mark.parametrize("arm", arm_names(include_variants=True))
def test_train_step(benchmark, arm):
    torch.manual_seed(0)
    model = build_arm(arm, SHAPE).train()
    opt = build_optimizer(model, TrainConfig())
    x = torch.randn(SHAPE.batch, 3, SHAPE.img_size, SHAPE.img_size)
    y = torch.randint(0, SHAPE.num_classes, (SHAPE.batch,))

    def step() -> float:
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    benchmark.group = f"train step, depth {SHAPE.depth}, dim {SHAPE.dim}, tokens {SHAPE.tokens}, batch {SHAPE.batch}"
    benchmark.extra_info.update(arm=arm, threads=torch.get_num_threads())
    loss = benchmark.pedantic(step, rounds=10, warmup_rounds=2, iterations=1)
    assert torch.isfinite(torch.tensor(loss))
