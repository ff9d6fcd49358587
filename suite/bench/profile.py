"""``suite bench --profile``: where a training step's time goes, by operator family (:data:`FAMILIES`), on the CPU.
The profiler adds its own time, so the shares are of the profiled step; overheads are ``suite bench``'s to measure.
"""

from __future__ import annotations

import collections
import statistics
import time
from typing import Any, Callable

import torch
import torch.nn.functional as F

FAMILIES = {  # operator name -> family; anything not listed is "other" (autograd engine, views, ...)
    "aten::mm": "linear", "aten::addmm": "linear",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": "attention",
    "aten::gelu": "GELU", "aten::gelu_backward": "GELU",
    "aten::native_layer_norm": "LayerNorm", "aten::native_layer_norm_backward": "LayerNorm",
    "aten::add": "residual", "aten::add_": "residual", "aten::addcmul": "residual",
    "aten::mul": "residual", "aten::sum": "residual",
    "aten::copy_": "layout copies", "aten::clone": "layout copies", "aten::cat": "layout copies",
    "aten::stack": "layout copies",
    "aten::_fused_adamw_": "optimizer", "Optimizer.zero_grad#AdamW.zero_grad": "optimizer",
}
ORDER = ["linear", "attention", "GELU", "LayerNorm", "residual", "layout copies", "optimizer", "other"]


def _median_s(step: Callable[[], None], steps: int, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        times.append((time.perf_counter() - t0) / steps)
    return statistics.median(times)


def gemm_gflops(n: int, repeats: int = 7) -> float:
    """The best of ``repeats`` blocks of 3 ``n``³ fp32 matmuls: what a core reaches left alone."""
    a, b, out = torch.randn(n, n), torch.randn(n, n), torch.empty(n, n)
    return 2 * n**3 / min(_median_s(lambda: torch.mm(a, b, out=out), 3, 1) for _ in range(repeats)) / 1e9


def profile_arm(name: str, shape: Any, steps: int) -> dict[str, Any]:
    """One arm's plain step time, and its profiled step's self CPU time per family (seconds per step)."""
    from suite.bench.arms import build_arm
    from suite.config import TrainConfig
    from suite.engine.optim import build_optimizer

    torch.manual_seed(0)
    model = build_arm(name, shape)
    opt = build_optimizer(model, TrainConfig(lr=1e-3))
    x = torch.randn(shape.batch, 3, shape.img_size, shape.img_size)
    y = torch.randint(0, shape.num_classes, (shape.batch,))

    def step() -> None:
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(5):
        step()
    plain = _median_s(step, steps)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    families: dict[str, float] = collections.defaultdict(float)
    for avg in prof.key_averages():
        families[FAMILIES.get(avg.key, "other")] += avg.self_cpu_time_total / 1e6 / steps
    return {"arm": name, "plain_s": plain, "profiled_s": sum(families.values()), "families": dict(families)}


def table(results: list[dict[str, Any]], shape: Any, gemm: float, gemm_n: int, header: str) -> str:
    """The Markdown of ``step_profile.md``: one column per arm, one row per family, the linears' GFLOP/s."""
    from suite.models.flops import block_linear_flops

    lines = [header, "",
             f"Self CPU time per step under `torch.profiler`, by operator family (depth {shape.depth}, width {shape.dim}, "
             f"{shape.heads} heads, {shape.tokens} tokens, batch {shape.batch}; fused AdamW). Shares are of the profiled "
             f"step, which is longer than the plain one (both given); overheads are `suite bench`'s to measure. A "
             f"{gemm_n}³ fp32 matmul reached **{gemm:.1f} GFLOP/s** in the same process.", "",
             "| family | " + " | ".join(r["arm"] for r in results) + " |", "|---|" + "---:|" * len(results)]
    for fam in ORDER:
        lines.append(f"| {fam} | " + " | ".join(
            f"{r['families'].get(fam, 0.0) * 1e3:.1f} ms ({100 * r['families'].get(fam, 0.0) / r['profiled_s']:.0f}%)"
            for r in results) + " |")
    lines.append("| **step, profiled** | " + " | ".join(f"{r['profiled_s'] * 1e3:.1f} ms" for r in results) + " |")
    lines.append("| **step, not profiled** | " + " | ".join(f"{r['plain_s'] * 1e3:.1f} ms" for r in results) + " |")
    flops = 3 * block_linear_flops(shape.model_config(), shape.batch)  # forward, input and weight gradients
    rates = [flops / r["families"]["linear"] / 1e9 if r["families"].get("linear") else float("nan") for r in results]
    lines.append("| linears' GFLOP/s (share of the matmul) | "
                 + " | ".join(f"{g:.1f} ({100 * g / gemm:.0f}%)" for g in rates) + " |")
    lines += ["", "Families: `linear` = `mm` + `addmm` (forward and backward); `attention` = the CPU flash-attention "
              "kernel, forward and backward; `residual` = `add`, `addcmul`, `mul`, `sum` (LayerScale's own arithmetic "
              "is here); `layout copies` = `copy_`, `clone`, `cat`, `stack`; `optimizer` = fused AdamW and zero_grad; "
              "`other` = the autograd engine, views and the rest. The linears' FLOPs count the blocks' four linears."]
    return "\n".join(lines) + "\n"
