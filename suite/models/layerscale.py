"""LayerScale (CaiT, Touvron et al. 2021): a learnable diagonal on a residual branch.

``x = x + diag(λ) · F(LN(x))`` with every entry of λ initialised to a tiny ε, so that deep blocks
start near the identity. Two traps of published code are guarded against here:

* ε is chosen from the *total* depth (:func:`cait_init`), never from the block index;
* "init 0" is a real initialisation (the block starts exactly at the identity) and is distinct from
  "no LayerScale", which is the ``preln`` scheme. ``reset_parameters`` honours the configured init
  (timm once reset γ to 1, ignoring it).
"""

from __future__ import annotations

import torch
from torch import nn


def cait_init(depth: int) -> float:
    """ε by total depth, as in CaiT: 0.1 up to 18 blocks, 1e-5 up to 24, 1e-6 deeper.

    The paper gives 0.1 / 1e-5 / 1e-6 for depths 12 / 24 / 36 and nothing between 18 and 24; we
    keep 0.1 through 18 (its last "shallow" depth) and switch to 1e-5 from 19 on.

    Args:
        depth: total number of blocks of the network.

    Returns:
        The initial value of every scale.
    """
    if depth <= 18:
        return 0.1
    if depth <= 24:
        return 1e-5
    return 1e-6


def resolve_init(init: float | str, depth: int) -> float:
    """A configured init (a float, or ``"cait"``) as a number."""
    if init == "cait":
        return cait_init(depth)
    if isinstance(init, str):
        raise ValueError(f"layerscale init must be a number >= 0 or 'cait', got {init!r}")
    return float(init)


class _Scale(nn.Module):
    """A vector of ``size`` scales, all set to ``init``; a parameter, or a buffer when frozen."""

    def __init__(self, size: int, init: float, learnable: bool) -> None:
        super().__init__()
        self.init = float(init)
        self.learnable = learnable
        gamma = torch.empty(size)
        if learnable:
            self.gamma = nn.Parameter(gamma)
        else:
            self.register_buffer("gamma", gamma)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # Honour the configured init (timm once reset its gamma to 1 here, ignoring init_values).
        with torch.no_grad():
            self.gamma.fill_(self.init)

    def extra_repr(self) -> str:
        kind = "param" if self.learnable else "buffer"
        return f"size={self.gamma.numel()}, init={self.init:g}, {kind}"


class LayerScale(_Scale):
    """Per-channel (or one scalar) scale of a residual branch, fused with the residual add.

    Args:
        dim: channel width; the scale has ``dim`` entries, or 1 when ``scalar``.
        init: initial value of every entry (0 allowed).
        learnable: a parameter if true, else a fixed buffer (the "frozen" ablation).
        scalar: one scale shared by all channels instead of one per channel.
    """

    def __init__(self, dim: int, init: float, learnable: bool = True, scalar: bool = False) -> None:
        super().__init__(1 if scalar else dim, init, learnable)
        self.folded = False  # set by the model's ScaleBank while γ is folded into the branch (scalebank.py)

    def add_to(self, x: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
        """``x + γ ⊙ branch`` as one fused op (no separate pass over the activations).

        Args:
            x: residual stream, (B, N, C).
            branch: branch output, (B, N, C); already scaled while ``folded``.
        """
        if self.folded:
            return x + branch
        return torch.addcmul(x, self.gamma.to(branch.dtype), branch)

    def forward(self, branch: torch.Tensor) -> torch.Tensor:
        return branch * self.gamma.to(branch.dtype)


class HeadScale(_Scale):
    """One scale per attention head, applied to each head's output before the output projection.

    Our variant (no paper does per-head LayerScale for ViTs; nearest is NormFormer's HeadScale,
    init 1). Initialised to ε like the channel version.

    Args:
        heads: number of attention heads.
        init: initial value of every head's scale.
        learnable: a parameter if true, else a fixed buffer.
    """

    def __init__(self, heads: int, init: float, learnable: bool = True) -> None:
        super().__init__(heads, init, learnable)

    def forward(self, heads_out: torch.Tensor) -> torch.Tensor:
        """Scale attention output per head.

        Args:
            heads_out: (B, H, N, hd), the output of scaled dot-product attention.
        """
        return heads_out * self.gamma.to(heads_out.dtype).view(1, -1, 1, 1)


def residual_add(x: torch.Tensor, scale: nn.Module, branch: torch.Tensor) -> torch.Tensor:
    """``x + scale(branch)``; a :class:`LayerScale` fuses the multiply into the add (``addcmul``).

    ``scale`` is ``nn.Identity`` when the branch has no LayerScale, so the baseline and the variant
    share this one code path.
    """
    if isinstance(scale, LayerScale):
        return scale.add_to(x, branch)
    return x + branch
