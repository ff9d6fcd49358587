"""The arms ``suite bench`` can measure (our schemes, timm's ViT, LayerScale variants) and their shape."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
from torch import nn

from suite.config import LayerScaleConfig, ModelConfig
from suite.models import build_model
from suite.models.layerscale import LayerScale
from suite.registry import SCHEMES, did_you_mean

BASELINE = "preln"
TIMM_ARMS = {"timm-preln": "preln", "timm-layerscale": "layerscale"}  # arm -> our scheme it mirrors
CAST = "layerscale:cast"  # in the default arms: the option measured beside the LayerScale users write
VARIANTS = {
    CAST: LayerScaleConfig(cast=True),
    "layerscale:scalar": LayerScaleConfig(granularity="scalar"),
    "layerscale:head": LayerScaleConfig(granularity="head"),
    "layerscale:frozen": LayerScaleConfig(learnable=False),  # no γ gradient: isolates its cost
}


def arm_names(include_variants: bool = False, include_timm: bool = True) -> list[str]:
    """Every arm ``suite bench`` knows, baseline first."""
    names = [BASELINE] + sorted(s for s in SCHEMES if s != BASELINE)
    names += list(TIMM_ARMS) if include_timm else []
    return names + [CAST] + ([v for v in VARIANTS if v != CAST] if include_variants else [])


@dataclass(frozen=True)
class BenchShape:
    """The model and batch shape every arm is measured at (defaults: ViT-Ti, 64 patches, CPU)."""

    depth: int = 12
    dim: int = 192
    heads: int = 3
    tokens: int = 65  # sequence length including the class token: n*n patches + 1
    batch: int = 4
    patch_size: int = 16
    num_classes: int = 100

    @property
    def img_size(self) -> int:
        side = math.isqrt(max(self.tokens - 1, 0))
        if self.tokens < 2 or side * side != self.tokens - 1:
            raise ValueError(f"tokens counts the class token and must be n*n + 1 (65 = 8x8 patches + cls, "
                             f"197 = 14x14 + cls), got {self.tokens}")
        return side * self.patch_size

    def model_config(self, residual: str = BASELINE, backend: str = "suite",
                     layerscale: LayerScaleConfig | None = None) -> ModelConfig:
        return ModelConfig(
            backend=backend, residual=residual, img_size=self.img_size, patch_size=self.patch_size,
            in_chans=3, num_classes=self.num_classes, dim=self.dim, depth=self.depth, heads=self.heads,
            layerscale=dataclasses.replace(layerscale) if layerscale else LayerScaleConfig(),
        )


def slow_down_layerscale(model: nn.Module, passes: int = 1) -> nn.Module:
    """Add ``passes`` elementwise passes after every :class:`LayerScale`: a regression on purpose, for the CI gate."""
    def hook(module: nn.Module, args, out: torch.Tensor) -> torch.Tensor:
        for _ in range(passes):
            out = out * 1.0
        return out

    scales = [m for m in model.modules() if type(m) is LayerScale]
    if not scales:
        raise ValueError("model has no LayerScale to slow down")
    for m in scales:
        m.register_forward_hook(hook)
    return model


def check_arm(name: str) -> None:
    """Raise ``ValueError`` (with the valid names and a did-you-mean) if ``name`` is no arm."""
    known = arm_names(include_variants=True)
    if name not in known:
        raise ValueError(f"unknown bench arm '{name}'{did_you_mean(name, known)}; valid: {', '.join(known)}")


def build_arm(name: str, shape: BenchShape) -> nn.Module:
    """The model of arm ``name`` (see :func:`arm_names`) at ``shape``."""
    check_arm(name)
    if name in TIMM_ARMS:
        return build_model(shape.model_config(TIMM_ARMS[name], backend="timm"))
    if name in VARIANTS:
        return build_model(shape.model_config("layerscale", layerscale=VARIANTS[name]))
    return build_model(shape.model_config(name))
