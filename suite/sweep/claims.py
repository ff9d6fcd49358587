"""Claims on runs, for workers that pull runs from a shared results folder (the Slurm backend).

A worker may train a run only while it holds the run's claim: ``<out>/claims/<run_id>.json``,
created with ``O_CREAT | O_EXCL`` (exactly one creator succeeds, also on NFS v3+ and Lustre), holding
the owner's id and a random token. The owner renews its lease by touching the file every
``lease_s / 4`` seconds. A claim not touched for ``lease_s`` seconds belongs to a dead (or frozen)
worker: another worker renames it aside (exactly one renamer succeeds) and claims the run itself. An
owner that finds its claim gone or replaced has lost the run and must stop it without writing.

The lease is compared with the file's modification time, which the file server sets: keep
``lease_s`` well above the clock skew between nodes and the longest pause of a live worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import threading
import time
from pathlib import Path

from suite import store

CLAIMS = "claims"


class Claim:
    """A claim this worker holds; :meth:`renew` keeps it, :meth:`release` gives it up."""

    def __init__(self, path: Path, token: str) -> None:
        self.path, self.token = path, token

    def held(self) -> bool:
        """Whether the file is still this claim: False once it is released, taken over or replaced.

        Raises:
            OSError: the file could not be read (a stale NFS handle, a busy server): unknown, not lost.
        """
        try:
            return json.loads(self.path.read_text(encoding="utf-8")).get("token") == self.token
        except FileNotFoundError:
            return False
        except (ValueError, AttributeError):  # another worker's claim being written, or garbage
            return False

    def renew(self) -> bool:
        """Touch the claim; False only when it is certainly no longer ours (the run must stop). A
        file system that fails for a moment is not a lost claim: the next beat tries again."""
        try:
            if not self.held():
                return False
            os.utime(self.path)
        except FileNotFoundError:
            return False
        except OSError:
            return True
        return True

    def release(self) -> None:
        with contextlib.suppress(OSError):
            if self.held():
                self.path.unlink(missing_ok=True)


def owner_id() -> str:
    """Who holds a claim: the Slurm job (array task) id where there is one, host and pid."""
    job = os.environ.get("SLURM_ARRAY_JOB_ID")
    if job:
        job = f"{job}_{os.environ.get('SLURM_ARRAY_TASK_ID', '')}"
    job = job or os.environ.get("SLURM_JOB_ID") or os.environ.get("SUBMITIT_LOCAL_JOB_ID") or "-"
    return f"{job}@{socket.gethostname()}:{os.getpid()}"


def claim_path(out: Path, run_id: str) -> Path:
    return Path(out) / CLAIMS / f"{run_id}.json"


def age(path: Path, now: float | None = None) -> float | None:
    """Seconds since ``path`` was last touched; None when it does not exist."""
    try:
        return (time.time() if now is None else now) - path.stat().st_mtime
    except FileNotFoundError:
        return None


def try_claim(out: Path, run_id: str, lease_s: float) -> Claim | None:
    """Claim ``run_id`` for this process; None when a live worker holds it.

    A claim older than ``lease_s`` is taken over: renamed aside (one taker wins), checked once more
    (its owner may have renewed it just before), and replaced by ours.
    """
    path = claim_path(out, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(8)
    text = store.metrics_line({"owner": owner_id(), "token": token, "claimed_at": time.time()})
    for _ in range(3):  # a claim released or taken over under our feet: look again
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            held_for = age(path)
            if held_for is None:
                continue
            if held_for <= lease_s:
                return None
            aside = path.with_name(f"{path.name}.expired-{token}")
            try:
                os.rename(path, aside)
            except FileNotFoundError:
                return None  # another worker took it over first
            if (age(aside) or 0.0) <= lease_s:  # renewed between our look and the rename: give it back
                with contextlib.suppress(OSError):
                    os.link(aside, path)
                aside.unlink(missing_ok=True)
                return None
            aside.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        return Claim(path, token)
    return None


def holder(out: Path, run_id: str) -> str | None:
    """The owner id in ``run_id``'s claim, or None when it is not claimed."""
    try:
        return json.loads(claim_path(out, run_id).read_text(encoding="utf-8")).get("owner")
    except (OSError, ValueError, AttributeError):
        return None


def clear(out: Path, run_ids: list[str]) -> None:
    """Drop the claims of ``run_ids`` (their holders are known to be dead)."""
    for run_id in run_ids:
        claim_path(out, run_id).unlink(missing_ok=True)


class Heartbeat:
    """Renews the current claim every ``lease_s / 4`` seconds from a thread; ``lost`` is set when the
    claim was taken from us (the run in progress must stop without writing anything more)."""

    def __init__(self, lease_s: float) -> None:
        self.period = max(0.05, lease_s / 4)
        self.claim: Claim | None = None
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name="claim-heartbeat")
        self._thread.start()

    def hold(self, claim: Claim | None) -> None:
        self.lost.clear()
        self.claim = claim

    def _beat(self) -> None:
        while not self._stop.wait(self.period):
            claim = self.claim
            # A claim the worker has just released is not lost: only the one still held counts.
            if claim is not None and not claim.renew() and self.claim is claim:
                self.lost.set()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
