"""Models, pure (no probes, no logging): ``vit.py`` (the ViT), ``residual.py`` (one block per scheme), ``layers.py``
(attention, MLP, drop-path), ``layerscale.py``, ``depth_scaled.py`` (Depth-μP, CompleteP), ``timm_bridge.py`` (timm's
ViT at our shape) and ``flops.py`` (a step's FLOPs)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from suite.config import ModelConfig

if TYPE_CHECKING:
    from torch import nn

__all__ = ["VisionTransformer", "build_model", "count_params"]


def __getattr__(name: str) -> Any:
    """The model classes, imported when first asked for: the package itself imports no torch, so that ``flops.py``
    (all that ``suite cost`` needs) costs no torch import (1.7 s)."""
    if name in ("VisionTransformer", "count_params"):
        from suite.models import vit

        return getattr(vit, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def build_model(cfg: ModelConfig) -> nn.Module:
    """Our ViT (``backend: suite``) or timm's at the same shape (``backend: timm``)."""
    from suite.models.vit import VisionTransformer

    if cfg.backend == "timm":
        from suite.models.timm_bridge import build_timm_vit

        return build_timm_vit(cfg)
    if cfg.backend != "suite":
        raise ValueError(f"model.backend must be 'suite' or 'timm', got {cfg.backend!r}")
    return VisionTransformer(dataclasses.replace(cfg))
