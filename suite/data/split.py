"""Stratified test and validation splits, fixed by ``data.split_seed`` alone, so every run of a sweep sees the same."""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor
from torch.utils.data import Subset

from suite.data import seeds
from suite.data.bundle import DataError, DatasetBundle, TensorSplit, channel_stats


def stratified_split(y: Tensor, fraction: float, split_seed: int, tag: int = seeds.SPLIT) -> tuple[Tensor, Tensor]:
    """(kept, held out): sorted indices partitioning ``range(N)``; per class ``round(fraction * n_c)`` held out, at
    least 1 and leaving 1 (a one-sample class stays whole)."""
    gen = seeds.generator(tag, split_seed)
    kept, held = [], []
    for c in torch.unique(y).tolist():
        idx = torch.nonzero(y == c).flatten()
        n_held = int(round(fraction * len(idx)))
        n_held = max(1, min(n_held, len(idx) - 1)) if len(idx) > 1 else 0
        idx = idx[torch.randperm(len(idx), generator=gen)]
        held.append(idx[:n_held])
        kept.append(idx[n_held:])
    empty = torch.zeros(0, dtype=torch.int64)
    return torch.cat(kept or [empty]).sort().values, torch.cat(held or [empty]).sort().values


def _labels(split: object, name: str) -> Tensor:
    """The (N,) labels of a training split, in memory or a Dataset with ``targets`` (ImageFolder)."""
    if isinstance(split, TensorSplit):
        return split.y
    targets = getattr(split, "targets", None)
    if targets is None:
        raise DataError(f"{name}: cannot carve a validation split from a dataset without labels "
                        f"(.targets); set data.val_fraction: 0")
    return torch.as_tensor(targets, dtype=torch.int64)


def carve_validation(bundle: DatasetBundle, fraction: float, split_seed: int) -> DatasetBundle:
    """A new bundle with a stratified ``fraction`` (0: none) of the training split moved into ``val``, its statistics
    measured again without it. DataError when the training split cannot hold out one image per class."""
    if fraction <= 0:
        return bundle
    y = _labels(bundle.train, bundle.name)
    kept, held = stratified_split(y, fraction, split_seed, tag=seeds.VALIDATION)
    if len(held) == 0 or len(kept) == 0:
        raise DataError(f"{bundle.name}: {len(y)} training images are too few for a validation split "
                        f"(data.val_fraction={fraction}); add data or set data.val_fraction: 0")
    if isinstance(bundle.train, TensorSplit):
        train = TensorSplit(bundle.train.x[kept].contiguous(), bundle.train.y[kept].contiguous())
        val = TensorSplit(bundle.train.x[held].contiguous(), bundle.train.y[held].contiguous())
    else:
        train, val = Subset(bundle.train, kept.tolist()), Subset(bundle.train, held.tolist())
    mean, std = bundle.mean, bundle.std
    if bundle.stats_from_train and isinstance(train, TensorSplit):
        mean, std = channel_stats(train.x)
    return dataclasses.replace(bundle, train=train, val=val, mean=mean, std=std)
