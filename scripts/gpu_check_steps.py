"""What each ``make gpu-check`` step runs, in each mode, and the work it does on the GPU.

Modes:

- ``gpu``: on CUDA at the real shapes;
- ``full`` (``GPU_CHECK_DRY=full``): the same commands on the CPU at the GPU's counts (processes,
  runs, steps, depths, packs, arms, rounds) with tiny tensors: what ``--calibrate`` times to set the
  limits (scripts/gpu_check_budget.py);
- ``smoke`` (``GPU_CHECK_DRY=1``): the same commands on the CPU at the smallest counts, so that the
  tests keep every step's code path and table working in a minute or two.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from gpu_check_budget import Work

ROOT = Path(__file__).resolve().parents[1]
MODES = ("gpu", "full", "smoke")

# ViT-S/16 at 224 px, bf16, batch 128: 6 x 21.2M block parameters x 197 tokens x 128 images, plus
# attention (2 x 197^2 x 384 x 12 blocks x 128 per pass, three passes) = 3.5 TFLOP a training step;
# a forward is a third of it; the reference GEMM 2 x 8192^3 = 1.1 TFLOP.
VIT_STEP_TFLOP, VIT_FORWARD_TFLOP, GEMM_TFLOP = 3.5, 1.17, 1.1
# Depth 96, width 192, 65 tokens, batch 128: 6 x 42.5M x 65 x 128 = 2.1 TFLOP a step (+ probes).
DEEP_STEP_TFLOP = 2.2
THROUGHPUT_ARMS = (("solo", 8), ("co-located-4", 8), ("packed-16", 16), ("packed-64", 64))  # (arm, runs)
SMOKE_ARMS = (("solo", 2), ("co-located-2", 2), ("packed-2", 2))  # one of each code path
RUN_STEPS, DEEP_STEPS = 100, 40
BENCH_ROUNDS, BENCH_STEPS, BENCH_WARMUP = 10, 5, 5  # suite bench on cuda defaults to 20 rounds: 10 fit the budget


@dataclass(frozen=True)
class Step:
    """One step: its name, command, what kind of table it leaves and its :class:`Work` on the GPU."""

    name: str
    command: list[str]
    kind: str  # "pytest", "overhead", "throughput" or "deep"
    work: Work


def cuda_tests() -> list[str]:
    """The test files that hold tests marked ``cuda``, relative to the checkout."""
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py") if "mark.cuda" in p.read_text())


def _bench(mode: str) -> list[str]:
    if mode == "gpu":
        shape = ["--depth", "12", "--dim", "384", "--heads", "6", "--tokens", "197", "--batch", "128", "--gemm", "8192"]
    else:  # width 12 keeps ViT-S's 6 heads; depth 12 (full) keeps its operators
        shape = ["--depth", "12" if mode == "full" else "1", "--dim", "12", "--heads", "6", "--tokens", "5", "--batch",
                 "2", "--gemm", "64" if mode == "full" else "0"]
    counts = ([str(BENCH_ROUNDS), str(BENCH_STEPS), str(BENCH_WARMUP)] if mode != "smoke" else ["2", "1", "1"])
    return [*shape, "--rounds", counts[0], "--steps", counts[1], "--warmup", counts[2]]


def steps(out: Path, mode: str) -> list[Step]:
    """Every step of the check, in order, for ``mode`` (one of :data:`MODES`)."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
    py, device = sys.executable, ("cuda" if mode == "gpu" else "cpu")
    bench = [py, "-m", "suite", "bench", "--device", device, "--dtype", "bf16", *_bench(mode),
             "--schemes", "layerscale", "timm-layerscale"]
    visits = BENCH_WARMUP + BENCH_ROUNDS * BENCH_STEPS  # per arm, per series; +1 training step for the peak memory
    arms = 3  # preln (always), layerscale, timm-layerscale
    eager = Work(imports=1, contexts=1, steps=(("bench step", arms * (visits + 1)), ("bench forward", arms * visits)),
                 tflop=arms * ((visits + 1) * VIT_STEP_TFLOP + visits * VIT_FORWARD_TFLOP)
                 + (BENCH_ROUNDS * BENCH_STEPS + 1) * GEMM_TFLOP)
    # compiled: training steps only; one graph per arm (a model's blocks share theirs)
    compiled = Work(imports=1, contexts=1, steps=(("bench step", arms * (visits + 1)),), compilers=1, graphs=arms,
                    tflop=arms * (visits + 1) * VIT_STEP_TFLOP + (BENCH_ROUNDS * BENCH_STEPS + 1) * GEMM_TFLOP)
    # pytest-cuda: test_measure_on_cuda_bf16 (compiled: 2 arms x a training and a no-grad graph) and the
    # sync test for 11 arms, all at depth 1 (a twelfth of depth 12's operators per step): ~100 such steps
    tests = Work(imports=1, contexts=1, steps=(("bench step", 8),), compilers=1, graphs=4)
    out_steps = [
        Step("pytest-cuda", [py, "-m", "pytest", "-m", "cuda", "-q", "-rA", "-p", "no:cacheprovider", *cuda_tests()],
             "pytest", tests),
        Step("overhead-eager", [*bench, "--out", str(out / "overhead-eager")], "overhead", eager),
        Step("overhead-compiled", [*bench, "--compile", "--no-forward", "--out", str(out / "overhead-compiled")],
             "overhead", compiled),
    ]
    for arm, runs in (THROUGHPUT_ARMS if mode != "smoke" else SMOKE_ARMS):
        n = int(arm.rsplit("-", 1)[1]) if arm != "solo" else 1
        packed = arm.startswith("packed")
        work = Work(imports=2, contexts=2 + (n - 1 if arm.startswith("co-located") else 0),  # step, fork server
                    steps=(("solo d12", 2),) + ((("pack d12", RUN_STEPS),) if packed
                                                else (("solo d12", runs * RUN_STEPS),)),
                    runs=1 + (1 if packed else runs), members=runs if packed else 0)
        cmd = [py, str(ROOT / "scripts" / "throughput_arm.py"), arm, "--runs", str(runs), "--run-steps",
               str(RUN_STEPS if mode != "smoke" else 2), "--device", device, "--out", str(out / "throughput")]
        out_steps.append(Step(f"throughput-{arm}", cmd + (["--tiny"] if mode != "gpu" else []), "throughput", work))
    deep = [py, "-m", "suite", "train", "--device", device, "data.name=synthetic", "model.heads=3",
            "model.patch_size=4", "train.eval_every=0", "train.log_every=10",
            f"train.steps={DEEP_STEPS if mode != 'smoke' else 2}"]
    if mode == "gpu":
        deep += ["model.depth=96", "model.dim=192"]
    else:
        deep += [f"model.depth={96 if mode == 'full' else 4}", "model.dim=12", "data.synthetic_img_size=8",
                 "data.synthetic_train=64", "data.synthetic_test=16", "train.batch_size=8", "train.warmup_steps=1",
                 "train.threads=1"]  # one thread, as suite bench and the throughput arms: see scripts/throughput_arm.py
    work = Work(imports=1, contexts=1, steps=(("solo d96", DEEP_STEPS + DEEP_STEPS // 10),), runs=1,
                tflop=(DEEP_STEPS + DEEP_STEPS // 10) * DEEP_STEP_TFLOP)  # + a probe pass every 10 steps
    for scheme in ("preln", "layerscale"):
        cmd = [*deep, f"model.residual={scheme}", "--out", str(out / f"deep-{scheme}")]
        out_steps.append(Step(f"deep-{scheme}", cmd, "deep", work))
    return out_steps
