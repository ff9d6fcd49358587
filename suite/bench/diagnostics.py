"""What the instability diagnostics cost (``suite bench --diagnostics``): a log step with and without them,
interleaved in one process, spread over ``log_every`` steps as a share of a training step (docs/benchmark.md).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from suite.config import ModelConfig
from suite.engine.probes import probe
from suite.models import build_model


def cost(depth: int = 48, dim: int = 32, heads: int = 2, batch: int = 64, log_every: int = 10,
         rounds: int = 15, seed: int = 0) -> dict[str, float]:
    """Median milliseconds of each arm over ``rounds`` rounds, and ``share``: the diagnostics' extra time per step."""
    torch.manual_seed(seed)
    model = build_model(ModelConfig(depth=depth, dim=dim, heads=heads, patch_size=7, mlp_ratio=4.0, img_size=28,
                                    in_chans=1, num_classes=10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(batch, 1, 28, 28), torch.randint(0, 10, (batch,))
    params = list(model.parameters())

    def step() -> None:
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def step_measured() -> None:  # as suite.engine.loop.Training.measured_update
        before = [p.detach().clone() for p in params]
        step()
        with torch.no_grad():
            torch.stack([(p - b).pow(2).sum() for p, b in zip(params, before)]).sum().sqrt().item()

    arms: dict[str, Callable[[], object]] = {
        "step": step, "step_measured": step_measured, "probe": lambda: probe(model, x, attention=False),
        "probe_diagnostics": lambda: probe(model, x, model_level={}, attention=True)}
    times: dict[str, list[float]] = {k: [] for k in arms}
    for fn in arms.values():
        fn()
    for _ in range(rounds):
        for name, fn in arms.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    ms = {k: 1e3 * statistics.median(v) for k, v in times.items()}
    extra = (ms["probe_diagnostics"] - ms["probe"]) + (ms["step_measured"] - ms["step"])
    return {**ms, "extra_per_log_step": extra, "share": extra / log_every / ms["step"]}


def table(found: dict[str, float], depth: int, log_every: int) -> str:
    """The measurement as Markdown."""
    rows = "\n".join(f"| {k} | {found[k]:.1f} |" for k in ("step", "step_measured", "probe", "probe_diagnostics"))
    return (f"# What the diagnostics cost (depth {depth}, dim 32, batch 64, 1 thread)\n\n| arm | median ms |\n"
            f"|:--|--:|\n{rows}\n\nExtra per log step: {found['extra_per_log_step']:.1f} ms; at log_every "
            f"{log_every}: **{100 * found['share']:.2f}% of a training step** (target: 3% or less).\n")
