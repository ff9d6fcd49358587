"""The analytic FLOP count against torch's own counter (torch.utils.flop_counter) on the real model."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from suite.config import ModelConfig
from suite.models import build_model
from suite.models.flops import forward_flops, tokens, train_step_flops


@pytest.mark.parametrize("residual", ["preln", "layerscale", "postln"])
@pytest.mark.parametrize("shape", [dict(dim=32, heads=2, depth=3, img_size=28, patch_size=7, in_chans=1),
                                   dict(dim=64, heads=4, depth=2, img_size=32, patch_size=4, in_chans=3)])
def test_matches_torch_flop_counter(residual, shape):
    cfg = ModelConfig(residual=residual, num_classes=10, **shape)
    model = build_model(cfg)
    x = torch.randn(4, cfg.in_chans, cfg.img_size, cfg.img_size)
    # The math backend spells attention as matmuls, which the counter sees (the fused CPU kernel it misses).
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fwd:
        logits = model(x)
    assert forward_flops(cfg, 4) == pytest.approx(fwd.get_total_flops(), rel=0.02)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as step:
        F.cross_entropy(model(x), torch.zeros(4, dtype=torch.long)).backward()
    # The backward skips the input gradient of the first layer (the images need none): just under 3x.
    assert train_step_flops(cfg, 4) == pytest.approx(step.get_total_flops(), rel=0.05)
    assert logits.shape == (4, 10)


def test_grows_linearly_with_depth_and_needs_an_image_size():
    cfg = ModelConfig(dim=32, heads=2, img_size=28, patch_size=7, in_chans=1, num_classes=10)
    one, two = (forward_flops(dataclasses.replace(cfg, depth=d), 8) for d in (12, 24))
    assert tokens(cfg) == 17 and 1.9 < two / one < 2.0
    with pytest.raises(ValueError, match="img_size"):
        tokens(ModelConfig())
