"""Any ``root/train/<class>/*`` + ``root/val/<class>/*`` image tree (ImageNet layout)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
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
        for p in (root / split).iterdir():
            if p.is_symlink() and not p.exists():  # a broken link or a link loop: is_dir() says False, and silently
                raise DataError(f"imagefolder under {root}: {p} is a link to nothing (or a loop); remove the link")
        classes[split] = sorted(p.name for p in (root / split).iterdir() if p.is_dir() and not p.name.startswith("."))
        if not classes[split]:
            raise DataError(f"imagefolder under {root}: {split}/ has no class folders (expected {LAYOUT})")
    _same_classes(root, classes["train"], classes["val"])
    if len(classes["train"]) < 2:
        raise DataError(f"imagefolder under {root}: one class folder ({classes['train'][0]}); a classifier needs two "
                        f"or more: add class folders to train/ and val/")
    return root


def open_image(path: str) -> Image.Image:
    """The image at ``path`` as RGB; DataError naming it when it cannot be decoded (in a DataLoader worker too).
    16-bit grayscale is scaled to 8 bits; 32-bit integer and float images are refused: PIL clips them to 0..255
    (a 16-bit ramp came out 99.6% white), and their range is not known."""
    try:
        with open(path, "rb") as f:
            image = Image.open(f)
            image.load()
    except Exception as err:  # truncated, not an image, a decompression bomb: which file, in one line
        raise DataError(f"{path}: not a readable image ({one_line(err)}); remove or replace it") from None
    if image.mode.startswith("I;16"):
        image = Image.fromarray((np.asarray(image, dtype=np.uint16) >> 8).astype(np.uint8), "L")
    elif image.mode in ("I", "F"):
        raise DataError(f"{path}: a {'32-bit integer' if image.mode == 'I' else 'floating-point'} image (PIL mode "
                        f"{image.mode}), whose range is unknown; convert it to 8 or 16 bits per channel")
    return image.convert("RGB")


def _visible(split: Path):
    """ImageFolder's file check: an image file, none of whose parts below ``split`` is hidden (.thumbs/, ._x.png)."""
    from torchvision.datasets.folder import IMG_EXTENSIONS, has_file_allowed_extension

    def valid(path: str) -> bool:
        parts = Path(path).relative_to(split).parts
        return has_file_allowed_extension(path, IMG_EXTENSIONS) and not any(p.startswith(".") for p in parts)
    return valid


class _Visible(ImageFolder):
    """ImageFolder without hidden class folders (``.ipynb_checkpoints``, ``.thumbs``) or hidden files."""

    def find_classes(self, directory: str) -> tuple[list[str], dict[str, int]]:
        classes, _ = super().find_classes(directory)
        classes = [c for c in classes if not c.startswith(".")]
        if not classes:
            raise FileNotFoundError(f"Couldn't find any visible class folder in {directory}.")
        return classes, {c: i for i, c in enumerate(classes)}


def _listed_once(root: Path, samples: list[tuple[str, int]]) -> None:
    """DataError when one file is listed twice (a symbolic or hard link to it, or a link loop, which ImageFolder
    follows): its copies could land in both training and validation, or in test. One stat per file."""
    seen: dict[tuple[int, int], str] = {}
    for path, _ in samples:
        try:
            st = os.stat(path)
        except OSError:  # a broken link: the loader names it when it reads it
            continue
        real = (st.st_dev, st.st_ino)
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
            train = _Visible(str(root / "train"), transform=tf, loader=open_image, is_valid_file=_visible(root / "train"))
            val = _Visible(str(root / "val"), transform=tf, loader=open_image, is_valid_file=_visible(root / "val"))
    except FileNotFoundError as err:  # no class folders, or a class folder without images
        raise DataError(f"imagefolder under {root}: {one_line(err)} (expected {LAYOUT})") from None
    except OSError as err:  # a link loop deeper down (too many levels of symbolic links)
        raise DataError(f"imagefolder under {root}: {err.filename or ''}: {err.strerror or one_line(err)}; remove "
                        f"the link") from None
    _same_classes(root, train.classes, val.classes)
    _listed_once(root, train.samples + val.samples)
    return DatasetBundle(name="imagefolder", num_classes=len(train.classes), in_chans=3, img_size=size,
                         train=train, test=val, mean=IMAGENET_MEAN, std=IMAGENET_STD)
