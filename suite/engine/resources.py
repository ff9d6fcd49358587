"""Which device a run uses, whether its CUDA kernels are deterministic, and how much memory it took at its peak."""

from __future__ import annotations

import os
import resource
from pathlib import Path

import torch


def resolve_device(device: str) -> torch.device:
    """``auto`` -> CUDA when torch sees a GPU, else CPU; ``cuda`` without a GPU is an error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' requested but torch sees no CUDA device (use --device cpu or auto)")
    return torch.device(device)


def set_deterministic(on: bool) -> None:
    """``train.deterministic`` for the whole process, set or cleared so a sweep worker's next run gets its own."""
    if on:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if torch.are_deterministic_algorithms_enabled() != on:  # the call imports torch._inductor (seconds)
        torch.use_deterministic_algorithms(on)
    torch.backends.cudnn.deterministic = on
    torch.backends.cudnn.benchmark = False


def available_memory(device: torch.device) -> float | None:
    """Bytes a run may use on ``device``: GPU memory, or RAM capped by ``ulimit -v``; None when unknown."""
    if device.type == "cuda":
        return float(torch.cuda.get_device_properties(device).total_memory)
    if device.type != "cpu":
        return None
    try:
        ram = float(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    return ram if limit == resource.RLIM_INFINITY else min(ram, float(limit))


def memory_problem(cfg, device: torch.device, pack: tuple[int, float] | None = None) -> str | None:
    """The one-line refusal when ``cfg``'s run (``pack``: N runs' bytes) cannot fit in ``device``'s memory, or None."""
    from suite.config import memory_estimate

    need, how = memory_estimate(cfg)
    if pack is not None:
        need = pack[1]
        how = f"{need / 2**30:.3g} GiB for a pack of {pack[0]} (--pack)"
    have = available_memory(device)
    if have is None or need <= have:
        return None
    fix = "lower --pack, train.batch_size, model.dim or model.depth" if pack is not None else \
        "lower train.batch_size, model.dim or model.depth"
    return f"this run needs at least {how}; {device.type} has {have / 2**30:.3g} GiB; {fix}"


def reset_peak_memory(device: torch.device) -> None:
    """Start counting peak memory now: CUDA's allocator stats, or the process's peak RSS."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:  # Linux >= 4.0: reset VmHWM, so a worker's earlier runs do not count
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def peak_memory_mb(device: torch.device) -> float:
    """Peak CUDA memory allocated, or on CPU the process's peak RSS since :func:`reset_peak_memory`."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
