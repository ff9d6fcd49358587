"""The sublayers every residual scheme shares: attention, MLP, stochastic depth; named as timm's, so weights convert."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def layer_norm(dim: int) -> nn.LayerNorm:
    # eps 1e-6 as in timm's ViT, so that converted weights give the same logits.
    return nn.LayerNorm(dim, eps=1e-6)


class Attention(nn.Module):
    """Multi-head self-attention. ``head_scale`` scales the per-head outputs before the projection, which then has no
    bias (so scales of 0 add exactly 0); ``qk_norm``: LayerNorm on each head's queries and keys (ViT-22B)."""

    def __init__(self, dim: int, heads: int, qkv_bias: bool, head_scale: nn.Module, qk_norm: bool = False) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim ({dim}) must be divisible by heads ({heads})")
        self.heads = heads
        self.head_dim = dim // heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.q_norm = layer_norm(self.head_dim) if qk_norm else nn.Identity()
        self.k_norm = layer_norm(self.head_dim) if qk_norm else nn.Identity()
        self.head_scale = head_scale
        self.proj = nn.Linear(dim, dim)  # built whole, so every scheme draws the same random numbers at a seed
        if not isinstance(head_scale, nn.Identity):
            self.proj.register_parameter("bias", None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, C = x.shape
        # (B, N, 3C) -> (3, B, H, N, hd): timm's layout, so converted qkv weights line up.
        qkv = self.qkv(x).reshape(B, N, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q, k = self.q_norm(q), self.k_norm(k)  # per head, over head_dim (timm's qk_norm)
        out = F.scaled_dot_product_attention(q, k, v)  # (B, H, N, hd)
        out = self.head_scale(out)
        return self.proj(out.transpose(1, 2).reshape(B, N, C))

    def value_rows(self) -> slice:
        """Rows of ``qkv.weight`` that form the value projection (DeepNorm scales them)."""
        dim = self.qkv.out_features // 3
        return slice(2 * dim, 3 * dim)


class Mlp(nn.Module):
    """``fc2(GELU(fc1(x)))`` with hidden width ``dim * mlp_ratio``."""

    def __init__(self, dim: int, mlp_ratio: float) -> None:
        super().__init__()
        hidden = int(dim * mlp_ratio)
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class DropPath(nn.Module):
    """Stochastic depth: drop a residual branch per sample with probability ``p`` in training."""

    def __init__(self, p: float) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"drop-path probability must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keep = 1.0 - self.p
        mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
        return x * mask.div_(keep)

    def extra_repr(self) -> str:
        return f"p={self.p:.3g}"


def drop_path_rates(rate: float, depth: int, schedule: str) -> list[float]:
    """Per-block drop probabilities: ``linear`` rises 0 -> rate (timm), ``uniform`` is flat (CaiT)."""
    if schedule == "uniform":
        return [rate] * depth
    if schedule == "linear":  # timm's linspace(0, rate, depth): one block gets 0
        return [rate * i / max(depth - 1, 1) for i in range(depth)]
    raise ValueError(f"drop_path_schedule must be 'linear' or 'uniform', got {schedule!r}")
