"""Packed runs: several runs of one shape trained as one stacked model in one process.

Runs that differ only in their seed (and, optionally, ``train.lr``, ``train.weight_decay`` and
``model.layerscale.init``) have the same computation graph. A pack stacks their parameters along a
new first dimension and runs the very same model code over all of them at once with
``torch.func.vmap`` over ``functional_call``: one kernel launch per layer for the whole pack instead
of one per run, which is what a GPU wastes on small models.

Each member stays a complete run: its own :class:`~suite.engine.loop.Training` with its own data
order, learning rate and schedule, gradient clipping, fused AdamW, device-side step log and
divergence rules, probes, evaluation, checkpoints and run folder, with the same files and summary as
a solo run (plus ``pack_size``). Only the forward and backward passes are joint: the members'
parameters are stacked afresh each step from their own leaves, so the sum of the members' losses
gives each member exactly its own gradient. A member that diverges, stops at chance or fails is
recorded at its step and leaves the pack; the others go on.

Restriction: randomness inside the forward (drop-path) cannot follow each member's own generator
under ``vmap``, so runs with ``model.drop_path > 0`` are not packed (:func:`packable`).
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch.func import functional_call, vmap

from suite import store
from suite.config import RunConfig
from suite.engine.lifecycle import RunFolder
from suite.engine.lifecycle import StopRun
from suite.engine.loop import Diverged, Training

# Keys in which the members of one pack may differ; everything else must be equal.
MEMBER_KEYS = frozenset({"seed", "train.lr", "train.weight_decay", "model.layerscale.init"})


def packable(cfg: RunConfig) -> str | None:
    """Why ``cfg`` cannot be packed, or None when it can."""
    if cfg.model.drop_path > 0:
        return "drop-path draws random numbers inside the forward, which vmap cannot give each member"
    if cfg.train.compile:
        return "torch.compile is not applied to packed runs"
    if cfg.model.backend != "suite":
        return "only the suite's own ViT is packed"
    return None


def pack_key(cfg: RunConfig) -> str:
    """Runs with equal keys can share a pack: the config without :data:`MEMBER_KEYS` and execution keys."""
    from suite.config import flatten, to_dict

    flat = {k: v for k, v in flatten(to_dict(cfg)).items()
            if k not in MEMBER_KEYS and k not in store.EXECUTION_KEYS}
    return repr(sorted(flat.items(), key=lambda kv: kv[0]))


class _Member:
    """One run of the pack: its :class:`RunFolder` and :class:`Training` (``done`` once it has ended)."""

    def __init__(self, cfg: RunConfig, out: Path, extra: dict[str, Any] | None, size: int) -> None:
        self.run = RunFolder(cfg, out, {**(extra or {}), "pack_size": size})
        self.summary = self.run.summary
        self.training: Training | None = None
        self.done = False
        try:
            cfg, _ = self.run.start(cfg)
            self.training = Training(cfg, self.run)
            self.training.setup()
            self.params = dict(self.training.model.named_parameters())  # the leaves each step stacks
            self.buffers = dict(self.training.model.named_buffers())
            self.batches = iter(self.training.stream.batches(self.training.state.step, self.training.total_steps))
            self.training.begin()
        except BaseException as err:
            self.fail(err)

    def fail(self, err: BaseException) -> None:
        """Inside ``except``: record the member's error (or raise what is not its fault) and end it."""
        self.run.fail(err)
        self.end()

    def end(self) -> None:
        if self.training is not None and self.training.metrics is not None and not self.training.metrics.closed:
            self.training.metrics.close()
        if self.summary["status"] != "error" and self.training is not None:
            self.training.finish()
        self.run.close()
        self.done = True


