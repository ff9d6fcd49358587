"""Typed run configuration (:class:`RunConfig`): every default in one place. YAML files, then ``key=value`` overrides,
only override them; an unknown or mistyped key is a :class:`ConfigError` naming the file, the dotted key and a fix."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

import yaml

from suite.files import read_text
from suite.registry import DATASETS, SCHEMES, did_you_mean


class ConfigError(ValueError):
    """A user error in a config: names the source, the dotted key and the fix."""


@dataclass
class LayerScaleConfig:
    """Options of the ``layerscale`` scheme (refused away from their defaults on another scheme: SCHEME_OPTIONS).
    ``init``: a float (0.0 is a real init), ``"cait"`` (0.1 to depth 18, 1e-5 to 24, 1e-6 deeper), ``"rsqrt_depth"``."""

    placement: Literal["attn", "mlp", "both"] = "both"
    granularity: Literal["channel", "head", "scalar"] = "channel"
    init: float | Literal["cait", "rsqrt_depth"] = "cait"
    learnable: bool = True
    # Multiply in the branch output's dtype (γ's master copy stays fp32); a no-op in fp32 (docs/benchmark.md).
    cast: bool = False


@dataclass
class ModelConfig:
    """Shape and residual scheme of the ViT; ``img_size``, ``in_chans``, ``num_classes`` None: from the dataset."""

    backend: Literal["suite", "timm"] = "suite"
    residual: str = "preln"  # see suite.registry.SCHEMES (`suite schemes`)
    img_size: int | None = None
    patch_size: int = 7
    in_chans: int | None = None
    num_classes: int | None = None
    dim: int = 64
    depth: int = 6
    heads: int = 4
    mlp_ratio: float = 4.0
    qkv_bias: bool = True
    qk_norm: bool = False  # LayerNorm on each head's queries and keys (ViT-22B; timm's qk_norm)
    # depth_scaled scheme: branches x (depth / base_depth)^-depth_alpha (depth-mup, completep fix it at 0.5, 1)
    depth_alpha: float = 0.5
    base_depth: int = 12  # the depth a learning rate is tuned at (depth-scaled schemes and layerscale-depth only)
    drop_path: float = 0.0
    drop_path_schedule: Literal["linear", "uniform"] = "linear"
    # Linear weights: timm's truncated normal (std 0.02) or Xavier uniform (docs/training.md)
    weight_init: Literal["timm", "xavier"] = "timm"
    layerscale: LayerScaleConfig = field(default_factory=LayerScaleConfig)


@dataclass
class DataConfig:
    """Which dataset and how to split and augment it (see the suite/data/ package)."""

    name: str = "mnist5k"  # see suite.registry.DATASETS (`suite schemes`)
    root: str | None = None  # CIFAR / ImageFolder root; falls back to $SUITE_DATA_DIR
    test_fraction: float = 0.2  # embedded datasets: stratified held-out test share
    val_fraction: float = 0.1  # stratified share of the training split held out for selection; 0 = none
    split_seed: int = 0  # test and validation splits are fixed by this, not by the run seed
    augment: bool = False  # random crop (padding 4) and horizontal flip; meant for CIFAR
    img_size: int | None = None  # ImageFolder: resize to this (default 224)
    synthetic_train: int = 512
    synthetic_test: int = 128
    synthetic_img_size: int = 32
    synthetic_channels: int = 3
    synthetic_classes: int = 10
    num_workers: int = 2  # DataLoader workers for datasets too large to hold on the device
    device_max_mb: int = 1024  # datasets up to this size are held as tensors on the device


# The dotted keys of a run's learning rate and depth, spelled once here for every layer above.
LR, DEPTH = "train.lr", "model.depth"
# The model keys a run takes from its dataset where the config leaves them None (engine.loop.fill_model_shape).
DATA_SHAPE_KEYS = ("img_size", "in_chans", "num_classes")


def epoch_steps(train_size: int, batch_size: int) -> int:
    """Steps in one epoch: whole batches only, the last incomplete one dropped (steps have one size); a split under
    one batch gives one step of all of it. The data stream and ``train.epochs`` both count by it."""
    return max(1, train_size // batch_size)


@dataclass
class TrainConfig:
    """Optimisation, divergence rules, logging and timing."""

    steps: int = 300  # total optimizer steps (ignored when epochs is set)
    epochs: float | None = None  # if set, steps = ceil(epochs * (train_size // batch_size)): see total_steps
    batch_size: int = 128
    lr: float = 1e-3  # peak AdamW learning rate
    min_lr: float = 1e-5  # cosine floor
    warmup_steps: int = 20  # linear warmup from 0 to lr
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.05
    decay_1d: bool = False  # weight decay on 1-D params (norms, biases, LayerScale/ReZero scales)
    grad_clip: float | None = None  # max global grad norm; None = off
    label_smoothing: float = 0.0
    # Divergence rules (suite/engine/divergence.py, docs/training.md), each a `diverged_reason`:
    spike_factor: float = 4.0  # spike: loss > spike_factor x the best smoothed loss so far (and > ln C) ...
    spike_after: int = 5  # ... once this many steps have been seen (warm-up included)
    spike_window: int = 20  # ... and still above it after this many steps (0: the first spike ends the run)
    collapse_below: float = 0.8  # collapse: the smoothed loss came down to this x ln C, ...
    collapse_within: float = 0.05  # ... later returned to within this share of ln C ...
    collapse_window: int = 50  # ... and stayed there for this many steps
    scale_max_skips: int = 20  # scale_collapse (fp16): the loss scaler skipped this many steps in a row, ...
    scale_min: float = 1e-4  # ... or its scale fell below this (fairseq's minimum loss scale)
    log_every: int = 10  # metrics.jsonl cadence (with per-block probes)
    diagnostics: bool = True  # instability diagnostics at each log step (docs/training.md); not part of the run id
    eval_every: int = 100  # held-out evaluation cadence: validation every N steps, test at the end (0 = only at the end)
    # fixed: every eval_every steps; log: also at 5, 10, 20, 40, ... below eval_every (docs/training.md)
    eval_schedule: Literal["fixed", "log"] = "fixed"
    timing_warmup_steps: int = 5  # steps excluded from step_time_ms
    checkpoint_every: int = 0  # 0 = no checkpoints; else save every N steps (resumable)
    # auto: bf16 on CUDA from model.dim BF16_MIN_WIDTH, tf32 below, fp32 on CPU (resolve_precision); fp16, tf32: CUDA
    precision: Literal["auto", "fp32", "tf32", "bf16", "fp16"] = "auto"
    # torch.compile each block (regional): false, true (= default) or a mode
    compile: bool | Literal["default", "reduce-overhead", "max-autotune"] = False
    threads: int | None = None  # torch CPU threads; None = leave torch's default
    # CUDA determinism, so a resumed run repeats the same floats; an execution key, not part of the run id
    deterministic: bool = False
    # Experiment trackers fed from metrics.jsonl's records (docs/trackers.md); not part of the run id
    log_to: tuple[Literal["tensorboard", "wandb", "mlflow"], ...] = ()

    def total_steps(self, train_size: int) -> int:
        """``steps``, or ``epochs`` passes over the :func:`epoch_steps` an epoch of the data stream draws, rounded
        up."""
        if self.epochs is None:
            return self.steps
        return max(1, math.ceil(self.epochs * epoch_steps(train_size, self.batch_size)))


@dataclass
class RunConfig:
    """One training run: the unit that the sweep runner schedules and the analysis reads."""

    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    seed: int = 0  # init, data order and augmentation are all derived from this
    device: Literal["auto", "cpu", "cuda"] = "auto"


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is tuple:  # tuple[X, ...] reads "list of X"
        return "list of " + ", ".join(_type_name(a) for a in typing.get_args(tp) if a is not Ellipsis)
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


# The scalar annotations _coerce reads, as its errors name them.
_EXPECTED = {type(None): "null", bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """Check ``value`` against the annotation ``tp``; returns the (lightly converted) value."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        if value in typing.get_args(tp):
            return value
        raise ConfigError(f"{where}: {value!r} is not one of {_type_name(tp)}")
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            with contextlib.suppress(ConfigError):
                return _coerce(value, arg, where)
        raise ConfigError(f"{where}: {value!r} is not a {_type_name(tp)}")
    if origin is tuple and typing.get_args(tp)[-1:] == (Ellipsis,):  # any length
        if isinstance(value, str):  # `log_to: tensorboard` is a list of one
            value = [value]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return tuple(_coerce(v, typing.get_args(tp)[0], where) for v in value)
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise ConfigError(f"{where}: expected a list of {len(args)} values, got {value!r}")
        return tuple(_coerce(v, a, where) for v, a in zip(value, args))
    if tp not in _EXPECTED:
        raise TypeError(f"unsupported annotation {tp!r} at {where}")
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    # YAML 1.1 reads "1e-4" as a string; accept it, but not digit separators (float("1_0") is 10.0).
    if tp is float and isinstance(value, str) and "_" not in value:
        with contextlib.suppress(ValueError):
            return float(value)
    if isinstance(value, tp) and isinstance(value, bool) == (tp is bool):  # a bool is no int here
        return value
    raise ConfigError(f"{where}: expected {_EXPECTED[tp]}, got {value!r}")


