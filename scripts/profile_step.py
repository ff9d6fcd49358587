"""Where a training step's time goes at the default ablation's shape, by kind of operator.

For each scheme and depth: a model at the default ablation's shape (MNIST-5k, patch 7 -> 17 tokens,
width 32, 2 heads, MLP ratio 4, batch 64), fused AdamW, one thread; ``--steps`` steps under
``torch.profiler`` after a warm-up. Each operator's self CPU time is put in one family (linear
layers, attention, GELU, LayerNorm, residual arithmetic, layout copies, optimizer, everything else).
The linears' achieved GFLOP/s (analytic FLOPs of their forward and both backward products over their
time) is set against a 1024³ matmul timed in the same process, so "how far from the hardware" is
one number per family that does arithmetic. A second table times, at the same shapes, the GELU and
attention kernels the model uses against the alternatives one could swap in, and a third times
whole-model ``torch.compile`` (its compile time, and its step against eager) at one depth.

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
from suite.bench.measure import gemm_flops
from suite.models import build_model
from suite.models.flops import block_linear_flops
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
BATCH, TOKENS, DIM, HIDDEN = 64, 17, 32, 128  # the default ablation's shape (MLP ratio 4)
ROWS = BATCH * TOKENS


def config(scheme: str, depth: int) -> ModelConfig:
    return ModelConfig(depth=depth, dim=DIM, heads=2, patch_size=7, img_size=28, in_chans=1, num_classes=10,
                      residual=scheme, layerscale=LayerScaleConfig(init="cait"))


def build(scheme: str, depth: int):
    model = build_model(config(scheme, depth))
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
    """The best of ``repeats`` blocks of 3 ``n``³ matmuls: what the core reaches when left alone (a
    shared machine only ever slows a block down)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    out = torch.empty(n, n)
    torch.mm(a, b, out=out)
    return gemm_flops(n) / min(median_step_s(lambda: torch.mm(a, b, out=out), 3, 1) for _ in range(repeats)) / 1e9


def alternatives(rounds: int = 15, calls: int = 20) -> dict[str, float]:
    """Forward + backward of one block's GELU and attention at this shape, by the kernel torch uses
    and by the alternatives one could swap in; medians of interleaved rounds, in µs."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    B, N, H, hd = BATCH, TOKENS, 2, DIM // 2
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


def compile_vs_eager(depth: int, rounds: int = 8, steps: int = 5) -> dict[str, float]:
    """Whole-model ``torch.compile`` (inductor, default mode) of a Pre-LN model against the same
    model eager: the compile time this process paid (with the inductor cache as found on disk), and
    the median step of each in interleaved rounds."""
    x, y = torch.randn(BATCH, 1, 28, 28), torch.randint(0, 10, (BATCH,))
    arms = {}
    for kind in ("eager", "compiled"):
        torch.manual_seed(0)
        model, opt = build("preln", depth)
        arms[kind] = (torch.compile(model) if kind == "compiled" else model, opt)

    def step(kind: str) -> None:
        model, opt = arms[kind]
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    t0 = time.perf_counter()
    step("compiled")  # compiles forward and backward
    compile_s = time.perf_counter() - t0
    for kind in arms:
        for _ in range(3):
            step(kind)
    times: dict[str, list[float]] = {kind: [] for kind in arms}
    for r in range(rounds):
        for kind in (("eager", "compiled") if r % 2 == 0 else ("compiled", "eager")):
            times[kind].append(median_step_s(lambda: step(kind), steps, 1))
    return {"depth": depth, "compile_s": compile_s, **{k: statistics.median(v) for k, v in times.items()}}


def profile_one(scheme: str, depth: int, steps: int) -> dict:
    torch.manual_seed(0)
    model, opt = build(scheme, depth)
    x, y = torch.randn(BATCH, 1, 28, 28), torch.randint(0, 10, (BATCH,))

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


def render(results: list[dict], gemm: float, alts: dict[str, float], compiled: dict | None, command: str) -> str:
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
        f"A 1024³ fp32 matmul reached **{gemm:.1f} GFLOP/s** in the same process (best block, before and after).",
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
        # forward, input-gradient and weight-gradient products of the blocks' linears
        rate = 3 * block_linear_flops(config(r["scheme"], r["depth"]), BATCH) / r["families"]["linear"] / 1e9
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
    if compiled:
        c = compiled
        lines += [
            "",
            f"## Whole-model `torch.compile` at depth {c['depth']} (Pre-LN)",
            "",
            "Inductor, default mode, against the same model eager; medians of interleaved rounds. The compile "
            "time is what this process paid, with the inductor cache as it found it on disk; a sweep pays it in "
            "every run (`train.compile` starts each run from empty dynamo caches).",
            "",
            "| compile, first step | eager step | compiled step | compiled / eager |",
            "|---:|---:|---:|---:|",
            f"| {c['compile_s']:.1f} s | {c['eager'] * 1e3:.1f} ms | {c['compiled'] * 1e3:.1f} ms | "
            f"{c['compiled'] / c['eager']:.3f} |",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for step_profile.md")
    parser.add_argument("--schemes", nargs="+", default=["preln", "layerscale"], choices=sorted(SCHEMES))
    parser.add_argument("--depths", nargs="+", type=int, default=[12, 48])
    parser.add_argument("--steps", type=int, default=10, help="profiled steps per model (default 10)")
    parser.add_argument("--compile-depth", type=int, default=48, metavar="D",
                        help="also time whole-model torch.compile against eager at this depth (0: skip)")
    args = parser.parse_args(argv)
    if not all(1 <= d <= 1000 for d in args.depths + [args.compile_depth or 1]) or args.steps < 1:
        parser.error("--depths and --compile-depth must be between 1 and 1000 (--compile-depth 0 skips) "
                     "and --steps at least 1")
    torch.set_num_threads(1)
    gemm = gemm_gflops()
    results = [profile_one(s, d, args.steps) for d in args.depths for s in args.schemes]
    gemm = max(gemm, gemm_gflops())  # before and after the profiles: the best
    alts = alternatives()
    compiled = compile_vs_eager(args.compile_depth) if args.compile_depth else None
    command = "python scripts/profile_step.py " + " ".join(sys.argv[1:] if argv is None else argv)
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "step_profile.md").write_text(render(results, gemm, alts, compiled, command.strip()))
    except OSError as err:
        print(f"error: cannot write to --out {args.out}: {err.strerror}; pick a writable folder", file=sys.stderr)
        return 2
    print(f"wrote {args.out / 'step_profile.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
