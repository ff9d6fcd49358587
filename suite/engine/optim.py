"""AdamW with a visible weight-decay policy, and the warmup + cosine learning-rate schedule."""

from __future__ import annotations

import math

import torch
from torch import nn

from suite.config import TrainConfig

# Parameters that are not matrices: norms' weights and biases, linear biases, LayerScale γ,
# ReZero α, and (as in timm's no_weight_decay) the position embedding and class token.
_EMBEDDINGS = ("pos_embed", "cls_token")


def is_no_decay(name: str, param: torch.Tensor) -> bool:
    return param.ndim <= 1 or name.split(".")[-1] in _EMBEDDINGS


def build_optimizer(model: nn.Module, tc: TrainConfig) -> torch.optim.AdamW:
    """AdamW; weight decay on 1-D parameters (and embeddings) only when ``tc.decay_1d``.

    Weight decay on LayerScale's γ pulls it towards 0 and interacts with the very effect we measure,
    so it is off by default and recorded in every run (``train.decay_1d``).

    The fused implementation (one kernel for all parameters instead of one per tensor) is used where
    torch has it, CPU and CUDA: the same update to float rounding, in less time (the commit that
    made it the default measured ``make run-ablations``). :func:`implementation` names the one a run
    used (recorded as ``optimizer_impl`` in its summary).
    """
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if is_no_decay(name, p) else decay).append(p)
    groups = [
        {"params": decay, "weight_decay": tc.weight_decay},
        {"params": no_decay, "weight_decay": tc.weight_decay if tc.decay_1d else 0.0},
    ]
    groups = [g for g in groups if g["params"]]
    params = [p for g in groups for p in g["params"]]
    if params and all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in params):
        try:
            return torch.optim.AdamW(groups, lr=tc.lr, betas=tc.betas, fused=True)
        except (RuntimeError, TypeError):  # an older torch or an unusual dtype: the default one
            pass
    return torch.optim.AdamW(groups, lr=tc.lr, betas=tc.betas)


def implementation(optimizer: torch.optim.Optimizer) -> str:
    """``fused`` or ``foreach``/``for-loop``: which AdamW implementation ``optimizer`` runs."""
    if optimizer.defaults.get("fused"):
        return "fused"
    return "for-loop" if optimizer.defaults.get("foreach") is False else "foreach"


def lr_at(step: int, total_steps: int, tc: TrainConfig) -> float:
    """Learning rate for optimizer step ``step`` (0-based).

    Linear warmup from ``lr / warmup_steps`` to ``lr`` over ``warmup_steps`` steps, then cosine decay
    to ``min_lr`` at the last step.
    """
    if tc.warmup_steps and step < tc.warmup_steps:
        return tc.lr * (step + 1) / tc.warmup_steps
    span = max(1, total_steps - tc.warmup_steps - 1)
    progress = min(1.0, (step - tc.warmup_steps) / span)
    floor = min(tc.min_lr, tc.lr)
    return floor + 0.5 * (tc.lr - floor) * (1 + math.cos(math.pi * progress))
