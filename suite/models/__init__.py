"""Models: the ViT, its residual schemes (a registry), LayerScale, and the bridge to timm."""

from __future__ import annotations

import dataclasses

from torch import nn

from suite.config import ModelConfig
from suite.models.residual import SCHEMES, list_schemes
from suite.models.vit import VisionTransformer, count_params

__all__ = ["SCHEMES", "VisionTransformer", "build_model", "count_params", "list_schemes"]


def build_model(cfg: ModelConfig) -> nn.Module:
    """Our ViT (``backend: suite``) or timm's at the same shape (``backend: timm``)."""
    if cfg.backend == "timm":
        from suite.models.timm_bridge import build_timm_vit

        return build_timm_vit(cfg)
    if cfg.backend != "suite":
        raise ValueError(f"model.backend must be 'suite' or 'timm', got {cfg.backend!r}")
    return VisionTransformer(dataclasses.replace(cfg))
