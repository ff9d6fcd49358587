"""Per-block probes: how big the scales are, how far each branch moves the residual stream.

Probes run on a given batch without gradients and in eval mode, so they never change training.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn


def _blocks(model: nn.Module) -> list[nn.Module]:
    return list(getattr(model, "blocks", []))


def block_scales(block: nn.Module) -> list[torch.Tensor]:
    """A block's residual scales: ours via ``scales()``, timm's via its ``ls1``/``ls2`` gammas."""
    if hasattr(block, "scales"):
        return block.scales()
    return [m.gamma for m in (getattr(block, "ls1", None), getattr(block, "ls2", None)) if hasattr(m, "gamma")]


def _finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


@torch.no_grad()
def probe(model: nn.Module, x: torch.Tensor) -> list[dict[str, Any]]:
    """One record per block: scale_mean, scale_max, attn_ratio, mlp_ratio, out_rms.

    Args:
        model: the (uncompiled) model; our blocks record ratios, timm's only their scales.
        x: an input batch (B, C, H, W) on the model's device.

    Returns:
        ``depth`` dicts in block order; values are floats or ``None`` where not applicable.
    """
    blocks = _blocks(model)
    ours = [b for b in blocks if hasattr(b, "probe")]
    was_training = model.training
    model.eval()
    try:
        for b in ours:
            b.probe = {}
        if ours:
            model(x)
        records = []
        for i, b in enumerate(blocks):
            scales = block_scales(b)
            rec: dict[str, Any] = {"block": i, "scale_mean": None, "scale_max": None}
            if scales:
                flat = torch.cat([s.detach().float().abs().flatten() for s in scales])
                rec["scale_mean"] = _finite_or_none(flat.mean().item())
                rec["scale_max"] = _finite_or_none(flat.max().item())
            got = getattr(b, "probe", None) or {}
            for key in ("attn_ratio", "mlp_ratio", "out_rms"):
                rec[key] = _finite_or_none(got[key].item()) if key in got else None
            records.append(rec)
        return records
    finally:
        for b in ours:
            b.probe = None
        model.train(was_training)
