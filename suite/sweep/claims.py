"""Claims on runs: how workers pulling runs from one results folder agree on who trains what (docs/backends/slurm.md,
"How a run is handed to exactly one worker"). A worker trains a run only while it holds and touches
``<out>/claims/<run_id>.json``; a claim untouched for ``lease_s`` by the file server's clock (or dated over ``lease_s``
ahead), or whose owner's process on this host is gone, is dead: another worker takes it over, one attempt higher."""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import threading
import time
from pathlib import Path
from typing import Callable

from suite import store

CLAIMS = "claims"
Clock = Callable[[], float]


def owner_id() -> str:
    """Who holds a claim: the Slurm job (array task) id where there is one, host and pid."""
    job = os.environ.get("SLURM_ARRAY_JOB_ID")
    if job:
        job = f"{job}_{os.environ.get('SLURM_ARRAY_TASK_ID', '')}"
    job = job or os.environ.get("SLURM_JOB_ID") or os.environ.get("SUBMITIT_LOCAL_JOB_ID") or "-"
    return f"{job}@{socket.gethostname()}:{os.getpid()}"


def claim_path(out: Path, run_id: str) -> Path:
    return Path(out) / CLAIMS / f"{run_id}.json"


def read(path: Path) -> dict:
    """The claim's fields; ``{}`` when it is missing, being written, or damaged."""
    try:
        data = store.read_json(path)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class Claim:
    """A claim this worker holds: :attr:`attempt` is how many claims the run has had, this one included."""

    def __init__(self, path: Path, token: str, attempt: int) -> None:
        self.path, self.token, self.attempt = path, token, attempt

    def held(self) -> bool:
        """Whether the file is still this claim; OSError when unreadable (stale NFS handle): unknown, not lost."""
        try:
            data = store.read_json(self.path)
        except (FileNotFoundError, ValueError):  # gone, or garbage
            return False
        return isinstance(data, dict) and data.get("token") == self.token

    def renew(self) -> bool:
        """Touch the claim; False only when it is certainly no longer ours (a failing file system is not lost)."""
        try:
            if not self.held():
                return False
            os.utime(self.path, follow_symlinks=False)  # touch a planted link, never its target
        except FileNotFoundError:
            return False
        except OSError:
            return True
        return True

    def release(self) -> None:
        with contextlib.suppress(OSError):
            if self.held():
                self.path.unlink(missing_ok=True)


def dead(path: Path, lease_s: float, now: Clock = time.time) -> bool | None:
    """Whether the claim at ``path`` is dead (see the module docstring); None when there is none."""
    try:
        age = now() - path.stat().st_mtime
    except FileNotFoundError:
        return None
    if age > lease_s or age < -lease_s:  # not renewed in time, or "renewed" in the future: no live beat did that
        return True
    data = read(path)
    pid = data.get("pid")
    return (data.get("host") == socket.gethostname() and isinstance(pid, int) and pid > 0
            and not same_process(pid, data.get("pid_start")))


def process_start(pid: int) -> str | None:
    """Boot id and start time of this host's process ``pid`` (so a reused pid differs); None without ``/proc``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # after the command name (which may hold spaces): field 3 on
    return f"{boot}:{fields[19]}" if len(fields) > 19 else None


def same_process(pid: int, started: object) -> bool:
    """Whether process ``pid`` runs and is the one that started at ``started`` (unknown: taken at its word)."""
    if not alive(pid):
        return False
    return not isinstance(started, str) or process_start(pid) in (None, started)


def alive(pid: int) -> bool:
    """Whether process ``pid`` of this host runs (a zombie does not; another user's does)."""
    if not 0 < pid < 2**31:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    return True


def try_claim(out: Path, run_id: str, lease_s: float, take_over: bool = True, now: Clock = time.time) -> Claim | None:
    """Claim ``run_id`` for this process; None when a live worker holds it (or, ``take_over`` False, anyone does).
    Written whole, then hard-linked to the claim's name, so one worker wins (also on NFS), none reads half a claim."""
    path = claim_path(out, run_id)
    store.no_link(path.parent).mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(8)
    mine = path.with_name(f"{path.name}.{token}")
    record = {"owner": owner_id(), "host": socket.gethostname(), "pid": os.getpid(),
              "pid_start": process_start(os.getpid()), "token": token, "attempt": 1}
    try:
        for _ in range(3):  # a claim released or taken over under our feet: look again
            store.write_json(mine, {**record, "claimed_at": now()})
            try:
                os.link(mine, path)
                return Claim(path, token, record["attempt"])
            except FileExistsError:
                pass
            if not take_over or not dead(path, lease_s, now):
                return None
            aside = path.with_name(f"{path.name}.expired-{token}")
            try:
                os.rename(path, aside)
            except FileNotFoundError:
                return None  # another worker took it over first
            if not dead(aside, lease_s, now):  # renewed between our look and the rename: give it back
                with contextlib.suppress(OSError):
                    os.link(aside, path)
                aside.unlink(missing_ok=True)
                return None
            previous = read(aside).get("attempt")
            record["attempt"] = (previous if isinstance(previous, int) else 1) + 1
            aside.unlink(missing_ok=True)
        return None
    finally:
        mine.unlink(missing_ok=True)


def clear(out: Path, run_ids: list[str]) -> None:
    """Drop the claims of ``run_ids``: a new sweep starts counting attempts again."""
    for run_id in run_ids:
        claim_path(out, run_id).unlink(missing_ok=True)


def expire(out: Path, run_ids: list[str]) -> None:
    """Make the claims of ``run_ids`` dead at once, keeping their attempt numbers."""
    for run_id in run_ids:
        with contextlib.suppress(OSError):
            os.utime(claim_path(out, run_id), (0, 0), follow_symlinks=False)


class Heartbeat:
    """Renews the held claim every ``lease_s / 4`` s from a thread; sets ``lost`` when it was taken from us."""

    def __init__(self, lease_s: float, start: bool = True) -> None:
        self.period = max(0.05, lease_s / 4)
        self.claim: Claim | None = None
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="claim-heartbeat")
        if start:
            self._thread.start()

    def hold(self, claim: Claim | None) -> None:
        self.lost.clear()
        self.claim = claim

    def beat(self) -> None:
        claim = self.claim
        # A claim the worker has just released is not lost: only the one still held counts.
        if claim is not None and not claim.renew() and self.claim is claim:
            self.lost.set()

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.beat()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
