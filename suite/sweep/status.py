"""Where a sweep stands, read from its results folder alone (``suite status DIR``): ``ablation.yaml``,
``run_ids.json`` and ``runs/<run_id>/``, so it works from any machine that sees the folder, while it runs.

A run is ``done`` when it has a ``summary.json``, ``running`` when its ``metrics.jsonl`` was written in the
last :data:`RUNNING_WITHIN` seconds, ``interrupted`` when it has one but older (the next ``suite run``
resumes it), and ``pending`` otherwise.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from suite import store
from suite.sweep.folder import RUN_IDS
from suite.sweep.spec import Run, SpecError, load_ablation

RUNNING_WITHIN = 600.0  # seconds since the last metrics write that still count as running
STATES = ("done", "running", "interrupted", "pending")
RECENT = 20  # finished runs the throughput is measured over


class StatusError(ValueError):
    """The folder is not a sweep's results folder (one line, names the folder and the fix)."""


@dataclass
class RunView:
    run: Run
    state: str
    folder: str = ""  # the run folder's name: its run id, precision resolved
    status: str | None = None  # for done runs
    error: str | None = None
    step: int | None = None  # last logged step of a running run
    steps: int | None = None  # its total (None when the run counts epochs)
    finished: float | None = None  # epoch seconds


@dataclass
class SlurmView:
    """The Slurm backend's bookkeeping in the folder: its last submission and the claims on runs."""

    cluster: str
    jobs: int
    submitted_at: str
    claimed: int  # runs a worker holds now
    expired: int  # of those, claims not renewed within the lease: their workers are likely dead
    lease_s: float | None


@dataclass
class SweepStatus:
    name: str
    runs: list[RunView]
    runs_per_hour: float | None = None
    eta_s: float | None = None
    by_variant: dict[str, Counter] = field(default_factory=dict)
    slurm: SlurmView | None = None

    @property
    def counts(self) -> Counter:
        return Counter(v.state for v in self.runs)

    @property
    def statuses(self) -> Counter:
        return Counter(v.status for v in self.runs if v.state == "done")

    @property
    def errors(self) -> list[RunView]:
        return [v for v in self.runs if v.status == "error"]


def sweep_status(out: str | Path, now: float | None = None) -> SweepStatus:
    """Every run of the sweep in ``out`` with its state, and the sweep's throughput and ETA.

    Args:
        out: the results folder of ``suite run`` (holds ``ablation.yaml``).
        now: the current time (epoch seconds); tests pass it.

    Raises:
        StatusError: ``out`` is missing or holds no ``ablation.yaml`` (or a broken one).
    """
    out = Path(out)
    now = time.time() if now is None else now
    marker = out / "ablation.yaml"
    if not out.is_dir():
        raise StatusError(f"{out}: no such folder; pass the --out folder of a `suite run`")
    if not marker.exists():
        raise StatusError(f"{out}: no ablation.yaml, so no sweep has written here; pass the --out folder of a "
                          f"`suite run`")
    try:
        ablation = load_ablation(marker)
    except SpecError as err:
        raise StatusError(f"{marker}: cannot be read as an ablation ({err.problems[0]})") from None
    # A run's folder is named by its id with precision resolved, as the last sweep recorded it.
    ids = None
    with contextlib.suppress(OSError, ValueError):
        ids = store.read_json(out / RUN_IDS)
    if not (isinstance(ids, list) and len(ids) == len(ablation.runs) and all(isinstance(i, str) for i in ids)):
        ids = [run.run_id for run in ablation.runs]
    views = {rid: RunView(run, "pending", rid) for rid, run in zip(ids, ablation.runs)}
    for rid, view in views.items():
        folder = out / "runs" / rid
        summary = store.read_summary(folder) if folder.is_dir() else None
        if summary is not None:
            view.state, view.status, view.error = "done", summary.get("status"), summary.get("error")
            with contextlib.suppress(TypeError, ValueError):
                view.finished = (datetime.fromisoformat(str(summary.get("started_at"))).timestamp()
                                 + float(summary.get("wall_s") or 0.0))
            continue
        metrics = folder / store.METRICS
        if metrics.is_file():
            recent = now - metrics.stat().st_mtime <= RUNNING_WITHIN
            view.state = "running" if recent else "interrupted"
            tc = view.run.cfg.train
            view.step, view.steps = store.last_logged_step(folder), tc.steps if tc.epochs is None else None
    result = SweepStatus(ablation.name, list(views.values()))
    for v in result.runs:
        result.by_variant.setdefault(v.run.variant, Counter())[v.state] += 1
        if v.state == "done":
            result.by_variant[v.run.variant][v.status or "?"] += 1
    result.slurm = _slurm_view(out, now)
    finished = sorted(v.finished for v in result.runs if v.finished is not None)[-RECENT:]
    if len(finished) >= 2 and finished[-1] > finished[0]:
        result.runs_per_hour = (len(finished) - 1) / (finished[-1] - finished[0]) * 3600
        left = sum(1 for v in result.runs if v.state != "done")
        result.eta_s = left / result.runs_per_hour * 3600 if left else 0.0
    return result


def _slurm_view(out: Path, now: float) -> SlurmView | None:
    """What ``slurm/submission.json`` and ``claims/`` say, or None for a sweep that never used Slurm."""
    from suite.sweep.claims import CLAIMS
    from suite.sweep.slurm_backend import read_submission

    record = read_submission(out)
    if record is None:
        return None
    lease = record.get("lease_s") if isinstance(record.get("lease_s"), (int, float)) else None
    ages = []
    for claim in (out / CLAIMS).glob("*.json"):
        with contextlib.suppress(OSError):  # released meanwhile
            ages.append(now - claim.stat().st_mtime)
    return SlurmView(record["cluster"], len(record["jobs"]), str(record.get("submitted_at", "?")), len(ages),
                     sum(lease is not None and a > lease for a in ages), lease)


def format_duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "unknown"
    minutes, s = divmod(int(round(seconds)), 60)
    hours, m = divmod(minutes, 60)
    return f"{hours}h{m:02d}m" if hours else f"{m}m{s:02d}s"
