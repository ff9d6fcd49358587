"""Residual schemes: how each block combines its sublayers with the residual stream.

N is the total number of blocks; F is a sublayer (attention or MLP).

| scheme       | block update                                  |
|--------------|-----------------------------------------------|
| ``preln``    | ``x + F(LN(x))`` (the baseline)                |
| ``postln``   | ``LN(x + F(x))``                               |
| ``layerscale`` | ``x + γ ⊙ F(LN(x))`` (CaiT), see ``LayerScaleConfig`` |
| ``rezero``   | ``x + α·F(x)``, no LN, one α per block, α = 0   |
| ``deepnorm`` | ``LN(α·x + F(x))``, α = (2N)^¼; fc1, fc2, v, out init × β = (8N)^-¼ |
| ``sandwich`` | ``x + LN(F(LN(x)))``                           |

Every scheme is a builder (``build_<scheme>``) taking the same explicit arguments, registered by
name in :data:`suite.registry.SCHEMES`. Forwards compute the block and nothing else: the per-block
probes attach from outside with forward hooks (``suite/engine/probes.py``).
"""

from __future__ import annotations

import torch
from torch import nn

from suite.config import LayerScaleConfig
from suite.registry import SCHEMES
from suite.models.layers import Attention, DropPath, Mlp, layer_norm
from suite.models.layerscale import HeadScale, LayerScale, resolve_init


class Block(nn.Module):
    """State shared by every scheme; subclasses define ``forward``.

    Args:
        dim: width C. heads: attention heads. mlp_ratio: MLP hidden / C. qkv_bias: q/k/v bias.
        drop_path: this block's stochastic-depth probability.
        head_scale: ``HeadScale`` for per-head LayerScale, else ``nn.Identity()``.
    """

    def __init__(
        self, dim: int, heads: int, mlp_ratio: float, qkv_bias: bool, drop_path: float,
        head_scale: nn.Module,
    ) -> None:
        super().__init__()
        self.attn = Attention(dim, heads, qkv_bias, head_scale)
        self.mlp = Mlp(dim, mlp_ratio)
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()

    def scales(self) -> list[torch.Tensor]:
        """The block's residual scales (LayerScale γ, ReZero α); empty for schemes without."""
        return []

    def post_init(self) -> None:
        """Scheme-specific re-initialisation after the model-wide weight init (DeepNorm's β)."""


class PreLNBlock(Block):
    """``x + ls1(F(LN(x)))``: Pre-LN, with LayerScale when ``ls1``/``ls2`` are ``LayerScale``.

    The baseline and the LayerScale variant share this one code path; "off" is ``nn.Identity``.
    """

    def __init__(
        self, dim: int, heads: int, mlp_ratio: float, qkv_bias: bool, drop_path: float,
        ls1: nn.Module, ls2: nn.Module, head_scale: nn.Module,
    ) -> None:
        super().__init__(dim, heads, mlp_ratio, qkv_bias, drop_path, head_scale)
        self.norm1 = layer_norm(dim)
        self.ls1 = ls1
        self.norm2 = layer_norm(dim)
        self.ls2 = ls2

    def scales(self) -> list[torch.Tensor]:
        return [m.gamma for m in (self.ls1, self.ls2, self.attn.head_scale) if hasattr(m, "gamma")]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop_path(self.ls1(self.attn(self.norm1(x))))
        return x + self.drop_path(self.ls2(self.mlp(self.norm2(x))))


class PostLNBlock(Block):
    """``LN(x + F(x))``: the original Transformer's placement."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float, qkv_bias: bool, drop_path: float) -> None:
        super().__init__(dim, heads, mlp_ratio, qkv_bias, drop_path, nn.Identity())
        self.norm1 = layer_norm(dim)
        self.norm2 = layer_norm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.drop_path(self.attn(x))
        x = self.norm1(x + a)
        m = self.drop_path(self.mlp(x))
        return self.norm2(x + m)


class ReZeroBlock(Block):
    """``x + α·F(x)`` without LayerNorm; one scalar α per block, shared by both sublayers, init 0."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float, qkv_bias: bool, drop_path: float) -> None:
        super().__init__(dim, heads, mlp_ratio, qkv_bias, drop_path, nn.Identity())
        self.alpha = nn.Parameter(torch.zeros(1))

    def scales(self) -> list[torch.Tensor]:
        return [self.alpha]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        alpha = self.alpha.to(x.dtype)
        a = self.drop_path(self.attn(x))
        x = torch.addcmul(x, alpha, a)
        m = self.drop_path(self.mlp(x))
        return torch.addcmul(x, alpha, m)


