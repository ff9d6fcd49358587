"""Where a training step's time goes at the default ablation's shape, by kind of operator.

For each scheme and depth: a model at the default ablation's shape (MNIST-5k, patch 7 -> 17 tokens,
width 32, 2 heads, MLP ratio 4, batch 64), fused AdamW, one thread; ``--steps`` steps under
``torch.profiler`` after a warm-up. Each operator's self CPU time is put in one family (linear
layers, attention, GELU, LayerNorm, residual arithmetic, layout copies, optimizer, everything else).
The linears' achieved GFLOP/s (analytic FLOPs of their forward and both backward products over their
time) is set against a 1024³ matmul timed in the same process, so "how far from the hardware" is
one number per family that does arithmetic. A second table times, at the same shapes, the GELU and
attention kernels the model uses against the alternatives one could swap in.

The profiler adds its own time per operator; the table gives the step time with and without it, and
the shares are of the profiled time. Run on an idle machine, from the repository root:

    .venv/bin/python scripts/profile_step.py --out results/reference/bench/profile
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from suite.config import LayerScaleConfig, ModelConfig, TrainConfig
from suite.engine.optim import build_optimizer
from suite.models import build_model
from suite.registry import SCHEMES
from suite.store import provenance

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
ROWS, DIM, HIDDEN = 64 * 17, 32, 128  # batch x tokens, width, MLP hidden width


def linear_flops(depth: int) -> int:
    """Forward + input-gradient + weight-gradient products of the blocks' four linears (the patch
    embedding and the head are left out: under 1% of the products at these depths)."""
    per_block = DIM * 3 * DIM + DIM * DIM + DIM * HIDDEN + HIDDEN * DIM
    return 3 * 2 * ROWS * per_block * depth


def build(scheme: str, depth: int):
    cfg = ModelConfig(depth=depth, dim=DIM, heads=2, patch_size=7, img_size=28, in_chans=1, num_classes=10,
                      residual=scheme, layerscale=LayerScaleConfig(init="cait"))
    model = build_model(cfg)
    return model, build_optimizer(model, TrainConfig(lr=1e-3))


def median_step_s(step, steps: int, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        times.append((time.perf_counter() - t0) / steps)
    return statistics.median(times)


def gemm_gflops(n: int = 1024, repeats: int = 7) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    out = torch.empty(n, n)
    torch.mm(a, b, out=out)
    return 2 * n ** 3 / median_step_s(lambda: torch.mm(a, b, out=out), 3, repeats) / 1e9


def alternatives(rounds: int = 15, calls: int = 20) -> dict[str, float]:
    """Forward + backward of one block's GELU and attention at this shape, by the kernel torch uses
    and by the alternatives one could swap in; medians of interleaved rounds, in µs."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    B, N, H, hd = 64, 17, 2, DIM // 2
    h = torch.randn(ROWS, HIDDEN, requires_grad=True)
    qkv = torch.randn(B, N, 3 * DIM, requires_grad=True)

    def gelu(approximate: str):
        def run() -> None:
            h.grad = None
            F.gelu(h, approximate=approximate).backward(torch.ones_like(h))
        return run

    def heads(t: torch.Tensor):
        return t.reshape(B, N, 3, H, hd).permute(2, 0, 3, 1, 4).unbind(0)

    def attention(kind: str):
        def run() -> None:
            qkv.grad = None
            q, k, v = heads(qkv)
            if kind == "bmm":  # written out, heads folded into the batch
                q, k, v = (t.reshape(B * H, N, hd) for t in (q, k, v))
                out = torch.bmm(torch.bmm(q * hd ** -0.5, k.transpose(1, 2)).softmax(-1), v).reshape(B, H, N, hd)
            else:
                with sdpa_kernel(SDPBackend.MATH if kind == "math" else SDPBackend.FLASH_ATTENTION):
                    out = F.scaled_dot_product_attention(q, k, v)
            out.transpose(1, 2).reshape(B, N, DIM).sum().backward()
        return run

    arms = {"GELU exact (erf), used": gelu("none"), "GELU tanh": gelu("tanh"),
            "attention flash kernel, used": attention("flash"), "attention math kernel": attention("math"),
            "attention bmm + softmax": attention("bmm")}
    times: dict[str, list[float]] = {name: [] for name in arms}
    for run in arms.values():
        run()
    for r in range(rounds):
        order = list(arms) if r % 2 == 0 else list(reversed(arms))
        for name in order:
            t0 = time.perf_counter()
            for _ in range(calls):
                arms[name]()
            times[name].append((time.perf_counter() - t0) / calls * 1e6)
    return {name: statistics.median(t) for name, t in times.items()}