def apply_dict(obj: Any, updates: dict[str, Any], source: str, prefix: str = "") -> None:
    """Apply nested overrides onto a config dataclass in place; ConfigError for an unknown key or a wrong type."""
    if not isinstance(updates, dict):
        where = prefix.rstrip(".") or "the top level"
        example = f"e.g. {where}: {{{'depth: 12' if where == 'model' else '...'}}}" if prefix else "e.g. model: {depth: 12}"
        raise ConfigError(f"{source}: {where} must be a mapping of keys to values, got {repr(updates)[:60]}; {example}")
    hints = typing.get_type_hints(type(obj))
    names = [f.name for f in dataclasses.fields(obj)]
    for key, value in updates.items():
        dotted = f"{prefix}{key}"
        if key not in names:
            section = str(key).split(".")[0]
            if "." in str(key) and section in names:  # model.depth: 3 in a file, where sections nest
                raise ConfigError(f"{source}: '{dotted}': a dotted key; in a file write it nested, "
                                  f"{section}: {{{str(key).split('.', 1)[1]}: ...}}")
            if isinstance(obj, RunConfig) and {"variants", "grid"} & set(updates):
                raise ConfigError(f"{source}: an ablation file (it has variants or a grid), not a run config; run it "
                                  f"with `suite run FILE`")
            hint = did_you_mean(dotted, [f"{prefix}{n}" for n in names]) or _nested(obj, key)
            raise ConfigError(f"{source}: unknown key '{dotted}'{hint}; "
                              f"valid keys here: {', '.join(names)}")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            apply_dict(current, value, source, prefix=f"{dotted}.")
        else:
            setattr(obj, key, _coerce(value, hints[key], f"{source}: {dotted}"))


