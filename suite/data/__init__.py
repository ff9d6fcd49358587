"""The data layer: dataset registry, loading, and the step-indexed training stream.

Every loader (registered in :data:`suite.registry.DATASETS`) maps a :class:`~suite.config.DataConfig` to a
:class:`DatasetBundle` of uint8 images; :class:`TrainStream` (one run), :class:`PackStream` (N runs stacked) and
:func:`eval_batches` turn it into normalised float batches on the device. Files: ``bundle.py`` (types, errors),
``embedded.py`` (mnist5k, digits), ``cifar.py``, ``imagefolder.py``, ``split.py`` (test and validation splits),
``synthetic.py``, ``augment.py``, ``stream.py``, ``seeds.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from suite.data.bundle import DataError, DatasetBundle, TensorSplit
from suite.data.split import carve_validation
from suite.data.stream import PackStream, TrainStream, eval_batches
from suite.registry import DATASETS

if TYPE_CHECKING:
    from suite.config import DataConfig


def load_dataset(cfg: DataConfig) -> DatasetBundle:
    """Load dataset ``cfg.name`` with ``cfg.val_fraction`` of its training split held out as ``val``. Raises
    :class:`DataError` for an unknown name or missing / malformed files."""
    if cfg.name not in DATASETS:
        raise DataError(DATASETS.unknown(cfg.name))
    return carve_validation(DATASETS.get(cfg.name)(cfg), cfg.val_fraction, cfg.split_seed)


__all__ = ["DATASETS", "DataError", "DatasetBundle", "PackStream", "TensorSplit", "TrainStream", "eval_batches", "load_dataset"]
