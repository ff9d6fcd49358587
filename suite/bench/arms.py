"""The arms ``suite bench`` can measure: our schemes, timm's ViT, LayerScale variants, the shape.

Arms: every scheme of :data:`suite.registry.SCHEMES` at its defaults (``layerscale`` is per-channel,
on both branches, ε by CaiT's rule); ``timm-preln`` / ``timm-layerscale``, timm's own
``VisionTransformer`` without / with ``init_values`` at the same shape; and optional variants
(``layerscale:scalar``, ``:head``, ``:frozen``, ``:unfused``, and the candidate implementations
``:per-block``, ``:folded``, ``:function``, ``:no-fold``, ``:always-fold``); and, only when named,
``layerscale:kernel``, the bank with a compiled residual update (``kernel.py``: needs a C++
compiler and ninja). ``layerscale:unfused`` computes
``x + γ·branch`` as timm does (a separate multiply, one more pass over the activations): it shows
what the fused ``addcmul`` saves, and is the kind of regression the CI gate must catch. The
candidates (``candidates.py``) compute the same function by other routes: the implementation
before the scale bank, two rejected ideas, and the bank's folding rule forced either way (see
docs/benchmark.md, "What LayerScale costs, and why").

Sequence length: ``tokens`` counts the class token, so it must be n² + 1 with patch size 16:
65 = 8×8 patches at 128 px ("64 tokens"), 197 = 14×14 patches at 224 px.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
from torch import nn

from suite.bench import kernel
from suite.bench.candidates import always_fold, fold_layerscale, never_fold, per_block, use_function
from suite.config import LayerScaleConfig, ModelConfig
from suite.models import build_model
from suite.models.layerscale import LayerScale
from suite.registry import SCHEMES, did_you_mean

BASELINE = "preln"
TIMM_ARMS = {"timm-preln": "preln", "timm-layerscale": "layerscale"}  # arm -> our scheme it mirrors
VARIANTS = {
    "layerscale:scalar": LayerScaleConfig(granularity="scalar"),
    "layerscale:head": LayerScaleConfig(granularity="head"),
    "layerscale:frozen": LayerScaleConfig(learnable=False),  # no γ gradient: isolates its cost
    "layerscale:unfused": LayerScaleConfig(),  # + SlowLayerScale(passes=1), see build_arm
    # Candidate implementations of the same LayerScale (candidates.py), see build_arm:
    "layerscale:per-block": LayerScaleConfig(),
    "layerscale:folded": LayerScaleConfig(),
    "layerscale:function": LayerScaleConfig(),
    "layerscale:no-fold": LayerScaleConfig(),
    "layerscale:always-fold": LayerScaleConfig(),
}
CANDIDATES = {
    "layerscale:per-block": per_block,
    "layerscale:folded": fold_layerscale,
    "layerscale:function": use_function,
    "layerscale:no-fold": never_fold,
    "layerscale:always-fold": always_fold,
}
# Arms that need more than torch, named only on purpose (not in --variants): the compiled residual
# update needs a C++ compiler and ninja at run time (kernel.py).
OPT_IN = {kernel.ARM: kernel.use_kernel}


def arm_names(include_variants: bool = False, include_timm: bool = True) -> list[str]:
    """Every arm ``suite bench`` knows, baseline first."""
    names = [BASELINE] + sorted(s for s in SCHEMES if s != BASELINE)
    names += list(TIMM_ARMS) if include_timm else []
    return names + (list(VARIANTS) if include_variants else [])


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
            raise ValueError(
                f"tokens counts the class token and must be n*n + 1 (65 = 8x8 patches + cls, "
                f"197 = 14x14 + cls), got {self.tokens}"
            )
        return side * self.patch_size

    def model_config(self, residual: str = BASELINE, backend: str = "suite",
                     layerscale: LayerScaleConfig | None = None) -> ModelConfig:
        return ModelConfig(
            backend=backend, residual=residual, img_size=self.img_size, patch_size=self.patch_size,
            in_chans=3, num_classes=self.num_classes, dim=self.dim, depth=self.depth, heads=self.heads,
            layerscale=dataclasses.replace(layerscale) if layerscale else LayerScaleConfig(),
        )


class SlowLayerScale(LayerScale):
    """LayerScale with ``passes`` un-fused passes over the activations: a regression on purpose.

    ``passes=1`` is timm's ``x + γ·branch`` (the multiply is its own pass); each further pass is one
    more elementwise multiply in forward and in backward. Used by the ``layerscale:unfused`` arm and
    by the tests that prove the CI gate fails on a slowed LayerScale.
    """

    passes: int = 1

    def add_to(self, x: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
        # `passes` elementwise passes more than the real update, whether or not γ is folded.
        y = branch if self.folded else branch * self.gamma.to(branch.dtype)
        for _ in range(self.passes - (0 if self.folded else 1)):
            y = y * 1.0
        return x + y


def slow_down_layerscale(model: nn.Module, passes: int = 1) -> nn.Module:
    """Turn every :class:`LayerScale` of ``model`` into a :class:`SlowLayerScale` (in place)."""
    found = 0
    for module in model.modules():
        if type(module) is LayerScale:
            module.__class__ = SlowLayerScale
            module.passes = passes
            found += 1
    if not found:
        raise ValueError("model has no LayerScale to slow down")
    return model


def check_arm(name: str) -> None:
    """Raise ``ValueError`` (with the valid names and a did-you-mean) if ``name`` is no arm, and
    :class:`kernel.KernelBuildError` (a ``ValueError``) if an opt-in arm cannot be built here."""
    known = arm_names(include_variants=True) + list(OPT_IN)
    if name not in known:
        raise ValueError(f"unknown bench arm '{name}'{did_you_mean(name, known)}; valid: {', '.join(known)}")
    if name == kernel.ARM:
        kernel.build()  # fail before anything is measured, in one line


def build_arm(name: str, shape: BenchShape) -> nn.Module:
    """The model of arm ``name`` (see :func:`arm_names`) at ``shape``."""
    check_arm(name)
    if name in TIMM_ARMS:
        return build_model(shape.model_config(TIMM_ARMS[name], backend="timm"))
    if name in OPT_IN:
        return OPT_IN[name](build_model(shape.model_config("layerscale")))
    if name in VARIANTS:
        model = build_model(shape.model_config("layerscale", layerscale=VARIANTS[name]))
        if name == "layerscale:unfused":  # timm's multiply then add, per block, never folded
            return slow_down_layerscale(per_block(model), 1)
        return CANDIDATES[name](model) if name in CANDIDATES else model
    return build_model(shape.model_config(name))
