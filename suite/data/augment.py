"""Batch-wise, on-device image ops: normalisation and random crop + flip."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

CROP_PADDING = 4  # the standard CIFAR recipe: pad by 4 with zeros, crop back to size


def normalise(x: Tensor, mean: Tensor, std: Tensor) -> Tensor:
    """(..., C, H, W) uint8 to float32 ``(x / 255 - mean) / std``; ``mean``, ``std`` (1, C, 1, 1) on the 0..1 scale."""
    return x.to(torch.float32).div_(255).sub_(mean).div_(std)


def crop_flip_draws(gens: list[torch.Generator], b: int, padding: int = CROP_PADDING) -> tuple[Tensor, Tensor]:
    """:func:`crop_flip`'s draws on the CPU (the same on any device): offsets (G, b, 2) int64, flips (G, b) bool."""
    offsets = torch.stack([torch.randint(0, 2 * padding + 1, (b, 2), generator=g) for g in gens])
    flip = torch.stack([torch.rand(b, generator=g) < 0.5 for g in gens])
    return offsets, flip


def crop_flip(x: Tensor, offsets: Tensor, flip: Tensor, padding: int = CROP_PADDING) -> Tensor:
    """Per-sample crop from a zero-padded copy (as torchvision's RandomCrop) at ``offsets``, flipped where ``flip``."""
    b, c, h, w = x.shape
    padded = F.pad(x, (padding, padding, padding, padding))  # (B, C, H+2p, W+2p)
    ar_h = torch.arange(h, device=x.device)
    ar_w = torch.arange(w, device=x.device)
    rows = offsets[:, :1] + ar_h  # (B, H)
    # Flipping the crop = reading its columns right to left.
    cols = offsets[:, 1:] + torch.where(flip[:, None], ar_w.flip(0), ar_w)  # (B, W)
    bi = torch.arange(b, device=x.device)[:, None, None, None]
    ci = torch.arange(c, device=x.device)[None, :, None, None]
    return padded[bi, ci, rows[:, None, :, None], cols[:, None, None, :]]  # (B, C, H, W)
