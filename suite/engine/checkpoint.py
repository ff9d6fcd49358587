"""Checkpoints of one run: save, restore bit-identically (``weights_only``, and only the run's own), cut the metrics log
back to match."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
from torch import nn

from suite import store
from suite.engine.divergence import Watch


@dataclasses.dataclass
class RunState:
    """Everything besides the weights and the optimizer that a checkpoint must restore."""

    step: int = 0
    watch: Watch = dataclasses.field(default_factory=Watch)  # the divergence rules' state (smoothed loss, ...)
    evals: list[list[float]] = dataclasses.field(default_factory=list)  # [step, held-out accuracy] per evaluation
    held_out_n: int = 0  # examples in the held-out split the outcome is judged on
    held_out_majority: float = 0.0  # its largest class share
    best_test_acc: float | None = None
    test_acc: float | None = None
    best_val_acc: float | None = None
    val_acc: float | None = None
    step_times: list[float] = dataclasses.field(default_factory=list)
    resumed_at: list[int] = dataclasses.field(default_factory=list)  # steps this run was resumed from


class CheckpointError(Exception):
    """A checkpoint that must not be used: unsafe to load, damaged, or another run's."""


PREEMPTED = "preempted.json"  # beside a checkpoint saved because the worker was preempted
# Bumped whenever a checkpoint's layout changes (4: the run state keeps the divergence rules' Watch); older are refused.
FORMAT = 4


def preempted(run_dir: Path, clear: bool = False) -> bool:
    """Whether the checkpoint was saved at a preemption (resumed even if not periodic); ``clear`` drops the mark."""
    mark = Path(run_dir) / PREEMPTED
    if clear:
        mark.unlink(missing_ok=True)
        return False
    return mark.is_file()


def save(path: Path, run_id: str, model: nn.Module, optimizer: torch.optim.Optimizer, state: RunState,
         preempted: bool = False) -> None:
    """Write the checkpoint atomically; ``preempted``: marked so the run resumes from it even without periodic ones."""
    ckpt = {
        "format": FORMAT, "run_id": run_id, "model": _own(model.state_dict()), "optimizer": _own(optimizer.state_dict()),
        "state": dataclasses.asdict(state), "cpu_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }
    store.atomic_write(path, lambda f: torch.save(ckpt, f))
    if preempted:
        store.write_json(path.parent / PREEMPTED, {"step": state.step})


def _own(obj, seen: set[int] | None = None):
    """``obj`` with views (a pack member's row) and repeated tensors copied out, as ``torch.save`` keeps storages."""
    seen = set() if seen is None else seen
    if isinstance(obj, torch.Tensor):
        copy = obj.untyped_storage().nbytes() > obj.nbytes or id(obj) in seen
        seen.add(id(obj))
        return obj.clone() if copy else obj
    if isinstance(obj, dict):
        return {k: _own(v, seen) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_own(v, seen) for v in obj)
    return obj


def load(path: Path, run_id: str, model: nn.Module, optimizer: torch.optim.Optimizer) -> RunState:
    """Restore weights, optimizer, RNG states and the run state; :class:`CheckpointError` if unsafe, torn or foreign."""
    try:
        # To the CPU first: load_state_dict leaves AdamW's `step` counters where they were loaded, and on a GPU the
        # non-fused update would sync on them.
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001  (an unsafe pickle, a torn file: never run, never trusted)
        raise CheckpointError(f"{path}: refused to load it ({type(err).__name__}: {str(err).splitlines()[0][:200]}); "
                              f"delete it to start this run from step 0") from None
    found = ckpt.get("run_id") if isinstance(ckpt, dict) else None
    if found != run_id:
        raise CheckpointError(f"{path}: written by run {found!r}, not by this run ({run_id}); "
                              f"delete it to start this run from step 0")
    if ckpt.get("format", 1) != FORMAT:
        raise CheckpointError(f"{path}: checkpoint format {ckpt.get('format', 1)} (written by an older suite); this "
                              f"suite resumes format {FORMAT} only: delete it to start this run from step 0")
    try:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        _check_optimizer_shapes(optimizer)
    except torch.OutOfMemoryError:
        raise
    except (KeyError, RuntimeError, ValueError) as err:  # another model, or an older layout of its optimizer
        raise CheckpointError(f"{path}: does not fit this run's model or optimizer ({type(err).__name__}: "
                              f"{str(err).splitlines()[0][:200]}); delete it to start this run from step 0") from None
    torch.set_rng_state(ckpt["cpu_rng"].cpu())
    if ckpt["cuda_rng"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in ckpt["cuda_rng"]])
    state = RunState(**ckpt["state"])
    state.watch = Watch(**state.watch)
    state.step_times = []  # timings restart: the resumed process warms up again
    return state


def _check_optimizer_shapes(optimizer: torch.optim.Optimizer) -> None:
    """AdamW maps loaded state by position, so another layout with the same counts would load: shapes give it away."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            for key, value in optimizer.state.get(p, {}).items():
                if torch.is_tensor(value) and value.dim() > 0 and value.shape != p.shape:
                    raise ValueError(f"optimizer state {key!r} has shape {tuple(value.shape)}, "
                                     f"its parameter {tuple(p.shape)}")


def truncate_metrics(run_dir: Path, step: int) -> None:
    """Drop metric records written after the checkpoint (and damaged lines, with a warning)."""
    path = Path(run_dir) / store.METRICS
    if not path.exists():
        return
    keep = [r for r in store.read_metrics(run_dir, skip_damaged=True)
            if isinstance(r.get("step"), int) and not isinstance(r.get("step"), bool) and r["step"] <= step]
    store.atomic_write_text(path, "".join(store.metrics_line(r) for r in keep))