def _nested(obj: Any, key: Any) -> str:
    """`` (did you mean 'model.depth'?)`` for a section's key given without its section (``depth=4``), else ""."""
    inner = [f"{f.name}.{key}" for f in dataclasses.fields(obj) if dataclasses.is_dataclass(getattr(obj, f.name))
             and key in {g.name for g in dataclasses.fields(getattr(obj, f.name))}]
    return f" (did you mean '{inner[0]}'?)" if inner else ""


def nest(dotted: dict[str, Any], source: str = "") -> dict[str, Any]:
    """``{"model.depth": 12}`` -> ``{"model": {"depth": 12}}``; a key and one of its sub-keys both given is refused
    (``model.layerscale={}`` with ``model.layerscale.init=0.1``: else whichever came last would win, silently)."""
    out: dict[str, Any] = {}
    for key in dotted:  # a key whose section is given a value too (model.layerscale={} and model.layerscale.init=...)
        parts = key.split(".")
        given = next((".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in dotted), None)
        if given is not None:
            raise ConfigError(f"{source}{key}: sets a sub-key of {given}, which is given a value too; keep one")
    for key, value in dotted.items():
        parts = key.split(".")
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


class YamlLoader(yaml.SafeLoader):
    """PyYAML's safe loader, reading ``1e-3`` as the number it is (YAML 1.2; 1.1 reads it as text, so a grid value and a
    ``primary.where`` value could match each other as text and no run's 0.001)."""


YamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+.0123456789"))


def _too_many_digits(err: ValueError) -> bool:
    """Python's int() of a number longer than it converts (4,300 digits), as PyYAML meets it."""
    return "digits" in str(err)


def load_yaml(text: str) -> Any:
    """YAML text as data, with :class:`YamlLoader`: every file and ``key=value`` the suite reads goes through it."""
    return yaml.load(text, Loader=YamlLoader)  # noqa: S506 - a SafeLoader


def parse_overrides(items: typing.Sequence[str], source: str = "command line") -> dict[str, Any]:
    """Parse ``["model.depth=12", "train.lr=1e-3"]`` into a nested mapping (values read as YAML)."""
    dotted = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"{source}: override '{item}' must look like key=value (e.g. model.depth=12)")
        key, raw = item.split("=", 1)
        try:
            value = load_yaml(raw)
        except yaml.YAMLError as err:
            problem = getattr(err, "problem", None) or str(err).splitlines()[0]
            raise ConfigError(f"{source}: cannot read the value of '{key}' ({problem}); quote a text value, e.g. "
                              f"{key.strip()}='...'") from None
        except ValueError as err:
            if not _too_many_digits(err):  # a date YAML reads as one (2023-13-45), a tag it cannot build
                raise ConfigError(f"{source}: cannot read the value of '{key}' ({err}); quote a text value, e.g. "
                                  f"{key.strip()}='...'") from None
            raise ConfigError(f"{source}: {key.strip()}: the value has {len(raw.strip())} characters, too long "
                              f"a number; give a value in the key's range") from None
        # model={depth: 3} sets model.depth as model.depth=3 does: each leaf once, else the last would win silently
        leaves = flat_items(value, f"{key.strip()}.") if isinstance(value, dict) and value else [(key.strip(), value)]
        for leaf, v in leaves:
            if leaf in dotted:
                raise ConfigError(f"{source}: {leaf}: given twice; keep one")
            dotted[leaf] = v
    return nest(dotted, f"{source}: ")


def read_yaml(path: str | Path, links: bool = True, duplicates: list[str] | None = None) -> Any:
    """A YAML file's data; a one-line ConfigError for bad YAML, an unsafe, huge or too deep file, an alias bomb, or
    a key given twice in one mapping (YAML keeps the last silently), unless ``duplicates`` collects those lines."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        where = "" if path.is_absolute() else f" (looked in {Path.cwd()})"
        raise ConfigError(f"{path}: file not found{where}")
    try:
        text = read_text(path, MAX_YAML_BYTES, links)  # a regular file, not a FIFO or /dev/zero, and not huge
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text (byte {err.start}); an ablation or config is a YAML text file") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read it ({err.strerror})") from None
    try:
        root = yaml.compose(text, Loader=YamlLoader)
        if expanded_size(root) > MAX_YAML_NODES:
            raise ConfigError(f"{path}: its aliases (*name) expand to more than {MAX_YAML_NODES:,} values "
                              f"(an alias bomb?); write the values out or use fewer aliases")
        twice = duplicate_keys(root, path)
        data = load_yaml(text) or {}
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to read; an ablation or config is a few levels deep") from None
    except ConfigError:  # a ValueError too: said already, not a value YAML cannot read
        raise
    except ValueError as err:
        if not _too_many_digits(err):  # a date YAML reads as one (2023-13-45), a tag it cannot build (!!float 'a')
            raise ConfigError(f"{path}: a value YAML cannot read ({err}); quote it if it is text") from None
        raise ConfigError(f"{path}: a number too long to read ({str(err).split(';')[0]}); write a value in "
                          f"the key's range") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f" line {mark.line + 1}, column {mark.column + 1}:" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"{path}:{line} invalid YAML: {problem}") from None
    if twice and duplicates is None:
        raise ConfigError(twice[0])
    (duplicates if duplicates is not None else []).extend(twice)
    return data


def duplicate_keys(root: yaml.Node | None, path: str | Path) -> list[str]:
    """One line per key given twice in one mapping of ``root`` (PyYAML keeps the last one silently)."""
    out: list[tuple[int, str]] = []  # (line, what): said in the file's order
    seen_nodes: set[int] = set()  # an alias is its anchor's node again: walk it once, not once per use
    stack: list[tuple[yaml.Node, str]] = [(root, "")] if root is not None else []
    while stack:
        node, where = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, value_node in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else "?"
                dotted, line = f"{where}.{key}" if where else str(key), key_node.start_mark.line + 1
                if key in seen:
                    out.append((line, f"{path}: {dotted}: duplicate {'variant name' if where == 'variants' else 'key'} "
                                      f"(lines {seen[key]} and {line}); YAML would keep only the last one, so rename or "
                                      f"remove one"))
                seen.setdefault(key, line)
                stack.append((value_node, dotted))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, f"{where}[{i}]") for i, item in enumerate(node.value))
    return [what for _, what in sorted(out)]


MAX_YAML_NODES = 1_000_000  # values in a YAML file once its aliases are expanded (the default ablation: ~100)
MAX_YAML_BYTES = 1 << 20  # 1 MiB of YAML takes seconds to parse; the largest shipped ablation is a few kB


def expanded_size(root: yaml.Node | None) -> float:
    """Nodes in ``root``, each alias counted as a copy of its anchor (``inf`` for a cycle), in linear time."""
    size: dict[int, float] = {}
    open_: set[int] = set()  # nodes whose children are being counted: meeting one again is a cycle
    stack = [(root, False)] if root is not None else []
    while stack:
        node, closing = stack.pop()
        children = ([n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode)
                    else node.value if isinstance(node, yaml.SequenceNode) else [])
        if closing:
            size[id(node)] = 1 + sum(size[id(c)] for c in children)
            open_.discard(id(node))
        elif id(node) in open_:
            return math.inf
        elif id(node) not in size:
            open_.add(id(node))
            stack.append((node, True))
            stack.extend((c, False) for c in children)
    return size.get(id(root), 0)


def load_config(path: str | Path | None = None, overrides: typing.Sequence[str] = ()) -> RunConfig:
    """Defaults, then the YAML file (if any), then ``key=value`` overrides; validated."""
    cfg = RunConfig()
    if path is not None:
        apply_dict(cfg, read_yaml(path), str(path))
    if overrides:
        apply_dict(cfg, parse_overrides(overrides), "command line")
    source = "command line" if path is None else str(path) + (" with command-line overrides" if overrides else "")
    validate(cfg, source, reference=RunConfig())  # every key the file and the overrides set is the user's
    return cfg


def _finite(v: Any) -> bool:
    return isinstance(v, int) or isinstance(v, float) and math.isfinite(v)  # math.isfinite(10**400) overflows


def _between(lo: float, hi: float) -> Callable[[Any], bool]:
    return lambda v: _finite(v) and lo <= v <= hi


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or check(v)


SEED_MAX = 2**63 - 1  # seeds are stored as int64 (torch generators, numpy, JSON readers)
MAX_PARAMS = 10**10  # about 160 GB of weights, gradients and AdamW state: more than any one device holds

# Ranges a type cannot express: dotted key -> (check, what it must be). Numbers must be finite (YAML reads `.nan`);
# upper bounds are generous but keep a typo from asking for terabytes or years of steps.
RANGES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "model.depth": (lambda v: 1 <= v <= 1000, "an integer from 1 to 1000"),
    "model.dim": (_between(1, 16384), "an integer from 1 to 16384"),
    "model.heads": (_between(1, 1024), "an integer from 1 to 1024"),
    "model.patch_size": (_between(1, 1024), "an integer from 1 to 1024"),
    "model.mlp_ratio": (lambda v: _finite(v) and 0 < v <= 64, "a number in (0, 64]"),
    "model.img_size": (_optional(_between(1, 4096)), "an integer from 1 to 4096, or null"),
    "model.in_chans": (_optional(_between(1, 64)), "an integer from 1 to 64, or null"),
    "model.num_classes": (_optional(_between(2, 100_000)), "an integer from 2 to 100000, or null"),
    "model.drop_path": (lambda v: _finite(v) and 0 <= v < 1, "in [0, 1)"),
    "model.depth_alpha": (lambda v: _finite(v) and 0 <= v <= 1, "in [0, 1] (0.5 Depth-muP, 1 CompleteP)"),
    "model.base_depth": (lambda v: 1 <= v <= 1000, "an integer from 1 to 1000"),
    "model.layerscale.init": (lambda v: v in ("cait", "rsqrt_depth") or (_finite(v) and v >= 0),
                              "a number >= 0, 'cait' or 'rsqrt_depth'"),
    "data.test_fraction": (lambda v: _finite(v) and 0 < v < 1, "in (0, 1)"),
    "data.val_fraction": (lambda v: _finite(v) and 0 <= v < 1, "in [0, 1) (0 = no validation split)"),
    "data.split_seed": (_between(0, SEED_MAX), "an integer from 0 to 2**63 - 1"),
    "data.img_size": (_optional(_between(1, 4096)), "an integer from 1 to 4096, or null"),
    "data.synthetic_train": (_between(1, 10**6), "an integer from 1 to 1000000"),
    "data.synthetic_test": (_between(1, 10**6), "an integer from 1 to 1000000"),
    "data.synthetic_img_size": (_between(1, 1024), "an integer from 1 to 1024"),
    "data.synthetic_channels": (_between(1, 64), "an integer from 1 to 64"),
    "data.synthetic_classes": (_between(2, 100_000), "an integer from 2 to 100000 (one class leaves nothing to learn)"),
    "data.num_workers": (_between(0, 256), "an integer from 0 to 256"),
    "data.device_max_mb": (_between(0, 10**7), "an integer from 0 to 10000000"),
    "train.steps": (_between(1, 10**8), "an integer from 1 to 100000000"),
    "train.epochs": (_optional(lambda v: _finite(v) and 0 < v <= 100_000), "a number in (0, 100000] or null"),
    "train.batch_size": (_between(1, 65536), "an integer from 1 to 65536"),
    "train.lr": (_between(0, math.inf), "a finite number >= 0"),
    "train.min_lr": (_between(0, math.inf), "a finite number >= 0"),
    "train.warmup_steps": (_between(0, math.inf), ">= 0"),
    "train.betas": (lambda v: all(_finite(b) and 0 <= b < 1 for b in v), "two numbers in [0, 1)"),
    "train.log_to": (lambda v: len(set(v)) == len(v), "a list of distinct trackers"),
    "train.weight_decay": (_between(0, math.inf), "a finite number >= 0"),
    "train.grad_clip": (_optional(lambda v: _finite(v) and v > 0), "a number > 0 or null (off)"),
    "train.label_smoothing": (lambda v: _finite(v) and 0 <= v < 1, "in [0, 1)"),
    "train.spike_factor": (lambda v: _finite(v) and v > 1, "a number > 1"),
    "train.spike_after": (_between(0, 10**8), "an integer from 0 to 100000000"),
    "train.spike_window": (_between(0, 10**8), "an integer from 0 to 100000000"),
    "train.collapse_below": (lambda v: _finite(v) and 0 < v < 1, "in (0, 1)"),
    "train.collapse_within": (lambda v: _finite(v) and 0 < v < 1, "in (0, 1)"),
    "train.collapse_window": (_between(1, 10**8), "an integer from 1 to 100000000"),
    "train.scale_max_skips": (_between(1, 10**8), "an integer from 1 to 100000000"),
    "train.scale_min": (lambda v: _finite(v) and v > 0, "a number > 0"),
    "train.log_every": (_between(1, 10**6), "an integer from 1 to 1000000"),
    "train.eval_every": (_between(0, math.inf), ">= 0 (0 = only at the end)"),
    "train.timing_warmup_steps": (_between(0, math.inf), ">= 0"),
    "train.checkpoint_every": (_between(0, math.inf), ">= 0 (0 = no checkpoints)"),
    "train.threads": (_optional(_between(1, 1024)), "an integer from 1 to 1024, or null (torch's default)"),
    "seed": (_between(0, SEED_MAX), "an integer from 0 to 2**63 - 1"),
}


# Known without loading: (image side, channels, classes, images in the largest class); tests/data checks them.
DATA_SHAPES: dict[str, tuple[int, int, int | None, int | None]] = {
    "mnist5k": (28, 1, 10, 500), "digits": (8, 1, 10, 183), "cifar10": (32, 3, 10, None), "cifar100": (32, 3, 100, None),
}
# Images per class known without the files: an embedded dataset's (before the test split), or a (training, test) pair.
CLASS_COUNTS: dict[str, list[int]] = {
    "mnist5k": [500] * 10, "digits": [178, 182, 177, 183, 181, 182, 181, 179, 174, 180],
}
FIXED_SPLITS: dict[str, tuple[list[int], list[int]]] = {
    "cifar10": ([5000] * 10, [1000] * 10), "cifar100": ([500] * 100, [100] * 100),
}
MAX_SYNTHETIC_PIXELS = 2**30  # data.synthetic_*: 1 GiB of uint8 images (generated through float32: 4 GiB)


def data_shape(data: DataConfig) -> tuple[int, int, int | None, int | None]:
    """``(img_size, in_chans, num_classes, largest class)`` of ``data``; None where only the files can say."""
    if data.name == "synthetic":
        return data.synthetic_img_size, data.synthetic_channels, data.synthetic_classes, None
    if data.name == "imagefolder":
        return data.img_size or 224, 3, None, None
    return DATA_SHAPES[data.name]


def _held(count: int, fraction: float) -> int:
    """Images of a class of ``count`` that a stratified split holds out (suite/data/split.py's rule)."""
    return max(1, min(round(fraction * count), count - 1)) if count > 1 else 0


def held_out_counts(data: DataConfig, val_fraction: float | None = None) -> tuple[str, list[int]] | None:
    """The split a run is judged on (``val`` or ``test``) and its images per class; None if only the files know."""
    vf = data.val_fraction if val_fraction is None else val_fraction
    if data.name == "synthetic":
        c = data.synthetic_classes
        per = lambda n: [n // c + (i < n % c) for i in range(c)]  # noqa: E731  (labels i % classes)
        train, test = per(data.synthetic_train), per(data.synthetic_test)
    elif data.name in CLASS_COUNTS:
        test = [_held(n, data.test_fraction) for n in CLASS_COUNTS[data.name]]
        train = [n - t for n, t in zip(CLASS_COUNTS[data.name], test)]
    elif data.name in FIXED_SPLITS:
        train, test = FIXED_SPLITS[data.name]
    else:
        return None
    return ("val", [_held(n, vf) for n in train]) if vf > 0 else ("test", test)


def _check_held_out(d: DataConfig, source: str) -> None:
    """Refuse a held-out split too small for the learning test to pass even at 100% accuracy."""
    from suite.learned import ALPHA, can_pass, smallest_passing  # scipy.special: only when checked

    found = held_out_counts(d)
    if found is None:
        return
    split, counts = found
    n = sum(counts)
    if n and can_pass(n, max(counts) / n):
        return
    need = smallest_passing(max(counts) / n if n else 1.0)
    if split == "val":
        fix = next((f"raise data.val_fraction to {f:g} or more" for f in (k / 100 for k in range(1, 100))
                    if (c := held_out_counts(d, f)[1]) and can_pass(sum(c), max(c) / sum(c))),
                   "set data.val_fraction: 0 (judge on test) or use more data")
    else:
        more = {"synthetic": "raise data.synthetic_test"}.get(d.name, "raise data.test_fraction" if d.name in CLASS_COUNTS
                                                               else "use more test data")
        fix = f"{more}, or set data.val_fraction above 0 to judge on a validation split"
    raise ConfigError(f"{source}: data.val_fraction {d.val_fraction:g}: the {split} split that judges each run "
                      f"would hold {n} images (largest class {max(counts, default=0)}), too few for the learning "
                      f"test (alpha {ALPHA}) to pass even at 100% accuracy"
                      + (f"; it needs about {need} or more" if need else "") + f": {fix}")


def _get(cfg: Any, dotted: str) -> Any:
    return functools.reduce(getattr, dotted.split("."), cfg)


def validate(cfg: RunConfig, source: str = "config", reference: RunConfig | None = None) -> None:
    """Checks a type cannot express (names, RANGES, shapes, scheme options vs ``reference``); ConfigError if any."""
    m = cfg.model
    if m.residual not in SCHEMES:
        raise ConfigError(f"{source}: {SCHEMES.unknown(m.residual)}")
    if cfg.data.name not in DATASETS:
        raise ConfigError(f"{source}: {DATASETS.unknown(cfg.data.name)}")
    for key, (check, what) in RANGES.items():
        value = _get(cfg, key)
        if not check(value):
            raise ConfigError(f"{source}: {key} must be {what}, got {value!r}")
    if reference is not None:
        check_scheme_options(cfg, reference, source)
    _check_frozen_zero(cfg, source)
    if m.dim % m.heads:
        fits = [h for h in range(1, min(m.dim, 64) + 1) if m.dim % h == 0]
        raise ConfigError(f"{source}: model.dim ({m.dim}) must be divisible by model.heads ({m.heads}); set "
                          f"model.heads to one of {', '.join(map(str, fits))}, or change model.dim")
    params = approx_params(m)
    if params > MAX_PARAMS:
        raise ConfigError(f"{source}: model.depth {m.depth} x model.dim {m.dim} x model.mlp_ratio {m.mlp_ratio:g} "
                          f"is about {params:.2g} parameters, more than {MAX_PARAMS:.0e} (no device holds it); "
                          f"make the model smaller")
    if cfg.train.collapse_below >= 1 - cfg.train.collapse_within:
        raise ConfigError(f"{source}: train.collapse_below ({cfg.train.collapse_below:g}) must be below 1 - "
                          f"train.collapse_within ({1 - cfg.train.collapse_within:g}), or a run that learned would "
                          f"count as back at chance at once; lower train.collapse_below")
    if cfg.train.min_lr > cfg.train.lr:
        raise ConfigError(f"{source}: train.min_lr ({cfg.train.min_lr:g}) must be <= train.lr ({cfg.train.lr:g}), "
                          f"the cosine schedule's floor; lower train.min_lr")
    _validate_data(cfg, source)
    if m.backend == "timm" and m.weight_init != "timm":
        raise ConfigError(f"{source}: model.weight_init {m.weight_init}: timm's ViT initialises its own weights; "
                          f"use model.backend: suite")
    if m.backend == "timm" and m.residual not in ("preln", "layerscale"):
        raise ConfigError(f"{source}: model.residual {m.residual}: timm's ViT has only preln and layerscale; "
                          f"use model.backend: suite")


# Why a scheme does not read an option, where "it does not read it" alone would puzzle.
_NOT_READ_BECAUSE = {("depth-mup", "model.depth_alpha"): "fixes alpha at 1/2",
                     ("completep", "model.depth_alpha"): "fixes alpha at 1"}


def check_scheme_options(cfg: RunConfig, reference: RunConfig, source: str = "config") -> None:
    """ConfigError for a scheme option set away from ``reference`` that the scheme does not read (a mere rename)."""
    scheme = cfg.model.residual
    for key in SCHEMES.options():
        value, default = _get(cfg, key), _get(reference, key)
        if key in SCHEMES.reads(scheme) or value == default:
            continue
        why = _NOT_READ_BECAUSE.get((scheme, key), "does not read it")
        raise ConfigError(f"{source}: {key} {value!r}: model.residual {scheme} {why}, so the setting would only "
                          f"rename the run; remove it (or set it back to {default!r}), or use a scheme that reads "
                          f"it: {', '.join(SCHEMES.readers(key))}")


def _check_frozen_zero(cfg: RunConfig, source: str) -> None:
    """Refuse a frozen LayerScale at init 0 (it multiplies its branches by a fixed 0 for good), and a frozen
    depth-aware one (its one rule scales γ's learning rate, so frozen it is ``layerscale`` under another name)."""
    ls = cfg.model.layerscale
    if cfg.model.residual == "layerscale-depth" and not ls.learnable:
        raise ConfigError(f"{source}: model.residual layerscale-depth with model.layerscale.learnable false: the "
                          f"scheme only scales γ's learning rate by depth, and a frozen γ has none, so the run would "
                          f"be frozen layerscale under another name; use model.residual: layerscale")
    if cfg.model.residual in ("layerscale", "layerscale-depth") and not ls.learnable and not isinstance(ls.init, str) and ls.init == 0:
        branches = {"both": "attention and MLP branch", "attn": "attention branch", "mlp": "MLP branch"}[ls.placement]
        raise ConfigError(f"{source}: model.layerscale.init 0 with model.layerscale.learnable false multiplies every "
                          f"block's {branches} by a fixed 0, so those branches never contribute; make it learnable "
                          f"(init 0 is a real init then) or freeze it above 0 (e.g. rsqrt_depth)")


def memory_estimate(cfg: RunConfig) -> tuple[float, str]:
    """A lower bound on one training run's bytes, and how they add up (docs/training.md)."""
    m, t = cfg.model, cfg.train
    img, chans, classes, _ = data_shape(cfg.data)
    img, chans = m.img_size or img, m.in_chans or chans
    tokens = (img // m.patch_size) ** 2 + 1
    params = approx_params(m) + (chans * m.patch_size**2 + tokens + (m.num_classes or classes or 2)) * m.dim
    per_block = tokens * (10 + 2 * m.mlp_ratio) * m.dim + 2 * m.heads * tokens**2
    weights, activations, steplog = 16 * params, 2 * t.batch_size * m.depth * per_block, 16 * t.log_every
    total = weights + activations + steplog
    return total, (f"{total / 2**30:.3g} GiB: {weights / 2**30:.3g} GiB of weights, gradients and AdamW state, "
                   f"{activations / 2**30:.3g} GiB of activations (train.batch_size {t.batch_size} x {tokens} tokens "
                   f"x model.dim {m.dim} x model.depth {m.depth})")


def approx_params(m: ModelConfig) -> float:
    """The blocks' weights, 4 d^2 + 2 r d^2 per block: enough to refuse what cannot fit."""
    return m.depth * m.dim**2 * (4 + 2 * m.mlp_ratio)


# The data keys each built-in dataset never reads: set away from its default, such a key would only rename the run
# (two run ids, one run). A registered dataset of a user's is not listed: it may read any of them.
SYNTHETIC_KEYS = tuple(f.name for f in dataclasses.fields(DataConfig) if f.name.startswith("synthetic_"))
_FILES = ("test_fraction", "img_size", *SYNTHETIC_KEYS)  # CIFAR: fixed splits, fixed size
NOT_READ = {"mnist5k": ("img_size", *SYNTHETIC_KEYS), "digits": ("img_size", *SYNTHETIC_KEYS), "cifar10": _FILES,
            "cifar100": _FILES, "imagefolder": ("test_fraction", *SYNTHETIC_KEYS), "synthetic": ("test_fraction", "img_size")}


def _validate_data(cfg: RunConfig, source: str) -> None:
    """The model's shape against the dataset's (:func:`data_shape`), the splits and the data root."""
    d, m = cfg.data, cfg.model
    defaults = DataConfig()
    for key in NOT_READ.get(d.name, ()):
        if getattr(d, key) != getattr(defaults, key):
            raise ConfigError(f"{source}: data.{key} {getattr(d, key)}: data.name {d.name} does not read it, so it "
                              f"would only rename the run; remove it")
    img, chans, classes, largest = data_shape(d)
    for key, mine, theirs in (("img_size", m.img_size, img), ("in_chans", m.in_chans, chans),
                              ("num_classes", m.num_classes, classes)):
        if mine is not None and theirs is not None and mine != theirs:
            raise ConfigError(f"{source}: model.{key} {mine} does not match data.name {d.name} ({theirs}); leave it unset")
    if (m.img_size or img) % m.patch_size:
        raise ConfigError(f"{source}: model.patch_size {m.patch_size} does not divide the {m.img_size or img}-pixel "
                          f"images of {d.name}; pick a divisor of {m.img_size or img}")
    if d.name == "synthetic" and (d.synthetic_train + d.synthetic_test) * chans * img**2 > MAX_SYNTHETIC_PIXELS:
        raise ConfigError(f"{source}: data.synthetic_train + data.synthetic_test images of {chans} x {img} x {img} "
                          f"are more than {MAX_SYNTHETIC_PIXELS:,} pixels; make them fewer or smaller")
    # The validation split needs a class that keeps 2+ training images after the test split (suite/data/split.py).
    left = None if largest is None else largest - _held(largest, d.test_fraction)
    if d.val_fraction > 0 and (left is not None and left < 2 or d.name == "synthetic" and d.synthetic_train <= classes):
        what = f"data.test_fraction {d.test_fraction:g}" if left is not None else f"data.synthetic_train {d.synthetic_train}"
        raise ConfigError(f"{source}: {what} leaves no class of {d.name} with 2 training images, so the validation "
                          f"split (data.val_fraction {d.val_fraction:g}) would be empty; lower it or set data.val_fraction: 0")
    _check_held_out(d, source)
    if d.root is not None:
        try:
            is_file = Path(d.root).expanduser().exists() and not Path(d.root).expanduser().is_dir()
        except (OSError, ValueError, RuntimeError) as err:  # a name too long, a NUL byte, ~user of no such user
            raise ConfigError(f"{source}: data.root {str(d.root)[:60]}...: not a usable path "
                              f"({getattr(err, 'strerror', None) or err}); pass the folder that holds the data") from None
        if is_file:
            raise ConfigError(f"{source}: data.root {d.root}: is a file, not a folder; pass the folder that holds the data")


# Where fp16 training (loss scaling) and TF32 matmuls are offered; elsewhere they are refused.
FP16_DEVICES: tuple[str, ...] = ("cuda",)
# `train.precision: auto` on CUDA: bf16 from this model width up, tf32 below. bf16 adds ~34% more kernel launches at
# any width; below ~128 the matmul time it saves is less than its casts cost (counted on a CPU, not timed on a GPU).
BF16_MIN_WIDTH = 128


def resolve_precision(cfg: RunConfig, device_type: str) -> RunConfig:
    """``train.precision: auto`` made concrete for ``device_type`` (docs/training.md); the run id hashes the result, so
    a GPU result is never pooled with a CPU one. ConfigError for ``fp16`` or ``tf32`` where there are none."""
    if cfg.train.precision == "fp16" and device_type not in FP16_DEVICES:
        raise ConfigError(f"train.precision fp16: training in fp16 with loss scaling runs on "
                          f"{' or '.join(FP16_DEVICES)} only, not on {device_type}; use bf16 or fp32")
    if cfg.train.precision == "tf32" and device_type not in FP16_DEVICES:
        raise ConfigError(f"train.precision tf32: TF32 matmuls run on {' or '.join(FP16_DEVICES)} only, not on "
                          f"{device_type}; use fp32")
    if cfg.train.precision != "auto":
        return cfg
    resolved = ("fp32" if device_type != "cuda" else "bf16" if cfg.model.dim >= BF16_MIN_WIDTH else "tf32")
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, precision=resolved))


def to_dict(cfg: Any) -> dict[str, Any]:
    """Nested plain-Python dict (tuples become lists), ready for YAML/JSON."""
    return dataclasses.asdict(cfg, dict_factory=lambda kv: {k: list(v) if isinstance(v, tuple) else v for k, v in kv})


def flat_items(d: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Dotted ``(key, value)`` items of a nested mapping, repeats kept (spec reports them; flatten keeps the last)."""
    for key, v in d.items():
        yield from flat_items(v, f"{prefix}{key}.") if isinstance(v, dict) else [(f"{prefix}{key}", v)]


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"model": {"depth": 12}}`` -> ``{"model.depth": 12}`` (lists kept as values)."""
    return dict(flat_items(d, prefix))


def dump_yaml(cfg: RunConfig) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)
