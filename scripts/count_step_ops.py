"""Operators one training step dispatches, for each kind of step ``make gpu-check`` runs, on the CPU.

    .venv/bin/python scripts/count_step_ops.py [--precision fp32|bf16]

On a GPU each operator is at least one kernel launch and some microseconds of host time whatever the
tensors' size, so these counts, times a host cost per operator, are the part of a step's time that a
small model cannot hide behind arithmetic (scripts/gpu_check_budget.py uses them). The count does not
depend on the width or the batch, so the shapes here are tiny: what matters is the depth, the scheme
and, for a pack, the code path (not N: ``tests/engine/test_pack.py`` checks that).

- ``solo d12``, ``pack d12``: a run's step (``Training.step``) and a pack's (``Pack.step``) at the
  default ablation's depth, LayerScale, through the engine;
- ``solo d96``: the same at depth 96 (gpu-check's deep steps);
- ``bench <arm>``: ``suite bench``'s training step at depth 12 (autocast in ``--precision``, fused AdamW),
  and its no-grad forward.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from suite.bench.arms import BenchShape, build_arm
from suite.config import TrainConfig, load_config
from suite.data import PackStream, load_dataset
from suite.engine.lifecycle import RunFolder
from suite.engine.loop import Training
from suite.engine.optim import build_optimizer
from suite.engine.pack import Pack
from suite.engine.steplog import StepLog


class Counter(TorchDispatchMode):
    """Counts the ATen operators dispatched inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        self.count += 1
        return func(*args, **(kwargs or {}))


def counted(step, *args) -> int:  # noqa: ANN001
    """Operators in the fourth call of ``step`` (the first ones create optimizer state)."""
    for _ in range(3):
        step(*args)
    with Counter() as c:
        step(*args)
    return c.count


def members(out: Path, n: int, depth: int, precision: str) -> list[Training]:
    shape = ["data.name=synthetic", "data.synthetic_train=128", "data.synthetic_test=32", "data.synthetic_img_size=28",
             "model.patch_size=7", "model.dim=8", "model.heads=2", f"model.depth={depth}", "model.residual=layerscale",
             "train.batch_size=8", "train.eval_every=0", f"train.precision={precision}", "device=cpu"]
    data, runs = None, []
    for seed in range(n):
        cfg = load_config(None, [*shape, f"seed={seed}"])
        folder = RunFolder(cfg, out / f"{n}-{depth}-{seed}")
        cfg, _ = folder.start(cfg)
        data = data or load_dataset(cfg.data)
        runs.append(Training(cfg, folder, data, member=seed))
        runs[-1].setup()
    return runs


def engine_counts(out: Path, precision: str) -> dict[str, int]:
    counts = {}
    for depth in (12, 96):
        solo = members(out, 1, depth, precision)[0]
        solo.steps = StepLog(10**4, solo.device)  # room for every step: no host read in between
        solo.optimizer.found_inf = solo.steps.bad[0]
        (x,), (y,) = next(PackStream(solo.data, 8, [0], solo.device, False, 512, 0).batches(0, 1))
        counts[f"solo d{depth}"] = counted(solo.step, x, y)
    pack = Pack(members(out, 4, 12, precision))
    pack.log = StepLog(10**4, pack.device, 4)
    first = pack.members[0]
    counts["pack d12"] = counted(pack.step, *next(PackStream(first.data, 8, list(range(4)), first.device, False, 512,
                                                             0).batches(0, 1)))
    return counts


def bench_counts(precision: str) -> dict[str, int]:
    shape = BenchShape(depth=12, dim=12, heads=6, tokens=5, batch=2)
    x, y = torch.randn(shape.batch, 3, shape.img_size, shape.img_size), torch.randint(0, shape.num_classes, (2,))
    counts = {}
    for arm in ("preln", "layerscale", "timm-layerscale"):
        model = build_arm(arm, shape).train()
        opt = build_optimizer(model, TrainConfig())

        def step(model=model, opt=opt) -> None:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        def forward(model=model) -> None:
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
                model(x)

        counts[f"bench {arm}"] = counted(step)
        counts[f"bench {arm} forward"] = counted(forward)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        counts = {**engine_counts(Path(tmp), args.precision), **bench_counts(args.precision)}
    for name, n in counts.items():
        print(f"{name} ({args.precision}): {n} operators per step")


if __name__ == "__main__":
    main()
