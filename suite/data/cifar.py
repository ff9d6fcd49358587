"""CIFAR-10 / CIFAR-100 from the python pickles (the files torchvision downloads), never downloaded."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from suite.data.bundle import ENV_DATA_DIR, DataError, DatasetBundle, TensorSplit, data_root, one_line, readable

if TYPE_CHECKING:
    from suite.config import DataConfig

# Every global a CIFAR pickle names: numpy's array and dtype reconstructors (both numpy spellings; _frombuffer for
# protocol 5) and `_codecs.encode` (bytes in protocol 2). Dicts, lists, str, bytes and ints are opcodes, not globals.
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
    """One CIFAR pickle with str keys (Python 3 writers use bytes keys); DataError if damaged, foreign or planted."""
    try:
        with open(path, "rb") as f:
            entry = _CifarUnpickler(f, encoding="latin1").load()
        if not isinstance(entry, dict):
            raise pickle.UnpicklingError(f"expected a dict, got a {type(entry).__name__}")
    except Exception as err:  # truncated, foreign or planted file: say which one, in one line
        raise DataError(f"cannot read CIFAR file {path}: {one_line(err)}; extract the dataset's tarball there "
                        f"again") from None
    return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in entry.items()}


# name -> (title, folder, tarball, train files, test files and meta, label key, classes, training-set mean and std on
# the 0..1 scale). Files are checked for presence, not md5 sums, so a cut-down subset loads too (the tests').
CIFAR = {
    "cifar10": ("CIFAR-10", "cifar-10-batches-py", "cifar-10-python.tar.gz",
                [f"data_batch_{i}" for i in range(1, 6)], ["test_batch", "batches.meta"], "labels", 10,
                (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": ("CIFAR-100", "cifar-100-python", "cifar-100-python.tar.gz", ["train"], ["test", "meta"],
                 "fine_labels", 100, (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
}


@readable()
def cifar_folder(cfg: DataConfig) -> Path:
    """The folder of CIFAR-10's or CIFAR-100's pickles, every one present (unread), or DataError naming the fix."""
    title, base, tarball, train_files, test_files = CIFAR[cfg.name][:5]
    root = data_root(cfg, title, f"{base}/ (extracted from {tarball})")
    folder = root / base
    missing = [n for n in train_files + test_files if not (folder / n).is_file()]
    if missing:
        raise DataError(f"{title} not found under {root}: extract {tarball} there, into {folder}/ (missing: "
                        f"{', '.join(missing)}; set data.root or {ENV_DATA_DIR})")
    return folder


def load_cifar(cfg: DataConfig) -> DatasetBundle:
    """CIFAR-10 or CIFAR-100 (fine labels) from ``<root>/cifar-10-batches-py/`` or ``<root>/cifar-100-python/``."""
    title, base, tarball, train_files, test_files, label_key, num_classes, mean, std = CIFAR[cfg.name]
    folder = cifar_folder(cfg)

    def batch(path: Path) -> tuple[np.ndarray, list[int]]:
        entry = _unpickle(path)
        bad = f"{path}: not a {title} batch"
        if "data" not in entry or label_key not in entry:
            raise DataError(f"{bad} (no '{'data' if 'data' not in entry else label_key}' entry); extract {tarball} "
                            f"again")
        try:
            data, labels = np.asarray(entry["data"], dtype=np.uint8), [int(t) for t in entry[label_key]]
        except (TypeError, ValueError, OverflowError) as err:
            raise DataError(f"{bad} ({one_line(err)}); extract {tarball} again") from None
        if data.size != len(labels) * 3 * 32 * 32:
            raise DataError(f"{bad}: {data.size} pixel values for {len(labels)} labels, where each image has 3,072 "
                            f"(3 x 32 x 32); extract {tarball} again")
        return data, labels

    def split(names: list[str]) -> TensorSplit:
        entries = [batch(folder / n) for n in names]
        data = np.concatenate([d for d, _ in entries])
        x = torch.from_numpy(data.reshape(-1, 3, 32, 32).copy())  # rows are R, G, B planes: (N, 3, 32, 32)
        y = torch.tensor([t for _, labels in entries for t in labels], dtype=torch.int64)
        if len(y) and (y.min() < 0 or y.max() >= num_classes):
            raise DataError(f"{title} labels under {folder.parent} must be in 0..{num_classes - 1}, "
                            f"got {int(y.min())}..{int(y.max())}")
        return TensorSplit(x, y)

    return DatasetBundle(name=cfg.name, num_classes=num_classes, in_chans=3, img_size=32,
                         train=split(train_files), test=split(test_files[:1]), mean=mean, std=std)
