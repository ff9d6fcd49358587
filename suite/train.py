"""One training run, end to end: data, model, AdamW + warmup/cosine, divergence, probes, timing.

:func:`train` is what ``suite train`` and the sweep runner call for every run. It always writes
``summary.json`` with exactly one status (``ok``, ``diverged``, ``failed``, ``error``); an exception
inside a run becomes ``error`` with its message, so a sweep never dies of one run.
"""

from __future__ import annotations

import dataclasses
import json
import math
import resource
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from suite import store
from suite.config import RunConfig, dump_yaml, flatten, to_dict
from suite.data import TrainStream, eval_batches, load_dataset
from suite.models import build_model, count_params
from suite.monitor import probe
from suite.optim import build_optimizer, lr_at
from suite.store import CHECKPOINT, CONFIG, METRICS, SUMMARY

SPIKE_EMA = 0.9  # smoothing of the loss used for the spike rule and final_train_loss


class Diverged(Exception):
    def __init__(self, step: int, reason: str) -> None:
        super().__init__(f"diverged at step {step}: {reason}")
        self.step, self.reason = step, reason


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' requested but torch sees no CUDA device (use --device cpu or auto)")
    return torch.device(device)


@dataclasses.dataclass
class _State:
    """Everything a checkpoint must restore to continue bit-identically."""

    step: int = 0
    ema: float | None = None
    best_ema: float = math.inf
    best_test_acc: float | None = None
    test_acc: float | None = None
    step_times: list[float] = dataclasses.field(default_factory=list)


def train(
    cfg: RunConfig,
    out_dir: str | Path,
    *,
    progress: bool | None = None,
    extra: dict[str, Any] | None = None,
    on_step: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Train one ViT and write ``config.yaml``, ``metrics.jsonl`` and ``summary.json`` to ``out_dir``.

    Args:
        cfg: the resolved run config (validated).
        out_dir: the run folder; a ``checkpoint.pt`` there (from a killed run) is resumed from.
        progress: show a tqdm bar; ``None`` = only when stderr is a terminal.
        extra: top-level keys added to the summary (the sweep adds ``ablation``, ``variant``).
        on_step: called after every optimizer step with the step number (tests inject faults here).

    Returns:
        The summary dict (also written atomically to ``out_dir/summary.json``).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / SUMMARY).unlink(missing_ok=True)
    t0 = time.perf_counter()
    summary = store.empty_summary(cfg, extra)
    device = torch.device("cpu")
    try:
        device = resolve_device(cfg.device)
        summary.update(store.provenance(str(device)))
        _run(cfg, out, device, summary, progress, on_step)
    except Exception as err:  # one run's failure must never stop a sweep
        summary["status"] = "error"
        summary["error"] = f"{type(err).__name__}: {err}".splitlines()[0][:500]
        with open(out / "log.txt", "a") as log:
            log.write(traceback.format_exc())
        if "device_name" not in summary:
            summary.update(store.provenance(str(device)))
    summary["wall_s"] = round(time.perf_counter() - t0, 3)
    store.write_json(out / SUMMARY, summary)
    (out / CHECKPOINT).unlink(missing_ok=True)
    return summary


def _run(cfg: RunConfig, out: Path, device: torch.device, summary: dict, progress: bool | None,
         on_step: Callable[[int], None] | None) -> None:
    tc = cfg.train
    if tc.threads:
        torch.set_num_threads(tc.threads)
    data = load_dataset(cfg.data)
    cfg = _fill_model_shape(cfg, data)
    summary.update({k: v for k, v in flatten(to_dict(cfg)).items() if k.startswith("model.")})
    store.atomic_write_text(out / CONFIG, dump_yaml(cfg))

    torch.manual_seed(cfg.seed)  # init and drop-path draws; data order has its own generators
    model = build_model(cfg.model).to(device)
    summary["num_params"] = count_params(model)
    optimizer = build_optimizer(model, tc)
    total_steps = _total_steps(cfg, data.train_size)
    stream = TrainStream(data, tc.batch_size, cfg.seed, device, cfg.data.augment,
                         cfg.data.device_max_mb, cfg.data.num_workers)
    state = _State()
    ckpt = out / CHECKPOINT
    if ckpt.exists():
        state = _load_checkpoint(ckpt, model, optimizer, device)
        _truncate_metrics(out / METRICS, state.step)
    else:
        (out / METRICS).unlink(missing_ok=True)
    step_fn = torch.compile(model) if tc.compile else model
    use_bf16 = tc.precision == "bf16" or (tc.precision == "auto" and device.type == "cuda")
    chance = math.log(data.num_classes)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    else:
        _reset_peak_rss()
    params = [p for p in model.parameters() if p.requires_grad]
    clip = tc.grad_clip if tc.grad_clip is not None else math.inf
    timed_from = state.step + tc.timing_warmup_steps

    bar = _progress_bar(total_steps, state.step, progress)
    metrics = open(out / METRICS, "a")
    try:
        if state.step == 0:
            # The scales as initialised, before any update: a re-init bug (timm once reset its
            # gamma to 1) shows here. Probes take no gradients and draw no random numbers.
            x0, _ = next(stream.batches(0, 1))
            _log(metrics, {"kind": "train", "step": 0, "loss": None, "lr": lr_at(0, total_steps, tc),
                           "grad_norm": None, "blocks": probe(model, x0)})
        model.train()
        step = state.step
        for x, y in stream.batches(state.step, total_steps):
            t_start = time.perf_counter()
            lr = lr_at(step, total_steps, tc)
            for group in optimizer.param_groups:
                group["lr"] = lr
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16):
                loss = F.cross_entropy(step_fn(x), y, label_smoothing=tc.label_smoothing)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(params, clip)
            loss_v, grad_v = loss.item(), grad_norm.item()  # one sync per step, also for timing
            if not math.isfinite(loss_v):
                raise Diverged(step, "nonfinite_loss")
            if not math.isfinite(grad_v):
                raise Diverged(step, "nonfinite_grad")
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if step >= timed_from:
                state.step_times.append(time.perf_counter() - t_start)
            step += 1
            state.step = step
            state.ema = loss_v if state.ema is None else SPIKE_EMA * state.ema + (1 - SPIKE_EMA) * loss_v
            if step > tc.warmup_steps:
                if loss_v > tc.spike_factor * state.best_ema and loss_v > chance:
                    raise Diverged(step, "loss_spike")
                state.best_ema = min(state.best_ema, state.ema)
            if step % tc.log_every == 0 or step == total_steps:
                _log(metrics, {"kind": "train", "step": step, "loss": loss_v, "lr": lr, "grad_norm": grad_v,
                               "blocks": probe(model, x)})
            if (tc.eval_every and step % tc.eval_every == 0) or step == total_steps:
                _evaluate(model, data, cfg, device, use_bf16, state, metrics, step)
            if tc.checkpoint_every and step % tc.checkpoint_every == 0 and step < total_steps:
                metrics.flush()
                _save_checkpoint(ckpt, model, optimizer, state)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{state.ema:.3f}", refresh=False)
            if on_step is not None:
                on_step(step)
        summary["status"] = "ok"
        if state.ema is not None and state.ema >= tc.fail_fraction * chance:
            summary["status"] = "failed"
    except Diverged as d:
        summary.update(status="diverged", diverged_step=d.step, diverged_reason=d.reason)
        _log(metrics, {"kind": "diverged", "step": d.step, "reason": d.reason})
    finally:
        metrics.close()
        if bar is not None:
            bar.close()
    summary["steps_done"] = state.step
    summary["final_train_loss"] = state.ema
    summary["test_acc"] = state.test_acc
    summary["best_test_acc"] = state.best_test_acc
    if state.step_times:
        med = statistics.median(state.step_times)
        summary["step_time_ms"] = med * 1e3
        summary["throughput"] = tc.batch_size / med
    summary["peak_mem_mb"] = _peak_mem_mb(device)