class DeepNormBlock(Block):
    """``LN(α·x + F(x))`` with α = (2N)^¼; the residual ``x`` is scaled, not the branch.

    At init (DeepNet's Algorithm 1, encoder-only formulas; torchscale ``encoder.py``): query and key
    projections Xavier-normal, and fc1, fc2, the value and the output projections Xavier-normal with
    gain β = (8N)^-¼ (DeepNet derives β for Xavier weights; applied to timm's std-0.02 init it would
    be a different, much smaller gain). One public implementation puts α on the branch instead,
    against the reference: we follow the reference.
    """

    def __init__(
        self, dim: int, heads: int, mlp_ratio: float, qkv_bias: bool, drop_path: float, depth: int,
    ) -> None:
        super().__init__(dim, heads, mlp_ratio, qkv_bias, drop_path, nn.Identity())
        self.norm1 = layer_norm(dim)
        self.norm2 = layer_norm(dim)
        self.alpha = (2.0 * depth) ** 0.25
        self.beta = (8.0 * depth) ** -0.25

    def post_init(self) -> None:
        dim = self.attn.qkv.in_features
        qkv = self.attn.qkv.weight
        with torch.no_grad():
            for rows, gain in ((slice(0, dim), 1.0), (slice(dim, 2 * dim), 1.0), (self.attn.value_rows(), self.beta)):
                nn.init.xavier_normal_(qkv[rows], gain=gain)  # each (C, C) projection on its own fans
            for lin in (self.attn.proj, self.mlp.fc1, self.mlp.fc2):
                nn.init.xavier_normal_(lin.weight, gain=self.beta)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.drop_path(self.attn(x))
        x = self.norm1(torch.add(a, x, alpha=self.alpha))  # a + α·x, one fused op
        m = self.drop_path(self.mlp(x))
        return self.norm2(torch.add(m, x, alpha=self.alpha))

    def extra_repr(self) -> str:
        return f"alpha={self.alpha:.4g}, beta={self.beta:.4g}"


class SandwichBlock(Block):
    """``x + LN(F(LN(x)))`` (CogView's Sandwich-LN)."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float, qkv_bias: bool, drop_path: float) -> None:
        super().__init__(dim, heads, mlp_ratio, qkv_bias, drop_path, nn.Identity())
        self.norm1 = layer_norm(dim)
        self.post_norm1 = layer_norm(dim)
        self.norm2 = layer_norm(dim)
        self.post_norm2 = layer_norm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.drop_path(self.post_norm1(self.attn(self.norm1(x))))
        x = x + a
        m = self.drop_path(self.post_norm2(self.mlp(self.norm2(x))))
        return x + m


# ----------------------------------------------------------------------------- builders (see suite.registry.SCHEMES)

def build_block(
    scheme: str, *, dim: int, heads: int, mlp_ratio: float, qkv_bias: bool, drop_path: float,
    depth: int, layerscale: LayerScaleConfig,
) -> Block:
    """Build one block of ``scheme`` (a name in :data:`suite.registry.SCHEMES`).

    Args:
        depth: the network's total number of blocks (DeepNorm's α/β and CaiT's ε depend on it).
        layerscale: options of the ``layerscale`` scheme (ignored by the others).

    Raises:
        ValueError: unknown scheme (the message lists the valid names).
    """
    if scheme not in SCHEMES:
        raise ValueError(SCHEMES.unknown(scheme))
    return SCHEMES.get(scheme)(
        dim=dim, heads=heads, mlp_ratio=mlp_ratio, qkv_bias=qkv_bias, drop_path=drop_path,
        depth=depth, layerscale=layerscale,
    )


def build_preln(*, dim, heads, mlp_ratio, qkv_bias, drop_path, depth, layerscale) -> Block:
    return PreLNBlock(dim, heads, mlp_ratio, qkv_bias, drop_path, nn.Identity(), nn.Identity(), nn.Identity())


def build_layerscale(*, dim, heads, mlp_ratio, qkv_bias, drop_path, depth, layerscale: LayerScaleConfig) -> Block:
    ls = layerscale
    if ls.placement not in ("attn", "mlp", "both"):
        raise ValueError(f"layerscale.placement must be attn, mlp or both, got {ls.placement!r}")
    if ls.granularity not in ("channel", "head", "scalar"):
        raise ValueError(f"layerscale.granularity must be channel, head or scalar, got {ls.granularity!r}")
    init = resolve_init(ls.init, depth)
    on_attn = ls.placement in ("attn", "both")
    on_mlp = ls.placement in ("mlp", "both")
    scalar = ls.granularity == "scalar"
    head_scale: nn.Module = nn.Identity()
    ls1: nn.Module = nn.Identity()
    if on_attn and ls.granularity == "head":
        head_scale = HeadScale(heads, init, ls.learnable)
    elif on_attn:
        ls1 = LayerScale(dim, init, ls.learnable, scalar=scalar)
    # Per-head granularity has no meaning on the MLP branch: it uses per-channel scales there.
    ls2 = LayerScale(dim, init, ls.learnable, scalar=scalar) if on_mlp else nn.Identity()
    return PreLNBlock(dim, heads, mlp_ratio, qkv_bias, drop_path, ls1, ls2, head_scale)


def build_postln(*, dim, heads, mlp_ratio, qkv_bias, drop_path, depth, layerscale) -> Block:
    return PostLNBlock(dim, heads, mlp_ratio, qkv_bias, drop_path)


def build_rezero(*, dim, heads, mlp_ratio, qkv_bias, drop_path, depth, layerscale) -> Block:
    return ReZeroBlock(dim, heads, mlp_ratio, qkv_bias, drop_path)


def build_deepnorm(*, dim, heads, mlp_ratio, qkv_bias, drop_path, depth, layerscale) -> Block:
    return DeepNormBlock(dim, heads, mlp_ratio, qkv_bias, drop_path, depth)


def build_sandwich(*, dim, heads, mlp_ratio, qkv_bias, drop_path, depth, layerscale) -> Block:
    return SandwichBlock(dim, heads, mlp_ratio, qkv_bias, drop_path)
