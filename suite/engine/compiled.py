"""``torch.compile`` for one run in a long-lived process: regional, and never a silent fall-back to eager.

Regional: a ViT is one block repeated ``depth`` times, so each block's ``forward`` is compiled
rather than the whole model. The blocks share one compiled graph (their parameters are graph inputs,
``inline_inbuilt_nn_modules``), so compile time does not grow with depth. Blocks whose Python
constants differ (the linear drop-path schedule gives each block its own rate) compile once each.
The probes' hooks on a block's submodules would sit inside its compiled code, where dynamo does not
guard them, so the probes run their forward eagerly (:mod:`suite.engine.probes`).

No fall-back: a sweep worker trains many runs one after another. Dynamo's caches live as long as the
process, so each new model shape is a recompilation of the same code; past ``recompile_limit`` of
them dynamo stops compiling and runs that code eagerly, without an error, and whether a run was
compiled would then depend on what its worker ran before. Each run therefore starts from empty
caches, and hitting the limit inside one run is an error instead of a fall-back.

A pack (:mod:`suite.engine.packstep`) compiles its whole step as one program whose tensors are its
arguments, so the next pack of the same shape in this process runs the same compiled graph
(:func:`reuse`): the caches are cleared only when the shape changes.
"""

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
    """Within this block :func:`compile_for_run` compiles nothing and clears nothing: a pack's members
    are set up here (their ``train.compile`` is the pack's, which compiles its whole step as one
    program, :mod:`suite.engine.packstep`, and keeps it for the next pack of its shape)."""
    _packing[0] = True
    try:
        yield
    finally:
        _packing[0] = False


KEEP = 8  # the compiled pack programs a worker keeps, one per shape: dynamo's recompile limit of their step


def reuse(key: Hashable, build: Callable[[], T]) -> T:
    """What ``build()`` made for ``key``, kept from an earlier call for ``key`` when nothing outside packs
    was compiled since (its compiled graphs are still in dynamo's caches): a worker keeps one program per
    pack shape for its life, up to :data:`KEEP` shapes, so that packs of alternating shapes compile each
    shape once. The first program after a solo compiled run (which clears them), or one more than
    :data:`KEEP`, starts from cleared caches, as any new run does.

    ``key`` must name everything the compiled code holds as a constant (for a pack: its config
    without the members' own keys, its size, device and mode)."""
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
    """Why a solo run on ``device_type`` cannot use ``compile_setting``, or None. A solo run compiles block by
    block, every block sharing one graph: under CUDA graphs each replay overwrites the output of the block
    before it, which the next block and the backward still read (pytorch/pytorch#152887), so the CUDA-graph
    modes are refused there; a pack compiles its whole step and captures it (``compile: true``)."""
    if compile_setting in CUDA_GRAPH_MODES and device_type != "cpu":
        return (f"train.compile {compile_setting}: a run compiled block by block cannot replay CUDA graphs (each "
                f"block's replay overwrites the output of the one before, pytorch#152887); use compile: true, or "
                f"--pack N, whose packs capture their whole step as one CUDA graph")
    return None


def compile_for_run(model: nn.Module, mode: str = "default", regional: bool = True, **options: Any) -> nn.Module:
    """``model`` compiled with ``mode`` after clearing what earlier runs in this process compiled.

    Args:
        mode: ``default``, ``reduce-overhead`` (CUDA graphs) or ``max-autotune``.
        regional: compile each of ``model.blocks`` in place (the model itself is returned) rather
            than the whole model; a model without ``blocks`` is compiled whole.
        options: more ``torch.compile`` arguments (the tests pass ``backend="eager"``).

    Inside :func:`pack_members` it returns ``model`` as it is.

    Raises (when called):
        torch._dynamo.exc.FailOnRecompileLimitHit: one run needed more recompilations than the limit.
    """
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
        # A block's Python constants are part of its graph: under the linear drop-path schedule
        # every block has its own rate, so each block compiles once (in training and in eval mode)
        # and compile time grows with depth; without drop path, or with the uniform schedule, all
        # blocks share one graph. Allow that many compilations for this run, and no more.
        _dynamo.config.recompile_limit = max(8, 2 * len(blocks) + 4)
        _dynamo.config.accumulated_recompile_limit = max(256, 4 * len(blocks) + 16)
        for block in blocks:
            block.forward = torch.compile(block.forward, **options)
        return model
    _dynamo.config.recompile_limit = 8  # dynamo's default: a whole model compiles once per mode
    return torch.compile(model, **options)
