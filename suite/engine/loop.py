"""One training run, end to end (:func:`train`, for ``suite train`` and the sweep): setup, optimizer steps, held-out
evaluation (which judges the run: :mod:`suite.engine.outcome`) and finish, the phases of :class:`Training`."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, TextIO

import torch
import torch.nn.functional as F

from suite import files, learned, store
from suite.config import DATA_SHAPE_KEYS, ConfigError, RunConfig, dump_yaml, flatten, to_dict
from suite.data import TrainStream, eval_batches, load_dataset
from suite.data.bundle import DatasetBundle
from suite.engine import checkpoint, diagnostics, outcome
from suite.engine.checkpoint import RunState
from suite.engine.divergence import SCALER, Rules, Verdict
from suite.engine.compiled import compile_for_run
from suite.engine.optim import build_optimizer, implementation, lr_at, set_lr
from suite.engine.precision import set_matmul_precision
from suite.engine.probes import finite_or_none, probe
from suite.engine.trackers import Trackers
from suite.engine.steplog import StepLog
from suite.engine.lifecycle import RunFolder, StopRun
from suite.engine.resources import peak_memory_mb, reset_peak_memory, set_deterministic
from suite.models import build_model, count_params

# A CPU run whose timed steps got less than this share of its threads' time was waiting for cores
# (other runs, other jobs): its step time measures the machine's load, not the scheme.
CONTENDED_BELOW = 0.85
SKIPPED = -1.0  # the gradient norm logged for a step the fp16 loss scaler skipped


class Diverged(Exception):
    """A divergence rule fired (:mod:`suite.engine.divergence`)."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(f"diverged at step {verdict.step}: {verdict.reason} ({verdict.detail})")
        self.verdict = verdict
        self.step, self.reason = verdict.step, verdict.reason


