"""Any ``root/train/<class>/*`` + ``root/val/<class>/*`` image tree (ImageNet layout)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from torchvision import transforms
from torchvision.datasets import ImageFolder

from suite.data.bundle import ENV_DATA_DIR, DataError, DatasetBundle, data_root, one_line

if TYPE_CHECKING:
    from suite.config import DataConfig

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
DEFAULT_IMG_SIZE = 224
LAYOUT = "train/<class>/*.jpg|png and val/<class>/*.jpg|png"


def check_layout(cfg: DataConfig) -> Path:
    """The data root, ``train/`` and ``val/`` holding the same class folders (images unscanned: slow), or DataError."""
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
    return root


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
        train = ImageFolder(str(root / "train"), transform=tf)
        val = ImageFolder(str(root / "val"), transform=tf)
    except FileNotFoundError as err:  # no class folders, or a class folder without images
        raise DataError(f"imagefolder under {root}: {one_line(err)} (expected {LAYOUT})") from None
    _same_classes(root, train.classes, val.classes)
    return DatasetBundle(name="imagefolder", num_classes=len(train.classes), in_chans=3, img_size=size,
                         train=train, test=val, mean=IMAGENET_MEAN, std=IMAGENET_STD)
