"""Any ``root/train/<class>/*`` + ``root/val/<class>/*`` image tree (ImageNet layout)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from PIL import Image
from torchvision import transforms
from torchvision.datasets import ImageFolder

from suite.data.bundle import ENV_DATA_DIR, DataError, DatasetBundle, data_root, one_line, readable

if TYPE_CHECKING:
    from suite.config import DataConfig

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
DEFAULT_IMG_SIZE = 224
LAYOUT = "train/<class>/*.jpg|png and val/<class>/*.jpg|png"


@readable()
def check_layout(cfg: DataConfig) -> Path:
    """The data root, ``train/`` and ``val/`` holding the same class folders, two or more (images unscanned: slow), or
    DataError."""
    root = data_root(cfg, "imagefolder", LAYOUT)
    classes = {}
    for split in ("train", "val"):
        if not (root / split).is_dir():
            raise DataError(f"imagefolder: {root / split} not found: put images at {root}/train/<class>/* and "
                            f"{root}/val/<class>/* (set data.root or {ENV_DATA_DIR})")
        classes[split] = sorted(p.name for p in (root / split).iterdir() if p.is_dir())
        if not classes[split]:
            raise DataError(f"imagefolder under {root}: {split}/ has no class folders (expected {LAYOUT})")
    _same_classes(root, classes["train"], classes["val"])
    if len(classes["train"]) < 2:
        raise DataError(f"imagefolder under {root}: one class folder ({classes['train'][0]}); a classifier needs two "
                        f"or more: add class folders to train/ and val/")
    return root


def open_image(path: str) -> Image.Image:
    """The image at ``path`` as RGB; DataError naming it when it cannot be decoded (in a DataLoader worker too)."""
    try:
        with open(path, "rb") as f:
            return Image.open(f).convert("RGB")
    except Exception as err:  # truncated, not an image, a decompression bomb: which file, in one line
        raise DataError(f"{path}: not a readable image ({one_line(err)}); remove or replace it") from None


def _listed_once(root: Path, samples: list[tuple[str, int]]) -> None:
    """DataError when one file is listed twice (a link to it, or a link loop, which ImageFolder follows): its copies
    could land in both training and validation, or in test."""
    seen: dict[str, str] = {}
    folders: dict[str, str] = {}
    for path, _ in samples:
        folder, name = os.path.split(path)
        real = os.path.join(folders.setdefault(folder, os.path.realpath(folder)), name)
        real = os.path.realpath(real) if os.path.islink(real) else real
        if real in seen:
            raise DataError(f"imagefolder under {root}: {path} and {seen[real]} are one file (through a link); "
                            f"its copies would be split between training, validation and test: remove the link")
        seen[real] = path


def _same_classes(root: Path, train: list[str], val: list[str]) -> None:
    if train != val:
        only_train, only_val = sorted(set(train) - set(val)), sorted(set(val) - set(train))
        raise DataError(f"imagefolder under {root}: train/ and val/ must hold the same class folders "
                        f"(only in train: {only_train}; only in val: {only_val})")


def load_imagefolder(cfg: DataConfig) -> DatasetBundle:
    """Both splits as lazy ``ImageFolder`` datasets of uint8 RGB images, resized and centre-cropped to ``img_size``."""
    root = check_layout(cfg)
    size = cfg.img_size or DEFAULT_IMG_SIZE
    # PILToTensor keeps uint8 (C, H, W); ToTensor would return float and double the bytes moved.
    tf = transforms.Compose([transforms.Resize(size), transforms.CenterCrop(size), transforms.PILToTensor()])
    try:
        with readable():
            train = ImageFolder(str(root / "train"), transform=tf, loader=open_image)
            val = ImageFolder(str(root / "val"), transform=tf, loader=open_image)
    except FileNotFoundError as err:  # no class folders, or a class folder without images
        raise DataError(f"imagefolder under {root}: {one_line(err)} (expected {LAYOUT})") from None
    _same_classes(root, train.classes, val.classes)
    _listed_once(root, train.samples + val.samples)
    return DatasetBundle(name="imagefolder", num_classes=len(train.classes), in_chans=3, img_size=size,
                         train=train, test=val, mean=IMAGENET_MEAN, std=IMAGENET_STD)
