"""``torch.compile`` for one run in a long-lived process: regional (the blocks share one graph, so compile time does not
grow with depth), from empty caches, and past the recompile limit an error, never a silent fall-back to eager."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Hashable, Iterator, TypeVar

import torch
from torch import nn

MODES = ("default", "reduce-overhead", "max-autotune")
T = TypeVar("T")
_kept: dict[Hashable, Any] = {}  # the compiled pack programs kept for reuse, by their key (at most KEEP)
_packing = [False]  # inside pack_members(): a pack's members are set up, and the pack compiles its step


@contextlib.contextmanager
def pack_members() -> Iterator[None]:
    """Within this block :func:`compile_for_run` compiles and clears nothing: the pack compiles its step."""
    _packing[0] = True
    try:
        yield
    finally:
        _packing[0] = False


KEEP = 8  # the compiled pack programs a worker keeps, one per shape: dynamo's recompile limit of their step


def reuse(key: Hashable, build: Callable[[], T]) -> T:
    """What ``build()`` made for ``key`` (all the compiled code's constants), kept while nothing outside packs was
    compiled since, up to :data:`KEEP` keys; else built from cleared caches."""
    from torch import _dynamo

    if key in _kept:
        return _kept[key]
    if not _kept or len(_kept) >= KEEP:
        _kept.clear()
        _dynamo.reset()
        _dynamo.config.fail_on_recompile_limit_hit = True
        _dynamo.config.recompile_limit = KEEP  # each kept shape is one compilation of the same step code
    value = _kept[key] = build()
    return value


CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")  # the modes that capture CUDA graphs on CUDA


def solo_graph_problem(compile_setting: bool | str, device_type: str) -> str | None:
    """Why a solo run on ``device_type`` cannot use ``compile_setting``, or None: its blocks share one graph, and under
    CUDA graphs each replay overwrites the previous block's output, still read later (pytorch/pytorch#152887)."""
    if compile_setting in CUDA_GRAPH_MODES and device_type != "cpu":
        return (f"train.compile {compile_setting}: a run compiled block by block cannot replay CUDA graphs (each "
                f"block's replay overwrites the output of the one before, pytorch#152887); use compile: true, or "
                f"--pack N, whose packs capture their whole step as one CUDA graph")
    return None


def compile_for_run(model: nn.Module, mode: str = "default", regional: bool = True, **options: Any) -> nn.Module:
    """``model`` compiled with ``mode`` from cleared caches; ``regional``: each of ``model.blocks`` in place. Inside
    :func:`pack_members`, ``model`` as it is."""
    if mode not in MODES:
        raise ValueError(f"compile mode {mode!r}: expected one of {', '.join(MODES)}")
    if _packing[0]:
        return model
    from torch import _dynamo  # seconds to import: only runs that compile pay for it

    _dynamo.reset()
    _kept.clear()  # a pack's kept program is gone with the caches
    _dynamo.config.fail_on_recompile_limit_hit = True
    options = {**options, "mode": None if mode == "default" else mode}
    blocks = getattr(model, "blocks", None)
    if regional and isinstance(blocks, nn.Module) and len(blocks):
        # A block's Python constants are part of its graph: under the linear drop-path schedule each block compiles once
        # (training and eval mode), else all share one. Allow that many compilations for this run, and no more.
        _dynamo.config.recompile_limit = max(8, 2 * len(blocks) + 4)
        _dynamo.config.accumulated_recompile_limit = max(256, 4 * len(blocks) + 16)
        for block in blocks:
            block.forward = torch.compile(block.forward, **options)
        return model
    _dynamo.config.recompile_limit = 8  # dynamo's default: a whole model compiles once per mode
    return torch.compile(model, **options)
