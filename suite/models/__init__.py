"""Models: the ViT, its residual schemes, LayerScale, and the bridge to timm.

Pure model code: forwards compute the model and nothing else (no probes, no logging). ``layers.py`` (attention, MLP,
drop-path), ``layerscale.py`` (LayerScale, HeadScale, CaiT's ε rule), ``residual.py`` (one block class per scheme;
names in :data:`suite.registry.SCHEMES`), ``depth_scaled.py`` (Depth-μP and CompleteP branch multipliers), ``vit.py``
(the ViT), ``timm_bridge.py`` (timm's ViT at our shape, weight conversion), ``flops.py`` (a step's FLOPs).
"""

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