def train(cfg: RunConfig, out_dir: str | Path, *, progress: bool | None = None, extra: dict[str, Any] | None = None,
          on_step: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Train one ViT into ``out_dir`` (``config.yaml``, ``metrics.jsonl``, ``summary.json``: returned), resuming its
    ``checkpoint.pt``. ``progress``: a tqdm bar (None: if stderr is a terminal); ``extra``: top-level summary keys;
    ``on_step(step)`` may raise :class:`StopRun`. Raises DiskFull when the disk fills (no summary, checkpoint kept)."""
    with RunFolder(cfg, out_dir, extra) as run:
        cfg, _ = run.start(cfg)
        training = Training(cfg, run)
        training.setup()
        training.loop(progress, on_step)
        training.finish()
    return run.summary


class Training:
    """The state of one run between its phases; ``run.summary`` is filled in place."""

    def __init__(self, cfg: RunConfig, run: RunFolder, data: DatasetBundle | None = None, member: int = 0) -> None:
        self.cfg, self.run, self.out, self.device, self.summary = cfg, run, run.out, run.device, run.summary
        self.data, self.member = data, member  # a pack's members share one dataset; member: its index
        self.tc = cfg.train
        self.state = RunState()
        self.metrics: TextIO | None = None
        self.timed_wall = self.timed_cpu = 0.0  # seconds over the timed steps: wall clock, process CPU
        self.update_ratio: torch.Tensor | None = None  # of the last step before a log step (measured_update)

    # ------------------------------------------------------------------------- setup

    def setup(self) -> None:
        """Data, model, optimizer and the training stream; resume from a checkpoint if there is one."""
        tc = self.tc
        set_deterministic(tc.deterministic)
        set_matmul_precision(tc.precision, self.device)  # TF32 matmuls for fp32 on CUDA, as a pack does
        self.data = self.data or load_dataset(self.cfg.data)
        self.cfg = cfg = fill_model_shape(self.cfg, self.data)
        self.summary.update({k: v for k, v in flatten(to_dict(cfg)).items() if k.startswith("model.")})
        store.atomic_write_text(self.out / store.CONFIG, dump_yaml(cfg))

        torch.manual_seed(cfg.seed)  # init and drop-path draws; data order has its own generators
        self.model = build_model(cfg.model).to(self.device)
        self.summary["num_params"] = count_params(self.model)
        self.summary.update(train_size=self.data.train_size, val_size=self.data.val_size, test_size=self.data.test_size)
        self.optimizer = build_optimizer(self.model, tc, cfg.model)
        self.summary["optimizer_impl"] = implementation(self.optimizer)
        self.total_steps = cfg.train.total_steps(self.data.train_size)
        self.stream = TrainStream(self.data, tc.batch_size, cfg.seed, self.device, cfg.data.augment,
                                  cfg.data.device_max_mb, cfg.data.num_workers)
        ckpt = self.out / store.CHECKPOINT
        # A run that asked for no checkpoints loads none, unless it saved one when it was preempted.
        if ckpt.exists() and (tc.checkpoint_every > 0 or checkpoint.preempted(self.out)):
            self.state = checkpoint.load(ckpt, self.summary["run_id"], self.model, self.optimizer)
            checkpoint.truncate_metrics(self.out, self.state.step)
            self.summary["resumed_at"] = [*self.state.resumed_at, self.state.step]
            self.state.resumed_at = self.summary["resumed_at"]
        else:
            (self.out / store.METRICS).unlink(missing_ok=True)
        if tc.compile:  # in place, block by block: evaluation and probes run the compiled blocks too
            self.step_fn = compile_for_run(self.model, "default" if tc.compile is True else tc.compile)
        else:
            self.step_fn = self.model
        # resolved by RunFolder.start; fp16 (CUDA only) scales the loss (torch.amp.GradScaler)
        self.amp = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(tc.precision)
        self.use_bf16 = self.amp is torch.bfloat16  # a pack's stacked forward (suite.engine.pack)
        self.scaler = torch.amp.GradScaler(self.device.type, **SCALER) if tc.precision == "fp16" else None
        self.chance = math.log(self.data.num_classes)
        self.rules = Rules.of(tc, self.chance)
        check_held_out(self.data)
        reset_peak_memory(self.device)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.clip = tc.grad_clip if tc.grad_clip is not None else math.inf
        self.timed_from = self.state.step + tc.timing_warmup_steps
        # Device-side step numbers (StepLog); the fused AdamW skips updates once one is non-finite.
        self.steps = StepLog(max(1, tc.log_every), self.device)
        # Under fp16 the loss scaler hands the fused AdamW its own found_inf, and the host reads every step.
        self.sync_free = implementation(self.optimizer) == "fused" and self.scaler is None
        if self.sync_free:
            self.optimizer.found_inf = self.steps.bad[0]
        self.read_at = self.state.step  # the step of the last read
        self.window = (0.0, 0.0)  # wall and process time when the current read window began
        if self.scaler is not None and self.state.step:  # resumed: the scaler where the host's copy of it is
            w = self.state.watch
            self.scaler.load_state_dict({**SCALER, "scale": w.scale, "_growth_tracker": w.good_run})
        if tc.log_to:
            self.run.trackers = Trackers(tc.log_to, self.out, self.summary)  # the run closes them

    # ------------------------------------------------------------------------- the loop

    def loop(self, progress: bool | None, on_step: Callable[[int], None] | None) -> None:
        """Every step from the current one to the last; sets ``ok`` / ``failed`` / ``diverged``."""
        bar = _progress_bar(self.total_steps, self.state.step, progress)
        self.begin()
        try:
            run_steps([self], self.stream.batches(self.state.step, self.total_steps), self.step, on_step, bar)
        finally:
            self.metrics.close()
            if bar is not None:
                bar.close()

    def begin(self) -> None:
        """Open the metrics log; at step 0 log the probes before any update (where a re-init bug would show)."""
        self.metrics = files.open_append(self.out / store.METRICS)
        if self.state.step == 0:
            x0, _ = next(self.stream.batches(0, 1))
            self.log({"kind": "train", "step": 0, "loss": None, "lr": lr_at(0, self.total_steps, self.tc),
                      "grad_norm": None, "blocks": self.probes(x0)})
        self.model.train()

    def after_step(self, x: torch.Tensor, bar: Any = None) -> None:
        """What follows a step: the host read when due (:class:`Diverged` from :meth:`read`), evaluation, checkpoint."""
        tc, state = self.tc, self.state
        step = state.step
        evaluate = eval_due(step, tc.eval_every, tc.eval_schedule) or step == self.total_steps
        save = tc.checkpoint_every and step % tc.checkpoint_every == 0 and step < self.total_steps
        # The host reads at every log step, and every step without a fused AdamW.
        if evaluate or save or not self.sync_free or step % tc.log_every == 0:
            self.read(x)
        if evaluate:
            self.evaluate(step, final=step == self.total_steps)
        if save:
            self.save()
        if bar is not None:
            bar.update(1)
            if state.watch.ema is not None:
                bar.set_postfix(loss=f"{state.watch.ema:.3f}", refresh=False)

    def save(self, preempted: bool = False) -> None:
        """Checkpoint this step (``preempted``: marked so the run resumes from it even without periodic checkpoints)."""
        self.metrics.flush()
        checkpoint.save(self.out / store.CHECKPOINT, self.summary["run_id"], self.model, self.optimizer,
                        self.state, preempted=preempted)

    def completed(self) -> None:
        """Every step done: judge the run on its held-out evaluations (:mod:`suite.engine.outcome`)."""
        state = self.state
        status, reason, first = outcome.judge([(int(s), a) for s, a in state.evals], state.held_out_n,
                                              state.held_out_majority)
        self.summary.update(status=status, failed_reason=reason, steps_to_learn=first,
                            judged_on="val" if self.data.val is not None else "test")

    def stopped(self, stop: Diverged) -> None:
        """The run diverged: at which step, and why (and when it had learned, if it had)."""
        state = self.state
        _, _, first = outcome.judge([(int(s), a) for s, a in state.evals], state.held_out_n, state.held_out_majority)
        self.summary.update(status="diverged", diverged_step=stop.step, diverged_reason=stop.reason,
                            diverged_detail=stop.verdict.detail, steps_to_learn=first)
        self.log({"kind": "diverged", "step": stop.step, "reason": stop.reason, "detail": stop.verdict.detail})

    def step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """One optimizer step on ``(x, y)`` without waiting for the device: after a non-finite loss or norm the fused
        AdamW skips every update, and :meth:`read` finds the step (without a fused AdamW the host checks each one)."""
        lr, started = self.begin_step()
        with torch.autocast(self.device.type, dtype=self.amp or torch.float32, enabled=self.amp is not None):
            loss = F.cross_entropy(self.step_fn(x), y, label_smoothing=self.tc.label_smoothing)
        if self.scaler is None:
            loss.backward()
            self.end_step(loss, lr)
        else:
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.optimizer)  # clipping sees the true gradients
            self.end_scaled_step(loss, lr)
        self.optimizer.zero_grad(set_to_none=True)
        self.stepped(started)

    def begin_step(self) -> tuple[float, tuple[float, float]]:
        """Set this step's learning rate; returns it and the step's start (wall, process time)."""
        started = time.perf_counter(), time.process_time()
        if not self.steps:
            self.window = started
        lr = lr_at(self.state.step, self.total_steps, self.tc)
        set_lr(self.optimizer, lr)
        return lr, started

    def end_step(self, loss: torch.Tensor, lr: float) -> None:
        """After the backward: clip, keep the numbers on the device, update (skipped after a non-finite value)."""
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.clip)
        self.steps.record(self.state.step, lr, loss, grad_norm)
        if self.sync_free or not self.steps.bad.item():
            with self.measured_update():
                self.optimizer.step()

    @contextlib.contextmanager
    def measured_update(self) -> Iterator[None]:
        """With ``train.diagnostics``, around an update ending at a log step: ``||Δw|| / ||w||`` as a device tensor."""
        if not (self.tc.diagnostics and (self.state.step + 1) % max(1, self.tc.log_every) == 0):
            yield
            return
        before = [p.detach().clone() for p in self.params]
        yield
        with torch.no_grad():
            moved = torch.stack([(p.detach() - b).float().pow(2).sum() for p, b in zip(self.params, before)]).sum()
            size = torch.stack([b.float().pow(2).sum() for b in before]).sum().clamp_min(1e-30)
            self.update_ratio = (moved / size).sqrt()

    def end_scaled_step(self, loss: torch.Tensor, lr: float) -> None:
        """:meth:`end_step` under fp16 (waits for the device): a step the scaler skipped is logged with gradient norm
        :data:`SKIPPED`, so the replay counts it as skipped rather than non-finite."""
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.clip)
        before = self.scaler.get_scale()
        with self.measured_update():
            self.scaler.step(self.optimizer)
        self.scaler.update()
        skipped = self.scaler.get_scale() < before  # the scaler's own decision: it backs off only on a skip
        self.steps.record(self.state.step, lr, loss, torch.full_like(grad_norm, SKIPPED) if skipped else grad_norm)

    def stepped(self, started: tuple[float, float]) -> None:
        """Count the step just made (started at ``started``: wall, process time) and time it."""
        step = self.state.step
        self.state.step = step + 1
        if self.device.type != "cuda" and step >= self.timed_from:  # on a CPU each step's time is its own
            self._timed(time.perf_counter() - started[0], time.process_time() - started[1], 1)

    def read(self, x: torch.Tensor) -> None:
        """Replay the steps since the last read (one transfer): divergence rules, then the train record at a log step
        (probes on ``x``). Raises :class:`Diverged` at the exact step a rule fired."""
        tc, state = self.tc, self.state
        n = len(self.steps)
        if not n:
            return
        rows = self.steps.read(self.member)  # waits for the device: the end of this window's timing
        if self.device.type == "cuda" and rows[0][0] >= self.timed_from:
            (t0, c0), (t1, c1) = self.window, self.steps.read_at  # when the transfer ended (a pack's first read)
            self._timed(t1 - t0, c1 - c0, n)
        self.read_at = state.step
        for step, lr, loss_v, grad_v in rows:
            verdict = state.watch.observe(self.rules, step, loss_v, grad_v, skipped=self.scaler is not None
                                          and grad_v == SKIPPED)
            done = step + 1
            if verdict is not None:
                # Non-finite: the updates stopped at it (the fused AdamW skipped the rest). A spike or a collapse ends
                # the run at the step that decided it, as a host checking every step would; later steps are dropped.
                state.step = step if verdict.reason == "nonfinite" else done
                del state.step_times[max(0, state.step - self.timed_from):]
                raise Diverged(verdict)
            if done % tc.log_every == 0 or done == self.total_steps:  # only ever the last row: a read is due there
                model_level: dict[str, Any] = {}
                blocks = self.probes(x, model_level)
                ratio, self.update_ratio = self.update_ratio, None
                self.log({"kind": "train", "step": done, "loss": loss_v, "lr": lr,
                          "grad_norm": None if grad_v == SKIPPED and self.scaler is not None else grad_v,
                          **({**model_level, "update_ratio": None if ratio is None else finite_or_none(ratio.item())}
                             if tc.diagnostics else {}),
                          "blocks": blocks})

    def probes(self, x: torch.Tensor, model_level: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Per-block probe records on ``x``; with ``train.diagnostics`` also attention's, and the logits' RMS."""
        on = self.tc.diagnostics
        records = probe(self.model, x, model_level=model_level if on else None, attention=on)
        if not on:  # not measured: absent, not null
            for r in records:
                r.pop("attn_logit_max", None), r.pop("attn_entropy_min", None)
        return records

    def _timed(self, wall: float, cpu: float, steps: int) -> None:
        self.state.step_times.extend([wall / steps] * steps)
        self.timed_wall += wall
        self.timed_cpu += cpu

    @torch.no_grad()
    def evaluate(self, step: int, final: bool = True) -> None:
        """Held-out loss and accuracy, logged and kept: validation at every evaluation (it judges the run), test only
        at the ``final`` one (a periodic test pass would decide nothing), or at every one without validation."""
        state = self.state
        record: dict[str, Any] = {"kind": "eval", "step": step}
        held_out = "val" if self.data.val is not None else "test"
        self.model.eval()
        for split in ("val", "test"):
            if (split == "val" and self.data.val is None) or (split == "test" and not final and held_out == "val"):
                continue
            loss, acc, majority, n = self.accuracy(split)
            record.update({f"{split}_loss": loss, f"{split}_acc": acc})
            setattr(state, f"{split}_acc", acc)
            best = getattr(state, f"best_{split}_acc")
            setattr(state, f"best_{split}_acc", acc if best is None else max(best, acc))
            if split == held_out:
                state.evals.append([step, acc])
                state.held_out_n, state.held_out_majority = n, majority
        self.model.train()
        self.log(record)

    def accuracy(self, split: str) -> tuple[float, float, float, int]:
        """Mean loss, accuracy, largest class share and size of the whole ``split`` (``val`` or ``test``)."""
        cfg, device = self.cfg, self.device
        correct, total, loss_sum = 0, 0, 0.0
        counts = torch.zeros(self.data.num_classes, dtype=torch.long)
        for x, y in eval_batches(self.data, max(cfg.train.batch_size, 256), device, cfg.data.device_max_mb,
                                 cfg.data.num_workers, split=split):
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=self.use_bf16):
                logits = self.model(x)
            loss_sum += F.cross_entropy(logits.float(), y, reduction="sum").item()
            correct += (logits.argmax(-1) == y).sum().item()
            counts += torch.bincount(y.cpu(), minlength=self.data.num_classes)
            total += y.numel()
        return loss_sum / max(total, 1), correct / max(total, 1), counts.max().item() / max(total, 1), total

    # ------------------------------------------------------------------------- finish

    def finish(self) -> None:
        """The summary's results: steps, final loss, accuracy, step time, throughput, memory."""
        state, summary = self.state, self.summary
        summary.update(steps_done=state.step, final_train_loss=state.watch.ema,
                       spikes_recovered=state.watch.spikes_recovered)
        if self.scaler is not None:
            summary["scaler_skipped_steps"] = state.watch.skipped
        summary.update(val_acc=state.val_acc, best_val_acc=state.best_val_acc, test_acc=state.test_acc,
                       best_test_acc=state.best_test_acc)
        if state.step_times:
            med = statistics.median(state.step_times)
            images = min(self.tc.batch_size, self.data.train_size)  # a split under one batch: one step of all of it
            summary.update(step_time_ms=med * 1e3, throughput=images / med)
            summary.update(timing_contention(self.timed_cpu, self.timed_wall, torch.get_num_threads(), self.device))
        summary["peak_mem_mb"] = peak_memory_mb(self.device)
        if self.tc.diagnostics:  # each diagnostic's extreme and its step, and which passed their bounds
            found = diagnostics.peaks(store.read_metrics(self.out))
            summary.update(found, crossed=diagnostics.crossed(found))

    def log(self, record: dict[str, Any]) -> None:
        self.metrics.write(store.metrics_line(record))
        if record.get("kind") == "train":  # every log_every steps: progress lines (and a killed run) see it
            self.metrics.flush()
        if self.run.trackers is not None:
            self.run.trackers.log(record)


