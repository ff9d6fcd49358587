"""Progress of one training run as plain lines, for ``suite train`` without a terminal (a log file, a Slurm job); from
the run's ``on_step`` callback and its ``metrics.jsonl``'s tail, so the training loop needs no second channel."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Callable, TextIO

from suite import files, store
from suite.sweep.status import format_duration

TAIL_BYTES = 1 << 20  # the loss is looked for in the last MiB of metrics.jsonl (a record is ~150 bytes a block)


def last_loss(path: Path) -> tuple[int, float] | None:
    """``(step, loss)`` of the last training record with a loss in ``path``'s tail; None if none or unreadable."""
    try:
        with files.open_regular(path, max_bytes=None) as f:  # the run's own file, growing: no size cap
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - TAIL_BYTES))
            tail = f.read()
    except OSError:  # not there yet; UnsafeFile is an OSError too
        return None
    for line in reversed(tail.split(b"\n")):
        try:
            record = store.loads(line.decode("utf-8"))
        except ValueError:  # a partial first or last line (UnicodeDecodeError is a ValueError)
            continue
        if isinstance(record, dict) and record.get("kind") == "train" and isinstance(record.get("loss"), (int, float)):
            return int(record.get("step", 0)), float(record["loss"])
    return None


def line(step: int, total: int | None, rate: float | None, loss: tuple[int, float] | None) -> str:
    """One progress line, e.g. ``step 120/200 (60%)  loss 1.234 (step 110)  5.2 steps/s  eta 0m15s``."""
    parts = [f"step {step}/{total} ({100 * step // total}%)" if total else f"step {step}"]
    if loss is not None:
        parts.append(f"loss {loss[1]:.4g}" + (f" (step {loss[0]})" if loss[0] != step else ""))
    if rate:
        parts.append(f"{rate:.3g} steps/s")
        if total:
            parts.append(f"eta {format_duration((total - step) / rate)}")
    return "  ".join(parts)


class ProgressLines:
    """An ``on_step`` callback that prints a :func:`line` every ``every_s`` seconds and at the last step (``total``
    None: not known in advance; ``out`` is flushed at once, as a pipe buffers otherwise)."""

    def __init__(self, run_dir: Path, total: int | None, every_s: float = 10.0, out: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.metrics, self.total, self.every_s = Path(run_dir) / store.METRICS, total, every_s
        self.out, self.clock = out, clock
        self.first: tuple[int, float] | None = None  # the first step this process saw, and when
        self.last = 0.0

    def __call__(self, step: int) -> None:
        now = self.clock()
        if self.first is None:  # a resumed run starts at its checkpoint's step: the rate counts from here
            self.first, self.last = (step, now), now
            return
        if now - self.last < self.every_s and step != self.total:
            return
        self.last = now
        done, spent = step - self.first[0], now - self.first[1]
        rate = done / spent if done > 0 and spent > 0 else None
        print(line(step, self.total, rate, last_loss(self.metrics)), file=self.out or sys.stdout, flush=True)
