"""A seeded, learnable random dataset: for smoke tests and timing without any files."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from suite.data import seeds
from suite.data.bundle import DataError, DatasetBundle, TensorSplit, channel_stats

if TYPE_CHECKING:
    from suite.config import DataConfig

NOISE_STD = 48.0  # pixel noise around each prototype (0..255 scale): visible, yet separable


def load_synthetic(cfg: DataConfig) -> DatasetBundle:
    """A random prototype per class plus Gaussian noise: a model that fails to fit it is broken, not unlucky."""
    n_cls, ch, size = cfg.synthetic_classes, cfg.synthetic_channels, cfg.synthetic_img_size
    from suite.config import SYNTHETIC_KEYS

    for key in SYNTHETIC_KEYS:
        if getattr(cfg, key) < 1:
            raise DataError(f"data.{key} must be >= 1, got {getattr(cfg, key)}")
    gen = seeds.generator(seeds.SYNTHETIC, cfg.split_seed)
    prototypes = torch.rand(n_cls, ch, size, size, generator=gen) * 255  # (K, C, H, W)

    def sample(n: int) -> TensorSplit:
        y = (torch.arange(n) % n_cls)[torch.randperm(n, generator=gen)]
        noise = torch.randn(n, ch, size, size, generator=gen) * NOISE_STD
        x = (prototypes[y] + noise).round().clamp(0, 255).to(torch.uint8)  # (N, C, H, W)
        return TensorSplit(x, y)

    train, test = sample(cfg.synthetic_train), sample(cfg.synthetic_test)
    mean, std = channel_stats(train.x)
    return DatasetBundle(name="synthetic", num_classes=n_cls, in_chans=ch, img_size=size, train=train, test=test,
                         mean=mean, std=std, stats_from_train=True)