def run_steps(members: list[Training], batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
              step: Callable[[torch.Tensor, torch.Tensor], None], on_step: Callable[[int], None] | None = None,
              bar: Any = None, ended: Callable[[Training], None] = lambda m: None, packed: bool = False) -> None:
    """The training loop of a solo run or a pack (``packed``: batches lead with the member): ``step(x, y)`` steps every
    member, then each reads, evaluates and saves when due. A member that diverges (or, in a pack, raises) leaves alone
    (``ended``). ``on_step(step)`` may raise :class:`StopRun`; with ``save``, every member still going checkpoints."""
    live = list(members)
    for x, y in batches:
        step(x, y)
        for m in list(live):
            try:
                m.after_step(x[m.member] if packed else x, bar)
            except Diverged as stop:
                m.stopped(stop)
                live.remove(m)
                ended(m)
            except Exception as err:  # noqa: BLE001  (one member's failure ends it alone)
                if not packed:
                    raise
                live.remove(m)
                m.run.fail(err)
                ended(m)
        if not live:
            return
        if on_step is not None:
            try:
                on_step(live[0].state.step)
            except StopRun as stop:
                if stop.save and live[0].state.step >= live[0].total_steps:
                    continue  # the last step is done: finishing costs less than redoing it
                for m in list(live) if stop.save else []:
                    try:
                        m.read(x[m.member] if packed else x)  # the state saved must be this step's
                        m.save(preempted=True)
                    except Diverged as decided:  # its last steps decided it: nothing to resume
                        m.stopped(decided)
                        live.remove(m)
                        ended(m)
                if live or not stop.save:
                    raise
                return
    for m in live:
        m.completed()


