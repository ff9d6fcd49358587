"""LayerScale (CaiT, Touvron et al. 2021): a learnable diagonal on a residual branch.

``x = x + γ ⊙ F(LN(x))`` with every entry of γ initialised to a tiny ε, so that deep blocks start
near the identity. Written as users write it (timm's ``LayerScale``: ``x * gamma``); the block adds
it to the residual stream. Two traps of published code are guarded against here:

* ε is chosen from the *total* depth (:func:`cait_init`), never from the block index;
* "init 0" is a real initialisation (the block starts exactly at the identity) and is distinct from
  "no LayerScale", which is the ``preln`` scheme (``nn.Identity``). ``reset_parameters`` honours the
  configured init (timm once reset γ to 1, ignoring it).
"""

from __future__ import annotations

import torch
from torch import nn

# The depth-aware LayerScale (``model.residual: layerscale-depth``): CaiT's LayerScale whose γ learns at
# ``η · (L / L_base)^-1`` (every other parameter at η), so that γ's settled size, which under AdamW is set
# by its learning rate and not by its init (docs/schemes.md, LayerScale under AdamW), falls as 1/L and the
# sum of the 2L scaled branches stays the same size as the network deepens.
DEPTH_AWARE = "layerscale-depth"
GAMMA_PARAMETER = "gamma"  # the name of a LayerScale's (and a HeadScale's) γ inside a block


def gamma_lr_scale(residual: str, depth: int, base_depth: int) -> float:
    """The factor on γ's learning rate: ``(depth / base_depth)^-1`` for ``layerscale-depth``, 1 for every
    other scheme (and 1 at ``depth == base_depth``, where the two LayerScales are one)."""
    return base_depth / depth if residual == DEPTH_AWARE else 1.0


def cait_init(depth: int) -> float:
    """CaiT's initial scale ε for a network of ``depth`` blocks: 0.1 up to 18, 1e-5 up to 24, 1e-6 deeper (the
    paper gives depths 12 / 24 / 36 only; docs/schemes.md)."""
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
    """``x * γ``: a per-channel (or one scalar) scale of a residual branch's output.

    Args:
        dim: channel width; γ has ``dim`` entries, or 1 when ``scalar``.
        init: initial value of every entry (0 allowed).
        learnable: γ is a parameter if true, else a fixed buffer (the "frozen" ablation).
        scalar: one scale shared by all channels instead of one per channel.
        cast: multiply in ``x``'s dtype (``x * γ.to(x.dtype)``). Off, a bf16 branch output times the fp32 γ
            is promoted to an fp32 tensor of the branch's size, forward and backward (``mul`` is on no
            autocast list); on, the product and γ's gradient stay bf16 and γ's master copy stays fp32. In
            fp32 the cast is a no-op: the same operators and bit-identical results (docs/benchmark.md).
    """

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
    """One scale per attention head, applied to each head's output before the output projection.

    Our variant (no paper does per-head LayerScale for ViTs; nearest is NormFormer's HeadScale,
    init 1). Initialised to ε like the channel version.

    Args:
        heads: number of attention heads.
        init: initial value of every head's scale.
        learnable: a parameter if true, else a fixed buffer.
        cast: multiply in ``x``'s dtype (see :class:`LayerScale`).
    """

    def __init__(self, heads: int, init: float, learnable: bool = True, cast: bool = False) -> None:
        super().__init__(heads, init, learnable, cast=cast)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, H, N, hd) -> (B, H, N, hd)
        return x * self.scale(x).view(-1, 1, 1)
