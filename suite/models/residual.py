"""Residual schemes: one block class per update rule, stated in its docstring (docs/schemes.md), and one builder per
scheme (``build_<scheme>(model_config, drop_path)``), registered in :data:`suite.registry.SCHEMES`."""

from __future__ import annotations

import torch
from torch import nn

from suite.config import ModelConfig
from suite.registry import SCHEMES
from suite.models.layers import Attention, DropPath, Mlp, layer_norm
from suite.models.depth_scaled import BranchMultiplier, branch_multiplier
from suite.models.layerscale import HeadScale, LayerScale, resolve_init


class Block(nn.Module):
    """State shared by every scheme; subclasses define ``forward``. ``head_scale``: ``HeadScale`` or identity."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float, qkv_bias: bool, qk_norm: bool, drop_path: float,
                 head_scale: nn.Module) -> None:
        super().__init__()
        self.attn = Attention(dim, heads, qkv_bias, head_scale, qk_norm)
        self.mlp = Mlp(dim, mlp_ratio)
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()

    def scales(self) -> list[torch.Tensor]:
        """The block's residual scales (LayerScale γ, ReZero α); empty for schemes without."""
        return []

    def post_init(self) -> None:
        """Scheme-specific re-initialisation after the model-wide weight init (DeepNorm's β)."""


class PreLNBlock(Block):
    """``x + ls1(F(LN(x)))``: one code path for Pre-LN (``ls1``/``ls2`` ``nn.Identity``), LayerScale (``LayerScale``)
    and the depth-scaled schemes (a fixed :class:`BranchMultiplier`)."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float, qkv_bias: bool, qk_norm: bool, drop_path: float,
                 ls1: nn.Module, ls2: nn.Module, head_scale: nn.Module) -> None:
        super().__init__(dim, heads, mlp_ratio, qkv_bias, qk_norm, drop_path, head_scale)
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

    def __init__(self, dim: int, heads: int, mlp_ratio: float, qkv_bias: bool, qk_norm: bool, drop_path: float) -> None:
        super().__init__(dim, heads, mlp_ratio, qkv_bias, qk_norm, drop_path, nn.Identity())
        self.norm1 = layer_norm(dim)
        self.norm2 = layer_norm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.drop_path(self.attn(x))
        x = self.norm1(x + a)
        m = self.drop_path(self.mlp(x))
        return self.norm2(x + m)


class ReZeroBlock(Block):
    """``x + α·F(x)`` without LayerNorm; one scalar α per block, shared by both sublayers, init 0."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float, qkv_bias: bool, qk_norm: bool, drop_path: float) -> None:
        super().__init__(dim, heads, mlp_ratio, qkv_bias, qk_norm, drop_path, nn.Identity())
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
    """``LN(α·x + F(x))`` with α = (2N)^¼; init as DeepNet's Algorithm 1: q, k Xavier-normal, fc1, fc2, value and
    output projections with gain β = (8N)^-¼."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float, qkv_bias: bool, qk_norm: bool, drop_path: float,
                 depth: int) -> None:
        super().__init__(dim, heads, mlp_ratio, qkv_bias, qk_norm, drop_path, nn.Identity())
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

    def __init__(self, dim: int, heads: int, mlp_ratio: float, qkv_bias: bool, qk_norm: bool, drop_path: float) -> None:
        super().__init__(dim, heads, mlp_ratio, qkv_bias, qk_norm, drop_path, nn.Identity())
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

def build_block(m: ModelConfig, drop_path: float) -> Block:
    """One block of the scheme ``m.residual`` in a network of ``m.depth`` blocks; ValueError for an unknown scheme."""
    if m.residual not in SCHEMES:
        raise ValueError(SCHEMES.unknown(m.residual))
    return SCHEMES.get(m.residual)(m, drop_path)


def block_shape(m: ModelConfig, drop_path: float) -> dict:
    """The keyword arguments every block takes from the model config."""
    return dict(dim=m.dim, heads=m.heads, mlp_ratio=m.mlp_ratio, qkv_bias=m.qkv_bias, qk_norm=m.qk_norm,
                drop_path=drop_path)


def build_preln(m: ModelConfig, drop_path: float) -> Block:
    return PreLNBlock(**block_shape(m, drop_path), ls1=nn.Identity(), ls2=nn.Identity(), head_scale=nn.Identity())


def build_layerscale(m: ModelConfig, drop_path: float) -> Block:
    ls = m.layerscale
    if ls.placement not in ("attn", "mlp", "both"):
        raise ValueError(f"layerscale.placement must be attn, mlp or both, got {ls.placement!r}")
    if ls.granularity not in ("channel", "head", "scalar"):
        raise ValueError(f"layerscale.granularity must be channel, head or scalar, got {ls.granularity!r}")
    init = resolve_init(ls.init, m.depth)
    on_attn = ls.placement in ("attn", "both")
    on_mlp = ls.placement in ("mlp", "both")
    scalar = ls.granularity == "scalar"
    head_scale: nn.Module = nn.Identity()
    ls1: nn.Module = nn.Identity()
    if on_attn and ls.granularity == "head":
        head_scale = HeadScale(m.heads, init, ls.learnable, cast=ls.cast)
    elif on_attn:
        ls1 = LayerScale(m.dim, init, ls.learnable, scalar=scalar, cast=ls.cast)
    # Per-head granularity has no meaning on the MLP branch: it uses per-channel scales there.
    ls2 = LayerScale(m.dim, init, ls.learnable, scalar=scalar, cast=ls.cast) if on_mlp else nn.Identity()
    return PreLNBlock(**block_shape(m, drop_path), ls1=ls1, ls2=ls2, head_scale=head_scale)


def build_depth_scaled(m: ModelConfig, drop_path: float) -> Block:
    """Pre-LN with both branches multiplied by (L / L_base)^-α (see :mod:`suite.models.depth_scaled`)."""
    factor = branch_multiplier(m)
    return PreLNBlock(**block_shape(m, drop_path), ls1=BranchMultiplier(factor), ls2=BranchMultiplier(factor),
                      head_scale=nn.Identity())


def build_postln(m: ModelConfig, drop_path: float) -> Block:
    return PostLNBlock(**block_shape(m, drop_path))


def build_rezero(m: ModelConfig, drop_path: float) -> Block:
    return ReZeroBlock(**block_shape(m, drop_path))


def build_deepnorm(m: ModelConfig, drop_path: float) -> Block:
    return DeepNormBlock(**block_shape(m, drop_path), depth=m.depth)


def build_sandwich(m: ModelConfig, drop_path: float) -> Block:
    return SandwichBlock(**block_shape(m, drop_path))
