"""CIFAR-10 / CIFAR-100 from the python pickles, through torchvision, never downloaded."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torchvision.datasets import CIFAR10, CIFAR100
from torchvision.datasets.vision import VisionDataset

from suite.data.bundle import ENV_DATA_DIR, DataError, DatasetBundle, TensorSplit, data_root, one_line

if TYPE_CHECKING:
    from suite.config import DataConfig

# Standard per-channel statistics of the CIFAR training sets (0..1 scale).
CIFAR10_MEAN, CIFAR10_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
CIFAR100_MEAN, CIFAR100_STD = (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)


# Every global a CIFAR pickle names: numpy's array and dtype reconstructors (numpy 1 and 2 spell
# the module differently; protocol 5 uses _frombuffer) and `_codecs.encode`, which protocol 2
# pickles from Python 3 use for bytes. Dicts, lists, str, bytes and ints are opcodes, not globals.
ALLOWED = frozenset({
    ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
})


class _CifarUnpickler(pickle.Unpickler):
    """An unpickler that builds only what CIFAR files contain: a data folder may come from anywhere,
    and a plain ``pickle.load`` runs whatever code a planted file names."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in ALLOWED:
            raise pickle.UnpicklingError(f"refused to load {module}.{name} (a CIFAR file holds only "
                                         f"dicts, lists, bytes, str and numpy arrays)")
        return super().find_class(module, name)


def _unpickle(path: Path) -> dict[str, Any]:
    """Read one CIFAR pickle, with str keys whatever the writer used.

    The official files are Python 2 pickles (str keys under ``encoding="latin1"``); files written
    by Python 3 in the format documented on the CIFAR page have bytes keys (``b"data"``).

    Raises:
        DataError: the file is damaged, not a dict, or names anything but numpy arrays (never run).
    """
    try:
        with open(path, "rb") as f:
            entry = _CifarUnpickler(f, encoding="latin1").load()
        if not isinstance(entry, dict):
            raise pickle.UnpicklingError(f"expected a dict, got a {type(entry).__name__}")
    except Exception as err:  # truncated, foreign or planted file: say which one, in one line
        raise DataError(f"cannot read CIFAR file {path}: {one_line(err)}") from None
    return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in entry.items()}


class _PresenceCheckMixin:
    """torchvision's CIFAR classes, checking that the files exist instead of their md5 sums.

    Why: the md5 check rejects every file but the official ones, so a user cannot cut CIFAR down
    to a quick subset and the tests cannot load tiny files written in the real format. Loading is
    re-done here (same attributes as torchvision: ``data`` (N, 32, 32, 3) uint8 HWC, ``targets``,
    ``classes``) because torchvision expects str keys, which only Python 2 pickles give.
    """

    base_folder: str
    train_list: list[list[str]]
    test_list: list[list[str]]
    meta: dict[str, str]

    def __init__(self, root: str | Path, train: bool = True) -> None:
        VisionDataset.__init__(self, root)  # type: ignore[arg-type]
        self.train = train
        folder = Path(self.root) / self.base_folder
        files = self.train_list if train else self.test_list
        entries = [_unpickle(folder / name) for name, _md5 in files]
        data = np.concatenate([np.asarray(e["data"], dtype=np.uint8) for e in entries])
        self.data = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)  # rows are R, G, B planes
        label_key = "labels" if "labels" in entries[0] else "fine_labels"
        self.targets = [int(t) for e in entries for t in e[label_key]]
        self._load_meta()

    def _check_integrity(self) -> bool:
        return not self.missing_files(Path(self.root))

    def _load_meta(self) -> None:
        meta = _unpickle(Path(self.root) / self.base_folder / self.meta["filename"])
        self.classes = [c.decode() if isinstance(c, bytes) else c for c in meta[self.meta["key"]]]
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

    @classmethod
    def missing_files(cls, root: Path) -> list[str]:
        names = [n for n, _ in cls.train_list + cls.test_list] + [cls.meta["filename"]]
        return [n for n in names if not (root / cls.base_folder / n).is_file()]


class PresenceCIFAR10(_PresenceCheckMixin, CIFAR10):
    """CIFAR-10 checked for presence only (see :class:`_PresenceCheckMixin`)."""


class PresenceCIFAR100(_PresenceCheckMixin, CIFAR100):
    """CIFAR-100 checked for presence only (see :class:`_PresenceCheckMixin`)."""


def _load(cls: type, name: str, title: str, expected: str, num_classes: int,
          mean: tuple[float, ...], std: tuple[float, ...], cfg: DataConfig) -> DatasetBundle:
    tarball = cls.filename
    root = data_root(cfg, title, f"{cls.base_folder}/ (extracted from {tarball})")
    missing = cls.missing_files(root)
    if missing:
        folder = root / cls.base_folder
        raise DataError(
            f"{title} not found under {root}: extract {tarball} there so that {folder}/{expected} "
            f"exist (missing: {', '.join(missing)}; set data.root or {ENV_DATA_DIR})"
        )

    def split(train: bool) -> TensorSplit:
        ds = cls(root, train=train)
        x = torch.from_numpy(np.ascontiguousarray(ds.data)).permute(0, 3, 1, 2).contiguous()
        y = torch.tensor(ds.targets, dtype=torch.int64)
        if len(y) and (y.min() < 0 or y.max() >= num_classes):
            raise DataError(f"{title} labels under {root} must be in 0..{num_classes - 1}, "
                            f"got {int(y.min())}..{int(y.max())}")
        return TensorSplit(x, y)  # x: (N, 3, 32, 32) uint8

    return DatasetBundle(name=name, num_classes=num_classes, in_chans=3, img_size=32,
                         train=split(True), test=split(False), mean=mean, std=std)


def load_cifar10(cfg: DataConfig) -> DatasetBundle:
    """CIFAR-10 from ``<root>/cifar-10-batches-py/`` (root = data.root or $SUITE_DATA_DIR)."""
    return _load(PresenceCIFAR10, "cifar10", "CIFAR-10",
                 "data_batch_1..5, test_batch and batches.meta", 10, CIFAR10_MEAN, CIFAR10_STD, cfg)


def load_cifar100(cfg: DataConfig) -> DatasetBundle:
    """CIFAR-100 (fine labels) from ``<root>/cifar-100-python/``."""
    return _load(PresenceCIFAR100, "cifar100", "CIFAR-100", "train, test and meta", 100,
                 CIFAR100_MEAN, CIFAR100_STD, cfg)
