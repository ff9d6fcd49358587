"""Batch-wise, on-device image ops: normalisation and random crop + flip."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

CROP_PADDING = 4  # the standard CIFAR recipe: pad by 4 with zeros, crop back to size


def normalise(x: Tensor, mean: Tensor, std: Tensor) -> Tensor:
    """uint8 images to float32 ``(x / 255 - mean) / std``.

    Args:
        x: (B, C, H, W) uint8, on the device.
        mean, std: (1, C, 1, 1) float32 on the same device (0..1 scale).

    Returns:
        (B, C, H, W) float32.
    """
    return x.to(torch.float32).div_(255).sub_(mean).div_(std)


def random_crop_flip(x: Tensor, gen: torch.Generator, padding: int = CROP_PADDING) -> Tensor:
    """Per-sample random crop from a zero-padded image, then horizontal flip with p = 0.5.

    Vectorised: one gather with per-sample row/column indices instead of a loop over samples.
    The offsets and flips are drawn on the CPU from ``gen`` so they are the same on any device.
    Zero padding is applied to the raw uint8 pixels (black), as torchvision's RandomCrop does
    before normalisation.

    Args:
        x: (B, C, H, W) uint8 images.
        gen: CPU generator of this step.
        padding: pixels of zero padding on each side.

    Returns:
        (B, C, H, W) images of the same dtype and device.
    """
    b, c, h, w = x.shape
    offsets = torch.randint(0, 2 * padding + 1, (b, 2), generator=gen).to(x.device)  # (B, 2)
    flip = (torch.rand(b, generator=gen) < 0.5).to(x.device)  # (B,)
    padded = F.pad(x, (padding, padding, padding, padding))  # (B, C, H+2p, W+2p)
    ar_h = torch.arange(h, device=x.device)
    ar_w = torch.arange(w, device=x.device)
    rows = offsets[:, :1] + ar_h  # (B, H)
    # Flipping the crop = reading its columns right to left.
    cols = offsets[:, 1:] + torch.where(flip[:, None], ar_w.flip(0), ar_w)  # (B, W)
    bi = torch.arange(b, device=x.device)[:, None, None, None]
    ci = torch.arange(c, device=x.device)[None, :, None, None]
    return padded[bi, ci, rows[:, None, :, None], cols[:, None, None, :]]  # (B, C, H, W)
