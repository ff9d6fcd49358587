"""AdamW with a visible weight-decay policy, the warmup + cosine learning-rate schedule, and the
stacked AdamW of a pack (:func:`stacked_adamw_`, its schedule as a device table: :func:`lr_table`)."""

from __future__ import annotations

import math

import torch
from torch import nn

from suite.config import ModelConfig, TrainConfig
from suite.models import depth_scaled
from suite.models.layerscale import GAMMA_PARAMETER, gamma_lr_scale

# No decay by default: non-matrices (norms, biases, γ, α) and, as timm's no_weight_decay, the embeddings below.
_EMBEDDINGS = ("pos_embed", "cls_token")


def is_no_decay(name: str, param: torch.Tensor) -> bool:
    return param.ndim <= 1 or name.split(".")[-1] in _EMBEDDINGS


ADAM_EPS = 1e-8  # torch's default; depth-scaled schemes scale it (suite/models/depth_scaled.py)


def build_optimizer(model: nn.Module, tc: TrainConfig, mc: ModelConfig | None = None) -> torch.optim.AdamW:
    """AdamW, fused where torch has it; decay on 1-D parameters and embeddings only with ``tc.decay_1d`` (it pulls γ to
    0). ``mc``'s scheme may scale rates (``lr_scale``: :func:`set_lr`; γ's in ``layerscale-depth``) and ε."""
    hidden_scale = depth_scaled.hidden_lr_scale(mc) if mc is not None else 1.0
    eps = ADAM_EPS * (depth_scaled.eps_scale(mc) if mc is not None else 1.0)
    gamma_scale = gamma_lr_scale(mc.residual, mc.depth, mc.base_depth) if mc is not None else 1.0
    groups: dict[tuple[bool, float], list[torch.Tensor]] = {}
    for name, p in model.named_parameters():
        if p.requires_grad:
            scale = hidden_scale if name.startswith(depth_scaled.HIDDEN_PREFIX) else 1.0
            if name.startswith(depth_scaled.HIDDEN_PREFIX) and name.split(".")[-1] == GAMMA_PARAMETER:
                scale *= gamma_scale
            groups.setdefault((is_no_decay(name, p), scale), []).append(p)
    param_groups = [
        {"params": params, "lr_scale": scale,
         "weight_decay": tc.weight_decay if (not no_decay or tc.decay_1d) else 0.0}
        for (no_decay, scale), params in sorted(groups.items(), key=lambda kv: kv[0])
    ]
    params = [p for g in param_groups for p in g["params"]]
    if params and all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in params):
        try:
            return torch.optim.AdamW(param_groups, lr=tc.lr, betas=tc.betas, eps=eps, fused=True)
        except (RuntimeError, TypeError):  # an older torch or an unusual dtype: the default one
            pass
    return torch.optim.AdamW(param_groups, lr=tc.lr, betas=tc.betas, eps=eps)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """This step's learning rate for every group, times the group's ``lr_scale``."""
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)


def implementation(optimizer: torch.optim.Optimizer) -> str:
    """``fused`` or ``foreach``/``for-loop``: which AdamW implementation ``optimizer`` runs."""
    if optimizer.defaults.get("fused"):
        return "fused"
    return "for-loop" if optimizer.defaults.get("foreach") is False else "foreach"


def lr_at(step: int, total_steps: int, tc: TrainConfig) -> float:
    """Learning rate at step ``step`` (0-based): linear warmup over ``warmup_steps``, then cosine to ``min_lr``."""
    if tc.warmup_steps and step < tc.warmup_steps:
        return tc.lr * (step + 1) / tc.warmup_steps
    span = max(1, total_steps - tc.warmup_steps - 1)
    progress = min(1.0, (step - tc.warmup_steps) / span)
    floor = min(tc.min_lr, tc.lr)
    return floor + 0.5 * (tc.lr - floor) * (1 + math.cos(math.pi * progress))


def lr_table(total_steps: int, tcs: list[TrainConfig]) -> torch.Tensor:
    """Every step's learning rate, ``[total_steps, len(tcs)]`` float32: column ``i`` is :func:`lr_at` of ``tcs[i]``."""
    step = torch.arange(total_steps, dtype=torch.float64)[:, None]  # [T, 1]
    lr, warm, low = (torch.tensor([getattr(tc, k) for tc in tcs], dtype=torch.float64)[None, :]
                     for k in ("lr", "warmup_steps", "min_lr"))  # [1, N] each
    span = (total_steps - warm - 1).clamp(min=1)
    progress = ((step - warm) / span).clamp(max=1.0)
    floor = torch.minimum(low, lr)
    cosine = floor + 0.5 * (lr - floor) * (1 + torch.cos(math.pi * progress))
    warmup = lr * (step + 1) / warm.clamp(min=1)
    return torch.where((warm > 0) & (step < warm), warmup, cosine).float()


def stacked_adamw_(flat: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor,
                   lr: torch.Tensor, keep: torch.Tensor, step: torch.Tensor, weight_decay: torch.Tensor,
                   decay: torch.Tensor, lr_scale: torch.Tensor, betas: tuple[float, float], eps: float) -> None:
    """One AdamW update (as ``torch.optim.AdamW``) of N models held as rows of ``[N, P]`` tensors, in place; a member
    whose ``keep`` is false neither moves nor updates its moments. ``decay``, ``lr_scale``: ``[P]`` columns."""
    b1, b2 = betas
    k = keep[:, None]  # [N, 1]
    grad.masked_fill_(~k, 0.0)  # a skipped member's gradient may be NaN: it must not reach its moments
    kf = k.to(flat.dtype)
    exp_avg.lerp_(grad, kf * (1 - b1))
    exp_avg_sq.mul_(1 - kf * (1 - b2)).addcmul_(grad, grad, value=1 - b2)
    t = step.double()  # as torch's fused AdamW: 1 - 0.999 ** t loses 5 digits in float32
    bc1, bc2 = (1 - b1**t).to(flat.dtype), (1 - b2**t).to(flat.dtype)
    lr_k = lr[:, None] * kf  # [N, 1]: 0 for a member not kept
    flat.mul_(1 - (lr_k * weight_decay) * (decay * lr_scale))
    denom = (exp_avg_sq.sqrt() / bc2.sqrt()).add_(eps)
    flat.addcdiv_(exp_avg * ((lr_k / bc1) * lr_scale), denom, value=-1.0)
