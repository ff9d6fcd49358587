"""Which device a run uses, and how much memory it took at its peak."""

from __future__ import annotations

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
