"""One run's folder, summary and error policy (:class:`RunFolder`), the same for a training run, a pack's member and a
propagation run. The run's ``Exception`` is status ``error`` (traceback in ``log.txt``); what is not its fault (a full
disk, Ctrl-C, a preemption) leaves it unfinished, without a summary, to run again."""

from __future__ import annotations

import contextlib
import contextvars
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from suite import files, store
from suite.config import RunConfig, resolve_precision
from suite.engine import checkpoint
from suite.engine.resources import resolve_device


# A sweep worker's check around its runs: None while the run may write its summary, else why not.
_GUARD: contextvars.ContextVar[Callable[[], str | None] | None] = contextvars.ContextVar("summary_guard", default=None)


@contextlib.contextmanager
def summary_guard(check: Callable[[], str | None]) -> Iterator[None]:
    """Within this block every run asks ``check()`` right before writing its summary (None: it may)."""
    token = _GUARD.set(check)
    try:
        yield
    finally:
        _GUARD.reset(token)


class StopRun(BaseException):
    """Ends a run now, unfinished (no summary): the worker was preempted (``save``: checkpoint this step first) or lost
    its claim on the run."""

    def __init__(self, reason: str, save: bool) -> None:
        super().__init__(reason)
        self.reason, self.save = reason, save


class RunFolder:
    """A run's folder and summary from open to close, as a context manager; ``extra``: top-level summary keys. Raises
    DiskFull when there is no space for the folder."""

    def __init__(self, cfg: RunConfig, out: str | Path, extra: dict[str, Any] | None = None) -> None:
        self.out = Path(out)
        store.open_run_folder(self.out)
        self.t0 = time.perf_counter()
        self.summary = store.empty_summary(cfg, extra)
        self.device = torch.device("cpu")
        self.trackers: Any = None  # train.log_to's sinks, once the run opened them
        self.closed = False

    def start(self, cfg: RunConfig, precision_on: str | None = None) -> tuple[RunConfig, torch.device]:
        """The run's device, and ``cfg`` with ``train.precision: auto`` resolved for it (or ``precision_on``)."""
        self.device = resolve_device(cfg.device)
        if cfg.train.threads:  # before the provenance: device_name records torch's threads
            torch.set_num_threads(cfg.train.threads)
        cfg = resolve_precision(cfg, precision_on or self.device.type)  # for library callers; `suite` resolved it
        self.summary.update({"run_id": store.run_id(cfg), "train.precision": cfg.train.precision})
        self.summary.update(store.provenance(str(self.device)))
        return cfg, self.device

    def __enter__(self) -> RunFolder:
        return self

    def __exit__(self, typ, err, tb) -> bool:
        if err is not None:
            self.fail(err)
        self.close()
        return True  # the run's own error is in its summary

    def fail(self, err: BaseException) -> None:
        """Record the run's exception as its ``error`` status, or raise again what is not its fault (a full disk as
        :class:`~suite.store.DiskFull`)."""
        if not isinstance(err, Exception) or store.no_space(err):
            self.closed = True
            if self.trackers is not None:
                self.trackers.abort()
            if isinstance(err, Exception):
                raise store.DiskFull(self.out) from None
            raise err
        self.summary["status"] = "error"
        lines = [line for line in f"{type(err).__name__}: {err}".splitlines() if line.strip()]
        # An error in a DataLoader worker comes back as "Caught X in DataLoader worker process N." and its traceback,
        # whose last line is the error itself (a bad image, with its path)
        worker = len(lines) > 1 and " in DataLoader worker process " in lines[0]
        said = lines[-1].split(": ", 1) if worker else []  # "suite.data.bundle.DataError: ..." as "DataError: ..."
        said = ": ".join([said[0].rsplit(".", 1)[-1], *said[1:]]) if worker else lines[0] if lines else type(err).__name__
        self.summary["error"] = said[:500]
        try:
            with files.open_append(self.out / "log.txt") as log:
                log.write("".join(traceback.format_exception(type(err), err, err.__traceback__)))
        except OSError as log_err:  # no room for the traceback: no room for the summary either
            if not store.no_space(log_err):
                raise
            self.closed = True
            if self.trackers is not None:
                self.trackers.abort()
            raise store.DiskFull(self.out) from None
        if "device_name" not in self.summary:
            self.summary.update(store.provenance(str(self.device)))

    def close(self) -> None:
        """Write the summary (last, atomically), finish the trackers, drop a finished run's checkpoint."""
        if self.closed:
            return
        self.closed = True
        check = _GUARD.get()
        lost = check() if check is not None else None
        if lost:
            if self.trackers is not None:
                self.trackers.abort()
            warnings.warn(f"{self.out}: result dropped, not written ({lost})", store.SuiteWarning, stacklevel=2)
            raise StopRun(lost, save=False)
        self.summary["wall_s"] = round(time.perf_counter() - self.t0, 3)
        store.write_json(self.out / store.SUMMARY, self.summary)
        if self.trackers is not None:
            self.trackers.finish(self.summary)
        if self.summary["status"] != "error":
            (self.out / store.CHECKPOINT).unlink(missing_ok=True)
            checkpoint.preempted(self.out, clear=True)
