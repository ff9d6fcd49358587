"""How long each ``make gpu-check`` step may take on one H200, and why (pure arithmetic, no torch).

No GPU has been lent to this project yet, so both numbers per step come from the CPU:

- **limit** = ``FACTOR`` x the step's *measured* dry run + what only a GPU pays (:func:`gpu_only_s`).
  The dry run (``scripts/gpu_check.py --calibrate``, ``GPU_CHECK_DRY=full``) runs every step's own
  command on the CPU at the GPU's counts (the same processes, runs, steps, depths, packs, arms and
  rounds) with tiny tensors, so it pays everything that is host work on a GPU too: imports, worker
  start-up, model and pack set-up, the data, evaluations, summaries, and one dispatch per operator.
  What is measured is the CPU time (user + system) of all the step's processes, fork server and
  workers included, which neighbours on a shared machine stretch less than its wall time
  (scripts/gpu_check_dry.json). On the 2-core CPU it was measured on, at one thread, a tiny operator
  costs the dry run 10-15 us and importing torch and the suite about 4 s of CPU; the estimate's high
  end below prices a CUDA operator's host time at 13 us and an import at 6 s. ``FACTOR`` = 2 covers
  both ratios with room to spare for a slower host.
- **estimate** (low, high) = a model of the same step on the GPU (:func:`estimate`): operators per
  step (counted on the CPU, :data:`OPS`) times a host cost per operator, plus process start-up, CUDA
  contexts, cold Triton compiles, per-run and per-member set-up and the arithmetic at a stated rate.

``tests/test_gpu_check.py`` holds every throughput arm's limit above its estimate's high end and
the sum of the limits, with the CUDA probe, within :data:`BUDGET_S`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

BUDGET_S = 600  # the whole check on an H200: a 15-minute device lease also pays the machine's start and the install
FACTOR = 2.0  # limit = FACTOR x measured dry run + GPU-only costs (module docstring)
DRY_TIMES = Path(__file__).with_name("gpu_check_dry.json")  # written by scripts/gpu_check.py --calibrate

# Operators one step dispatches, counted on the CPU by `scripts/count_step_ops.py` (fp32 | bf16 autocast)
# at commit 63cc7b3 with issue 42's packed-step rewrite under way; the count does not depend on width or
# batch. The high estimate takes the bf16 count, or for a pack the 12,933 operators issue 42 counted
# before that rewrite, whichever is larger.
OPS: dict[str, tuple[int, int]] = {
    "solo d12": (1335, 1614),
    "solo d96": (10155, 12282),
    "pack d12": (3146, 12933),
    "bench step": (1310, 1589),  # the costlier of preln / layerscale / timm-layerscale
    "bench forward": (358, 485),  # its no-grad forward
}

# Unit costs on the H200 box, (low, high). Sources: issue 42's static review (13 us of host time per
# eager op, 151 ms to set up one pack member); KINDS.md (790 TFLOP/s on an 8192^3 bf16 GEMM).
OP_S = (5e-6, 13e-6)  # host time per eager CUDA operator
IMPORT_S = (3.0, 6.0)  # a Python process importing torch, the suite (and timm) from a cold file cache
CUDA_INIT_S = (0.5, 3.0)  # a process's CUDA context, cuBLAS handle and first kernels' module loads
FIRST_COMPILE_S = (5.0, 20.0)  # a process's first compile: inductor's imports, its pool of compile workers
COMPILE_S = (2.0, 10.0)  # inductor + Triton compiling one block's graph (forward and backward), cold caches, 16 cores
RUN_S = (0.2, 1.0)  # one run's model build, final evaluation, summary and folder
MEMBER_S = (0.05, 0.151)  # one pack member's set-up
TFLOPS = (400.0, 150.0)  # reached on ViT-S/16's bf16 matmuls (the 8192^3 GEMM reached 790)


@dataclass(frozen=True)
class Work:
    """What one step does on the GPU, in the units the estimate prices.

    Attributes:
        imports: Python processes that import torch (the step's own, a fork server).
        contexts: processes that create a CUDA context (the step's own, each sweep worker).
        steps: training steps (or timed forwards) of each kind in :data:`OPS`, by that key.
        compilers: processes that compile (each pays :data:`FIRST_COMPILE_S` once).
        graphs: graphs inductor and Triton compile from cold caches.
        runs: runs started and finished (model, final evaluation, summary).
        members: pack members set up.
        tflop: arithmetic, in TFLOP.
    """

    imports: int
    contexts: int
    steps: tuple[tuple[str, int], ...] = ()
    compilers: int = 0
    graphs: int = 0
    runs: int = 0
    members: int = 0
    tflop: float = 0.0


def host_s(work: Work, end: int) -> float:
    """Host time the step's operators, runs and members cost at the low (``end`` 0) or high (1) rates."""
    ops = sum(OPS[kind][end] * n for kind, n in work.steps)
    return ops * OP_S[end] + work.runs * RUN_S[end] + work.members * MEMBER_S[end]


def gpu_only_s(work: Work) -> float:
    """What a step pays on a GPU that its CPU dry run does not, at the high rates: CUDA contexts,
    cold compiles and the arithmetic (the dry run's tensors are tiny)."""
    return work.contexts * CUDA_INIT_S[1] + compile_s(work, 1) + work.tflop / TFLOPS[1]


def compile_s(work: Work, end: int) -> float:
    """Compile time at the low (``end`` 0) or high (1) rates."""
    return work.compilers * FIRST_COMPILE_S[end] + work.graphs * COMPILE_S[end]


def estimate(work: Work) -> tuple[float, float]:
    """(low, high) seconds for ``work`` on the H200, summing every part (the host and the GPU overlap
    in reality, so the high end over-states)."""
    return tuple(work.imports * IMPORT_S[e] + work.contexts * CUDA_INIT_S[e] + compile_s(work, e)
                 + work.tflop / TFLOPS[e] + host_s(work, e) for e in (0, 1))


def limit(dry_s: float, work: Work, factor: float = FACTOR) -> int:
    """The step's time limit on the GPU: ``factor`` x its measured dry run + :func:`gpu_only_s`, whole seconds up."""
    return math.ceil(factor * dry_s + gpu_only_s(work))


def load_dry_times(path: Path = DRY_TIMES) -> dict[str, dict]:
    """{step: {"dry_s": seconds, "command": [...]}} as ``--calibrate`` measured them; {} if never measured."""
    if not path.exists():
        return {}
    return json.loads(path.read_text())["steps"]
