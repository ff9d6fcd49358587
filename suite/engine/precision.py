"""What a run's resolved ``train.precision`` sets in torch beyond autocast: ``tf32`` runs fp32 matmuls in TF32.

``auto`` resolves to ``tf32`` on CUDA below :data:`suite.config.BF16_MIN_WIDTH`, where bf16 would only add casts
(docs/training.md, ``train.precision``); every other CUDA run keeps IEEE fp32 matmuls, and a CPU is untouched. The
setting is process-wide, so every run sets it (a sweep worker's next run may be bf16).
"""

from __future__ import annotations

import torch


def set_matmul_precision(precision: str, device: torch.device) -> None:
    """TF32 matmuls for a ``tf32`` run on CUDA, IEEE fp32 for any other CUDA run, nothing elsewhere. Uses the one API
    that keeps torch's legacy and per-backend views of the setting consistent."""
    if device.type == "cuda":
        torch.set_float32_matmul_precision("high" if precision == "tf32" else "highest")
