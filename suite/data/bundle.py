"""What every dataset loader returns, and the helpers the loaders share."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Union

import torch
from torch import Tensor
from torch.utils.data import Dataset

if TYPE_CHECKING:
    from suite.config import DataConfig

ENV_DATA_DIR = "SUITE_DATA_DIR"


class DataError(ValueError):
    """A user error about data, in one line: what is missing, where to put which files, which key to set."""


@dataclass(eq=False)  # == on tensors is elementwise; identity is the only sensible equality
class TensorSplit(Dataset):
    """A split in memory: (N, C, H, W) uint8 images ``x``, (N,) int64 labels ``y``; a ``Dataset`` for the DataLoader."""

    x: Tensor
    y: Tensor

    def __post_init__(self) -> None:
        # Fail here, at load time, rather than as a dtype error deep inside a training step.
        if self.x.dtype != torch.uint8 or self.x.dim() != 4:
            raise TypeError(f"x must be uint8 (N, C, H, W), got {self.x.dtype} {tuple(self.x.shape)}")
        if self.y.dtype != torch.int64 or self.y.shape != self.x.shape[:1]:
            raise TypeError(f"y must be int64 (N,), got {self.y.dtype} {tuple(self.y.shape)}")

    def __len__(self) -> int:
        return self.x.shape[0]

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        return self.x[i], self.y[i]


# A split is either in memory or a Dataset yielding (uint8 (C, H, W) tensor, int label).
Split = Union[TensorSplit, Dataset]


@dataclass
class DatasetBundle:
    """A loaded dataset: its uint8 splits, and per-channel ``mean`` / ``std`` (0..1 scale) applied on the device.
    ``stats_from_train``: measured on the training split (again once ``val`` is carved out of it)."""

    name: str
    num_classes: int
    in_chans: int
    img_size: int
    train: Split
    test: Split
    mean: tuple[float, ...]
    std: tuple[float, ...]
    val: Split | None = None
    stats_from_train: bool = False
    # Device copies of in-memory splits by (split, device), so an evaluation does not upload the split again.
    device_cache: dict[tuple[str, str], TensorSplit] = field(default_factory=dict, init=False, repr=False,
                                                             compare=False)

    @property
    def train_size(self) -> int:
        return len(self.train)

    @property
    def test_size(self) -> int:
        return len(self.test)

    @property
    def val_size(self) -> int:
        return 0 if self.val is None else len(self.val)

    def splits(self) -> dict[str, Split]:
        """The splits that exist, by name: ``train``, ``val`` (when carved) and ``test``."""
        named = {"train": self.train, "val": self.val, "test": self.test}
        return {k: v for k, v in named.items() if v is not None}

    def in_memory_bytes(self) -> int | None:
        """Bytes of all splits' uint8 images, or None when a split is not held in memory."""
        parts = list(self.splits().values())
        if all(isinstance(p, TensorSplit) for p in parts):
            return sum(p.x.nbytes for p in parts)
        return None


def channel_stats(x: Tensor) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel mean and population std on the 0..1 scale of (N, C, H, W) uint8 images (the train split's)."""
    xf = x.to(torch.float64) / 255  # float64: sums over millions of pixels stay exact enough
    mean = xf.mean(dim=(0, 2, 3))
    std = xf.std(dim=(0, 2, 3), unbiased=False).clamp_min(1e-8)  # constant channel: no div by 0
    return tuple(mean.tolist()), tuple(std.tolist())


def data_root(cfg: DataConfig, what: str, layout: str) -> Path:
    """``cfg.root``, else ``$SUITE_DATA_DIR``, else a :class:`DataError` saying where to put ``what`` (``layout``)."""
    root = cfg.root or os.environ.get(ENV_DATA_DIR)
    if not root:
        raise DataError(f"{what} needs a data folder: set data.root (or the {ENV_DATA_DIR} environment "
                        f"variable) to a folder holding {layout}")
    return Path(root).expanduser()


@contextlib.contextmanager
def readable() -> Iterator[None]:
    """A folder or file of the dataset this user may not read: DataError naming it, not a traceback."""
    try:
        yield
    except PermissionError as err:
        raise DataError(f"{err.filename}: permission denied; make it readable (and its folders searchable) by this "
                        f"user, or set data.root elsewhere") from None


def one_line(err: Any) -> str:
    """First line of an exception's message, so wrapped errors keep DataError one line long."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