def _fill_model_shape(cfg: RunConfig, data) -> RunConfig:
    """Take img_size / in_chans / num_classes from the dataset where the config leaves them None."""
    m = cfg.model
    found = {"img_size": data.img_size, "in_chans": data.in_chans, "num_classes": data.num_classes}
    for key, value in found.items():
        mine = getattr(m, key)
        if mine is not None and mine != value:
            raise ValueError(f"model.{key}={mine} does not match dataset '{data.name}' ({value}); leave it unset")
    model = dataclasses.replace(m, **found)
    return dataclasses.replace(cfg, model=model)


def _total_steps(cfg: RunConfig, train_size: int) -> int:
    tc = cfg.train
    if tc.epochs is not None:
        return max(1, math.ceil(tc.epochs * train_size / tc.batch_size))
    return tc.steps


@torch.no_grad()
def _evaluate(model: nn.Module, data, cfg: RunConfig, device: torch.device, use_bf16: bool,
              state: _State, metrics, step: int) -> None:
    model.eval()
    correct, total, loss_sum = 0, 0, 0.0
    for x, y in eval_batches(data, max(cfg.train.batch_size, 256), device, cfg.data.device_max_mb,
                             cfg.data.num_workers):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16):
            logits = model(x)
        loss_sum += F.cross_entropy(logits.float(), y, reduction="sum").item()
        correct += (logits.argmax(-1) == y).sum().item()
        total += y.numel()
    model.train()
    acc = correct / max(total, 1)
    state.test_acc = acc
    state.best_test_acc = acc if state.best_test_acc is None else max(state.best_test_acc, acc)
    _log(metrics, {"kind": "eval", "step": step, "test_loss": loss_sum / max(total, 1), "test_acc": acc})


def _log(f, record: dict[str, Any]) -> None:
    # Every value logged is finite by construction (non-finite losses end the run first; probes
    # map non-finite values to null), so a NaN here is a bug and must raise, not be written.
    f.write(json.dumps(record, allow_nan=False) + "\n")


def _progress_bar(total: int, start: int, progress: bool | None):
    if progress is None:
        progress = sys.stderr.isatty()
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=start, unit="step", dynamic_ncols=True, leave=False)


def _reset_peak_rss() -> None:
    """Reset the process's peak-RSS mark (Linux >= 4.0), so a worker's earlier runs do not count."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _peak_mem_mb(device: torch.device) -> float:
    """Peak CUDA memory allocated, or on CPU the process's peak RSS since ``_reset_peak_rss``."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _save_checkpoint(path: Path, model: nn.Module, optimizer, state: _State) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save({
        "model": model.state_dict(), "optimizer": optimizer.state_dict(),
        "state": dataclasses.asdict(state), "cpu_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }, tmp)
    tmp.replace(path)


def _load_checkpoint(path: Path, model: nn.Module, optimizer, device: torch.device) -> _State:
    ckpt = torch.load(path, map_location=device, weights_only=False)
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    torch.set_rng_state(ckpt["cpu_rng"].cpu())
    if ckpt["cuda_rng"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in ckpt["cuda_rng"]])
    state = _State(**ckpt["state"])
    state.step_times = []  # timings restart: the resumed process warms up again
    return state


def _truncate_metrics(path: Path, step: int) -> None:
    """Drop metric lines written after the checkpoint, so a resumed run's log has no duplicates."""
    if not path.exists():
        return
    keep = [line for line in path.read_text().splitlines() if line.strip() and json.loads(line)["step"] <= step]
    store.atomic_write_text(path, "".join(line + "\n" for line in keep))