def timing_contention(cpu_s: float, wall_s: float, threads: int, device: torch.device) -> dict[str, Any]:
    """How much of the cores the timed steps got (``timing_cpu_util``: CPU time / (wall x threads)), the load, the
    cores, and ``timing_contended`` (a CPU run below :data:`CONTENDED_BELOW`; not judged on CUDA)."""
    util = cpu_s / (wall_s * max(threads, 1)) if wall_s > 0 else None
    try:
        load1 = round(os.getloadavg()[0], 2)
    except OSError:
        load1 = None
    contended = None if device.type != "cpu" or util is None else bool(util < CONTENDED_BELOW)
    return {"timing_cpu_util": None if util is None else round(util, 3), "timing_load1": load1,
            "timing_cores": os.cpu_count(), "timing_contended": contended}


def eval_due(step: int, every: int, schedule: str) -> bool:
    """Whether an evaluation is due after ``step`` steps: every ``every`` (0: never); ``log`` adds 5, 10, 20, 40, ..."""
    if not every:
        return False
    if step % every == 0:
        return True
    if schedule != "log" or step < 5 or step >= every:
        return False
    k = step // 5
    return step % 5 == 0 and k & (k - 1) == 0  # 5 x a power of two


def check_held_out(data: DatasetBundle) -> None:
    """Refuse a held-out split too small for the learning test to pass even at 100% accuracy."""
    name, split = ("val", data.val) if data.val is not None else ("test", data.test)
    labels = getattr(split, "y", getattr(split, "targets", None))
    if labels is None and isinstance(split, torch.utils.data.Subset):  # a validation split carved from a Dataset
        targets = getattr(split.dataset, "targets", None)
        labels = None if targets is None else torch.as_tensor(targets, dtype=torch.int64)[torch.as_tensor(split.indices)]
    if labels is None:
        return
    counts = torch.bincount(torch.as_tensor(labels, dtype=torch.int64))
    n = int(counts.sum())
    if n and int(counts.max()) == n:
        raise ConfigError(f"data.val_fraction: the {name} split that judges each run holds images of one class only, "
                          f"so no accuracy can show learning; give the dataset two or more classes in it")
    if n and not learned.can_pass(n, int(counts.max()) / n):
        fix = "raise data.val_fraction" if name == "val" else "set data.val_fraction above 0"
        raise ConfigError(f"data.val_fraction: the {name} split that judges each run holds {n} images (largest class "
                          f"{int(counts.max())}), too few for the learning test to pass even at 100% accuracy; it "
                          f"needs about {learned.smallest_passing(int(counts.max()) / n)}: {fix}")


def fill_model_shape(cfg: RunConfig, data: DatasetBundle) -> RunConfig:
    """Take img_size / in_chans / num_classes from the dataset where the config leaves them None."""
    found = {key: getattr(data, key) for key in DATA_SHAPE_KEYS}
    for key, value in found.items():
        mine = getattr(cfg.model, key)
        if mine is not None and mine != value:
            raise ValueError(f"model.{key}={mine} does not match dataset '{data.name}' ({value}); leave it unset")
    return dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, **found))


def _progress_bar(total: int, start: int, progress: bool | None):
    if not (sys.stderr.isatty() if progress is None else progress):
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=start, unit="step", dynamic_ncols=True, leave=False)
