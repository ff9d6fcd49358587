"""A Vision Transformer whose residual scheme is an ablation axis; module names match timm's, so weights convert."""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from suite.config import ModelConfig
from suite.models.layers import drop_path_rates, layer_norm
from suite.models.residual import build_block


class PatchEmbed(nn.Module):
    """Non-overlapping patches -> tokens: (B, C_in, H, W) -> (B, N, C) with N = (H/p)·(W/p)."""

    def __init__(self, img_size: int, patch_size: int, in_chans: int, dim: int) -> None:
        super().__init__()
        if img_size % patch_size:
            raise ValueError(f"img_size ({img_size}) must be divisible by patch_size ({patch_size})")
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_chans, dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)


class VisionTransformer(nn.Module):
    """ViT for classification from one :class:`ModelConfig` with ``img_size``, ``in_chans``, ``num_classes`` set."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        missing = [k for k in ("img_size", "in_chans", "num_classes") if getattr(cfg, k) is None]
        if missing:
            raise ValueError(f"model config needs {', '.join(missing)} (or let the trainer take them from the data)")
        if not 1 <= cfg.depth <= 1000:
            raise ValueError(f"depth must be between 1 and 1000, got {cfg.depth}")
        self.cfg = dataclasses.replace(cfg)
        self.patch_embed = PatchEmbed(cfg.img_size, cfg.patch_size, cfg.in_chans, cfg.dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches + 1, cfg.dim))
        rates = drop_path_rates(cfg.drop_path, cfg.depth, cfg.drop_path_schedule)
        self.blocks = nn.Sequential(*[build_block(cfg, rate) for rate in rates])
        self.norm = layer_norm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.num_classes)
        self.init_weights()

    def init_weights(self) -> None:
        """timm-style init (truncated normal 0.02; Xavier uniform if ``weight_init: xavier``), then the blocks' own."""
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.normal_(self.cls_token, std=1e-6)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                if self.cfg.weight_init == "xavier":
                    nn.init.xavier_uniform_(m.weight)
                else:
                    nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        for block in self.blocks:
            block.post_init()

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """Images (B, C_in, H, W) -> tokens with class token and positions, (B, N+1, C)."""
        x = self.patch_embed(x)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        return torch.cat([cls, x], dim=1) + self.pos_embed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Images (B, C_in, H, W) -> logits (B, num_classes)."""
        x = self.embed(x)
        x = self.blocks(x)
        return self.head(self.norm(x)[:, 0])


def count_params(model: nn.Module) -> int:
    """Parameters (trainable or not) plus fixed scale buffers: everything a checkpoint stores as weights."""
    return (sum(p.numel() for p in model.parameters())
            + sum(b.numel() for name, b in model.named_buffers() if name.endswith("gamma")))
