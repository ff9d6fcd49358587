"""The data layer: loaders (``embedded.py``, ``cifar.py``, ``imagefolder.py``, ``synthetic.py``) give a
:class:`DatasetBundle` of uint8 images (``bundle.py``), split by ``split.py``; ``stream.py`` makes normalised device
batches, augmented by ``augment.py``, drawn from ``seeds.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from suite.data.bundle import DataError, DatasetBundle, TensorSplit
from suite.data.split import carve_validation
from suite.data.stream import PackStream, TrainStream, eval_batches
from suite.registry import DATASETS

if TYPE_CHECKING:
    from suite.config import DataConfig


def load_dataset(cfg: DataConfig) -> DatasetBundle:
    """Load dataset ``cfg.name`` with ``cfg.val_fraction`` of its training split held out as ``val``."""
    if cfg.name not in DATASETS:
        raise DataError(DATASETS.unknown(cfg.name))
    return carve_validation(DATASETS.get(cfg.name)(cfg), cfg.val_fraction, cfg.split_seed)


__all__ = ["DATASETS", "DataError", "DatasetBundle", "PackStream", "TensorSplit", "TrainStream", "eval_batches", "load_dataset"]
