"""Packed runs: runs differing only in :data:`MEMBER_KEYS` trained as one stacked model (``[N, P]`` parameters, vmapped
model code), one kernel per layer for the pack instead of per run, which small models waste a GPU on. Each member stays
a complete :class:`~suite.engine.loop.Training` run. Details: docs/backends/local.md ("Packed runs")."""

from __future__ import annotations

import contextlib
import copy
import time
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F

from suite import store
from suite.config import LR, RunConfig, approx_params, data_shape, flatten, memory_estimate, to_dict
from suite.data import PackStream, eval_batches, load_dataset
from suite.engine import packstep
from suite.engine.compiled import pack_members, reuse
from suite.engine.lifecycle import RunFolder
from suite.engine.loop import Training, run_steps
from suite.engine.optim import is_no_decay, lr_table
from suite.engine.packstep import (PackState, Program, StepSpec, attention, cast_names, compile_mode, mark_static,
                                   unflatten)
from suite.engine.precision import set_matmul_precision
from suite.engine.probes import probe_stacked
from suite.engine.steplog import StepLog

# Keys in which the members of one pack may differ; everything else must be equal.
MEMBER_KEYS = frozenset({"seed", LR, "train.weight_decay", "train.warmup_steps", "train.min_lr",
                         "model.layerscale.init"})


def packable(cfg: RunConfig) -> str | None:
    """Why ``cfg`` cannot be packed, or None when it can."""
    if cfg.model.drop_path > 0:
        return "drop-path draws random numbers inside the forward, which vmap cannot give each member"
    if cfg.model.backend != "suite":
        return "only the suite's own ViT is packed"
    if cfg.train.precision == "fp16":
        return "fp16's loss scaler skips steps run by run, which a stacked update does not"
    return None


