"""The per-step numbers a training step produces, kept on the device until the host reads them.

A step that hands its loss and gradient norm to the host (``loss.item()``) makes the host wait for
the device every step; on a GPU that wait, not the arithmetic, is most of a small model's step. So
each step writes its loss and gradient norm into a buffer on the device, and ``bad`` (a sticky flag:
a non-finite value at this step or an earlier one) is handed to the fused AdamW as its
``found_inf``, which then skips the update on the device, as under a gradient scaler. The host reads
the buffer in one transfer every ``train.log_every`` steps (and before an evaluation or a
checkpoint), and replays the steps in order to find the exact step that diverged: the weights did
not move after it, so nothing is lost by learning of it late.
"""

from __future__ import annotations

import torch


class StepLog:
    """Losses and gradient norms of up to ``capacity`` steps, on ``device``."""

    def __init__(self, capacity: int, device: torch.device) -> None:
        self.values = torch.zeros(capacity, 2, device=device)  # loss, gradient norm (fp32)
        self.bad = torch.zeros((), device=device)  # 1.0 once any step had a non-finite loss or norm
        self.first_step = 0
        self.lrs: list[float] = []

    def __len__(self) -> int:
        return len(self.lrs)

    def record(self, step: int, lr: float, loss: torch.Tensor, grad_norm: torch.Tensor) -> None:
        """Keep step ``step``'s numbers; device operations only, no host sync."""
        if not self.lrs:
            self.first_step = step
        i = len(self.lrs)
        self.values[i, 0] = loss.detach().float()
        self.values[i, 1] = grad_norm.detach().float()
        finite = torch.isfinite(self.values[i]).all()
        torch.maximum(self.bad, (~finite).float(), out=self.bad)
        self.lrs.append(lr)

    def read(self) -> list[tuple[int, float, float, float]]:
        """``(step, lr, loss, grad_norm)`` of every step since the last read, in one transfer; empties
        the buffer (the sticky ``bad`` flag stays)."""
        rows = self.values[: len(self.lrs)].tolist()
        out = [(self.first_step + i, lr, loss, norm) for i, (lr, (loss, norm)) in enumerate(zip(self.lrs, rows))]
        self.lrs = []
        return out
