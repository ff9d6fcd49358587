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


def check_present(cfg: DataConfig) -> None:
    """DataError, naming the fix, when a dataset read from disk (CIFAR, an ImageFolder) is not where the config says;
    its files are not read (a run reads them). The embedded and generated datasets are always there."""
    if cfg.name in ("cifar10", "cifar100"):
        from suite.data.cifar import cifar_folder

        cifar_folder(cfg)
    elif cfg.name == "imagefolder":
        from suite.data.imagefolder import check_layout

        check_layout(cfg)


__all__ = ["DATASETS", "DataError", "DatasetBundle", "PackStream", "TensorSplit", "TrainStream", "check_present",
           "eval_batches", "load_dataset"]
