"""What ``train.precision`` sets in torch beyond autocast: ``tf32`` runs fp32 matmuls in TF32 (docs/training.md).
The setting is process-wide, so every run sets it (a sweep worker's next run may differ)."""

from __future__ import annotations

import torch


def set_matmul_precision(precision: str, device: torch.device) -> None:
    """TF32 matmuls for a ``tf32`` run on CUDA, IEEE fp32 for any other CUDA run, nothing elsewhere."""
    if device.type == "cuda":
        torch.set_float32_matmul_precision("high" if precision == "tf32" else "highest")