def pack_memory_mb(cfg: RunConfig, n: int) -> float:
    """MiB a pack of ``n`` runs of ``cfg``'s shape needs at the least (docs/training.md, "A run that cannot fit")."""
    m = cfg.model
    img, chans, classes, _ = data_shape(cfg.data)
    img, chans = m.img_size or img, m.in_chans or chans
    tokens = (img // m.patch_size) ** 2 + 1
    params = approx_params(m) + (chans * m.patch_size**2 + tokens + (m.num_classes or classes or 2)) * m.dim
    temporaries = 0 if cfg.train.compile else 8
    steps = cfg.train.steps if cfg.train.epochs is None else 0
    one, _ = memory_estimate(cfg)
    return (n * one + temporaries * n * params + 4 * n * steps) / 2**20


def pack_key(cfg: RunConfig) -> str:
    """Runs with equal keys can share a pack: the config without :data:`MEMBER_KEYS` and execution keys."""
    flat = {k: v for k, v in flatten(to_dict(cfg)).items()
            if k not in MEMBER_KEYS and k not in store.EXECUTION_KEYS}
    return repr(sorted(flat.items(), key=lambda kv: kv[0]))


class Pack:
    """The members' parameters as one stack, its device state, and the stacked step and evaluation."""

    def __init__(self, members: list[Training], width: int = 0) -> None:
        first = members[0]
        self.members, self.device, self.tc = members, first.device, first.tc
        # ``width`` > N: inert rows (copies of the first member that never train) keep a compiled step's shape.
        n, self.width = len(members), max(len(members), width)
        pad = [first] * (self.width - n)
        # The code of the model, none of its tensors (copied before they become views of the stack).
        self.base = copy.deepcopy(first.model).to("meta")
        named = [dict(m.model.named_parameters()) for m in members]
        names = list(named[0])
        shapes = [named[0][k].shape for k in names]
        sizes = [s.numel() for s in shapes]
        in_opt = {id(p): g for g in first.optimizer.param_groups for p in g["params"]}
        groups = [in_opt.get(id(named[0][k])) for k in names]  # None: not trained (in no group), in every member
        per_param = torch.tensor([[0.0 if g is None else g.get("lr_scale", 1.0),
                                   float(not is_no_decay(k, named[0][k]) or first.tc.decay_1d)]
                                  for k, g in zip(names, groups)], device=self.device)
        lr_scale, decay = per_param.repeat_interleave(torch.tensor(sizes, device=self.device), dim=0).unbind(1)  # [P]
        # One pass over the parameters, whatever N: each parameter's N copies stacked, the stacks joined.
        named += named[:1] * len(pad)
        flat = torch.cat([torch.stack([nm[k].detach() for nm in named]).flatten(1) for k in names], 1)
        opt_state = [[m.optimizer.state.get(nm[k], {}) for k in names] for m, nm in zip(members + pad, named)]
        moments = []
        for key in ("exp_avg", "exp_avg_sq"):
            if any(key in st for row in opt_state for st in row):  # resumed: the checkpoint's moments
                moments.append(torch.cat([torch.stack([row[j].get(key, torch.zeros(shapes[j], device=self.device))
                                                       for row in opt_state]).flatten(1)
                                          for j in range(len(names))], 1))
            else:
                moments.append(torch.zeros_like(flat))
        self.step_count = first.state.step
        self.step_tensor = torch.tensor(float(self.step_count))  # every member's AdamW state "step" (its checkpoints)
        self.log = StepLog(max(1, self.tc.log_every), self.device, self.width)
        for i in range(n, self.width):
            self.log.leave(i)
        self.state = PackState(
            flat=flat, exp_avg=moments[0], exp_avg_sq=moments[1],
            step=torch.tensor(self.step_count, device=self.device),
            lrs=lr_table(first.total_steps, [m.tc for m in members + pad]).to(self.device),
            weight_decay=torch.tensor([[m.tc.weight_decay] for m in members + pad], device=self.device),
            decay=decay.contiguous(), lr_scale=lr_scale.contiguous(),
            live=torch.arange(self.width, device=self.device) < n, log=self.log.values, bad=self.log.bad,
            buffers={name: torch.stack([dict(m.model.named_buffers())[name] for m in members + pad])
                     for name, _ in first.model.named_buffers()})
        for i, (m, nm) in enumerate(zip(members, named[:n])):  # each member's tensors become views of its row
            rows = [stack[i].split(sizes) for stack in (flat, *moments)]
            for j, k in enumerate(names):
                p = nm[k]
                p.data = rows[0][j].view(shapes[j])
                if groups[j] is not None:
                    m.optimizer.state[p] = {"step": self.step_tensor, "exp_avg": rows[1][j].view(shapes[j]),
                                            "exp_avg_sq": rows[2][j].view(shapes[j])}
        spec = StepSpec(self.base, tuple(names), tuple(shapes), first.use_bf16,
                        cast_names(self.base) if first.use_bf16 else frozenset(), self.device.type, first.tc.betas,
                        first.optimizer.defaults["eps"], first.clip, first.tc.label_smoothing)
        mode = compile_mode(first.tc.compile, self.device.type)
        # compiled: the next pack of this shape in this process runs the same compiled graph
        self.program = Program(spec, None) if mode is None else reuse(
            (pack_key(first.cfg), self.width, str(self.device), mode), lambda: Program(spec, mode))
        if self.program.uses_cuda_graphs():
            mark_static(self.state)
        self.spec = self.program.spec
        self.leaves = unflatten(self.spec, flat)  # [N, *shape] views, for evaluation and probes
        self.buffers = self.state.buffers
        self.going = list(members)  # the members still training (the host's copy of ``live``)
        self._going = [True] * n  # the same by position: a step looks each member up without a search
        self._evals: tuple[int, dict[str, list[tuple[float, float, float, int]]]] = (-1, {})
        for i, m in enumerate(members):
            m.steps, m.member, m.sync_free = self.log, i, True
            m.accuracy = lambda split, i=i: self._accuracy(split)[i]
            m.probes = lambda x, model_level=None, i=i: self._probes(i, model_level)
        self.x: torch.Tensor | None = None  # the batch of the last step (the members' probes run on it)
        self._probed: tuple[int, list] | None = None

    def forward(self, x: torch.Tensor, shared_input: bool = False) -> torch.Tensor:
        """Logits ``[N, B, classes]`` of every member on its own ``x[i]`` (or all on one ``x``)."""
        with attention():
            return packstep.forward(self.spec, self.leaves, self.buffers, x, shared_input)

    def step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """One optimizer step of every member on ``(x[i], y[i])``: one device program that reads no host value."""
        started = time.perf_counter(), time.process_time()
        lrs = [m.begin_step()[0] if going else 0.0 for m, going in zip(self.members, self._going)]
        lrs += [0.0] * (self.width - len(lrs))
        self.x = x
        self.log.note(self.step_count, lrs)
        self.program(self.state, x, y)
        self.step_count += 1
        self.step_tensor.fill_(self.step_count)
        for m in self.going:
            m.stepped(started)

    def _probes(self, i: int, model_level: dict[str, Any] | None) -> list[dict[str, Any]]:
        """Member ``i``'s probe records on its batch of this step, as :meth:`Training.probes` gives a solo run's: every
        member's come from one vmapped forward, at the first request."""
        step = self.step_count  # the pack's step: a member that diverged went back to its step
        on = self.tc.diagnostics
        if self._probed is None or self._probed[0] != step:
            with attention():
                self._probed = (step, probe_stacked(self.base, self.leaves, self.buffers, self.x, attention=on))
        records, logit_rms = self._probed[1][i]
        if model_level is not None and on:
            model_level["logit_rms"] = logit_rms
        if not on:  # not measured: absent, not null
            records = [{k: v for k, v in r.items() if k not in ("attn_logit_max", "attn_entropy_min")}
                       for r in records]
        return records

    def leave(self, member: Training) -> None:
        """``member``'s run ended: it reads and moves no more."""
        self.log.leave(member.member)
        self.state.live[member.member] = False
        self._going[member.member] = False
        self.going.remove(member)

    @torch.no_grad()
    def _accuracy(self, split: str) -> list[tuple[float, float, float, int]]:
        """Every member's (loss, accuracy, largest class share, size) of ``split``, in one vmapped pass."""
        step = self.step_count
        if self._evals[0] != step:
            self._evals = (step, {})
        if split not in self._evals[1]:
            first, n = self.members[0], self.width
            cfg, data = first.cfg, first.data
            loss_sum, correct = torch.zeros(n, device=self.device), torch.zeros(n, device=self.device)
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
               on_step: Callable[[int], None] | None = None, width: int = 0) -> list[dict[str, Any]]:
    """Train ``cfgs`` as one pack, each into its own folder as solo; their summaries in order. ``width``: under
    ``train.compile``, pad to this many rows with inert copies, so every pack of a shape runs one compiled step.
    Raises ValueError when the runs cannot share a pack, DiskFull when the disk fills."""
    keys = {pack_key(c) for c in cfgs}
    problems = [p for p in map(packable, cfgs) if p]
    if len(keys) > 1 or problems:
        raise ValueError(f"these runs cannot share a pack: {problems[0] if problems else 'they differ in more than '}"
                         f"{'' if problems else ', '.join(sorted(MEMBER_KEYS))}")
    extras = extras or [{} for _ in cfgs]
    # ``packed``: analysed apart from solo runs (bf16 rounds differently); ``peak_mem_scope``: the pack's peak_mem_mb.
    folders = [RunFolder(c, Path(o), {**e, "packed": True, "pack_size": len(cfgs), "peak_mem_scope": "pack"})
               for c, o, e in zip(cfgs, out_dirs, extras)]
    members: list[Training] = []
    data = None
    try:
        for folder, c in zip(folders, cfgs):
            try:
                c, _ = folder.start(c)
                data = data or load_dataset(c.data)  # one dataset for the pack
                training = Training(c, folder, data)
                with pack_members():  # the pack compiles its whole step, not each member's blocks
                    training.setup()
                members.append(training)
            except BaseException as err:
                folder.fail(err)  # raises what is not the run's fault
                folder.close()
        # Members resumed from different steps (one preempted alone, packed again) train as one pack per step, in turn.
        for step in sorted({m.state.step for m in members}):
            group = [m for m in members if m.state.step == step]
            try:
                _train(group, on_step, width)
            except Exception as err:  # the pack's own step raised (out of memory): each member ends error, as solo
                for m in group:
                    if not m.run.closed:
                        _close_metrics(m)
                        m.run.fail(err)  # raises what is not the run's fault (a full disk)
                        m.run.close()
    except BaseException:
        for m in members:
            if not m.run.closed:
                _close_metrics(m)
                if m.run.trackers is not None:
                    m.run.trackers.abort()
        raise
    return [f.summary for f in folders]


