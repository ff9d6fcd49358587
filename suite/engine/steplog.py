"""The per-step numbers a training step produces, kept on the device until the host reads them.

A step that hands its loss and gradient norm to the host (``loss.item()``) makes the host wait for
the device every step; on a GPU that wait, not the arithmetic, is most of a small model's step. So
each step writes its loss and gradient norm into a buffer on the device, and ``bad`` (a sticky flag:
a non-finite value at this step or an earlier one) is handed to the AdamW as its ``found_inf``
(or, in a pack, its skip mask), which then skips the update on the device, as under a gradient
scaler. The host reads the buffer in one transfer every ``train.log_every`` steps (and before an
evaluation or a checkpoint), and replays the steps in order to find the exact step that diverged:
the weights did not move after it, so nothing is lost by learning of it late.

Step ``s`` is written to row ``s % capacity``: a window between two reads is at most ``capacity``
consecutive steps, so its rows are distinct, and the row is a function of the step alone. A packed
step (:mod:`suite.engine.packstep`) computes it from its step count on the device (:func:`write`),
so no host value enters the step; the host keeps only the learning rates it logs (:meth:`StepLog.note`).

A pack of N runs keeps one log with a member dimension (``[capacity, N]``); one transfer serves every
member, and each member reads its own column.
"""

from __future__ import annotations

import time

import torch


def write(values: torch.Tensor, bad: torch.Tensor, row: int | torch.Tensor, loss: torch.Tensor,
          grad_norm: torch.Tensor) -> None:
    """Device operations only: ``loss`` and ``grad_norm`` (scalars or ``[members]``) into ``values[row]``
    (``values`` ``[capacity, members, 2]``), and the sticky non-finite flags ``bad`` ``[members]``.
    ``row`` may be a tensor (a compiled step indexes with its step count)."""
    got = torch.stack([loss.detach().float(), grad_norm.detach().float()], -1).expand(values.shape[1:])
    if isinstance(row, torch.Tensor):  # an index tensor, not a 0-dim one (which dynamo would read to the host)
        values.index_copy_(0, row.reshape(1), got[None])
    else:
        values[row] = got
    bad.copy_(torch.maximum(bad, (~torch.isfinite(got).all(-1)).float()))


class StepLog:
    """Losses and gradient norms of up to ``capacity`` steps of ``members`` runs, on ``device``."""

    def __init__(self, capacity: int, device: torch.device, members: int = 1) -> None:
        self.values = torch.zeros(capacity, members, 2, device=device)  # loss, gradient norm (fp32)
        self.bad = torch.zeros(members, device=device)  # 1.0 once a member had a non-finite loss or norm
        self.first_step = 0
        self.lrs: list[list[float]] = []  # per recorded step, each member's learning rate
        self._host: list | None = None  # the window's values once transferred
        self._members = set(range(members))  # members still reading
        self._unread = set(self._members)
        self.read_at = (0.0, 0.0)

    def __len__(self) -> int:
        return len(self.lrs)

    @property
    def capacity(self) -> int:
        return self.values.shape[0]

    def note(self, step: int, lr: float | list[float]) -> int:
        """The host's half of recording step ``step``: its learning rate(s); returns the row the step's
        numbers go to (:func:`write`)."""
        if len(self.lrs) >= self.capacity:
            raise RuntimeError(f"step log: {len(self.lrs)} steps recorded since the last read, at most "
                               f"{self.capacity} fit")
        if not self.lrs:
            self.first_step = step
        self.lrs.append(lr if isinstance(lr, list) else [lr])
        return step % self.capacity

    def record(self, step: int, lr: float | list[float], loss: torch.Tensor, grad_norm: torch.Tensor) -> None:
        """Keep step ``step``'s numbers (scalars, or ``[members]`` tensors); device operations only."""
        write(self.values, self.bad, self.note(step, lr), loss, grad_norm)

    def read(self, member: int = 0) -> list[tuple[int, float, float, float]]:
        """``(step, lr, loss, grad_norm)`` of ``member``'s steps since its last read. The first member
        to read transfers the window for all; once every member has read it, the buffer empties (the
        sticky ``bad`` flags stay)."""
        if self._host is None:
            n, start = len(self.lrs), self.first_step % self.capacity
            if start + n <= self.capacity:
                window = self.values[start:start + n]
            else:  # the window wrapped around the end of the buffer
                window = torch.cat([self.values[start:], self.values[:start + n - self.capacity]])
            self._host = window.tolist()
            self.read_at = time.perf_counter(), time.process_time()  # wall, process time when it arrived
        out = [(self.first_step + k, lrs[member], *vals[member]) for k, (lrs, vals) in enumerate(zip(self.lrs, self._host))]
        self._unread.discard(member)
        if not self._unread:
            self._reset()
        return out

    def leave(self, member: int) -> None:
        """``member`` reads no more (its run ended inside a pack)."""
        self._members.discard(member)
        self._unread.discard(member)
        if not self._unread:
            self._reset()

    def _reset(self) -> None:
        self.lrs, self._host, self._unread = [], None, set(self._members)
