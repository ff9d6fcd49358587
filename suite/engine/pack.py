"""Packed runs: several runs of one shape trained as one stacked model in one process.

Runs that differ only in their seed (and, optionally, ``train.lr``, ``train.weight_decay`` and
``model.layerscale.init``) have the same computation graph. A pack of N keeps their parameters in one
``[N, P]`` tensor (with its gradients and AdamW moments alike) and runs the very same model code over
all of them at once with ``torch.func.vmap`` over ``functional_call``: one kernel per layer, optimizer
update and loss for the whole pack instead of one per run, which is what a GPU wastes on small
models. The operators a step dispatches do not depend on N (``tests/engine/test_pack.py`` counts them).

* **Data**: one copy of the dataset, each member's batch gathered with its own ``(N, B)`` indices
  (:class:`~suite.data.stream.PackStream`): every member sees exactly the batches of its solo run.
* **Step**: one forward over the stacked leaves, one cross-entropy reshaped to ``[N, B]``, one
  backward; per-member gradient norms and clipping as one reduction over ``[N, P]``; one AdamW update
  (:class:`StackedAdamW`) with each member's learning rate and weight decay as ``[N]`` tensors, which
  skips, on the device, a member whose loss or gradient went non-finite (a ``[window, N]``
  :class:`~suite.engine.steplog.StepLog`) or whose run has ended.
* **Precision**: under ``train.precision: bf16`` the stacked forward runs under autocast like a solo
  run, and the linear biases are cast to bf16 explicitly (vmap splits a linear into a matmul, which
  autocast casts, and a bias add, which it does not); the loss is taken on fp32 logits.
* **Members**: each member stays a complete run (:class:`~suite.engine.loop.Training`) with its own
  folder, summary, step log replay, divergence rules, probes and checkpoints, and its model's
  parameters are views of its row of the stack (its checkpoint, in the solo format, copies its row
  out). Probes and evaluation run once for the pack, vmapped. The loop is the solo one
  (:func:`~suite.engine.loop.run_steps`) with this module's step passed in; the pack counts its
  own steps, so a member that diverges and ends changes nothing for the others.

Restrictions: randomness inside the forward (drop-path) cannot follow each member's own generator
under ``vmap``, so runs with ``model.drop_path > 0`` are not packed (:func:`packable`); nor are
compiled runs or timm's models.
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap
from torch.nn.attention import SDPBackend, sdpa_kernel

from suite import store
from suite.config import RunConfig
from suite.data import PackStream, eval_batches, load_dataset
from suite.engine.lifecycle import RunFolder
from suite.engine.loop import Training, run_steps
from suite.engine.probes import probe_stacked
from suite.engine.optim import is_no_decay
from suite.engine.steplog import StepLog

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
    if cfg.train.precision == "fp16":
        return "fp16's loss scaler skips steps run by run, which a stacked update does not"
    return None


def pack_key(cfg: RunConfig) -> str:
    """Runs with equal keys can share a pack: the config without :data:`MEMBER_KEYS` and execution keys."""
    from suite.config import flatten, to_dict

    flat = {k: v for k, v in flatten(to_dict(cfg)).items()
            if k not in MEMBER_KEYS and k not in store.EXECUTION_KEYS}
    return repr(sorted(flat.items(), key=lambda kv: kv[0]))


class StackedAdamW:
    """AdamW over N models' parameters held as rows of one ``[N, P]`` tensor.

    The same update as ``torch.optim.AdamW`` per member (decoupled weight decay, bias-corrected
    moments), with the learning rate and weight decay ``[N]`` tensors, and the per-parameter policy of
    :func:`~suite.engine.optim.build_optimizer` (which parameters decay, each group's ``lr_scale``) as
    ``[P]`` columns. A member masked out by ``keep`` neither moves nor updates its moments.
    """

    def __init__(self, flat: torch.Tensor, lr_scale: torch.Tensor, decays: torch.Tensor, weight_decay: torch.Tensor,
                 betas: tuple[float, float], eps: float, step: int = 0) -> None:
        self.flat, self.grad = flat, torch.zeros_like(flat)
        self.exp_avg, self.exp_avg_sq = torch.zeros_like(flat), torch.zeros_like(flat)
        self.lr_scale, self.decay = lr_scale, decays[None, :] * weight_decay[:, None]  # [P], [N, P]
        self.betas, self.eps, self.step_count = betas, eps, step
        self.step_tensor = torch.tensor(float(step))  # every member's AdamW state "step" (its checkpoints)

    @torch.no_grad()
    def step(self, lr: torch.Tensor, keep: torch.Tensor) -> None:
        """One update with learning rates ``lr`` ``[N]`` of the members where ``keep`` ``[N]`` is true."""
        b1, b2 = self.betas
        self.step_count += 1
        self.step_tensor.fill_(self.step_count)
        bc1, bc2 = 1 - b1 ** self.step_count, 1 - b2 ** self.step_count
        k = keep[:, None]
        grad = torch.where(k, self.grad, 0.0)
        lr_np = torch.where(k, lr[:, None] * self.lr_scale[None, :], 0.0)  # [N, P]
        self.flat.mul_(1 - lr_np * self.decay)
        self.exp_avg.copy_(torch.where(k, self.exp_avg.lerp(grad, 1 - b1), self.exp_avg))
        self.exp_avg_sq.copy_(torch.where(k, self.exp_avg_sq * b2 + (1 - b2) * grad * grad, self.exp_avg_sq))
        denom = (self.exp_avg_sq.sqrt() / math.sqrt(bc2)).add_(self.eps)
        self.flat.addcdiv_(self.exp_avg * lr_np, denom, value=-1 / bc1)


class Pack:
    """The members' parameters as one stack, its optimizer, and the stacked step and evaluation."""

    def __init__(self, members: list[Training]) -> None:
        first = members[0]
        self.members, self.device, self.tc = members, first.device, first.tc
        self.base = copy.deepcopy(first.model).to("meta")  # the code of the model, none of its tensors
        n = len(members)
        named = [dict(m.model.named_parameters()) for m in members]
        self.names = list(named[0])
        self.shapes = [named[0][k].shape for k in self.names]
        sizes = [s.numel() for s in self.shapes]
        self.offsets = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
        flat = torch.zeros(n, self.offsets[-1], device=self.device)
        scale, decays = torch.zeros(self.offsets[-1], device=self.device), torch.zeros(self.offsets[-1], device=self.device)
        group_of = {id(p): g for g in first.optimizer.param_groups for p in g["params"]}
        for k, name in enumerate(self.names):
            a, b = self.offsets[k], self.offsets[k + 1]
            group = group_of.get(id(named[0][name]))
            scale[a:b] = 0.0 if group is None else group.get("lr_scale", 1.0)
            decays[a:b] = float(not is_no_decay(name, named[0][name]) or first.tc.decay_1d)
            for i in range(n):
                flat[i, a:b] = named[i][name].detach().flatten()
        wd = torch.tensor([m.tc.weight_decay for m in members], device=self.device)
        self.opt = StackedAdamW(flat, scale, decays, wd, first.tc.betas, first.optimizer.defaults["eps"], first.state.step)
        for i, m in enumerate(members):  # each member's tensors become views of its row
            for k, name in enumerate(self.names):
                p = named[i][name]
                state = m.optimizer.state.get(p, {})
                for key, stack in (("exp_avg", self.opt.exp_avg), ("exp_avg_sq", self.opt.exp_avg_sq)):
                    view = self._view(stack, k, i)
                    if key in state:
                        view.copy_(state[key])
                    state[key] = view
                state["step"] = self.opt.step_tensor
                m.optimizer.state[p] = state
                p.data = self._view(flat, k, i)
        self.leaves = {name: self._view(flat, k).requires_grad_(named[0][name].requires_grad)
                       for k, name in enumerate(self.names)}
        for k, leaf in enumerate(self.leaves.values()):
            if leaf.requires_grad:
                leaf.grad = self._view(self.opt.grad, k)  # backward accumulates into the [N, P] gradient
        self.buffers = {name: torch.stack([dict(m.model.named_buffers())[name] for m in members])
                        for name, _ in first.model.named_buffers()}
        self.biases = {f"{mod}.bias" for mod, module in self.base.named_modules()
                       if isinstance(module, nn.Linear) and module.bias is not None}
        self.log = StepLog(max(1, self.tc.log_every), self.device, n)
        self.live = torch.ones(n, dtype=torch.bool, device=self.device)
        self.going = list(members)  # the members still training (the host's copy of ``live``)
        self._evals: tuple[int, dict[str, list[tuple[float, float, float, int]]]] = (-1, {})
        for i, m in enumerate(members):
            m.steps, m.member, m.sync_free = self.log, i, True
            m.accuracy = lambda split, i=i: self._accuracy(split)[i]
            m.probes = lambda x, i=i: self._probes()[i]
        self.x: torch.Tensor | None = None  # the batch of the last step (the members' probes run on it)
        self._probed: tuple[int, list] | None = None

    def _view(self, stack: torch.Tensor, k: int, member: int | None = None) -> torch.Tensor:
        """Parameter ``k`` of ``member`` (or of all members, ``[N, ...]``) as a view of ``stack``."""
        a, b = self.offsets[k], self.offsets[k + 1]
        if member is None:
            return stack[:, a:b].view(stack.shape[0], *self.shapes[k])
        return stack[member, a:b].view(self.shapes[k])

    def forward(self, x: torch.Tensor, shared_input: bool = False) -> torch.Tensor:
        """Logits ``[N, B, classes]`` of every member on its own ``x[i]`` (or all on one ``x``)."""
        bf16 = self.members[0].use_bf16
        params = {k: v.to(torch.bfloat16) if bf16 and k in self.biases else v for k, v in self.leaves.items()}

        def one(p: dict, b: dict, xi: torch.Tensor) -> torch.Tensor:
            return functional_call(self.base, (p, b), (xi,))

        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=bf16), self._attention():
            return vmap(one, in_dims=(0, 0, None if shared_input else 0), randomness="error")(params, self.buffers, x)

    def step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """One optimizer step of every member on its batch ``(x[i], y[i])``, without waiting for the device."""
        started = time.perf_counter(), time.process_time()
        lrs = [m.begin_step()[0] if m in self.going else 0.0 for m in self.members]
        n, b = y.shape
        self.x = x
        logits = self.forward(x).float()
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none",
                               label_smoothing=self.tc.label_smoothing).view(n, b).mean(1)
        with warnings.catch_warnings():  # the stack's rows are not dense tensors, and torch says so once
            warnings.filterwarnings("ignore", message="grad and param do not obey the gradient layout contract")
            loss.sum().backward()  # each member's rows get the gradient of its own loss
        grad = self.opt.grad
        norm = torch.linalg.vector_norm(grad, dim=1)
        clip = self.tc.grad_clip if self.tc.grad_clip is not None else math.inf
        grad.mul_((clip / (norm + 1e-6)).clamp_(max=1.0)[:, None])  # as clip_grad_norm_, per member
        self.log.record(self.opt.step_count, lrs, loss, norm)
        cuda = self.device.type == "cuda"  # a copy from pinned memory does not make the host wait
        lr = torch.tensor(lrs, pin_memory=cuda).to(self.device, non_blocking=True)
        self.opt.step(lr, self.live & (self.log.bad == 0))
        grad.zero_()
        for m in self.going:
            m.stepped(started)

    def _probes(self) -> list[list[dict[str, Any]]]:
        """Every member's probe records on its batch of the current step, in one vmapped forward,
        computed at the first member's request."""
        step = self.opt.step_count  # the pack's step: a member that diverged went back to its step
        if self._probed is None or self._probed[0] != step:
            with self._attention():
                self._probed = (step, probe_stacked(self.base, self.leaves, self.buffers, self.x))
        return self._probed[1]

    def _attention(self) -> contextlib.AbstractContextManager:
        # torch has no vmap rule for the CPU's fused attention (it would loop over the members): on a
        # CPU the pack takes the math attention, which vmaps into batched matmuls.
        return sdpa_kernel(SDPBackend.MATH) if self.device.type == "cpu" else contextlib.nullcontext()

    def leave(self, member: Training) -> None:
        """``member``'s run ended: it reads and moves no more."""
        self.log.leave(member.member)
        self.live[member.member] = False
        self.going.remove(member)

    @torch.no_grad()
    def _accuracy(self, split: str) -> list[tuple[float, float, float, int]]:
        """Every member's (loss, accuracy, largest class share, size) of ``split``, in one vmapped pass
        per batch, computed at the first member's request of each evaluation."""
        step = self.opt.step_count
        if self._evals[0] != step:
            self._evals = (step, {})
        if split not in self._evals[1]:
            first, n = self.members[0], len(self.members)
            cfg, data = first.cfg, first.data
            loss_sum = torch.zeros(n, device=self.device)
            correct = torch.zeros(n, device=self.device)
            counts, total = torch.zeros(data.num_classes, dtype=torch.long), 0
            for x, y in eval_batches(data, max(cfg.train.batch_size, 256), self.device, cfg.data.device_max_mb,
                                     cfg.data.num_workers, split=split):
                logits = self.forward(x, shared_input=True).float()
                loss_sum += F.cross_entropy(logits.transpose(1, 2), y.expand(n, -1), reduction="none").sum(1)
                correct += (logits.argmax(-1) == y).sum(1)
                counts += torch.bincount(y.cpu(), minlength=data.num_classes)
                total += y.numel()
            major = counts.max().item() / max(total, 1)
            self._evals[1][split] = [(ls / max(total, 1), c / max(total, 1), major, total)
                                     for ls, c in zip(loss_sum.tolist(), correct.tolist())]
        return self._evals[1][split]


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
    folders = [RunFolder(c, Path(o), {**e, "pack_size": len(cfgs)}) for c, o, e in zip(cfgs, out_dirs, extras)]
    members: list[Training] = []
    data = None
    try:
        for folder, c in zip(folders, cfgs):
            try:
                c, _ = folder.start(c)
                data = data or load_dataset(c.data)  # one dataset for the pack
                training = Training(c, folder, data)
                training.setup()
                members.append(training)
            except BaseException as err:
                _end(folder, err)
        # Members resumed from different steps (a run preempted alone, packed again) train as one
        # pack per step, one after another.
        for step in sorted({m.state.step for m in members}):
            _train([m for m in members if m.state.step == step], on_step)
    except BaseException:
        for m in members:
            if not m.run.closed:
                if m.metrics is not None:
                    with contextlib.suppress(OSError):  # a full disk fails its flush: the error raised says so
                        m.metrics.close()
                if m.run.trackers is not None:
                    m.run.trackers.abort()
        raise
    return [f.summary for f in folders]


def _end(folder: RunFolder, err: BaseException | None = None) -> None:
    """Close a member's run folder, recording ``err`` first (or raising what is not the run's fault)."""
    if err is not None:
        folder.fail(err)
    folder.close()


def _train(members: list[Training], on_step: Callable[[int], None] | None) -> None:
    pack = Pack(members)
    first = members[0]
    seeds = [m.cfg.seed for m in members]
    stream = PackStream(first.data, first.tc.batch_size, seeds, first.device, first.cfg.data.augment,
                        first.cfg.data.device_max_mb, first.cfg.data.num_workers)
    pack.x = next(stream.batches(first.state.step, first.state.step + 1))[0]  # the probes at step 0
    for m in members:
        m.begin()

    def ended(m: Training) -> None:
        pack.leave(m)
        m.metrics.close()
        if m.summary["status"] != "error":
            m.finish()
        m.run.close()

    run_steps(members, stream.batches(first.state.step, first.total_steps), pack.step, on_step, ended=ended,
              packed=True)
    for m in members:
        if not m.run.closed:
            ended(m)
