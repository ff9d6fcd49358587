"""What a run's resolved ``train.precision`` sets in torch beyond autocast: ``tf32`` runs fp32 matmuls in TF32.

``train.precision: auto`` resolves to ``tf32`` below :data:`suite.config.BF16_MIN_WIDTH` on CUDA, where
bf16 would only add casts: fp32 matmuls on the tensor cores in TF32 (10-bit mantissa, fp32 range and
accumulation), which costs nothing in a launch-bound step and keeps wide fp32 runs from being several
times slower than they need be. Every other CUDA run (``fp32`` explicitly: IEEE) keeps full fp32
matmuls. On a CPU nothing changes. The setting is process-wide, so every run sets it (a sweep worker's
next run may be bf16).
"""

from __future__ import annotations

import torch


def set_matmul_precision(precision: str, device: torch.device) -> None:
    """TF32 fp32 matmuls for a ``tf32`` run on CUDA, full fp32 (IEEE) for any other CUDA run; nothing on
    other devices. Uses the one API (``torch.set_float32_matmul_precision``) that keeps torch's
    legacy and per-backend views of the setting consistent."""
    if device.type == "cuda":
        torch.set_float32_matmul_precision("high" if precision == "tf32" else "highest")
