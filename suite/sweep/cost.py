"""What an ablation will cost before it runs: steps and FLOPs per run, and device-hours at a given throughput.
Torch-free (the datasets' known :data:`GEOMETRY`); an upper bound, as runs that diverge or stop early cost less."""

from __future__ import annotations

import dataclasses
import statistics
import time
from dataclasses import dataclass
from typing import Callable

from suite.config import RunConfig
from suite.models.flops import train_step_flops
from suite.sweep.spec import Ablation

# name -> (img_size, in_chans, num_classes, training images before the validation split or None)
GEOMETRY: dict[str, tuple[int, int, int, int | None]] = {
    "cifar10": (32, 3, 10, 50_000),
    "cifar100": (32, 3, 100, 50_000),
    "mnist5k": (28, 1, 10, None),  # 5,000 images, test_fraction held out first
    "digits": (8, 1, 10, None),  # 1,797 images
}
EMBEDDED_TOTAL = {"mnist5k": 5_000, "digits": 1_797}


class CostError(ValueError):
    """An ablation whose cost cannot be computed without its data (one line, names the key)."""


@dataclass(frozen=True)
class Cost:
    runs: int
    steps: int
    flops: float  # total over every run

    def hours(self, tflops: float) -> float:
        """Device-hours at a sustained ``tflops`` (10^12 FLOP/s)."""
        return self.flops / (tflops * 1e12) / 3600


def cost_shape(cfg: RunConfig) -> tuple[RunConfig, int | None]:
    data, m = cfg.data, cfg.model
    if None not in (m.img_size, m.in_chans, m.num_classes) and data.name not in GEOMETRY and data.name != "synthetic":
        return cfg, None  # the config says its shape; its length must come from train.steps
    if data.name == "synthetic":
        geometry = (data.synthetic_img_size, data.synthetic_channels, data.synthetic_classes, data.synthetic_train)
    elif data.name in GEOMETRY:
        geometry = GEOMETRY[data.name]
        if data.name in EMBEDDED_TOTAL:
            total = EMBEDDED_TOTAL[data.name]
            geometry = geometry[:3] + (total - round(total * data.test_fraction),)
    else:
        raise CostError(f"data.name {data.name}: image size and count unknown before loading; set "
                        f"model.img_size, model.in_chans, model.num_classes and train.steps")
    img, chans, classes, train = geometry
    model = dataclasses.replace(m, img_size=m.img_size or img, in_chans=m.in_chans or chans,
                                num_classes=m.num_classes or classes)
    if train is not None:
        train -= round(train * data.val_fraction) if data.val_fraction > 0 else 0
    return dataclasses.replace(cfg, model=model), train


def run_steps(cfg: RunConfig, train_size: int | None) -> int:
    tc = cfg.train
    if tc.epochs is None:
        return tc.steps
    if train_size is None:
        raise CostError(f"data.name {cfg.data.name}: train.epochs needs the dataset size; use train.steps")
    return tc.total_steps(train_size)


def estimate(ablation: Ablation) -> Cost:
    """Total steps and training FLOPs (forward + backward) of every run of ``ablation``; CostError where unknown."""
    steps, flops = 0, 0.0
    for run in ablation.runs:
        cfg, train = cost_shape(run.cfg)
        n = run_steps(cfg, train)
        steps += n
        flops += n * train_step_flops(cfg.model, cfg.train.batch_size)
    return Cost(len(ablation.runs), steps, flops)


def measure_step_ms(cfg: RunConfig, threads: int, steps: int = 8, warmup: int = 3) -> float:
    """Median milliseconds per training step of ``cfg`` on this CPU, on random data (CostError as ``cost_shape``)."""
    import torch

    from suite.models import build_model

    cfg, _ = cost_shape(cfg)
    m = cfg.model
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        torch.manual_seed(0)
        model = build_model(m)
        update = _adamw(list(model.parameters()))
        x = torch.randn(cfg.train.batch_size, m.in_chans, m.img_size, m.img_size)
        y = torch.randint(0, m.num_classes, (cfg.train.batch_size,))
        times = []
        for i in range(warmup + steps):
            t0 = time.perf_counter()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            model.zero_grad(set_to_none=True)
            loss.backward()
            update()
            if i >= warmup:
                times.append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(before)
    return 1e3 * statistics.median(times)


def _adamw(params: list) -> Callable[[], None]:
    """One AdamW update of ``params`` per call, the suite's own arithmetic (:func:`~suite.engine.optim.stacked_adamw_`,
    each parameter a row): a torch optimizer imports torch._dynamo at its first step, 1.5 s of CPU that the parent of
    every ``suite run`` would pay for its estimate alone."""
    import torch

    from suite.engine.optim import stacked_adamw_

    # torch.optim.AdamW(params, lr=1e-4), step for step
    one = {k: torch.tensor(v) for k, v in (("lr", [1e-4]), ("keep", [True]), ("step", [0.0]), ("weight_decay", 1e-2))}
    rows = [(p.detach().view(1, -1), torch.zeros(1, p.numel()), torch.zeros(1, p.numel()), torch.ones(p.numel()))
            for p in params]

    def update() -> None:
        one["step"] += 1
        with torch.no_grad():
            for p, (flat, exp_avg, exp_avg_sq, ones) in zip(params, rows):
                stacked_adamw_(flat, p.grad.view(1, -1), exp_avg, exp_avg_sq, one["lr"], one["keep"], one["step"],
                               one["weight_decay"], ones, ones, (0.9, 0.999), 1e-8)

    return update
