"""Check ourselves against timm: its ``VisionTransformer`` at our shape (``preln`` and plain ``layerscale`` only), and
weights converted by a strict, checked key map (our module names match timm's)."""

from __future__ import annotations

import re

import torch
from torch import nn

from suite.config import ModelConfig
from suite.models.layerscale import resolve_init

# Every parameter name both models share: a key outside this list is an error, never silently dropped.
_SHARED_KEYS = [re.compile(p) for p in (
    r"cls_token", r"pos_embed", r"patch_embed\.proj\.(weight|bias)",
    r"blocks\.\d+\.norm[12]\.(weight|bias)", r"blocks\.\d+\.attn\.(qkv|proj)\.(weight|bias)",
    r"blocks\.\d+\.mlp\.fc[12]\.(weight|bias)", r"blocks\.\d+\.ls[12]\.gamma",
    r"blocks\.\d+\.attn\.[qk]_norm\.(weight|bias)",
    r"norm\.(weight|bias)", r"head\.(weight|bias)",
)]


def timm_init_values(cfg: ModelConfig) -> float | None:
    """timm's ``init_values`` for our config; raises if timm's ViT cannot express the scheme."""
    if cfg.weight_init != "timm":
        raise ValueError(f"model.weight_init {cfg.weight_init}: timm's ViT initialises its own weights; "
                         f"use model.backend: suite")
    if cfg.drop_path > 0 and cfg.drop_path_schedule != "linear":
        raise ValueError(f"model.drop_path_schedule {cfg.drop_path_schedule}: timm's ViT raises model.drop_path "
                         f"linearly over its blocks; set model.drop_path_schedule: linear")
    if cfg.residual == "preln":
        return None
    if cfg.residual == "layerscale":
        ls = cfg.layerscale
        if (ls.placement, ls.granularity, ls.learnable, ls.cast) != ("both", "channel", True, False):
            raise ValueError("timm's ViT only has learnable per-channel LayerScale on both branches, multiplied in "
                             f"γ's dtype; got placement={ls.placement}, granularity={ls.granularity}, "
                             f"learnable={ls.learnable}, cast={ls.cast}")
        init = resolve_init(ls.init, cfg.depth)
        if init == 0.0:
            raise ValueError("timm treats init_values=0 as 'no LayerScale': use backend 'suite' for init 0")
        return init
    raise ValueError(f"timm's VisionTransformer has no '{cfg.residual}' scheme; use model.backend: suite")


def build_timm_vit(cfg: ModelConfig) -> nn.Module:
    """timm's ``VisionTransformer`` with our shape (same patch size, width, depth, heads, ...)."""
    from timm.models.vision_transformer import VisionTransformer as TimmViT

    return TimmViT(img_size=cfg.img_size, patch_size=cfg.patch_size, in_chans=cfg.in_chans,
                   num_classes=cfg.num_classes, global_pool="token", embed_dim=cfg.dim, depth=cfg.depth,
                   num_heads=cfg.heads, mlp_ratio=cfg.mlp_ratio, qkv_bias=cfg.qkv_bias, qk_norm=cfg.qk_norm,
                   init_values=timm_init_values(cfg), class_token=True, drop_path_rate=cfg.drop_path)


def _convert(state: dict[str, torch.Tensor], source: str, target: str) -> dict[str, torch.Tensor]:
    out = {}
    for key, value in state.items():
        if not any(p.fullmatch(key) for p in _SHARED_KEYS):
            raise KeyError(f"{source} key '{key}' has no counterpart in {target}'s VisionTransformer")
        out[key] = value
    return out


def suite_to_timm(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Our state dict -> timm's. Raises ``KeyError`` on a key timm's ViT has no place for."""
    return _convert(state, "suite", "timm")


def timm_to_suite(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """timm's state dict -> ours. Raises ``KeyError`` on a key we have no place for."""
    return _convert(state, "timm", "suite")