def _close_metrics(m: Training) -> None:
    if m.metrics is not None and not m.metrics.closed:
        with contextlib.suppress(OSError):  # a full disk fails its flush: the error raised says so
            m.metrics.close()


def _train(members: list[Training], on_step: Callable[[int], None] | None, width: int) -> None:
    first = members[0]
    set_matmul_precision(first.tc.precision, first.device)  # tf32 on CUDA: TF32 matmuls
    pack = Pack(members, width if compile_mode(first.tc.compile, first.device.type) else 0)
    seeds = [m.cfg.seed for m in members] + [first.cfg.seed] * (pack.width - len(members))  # inert rows: row 0's batches
    stream = PackStream(first.data, first.tc.batch_size, seeds, first.device, first.cfg.data.augment,
                        first.cfg.data.device_max_mb, first.cfg.data.num_workers)
    pack.x = next(stream.batches(first.state.step, first.state.step + 1))[0]  # the probes at step 0
    for m in members:
        m.begin()

    def ended(m: Training) -> None:
        pack.leave(m)
        m.metrics.close()
        if pack.program.mode is not None:  # compiled: did its step replay CUDA graphs, or run without them
            m.summary["cuda_graphs"] = pack.program.uses_cuda_graphs() and first.device.type == "cuda"
        if m.summary["status"] != "error":
            m.finish()
        m.run.close()

    run_steps(members, stream.batches(first.state.step, first.total_steps), pack.step, on_step, ended=ended,
              packed=True)
    for m in members:
        if not m.run.closed:
            ended(m)
