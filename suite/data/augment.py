"""Batch-wise, on-device image ops: normalisation and random crop + flip."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

CROP_PADDING = 4  # the standard CIFAR recipe: pad by 4 with zeros, crop back to size


def normalise(x: Tensor, mean: Tensor, std: Tensor) -> Tensor:
    """uint8 images to float32 ``(x / 255 - mean) / std``.

    Args:
        x: (..., C, H, W) uint8, on the device.
        mean, std: (1, C, 1, 1) float32 on the same device (0..1 scale).

    Returns:
        (..., C, H, W) float32.
    """
    return x.to(torch.float32).div_(255).sub_(mean).div_(std)


def crop_flip_draws(gens: list[torch.Generator], b: int, padding: int = CROP_PADDING) -> tuple[Tensor, Tensor]:
    """The random numbers of :func:`crop_flip` for ``b`` samples from each generator, on the CPU (so
    they are the same on any device): from each, ``b`` (row, column) offsets, then ``b`` flips.

    Args:
        gens: one CPU generator per batch (a step of one run).
        b: samples per batch.

    Returns:
        offsets (G, b, 2) int64 in ``[0, 2 * padding]`` and flip (G, b) bool, G = ``len(gens)``.
    """
    offsets = torch.stack([torch.randint(0, 2 * padding + 1, (b, 2), generator=g) for g in gens])
    flip = torch.stack([torch.rand(b, generator=g) < 0.5 for g in gens])
    return offsets, flip


def crop_flip(x: Tensor, offsets: Tensor, flip: Tensor, padding: int = CROP_PADDING) -> Tensor:
    """Per-sample crop from a zero-padded image, then a horizontal flip where ``flip`` says.

    Vectorised: one gather with per-sample row/column indices instead of a loop over samples.
    Zero padding is applied to the raw uint8 pixels (black), as torchvision's RandomCrop does
    before normalisation.

    Args:
        x: (B, C, H, W) uint8 images.
        offsets: (B, 2) int64 (row, column) of each crop in the padded image, on x's device.
        flip: (B,) bool, on x's device.
        padding: pixels of zero padding on each side.

    Returns:
        (B, C, H, W) images of the same dtype and device.
    """
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
