"""What a backend is: its checks, and the launcher that starts, watches and stops its workers. ``run_sweep`` asks the
:class:`Backend` only this, in order: ``check``, ``settle``, ``auto_device``, ``runs_here`` (then the pre-flight),
``refuse_beside``, ``place``; each check raises :class:`~suite.sweep.folder.RunnerError` before anything is written."""

from __future__ import annotations

import abc
import dataclasses
from pathlib import Path
from typing import ClassVar, Protocol, runtime_checkable

from suite.sweep.folder import RunnerError
from suite.sweep.options import SweepOptions
from suite.sweep.spec import Run
from suite.sweep.worker import Worker


class Detached(Exception):
    """Raised by a launcher whose workers go on without the parent (Slurm jobs); ``code`` is the exit status."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@runtime_checkable
class Launcher(Protocol):
    """Starts, watches and stops the workers of one sweep; every method returns at once."""

    def attach(self) -> int:
        """Take over workers an earlier ``suite run`` left running (Slurm jobs); how many."""

    def start(self, worker: Worker, n: int) -> str | None:
        """Start ``n`` workers running ``worker``; a line for the user, or None. May raise :class:`Detached`."""

    def running(self) -> bool:
        """Whether any worker is still alive. Raises ``store.DiskFull`` when one found the disk full."""

    def wait(self, seconds: float) -> None:
        """Sleep ``seconds``, or less when a worker ends (the sweep looks at its folder again then)."""

    def stop(self) -> None:
        """Ctrl-C: tell the workers to checkpoint and end, or raise :class:`Detached` (they go on)."""

    def close(self) -> None:
        """At the end of the sweep, whatever happened: no worker of ours is left behind."""

    def exit_of(self, pid: int | None) -> str | None:
        """How worker process ``pid`` ended (``exit code 3``), where the launcher knows; else None."""


@dataclasses.dataclass
class Placement:
    """Where a sweep's workers run, as a backend decides it."""

    launcher: Launcher
    workers: int  # the most workers at once (fewer when there are fewer packs)
    threads: int | None  # torch CPU threads per worker; None: cores // workers (local)
    device: str = "cpu"  # what the workers train on: "cpu" or "cuda"
    gpus: list[str] | None = None  # local: GPU ids the workers take in turn ([]: none); None: the scheduler's
    poll_s: float = 0.5  # seconds between looks at the results folder
    grace_s: float = 90.0  # after a preemption signal, how long a run may take to reach a step


class Backend(abc.ABC):
    """One way of running a sweep's workers (see the module docstring for the order of the calls)."""

    name: ClassVar[str]

    def check(self, opts: SweepOptions) -> None:
        """Refuse options this backend cannot honour, and a backend that is not installed here."""

    def settle(self, opts: SweepOptions) -> SweepOptions:
        """``opts`` with what this backend decides filled in (not called for a dry run)."""
        return opts

    @abc.abstractmethod
    def auto_device(self, opts: SweepOptions) -> str:
        """``cuda`` or ``cpu``: what ``device: auto`` means for its workers (called only if a run says auto)."""

    @abc.abstractmethod
    def runs_here(self, opts: SweepOptions) -> bool:
        """Whether the workers run on this machine, so that its devices and memory are theirs."""

    def refuse_beside(self, out: Path) -> None:
        """Refuse to run beside Slurm jobs still working on ``out``'s runs (the Slurm backend attaches to them)."""
        from suite.sweep.slurm_jobs import live_jobs

        if busy := [j.job_id for j in live_jobs(out)]:
            raise RunnerError(f"{out}: Slurm jobs {', '.join(busy[:4])} are still working on these runs; "
                              f"wait for them, cancel them, or pass --backend slurm to attach to them")

    @abc.abstractmethod
    def place(self, out: Path, todo: list[Run], opts: SweepOptions) -> Placement:
        """The launcher and workers for ``todo``, after this backend's checks that need the runs (RunnerError)."""


def devices(todo: list[Run], opts: SweepOptions) -> set[str]:
    """The devices the runs ``todo`` ask for (``--device`` over each run's ``device``)."""
    return {opts.device or r.cfg.device for r in todo}
