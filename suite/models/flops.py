"""Analytic FLOPs of a ViT training step (matmuls only, 2 per multiply-add; a step is 3 forwards), behind "GFLOP/s"
and "GPU-hours"; torch-free, so an ablation's cost can be estimated anywhere."""

from __future__ import annotations

from suite.config import ModelConfig


def tokens(cfg: ModelConfig) -> int:
    """Patches plus the class token; ``img_size`` must be filled in (from the dataset)."""
    if cfg.img_size is None:
        raise ValueError("model.img_size is unset: fill it from the dataset first")
    return (cfg.img_size // cfg.patch_size) ** 2 + 1


def forward_flops(cfg: ModelConfig, batch: int) -> int:
    """FLOPs of one forward pass over ``batch`` images (``img_size``, ``in_chans``, ``num_classes`` set)."""
    t, d = tokens(cfg), cfg.dim
    linears = 4 * d * d + 2 * d * int(d * cfg.mlp_ratio)  # q/k/v and output projection, then the MLP
    per_token = linears + 2 * t * d  # then QK^T and AV
    blocks = cfg.depth * t * per_token
    embed = (t - 1) * (cfg.in_chans or 3) * cfg.patch_size ** 2 * d
    head = d * (cfg.num_classes or 10)
    return 2 * batch * (blocks + embed + head)


def train_step_flops(cfg: ModelConfig, batch: int) -> int:
    """FLOPs of one training step (forward + backward)."""
    return 3 * forward_flops(cfg, batch)