def profile_one(scheme: str, depth: int, steps: int) -> dict:
    torch.manual_seed(0)
    model, opt = build(scheme, depth)
    x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))

    def step() -> None:
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(5):
        step()
    plain = median_step_s(step, steps)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    by_family: dict[str, float] = collections.defaultdict(float)
    for avg in prof.key_averages():
        by_family[FAMILIES.get(avg.key, "other")] += avg.self_cpu_time_total / 1e6 / steps
    return {"scheme": scheme, "depth": depth, "plain_s": plain, "profiled_s": sum(by_family.values()),
            "families": dict(by_family)}


def render(results: list[dict], gemm: float, alts: dict[str, float], command: str) -> str:
    prov = provenance("cpu")
    lines = [
        "# Where a training step's time goes (default ablation's shape, CPU, 1 thread)",
        "",
        f"Written by `{command}` at {prov['started_at']}: torch {prov['torch_version']}, "
        f"{prov['device_name']}, suite commit {prov['git_commit']}.",
        "",
        "Self CPU time per step under `torch.profiler`, by operator family (batch 64 x 17 tokens, width 32, "
        "fused AdamW). Shares are of the profiled step, which is longer than the plain one (both given). "
        "The models run one after another, so the step rows are not an overhead measurement: "
        "`suite bench` measures overheads in interleaved rounds (docs/benchmark.md).",
        f"A 1024³ fp32 matmul reached **{gemm:.1f} GFLOP/s** in the same process.",
        "",
    ]
    header = "| family | " + " | ".join(f"{r['scheme']} d{r['depth']}" for r in results) + " |"
    lines += [header, "|---|" + "---:|" * len(results)]
    for fam in ORDER:
        cells = []
        for r in results:
            t = r["families"].get(fam, 0.0)
            cells.append(f"{t * 1e3:.1f} ms ({100 * t / r['profiled_s']:.0f}%)")
        lines.append(f"| {fam} | " + " | ".join(cells) + " |")
    lines.append("| **step, profiled** | " + " | ".join(f"{r['profiled_s'] * 1e3:.1f} ms" for r in results) + " |")
    lines.append("| **step, not profiled** | " + " | ".join(f"{r['plain_s'] * 1e3:.1f} ms" for r in results) + " |")
    rates = []
    for r in results:
        rate = linear_flops(r["depth"]) / r["families"]["linear"] / 1e9
        rates.append(f"{rate:.1f} ({100 * rate / gemm:.0f}%)")
    lines.append("| linears' GFLOP/s (share of the 1024³ matmul) | " + " | ".join(rates) + " |")
    lines += [
        "",
        "Families: `linear` = `mm` + `addmm` (the blocks' qkv, proj, fc1, fc2, patch embedding and head, "
        "forward and backward); `attention` = the CPU flash-attention kernel, forward and backward; "
        "`residual` = `add`, `addcmul`, `mul`, `sum` (LayerScale's own arithmetic is here); "
        "`layout copies` = `copy_`, `clone`, `cat`, `stack`; `optimizer` = fused AdamW and zero_grad; "
        "`other` = the autograd engine, views and everything else. "
        "The linears' FLOPs count only the blocks' four linears.",
        "",
        "## The kernels one could swap in, one block's worth (forward + backward)",
        "",
        "The same shapes (64 x 17 tokens; GELU on the 128-wide hidden layer, attention with 2 heads of 16), "
        "medians of interleaved rounds in the same process. `used` marks what the model runs.",
        "",
        "| kernel | µs |",
        "|---|---:|",
    ]
    lines += [f"| {name} | {us:.0f} |" for name, us in alts.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for step_profile.md")
    parser.add_argument("--schemes", nargs="+", default=["preln", "layerscale"], choices=sorted(SCHEMES))
    parser.add_argument("--depths", nargs="+", type=int, default=[12, 48])
    parser.add_argument("--steps", type=int, default=10, help="profiled steps per model (default 10)")
    args = parser.parse_args(argv)
    if not all(1 <= d <= 1000 for d in args.depths) or args.steps < 1:
        parser.error("--depths must be between 1 and 1000 and --steps at least 1")
    torch.set_num_threads(1)
    results = [profile_one(s, d, args.steps) for d in args.depths for s in args.schemes]
    gemm = gemm_gflops()
    alts = alternatives()
    command = "python scripts/profile_step.py " + " ".join(sys.argv[1:] if argv is None else argv)
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "step_profile.md").write_text(render(results, gemm, alts, command.strip()))
    except OSError as err:
        print(f"error: cannot write to --out {args.out}: {err.strerror}; pick a writable folder", file=sys.stderr)
        return 2
    print(f"wrote {args.out / 'step_profile.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
