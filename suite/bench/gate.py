"""The CI gate on LayerScale's step-time cost (``suite bench-check``; docs/benchmark.md): three interleaved A/B checks,
each failing only when its median ratio and its whole 95% interval exceed the threshold, so noise cannot fail CI."""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from torch import nn

from suite.bench.arms import BenchShape, build_arm
from suite.bench.measure import Timer, interleave, measure
from suite.bench.stats import min_rounds, round_ratios, summarize

# What each threshold is for (to update one: docs/benchmark.md, "Updating a threshold"). Only the residual check
# resolves one extra pass over the activations (`suite bench-check --slowdown 1` fails it, and no step check); the
# step checks catch a regression of a whole step's size, which `tests/bench/test_bench.py` injects (8 extra passes
# at the default's shape). Their figures are `suite bench-check`'s own (results/reference/bench/gate.md); rounds are
# kept few for CI, which only widens intervals and never fails a sound change.
STEP_THRESHOLD = 0.05
RESIDUAL_THRESHOLD = 0.10
GATE_SHAPE = BenchShape(depth=12, dim=192, heads=3, tokens=65, batch=4)  # ViT-Ti, 8x8 patches
# The default ablation's model (only the patch embedding differs, the same for both arms); batch 64 as recorded before.
ABLATION_SHAPE = BenchShape(depth=12, dim=32, heads=2, tokens=17, batch=64)
ABLATION_STEP_THRESHOLD = 0.08
RESIDUAL_BATCH = 32  # 32x65x192 floats (1.6 MB): a pass costs memory traffic, not Python calls
STEP_ROUNDS = 20
RESIDUAL_ROUNDS = 50
THREADS = 1  # on a shared runner a second thread stalls at every op's barrier: noise, not cost
ALPHA = 0.05


class TooFewRounds(ValueError):
    """Too few rounds for the interval the gate decides on: it refuses to judge."""


def gate(ratios: np.ndarray, threshold: float, alpha: float = ALPHA, what: str = "overhead") -> tuple[bool, str]:
    """(passed, a one-line message) of one check's per-round ratios; :class:`TooFewRounds` below an interval."""
    s = summarize(ratios, alpha)
    limit = f"{100 * threshold:+.1f}%"
    if s.n < min_rounds(alpha):
        raise TooFewRounds(f"{what}: {s.n} rounds give no {100 * (1 - alpha):.0f}% interval; "
                           f"measure at least {min_rounds(alpha)}")
    if s.median > 1 + threshold and s.low > 1 + threshold:
        return False, f"FAIL: {what} {s.format()} exceeds the {limit} threshold (the whole 95% interval is above it)"
    if s.median > 1 + threshold:
        return True, f"PASS: {what} {s.format()}: the median is above {limit} but the 95% interval includes it (noise)"
    return True, f"PASS: {what} {s.format()} is within the {limit} threshold"


class ReferencePath(nn.Module):
    """The bar our residual path must meet: LayerScale's update written out, ``x = x + γ * x`` per branch."""

    def __init__(self, gammas: list[torch.Tensor]) -> None:
        super().__init__()
        self.gammas = nn.ParameterList([nn.Parameter(g.detach().clone()) for g in gammas])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for gamma in self.gammas:
            x = x + gamma * x
        return x


def residual_path(model: nn.Module) -> nn.Sequential:
    """``model.blocks`` with attention, MLP, norms and drop-path replaced by ``nn.Identity`` (in place)."""
    for block in model.blocks:
        for name in ("norm1", "attn", "norm2", "mlp", "drop_path"):
            setattr(block, name, nn.Identity())
    return model.blocks


def measure_step(shape: BenchShape = GATE_SHAPE, rounds: int = STEP_ROUNDS, *,
                 candidate: Callable[[], nn.Module] | None = None, seed: int = 0,
                 log: Callable[[str], None] | None = None) -> np.ndarray:
    """Per-round training-step ratios LayerScale / Pre-LN, shape (rounds,); tests inject a slowed ``candidate``."""
    factories = {"preln": lambda: build_arm("preln", shape),
                 "layerscale": candidate or (lambda: build_arm("layerscale", shape))}
    res = measure(factories, shape, rounds=rounds, warmup=2, forward=False, seed=seed, log=log)
    return round_ratios(res["layerscale"].train_s, res["preln"].train_s)


def measure_residual(shape: BenchShape = GATE_SHAPE, rounds: int = RESIDUAL_ROUNDS, *, batch: int = RESIDUAL_BATCH,
                     candidate: Callable[[], nn.Module] | None = None, seed: int = 0) -> np.ndarray:
    """Per-round forward+backward ratios of our residual path / the reference's, shape (rounds,)."""
    torch.manual_seed(seed)
    ours = residual_path((candidate or (lambda: build_arm("layerscale", shape)))())
    ref = ReferencePath([g for block in ours for g in (block.ls1.gamma, block.ls2.gamma)])
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, shape.tokens, shape.dim, generator=gen)
    grad = torch.randn(batch, shape.tokens, shape.dim, generator=gen)

    def step(blocks: nn.Module) -> Callable[[], None]:
        def fn() -> None:
            blocks(x).backward(grad)
            for p in blocks.parameters():
                p.grad = None
        return fn

    fns = {"ours": step(ours), "reference": step(ref)}
    for fn in fns.values():
        for _ in range(3):
            fn()
    times = interleave(fns, rounds, timer=Timer("cpu"), seed=seed)
    return round_ratios(times["ours"], times["reference"])


def check(measure_fn: Callable[..., np.ndarray], threshold: float, what: str, *, confirm: bool = True,
          **kwargs) -> tuple[bool, str, np.ndarray]:
    """Measure, decide; on a failure measure again (new seed) and decide on all rounds together."""
    ratios = measure_fn(**kwargs)
    passed, message = gate(ratios, threshold, what=what)
    if not passed and confirm:
        ratios = np.concatenate([ratios, measure_fn(**{**kwargs, "seed": kwargs.get("seed", 0) + 1})])
        passed, message = gate(ratios, threshold, what=what)
        message += " (confirmed on a second measurement)" if not passed else " (after a second measurement)"
    return passed, message, ratios