def train_pack(cfgs: list[RunConfig], out_dirs: list[str | Path], extras: list[dict[str, Any]] | None = None,
               on_step: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
    """Train ``cfgs`` as one pack, each into its own folder; returns their summaries (in order).

    Args:
        cfgs: resolved run configs that share a :func:`pack_key` and are :func:`packable`.
        out_dirs: one run folder each; a ``checkpoint.pt`` there is resumed from, as by a solo run.
        extras: top-level summary keys per run (the sweep adds ``ablation``, ``variant``).
        on_step: called after every pack step with the members' step; it may raise ``StopRun``
            (a preempted worker: every member still going then checkpoints this step first).

    Raises:
        ValueError: the runs cannot share a pack.
        DiskFull: the disk filled up (no summary for the runs still going; they run again).
    """
    keys = {pack_key(c) for c in cfgs}
    problems = [p for p in map(packable, cfgs) if p]
    if len(keys) > 1 or problems:
        raise ValueError(f"these runs cannot share a pack: {problems[0] if problems else 'they differ in more than '}"
                         f"{'' if problems else ', '.join(sorted(MEMBER_KEYS))}")
    extras = extras or [{} for _ in cfgs]
    members = [_Member(c, Path(o), e, len(cfgs)) for c, o, e in zip(cfgs, out_dirs, extras)]
    try:
        _loop([m for m in members if not m.done], on_step)
    except BaseException:
        for m in members:
            if not m.done and m.training is not None and m.training.metrics is not None:
                with contextlib.suppress(OSError):  # a full disk fails its flush: the error raised says so
                    m.training.metrics.close()
            if not m.done and m.run.trackers is not None:
                m.run.trackers.abort()
        raise
    return [m.summary for m in members]


def _loop(live: list[_Member], on_step: Callable[[int], None] | None) -> None:
    if not live:
        return
    base = copy.deepcopy(live[0].training.model).to("meta")  # the code of the model, none of its tensors
    names = [n for n, _ in base.named_parameters()]
    buffer_names = [n for n, _ in base.named_buffers()]

    def forward(params: dict, buffers: dict, x: torch.Tensor) -> torch.Tensor:
        return functional_call(base, (params, buffers), (x,))

    batched = vmap(forward, randomness="error")
    while live:
        batch = []
        for m in list(live):
            item = next(m.batches, None)
            if item is None:  # every step done
                m.training.completed()
                m.end()
                live.remove(m)
            else:
                batch.append((m, item))
        if not batch:
            return
        members = [m for m, _ in batch]
        started = [m.training.begin_step() for m in members]
        params = {n: torch.stack([m.params[n] for m in members]) for n in names}
        buffers = {n: torch.stack([m.buffers[n] for m in members]) for n in buffer_names}
        x = torch.stack([xy[0] for _, xy in batch])
        y = torch.stack([xy[1] for _, xy in batch])
        first = members[0].training
        with torch.autocast(first.device.type, dtype=torch.bfloat16, enabled=first.use_bf16), \
                warnings.catch_warnings():
            # torch has no vmap rule for CPU attention and says so every time; docs/backends/local.md says it once
            warnings.filterwarnings("ignore", message="There is a performance drop because we have not yet")
            logits = batched(params, buffers, x)
        losses = [F.cross_entropy(logits[i], y[i], label_smoothing=m.training.tc.label_smoothing)
                  for i, m in enumerate(members)]
        torch.stack(losses).sum().backward()  # each member's parameters get the gradient of its own loss
        for i, m in enumerate(members):
            m.training.end_step(losses[i].detach(), *started[i])
        for i, m in enumerate(members):
            try:
                m.training.after_step(x[i])
            except Diverged as stop:
                m.training.stopped(stop)
                m.end()
                live.remove(m)
            except Exception as err:  # noqa: BLE001  (one member's failure ends it alone)
                try:
                    m.fail(err)
                finally:
                    live.remove(m)
        if on_step is not None and live:
            try:
                on_step(live[0].training.state.step)
            except StopRun as stop:  # preempted: every member still going saves this step, as a solo run does
                for m in live if stop.save else []:
                    try:
                        m.training.read(x[members.index(m)])
                        m.training.save(preempted=True)
                    except Diverged as ended:  # its last steps decided it: no need to resume
                        m.training.stopped(ended)
                        m.end()
                raise
