"""Models, pure (no probes, no logging): ``vit.py`` (the ViT), ``residual.py`` (one block per scheme), ``layers.py``
(attention, MLP, drop-path), ``layerscale.py``, ``depth_scaled.py`` (Depth-μP, CompleteP), ``timm_bridge.py`` (timm's
ViT at our shape) and ``flops.py`` (a step's FLOPs)."""

from __future__ import annotations

import dataclasses

from torch import nn

from suite.config import ModelConfig
from suite.models.vit import VisionTransformer, count_params

__all__ = ["VisionTransformer", "build_model", "count_params"]


def build_model(cfg: ModelConfig) -> nn.Module:
    """Our ViT (``backend: suite``) or timm's at the same shape (``backend: timm``)."""
    if cfg.backend == "timm":
        from suite.models.timm_bridge import build_timm_vit

        return build_timm_vit(cfg)
    if cfg.backend != "suite":
        raise ValueError(f"model.backend must be 'suite' or 'timm', got {cfg.backend!r}")
    return VisionTransformer(dataclasses.replace(cfg))
