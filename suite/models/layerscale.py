"""LayerScale (CaiT, Touvron et al. 2021): ``x = x + γ ⊙ F(LN(x))``, γ a per-channel parameter starting at a tiny ε,
written as timm's so weights convert. ε comes from the *total* depth (:func:`cait_init`), and init 0 is a real init."""

from __future__ import annotations

import torch
from torch import nn

# The depth-aware LayerScale: γ learns at ``η · L_base / L``, so its settled size (set under AdamW by its rate, not its
# init) falls as 1/L and the sum of the 2L branches keeps its size (docs/schemes.md, "The depth-aware LayerScale").
DEPTH_AWARE = "layerscale-depth"
GAMMA_PARAMETER = "gamma"  # the name of a LayerScale's (and a HeadScale's) γ inside a block


def gamma_lr_scale(residual: str, depth: int, base_depth: int) -> float:
    """The factor on γ's learning rate: ``base_depth / depth`` for ``layerscale-depth``, 1 for every other scheme."""
    return base_depth / depth if residual == DEPTH_AWARE else 1.0


def cait_init(depth: int) -> float:
    """CaiT's ε for ``depth`` blocks: 0.1 up to 18, 1e-5 up to 24, 1e-6 deeper (the paper gives 12 / 24 / 36 only)."""
    if depth <= 18:
        return 0.1
    if depth <= 24:
        return 1e-5
    return 1e-6


def resolve_init(init: float | str, depth: int) -> float:
    """A configured init (a float, ``"cait"`` or ``"rsqrt_depth"``: depth^-1/2) as a number."""
    if init == "cait":
        return cait_init(depth)
    if init == "rsqrt_depth":
        return depth ** -0.5
    if isinstance(init, str):
        raise ValueError(f"layerscale init must be a number >= 0, 'cait' or 'rsqrt_depth', got {init!r}")
    return float(init)


class LayerScale(nn.Module):
    """``x * γ``, per channel (or ``scalar``), from ``init``; a buffer unless ``learnable``. ``cast`` multiplies in
    ``x``'s dtype, so bf16 is not promoted to fp32 (docs/benchmark.md, "The cast LayerScale")."""

    def __init__(self, dim: int, init: float, learnable: bool = True, scalar: bool = False,
                 cast: bool = False) -> None:
        super().__init__()
        self.init, self.learnable, self.cast = float(init), learnable, cast
        gamma = torch.full((1 if scalar else dim,), self.init)
        if learnable:
            self.gamma = nn.Parameter(gamma)
        else:
            self.register_buffer("gamma", gamma)

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.gamma.fill_(self.init)

    def scale(self, x: torch.Tensor) -> torch.Tensor:
        return self.gamma.to(x.dtype) if self.cast else self.gamma

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (..., C) -> (..., C)
        return x * self.scale(x)

    def extra_repr(self) -> str:
        return (f"size={self.gamma.numel()}, init={self.init:g}, {'param' if self.learnable else 'buffer'}"
                f"{', cast' if self.cast else ''}")


class HeadScale(LayerScale):
    """One scale per attention head, on its output before the projection (our variant; nearest: NormFormer's)."""

    def __init__(self, heads: int, init: float, learnable: bool = True, cast: bool = False) -> None:
        super().__init__(heads, init, learnable, cast=cast)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, H, N, hd) -> (B, H, N, hd)
        return x * self.scale(x).view(-1, 1, 1)
