"""Each step's loss and gradient norm, kept on the device until the host reads them every ``train.log_every`` steps:
``loss.item()`` per step would make the host wait for the device (docs/training.md, "A step that does not wait for the
host"). The sticky non-finite flag ``bad`` is the AdamW's ``found_inf``; step ``s`` goes to row ``s % capacity``."""

from __future__ import annotations

import time

import torch


def write(values: torch.Tensor, bad: torch.Tensor, row: int | torch.Tensor, loss: torch.Tensor,
          grad_norm: torch.Tensor) -> None:
    """Device operations only: ``loss`` and ``grad_norm`` into ``values[row]``, and the flags ``bad``; ``row`` may be a
    tensor (a compiled step)."""
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
        """The host's half of recording ``step``: its learning rate(s); returns the row for :func:`write`."""
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
        """``(step, lr, loss, grad_norm)`` of ``member``'s steps since its last read; one transfer for all members."""
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
