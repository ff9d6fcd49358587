"""Where a sweep stands (``suite status DIR``), from its results folder alone, on any machine, while it runs
(docs/ablations.md, "Watching a sweep"); the ETA times each run by its FLOPs over the last :data:`RECENT` finished."""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from suite import store
from suite.sweep import claims
from suite.results import ABLATION_FILE
from suite.sweep.folder import RUN_IDS, RunnerError
from suite.sweep.plan import resolve_runs
from suite.sweep.spec import Run, SpecError, load_ablation
from suite.sweep.sweep import SweepOptions

RUNNING_WITHIN = 600.0  # seconds since the last metrics write that still count as running
CLOCK_SKEW = 120.0  # a log this far in the future still counts as recent; further, its time is not believed
STATES = ("done", "running", "interrupted", "pending")
RECENT = 20  # finished runs the mean duration is measured over


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
    wall_s: float | None = None  # a done run's duration
    worker_gone: bool = False  # interrupted because its worker's claim is dead or missing (not by age)


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
    mean_run_s: float | None = None  # mean duration of the last finished runs (not errors)
    by_variant: dict[str, Counter] = field(default_factory=dict)
    slurm: SlurmView | None = None
    from_csv: int = 0  # runs done with no run folder here, read from runs.csv (a committed results folder)

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
    """Every run in ``out`` with its state, and the sweep's throughput and ETA; StatusError for no sweep's folder."""
    out = Path(out)
    now = time.time() if now is None else now
    marker = out / ABLATION_FILE
    if not out.is_dir():
        raise StatusError(f"{out}: no such folder; pass the --out folder of a `suite run`")
    if not marker.exists():
        raise StatusError(f"{out}: no ablation.yaml, so no sweep has written here; pass the --out folder of a "
                          f"`suite run`")
    try:
        ablation = load_ablation(marker, max_runs=sys.maxsize)  # the sweep's own file: its size was accepted
    except SpecError as err:
        raise StatusError(f"{marker}: cannot be read as an ablation ({err.problems[0]})") from None
    from suite.sweep.refine import replay

    try:
        ablation = replay(ablation, out)  # the rates --refine added, as the sweep runs them
    except RunnerError as err:
        raise StatusError(str(err)) from None
    # A run's folder is named by its id with precision resolved, as the last sweep recorded it.
    ids = None
    with contextlib.suppress(OSError, ValueError):
        ids = store.read_json(out / RUN_IDS)
    if not (isinstance(ids, list) and len(ids) == len(ablation.runs)
            and all(isinstance(i, str) and store.RUN_ID.fullmatch(i) for i in ids)):
        ids = _resolved_ids(ablation.runs)
    views = {rid: RunView(run, "pending", rid) for rid, run in zip(ids, ablation.runs)}
    try:
        slurm = _slurm_view(out, now)
        lease = slurm.lease_s if slurm is not None and slurm.lease_s else SweepOptions().lease  # as its workers
        _look(out, views, lease, now)
        from_csv = _from_csv(out, views)
    except OSError as err:  # a folder or file you may not read (one shared by someone else)
        raise StatusError(f"cannot read {err.filename or out} ({store.error_reason(err)}); check the folder's "
                          f"permissions") from None
    result = SweepStatus(ablation.name, list(views.values()), slurm=slurm, from_csv=from_csv)
    for v in result.runs:
        result.by_variant.setdefault(v.run.variant, Counter())[v.state] += 1
        if v.state == "done":
            result.by_variant[v.run.variant][v.status or "?"] += 1
    _estimate(result)
    return result


def _look(out: Path, views: dict[str, RunView], lease: float, now: float) -> None:
    """Each run's state from its folder: done (its summary), running or interrupted (its log's age and claim)."""
    claimed = (out / claims.CLAIMS).is_dir()  # sweeps before claims existed: judge by the log's age alone
    # A pack is claimed under its first run's id alone: a member without a claim of its own is gone only when no
    # live claim is left in the folder at all.
    live = claimed and any(claims.dead(p, lease, lambda: now) is False
                           for p in (out / claims.CLAIMS).glob("*.json") if p.is_file() and not p.is_symlink())
    for rid, view in views.items():
        folder = out / "runs" / rid
        summary = store.read_summary(folder) if folder.is_dir() else None
        if summary is not None:
            view.state, view.status, view.error = "done", summary.get("status"), summary.get("error")
            view.wall_s = _duration(summary.get("wall_s"))
            with contextlib.suppress(TypeError, ValueError, OverflowError):
                started = datetime.fromisoformat(str(summary.get("started_at"))).timestamp()
                if started <= now + CLOCK_SKEW:  # a start in the future is not believed
                    view.finished = started + (view.wall_s or 0.0)
            continue
        metrics = folder / store.METRICS
        if metrics.is_file():
            age = now - metrics.stat().st_mtime
            recent = -CLOCK_SKEW <= age <= RUNNING_WITHIN
            gone = claims.dead(claims.claim_path(out, rid), lease, lambda: now)
            view.worker_gone = recent and claimed and (gone is True or (gone is None and not live))
            view.state = "running" if recent and not view.worker_gone else "interrupted"
            tc = view.run.cfg.train
            view.step, view.steps = store.last_logged_step(folder), tc.steps if tc.epochs is None else None


def _from_csv(out: Path, views: dict[str, RunView]) -> int:
    """Runs with no folder here that ``runs.csv`` holds: done, with its status (a committed results folder keeps that
    file, not its run folders); how many."""
    import warnings

    from suite.results import AnalysisError, runs_from_csv

    pending = {rid: v for rid, v in views.items() if v.state == "pending" and not (out / "runs" / rid).exists()}
    if not pending or not (out / "runs.csv").is_file():
        return 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a damaged row is suite analyze's to report; here it stays pending
        try:
            rows = runs_from_csv(out / "runs.csv")
        except AnalysisError:
            return 0
    found = 0
    for row in rows:
        view = pending.pop(str(row.get("run_id")), None)
        if view is not None:
            view.state, view.status, view.error = "done", row.get("status"), row.get("error")
            view.wall_s = _duration(row.get("wall_s"))
            found += 1
    return found


def _duration(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) and value > 0 else None


def _estimate(result: SweepStatus) -> None:
    """Throughput and ETA from per-run durations and the number of runs at work (module docstring)."""
    done = sorted((v for v in result.runs if v.state == "done" and v.status != "error" and v.wall_s),
                  key=lambda v: v.finished or 0.0)[-RECENT:]
    left = [v for v in result.runs if v.state in ("pending", "interrupted")]
    running = [v for v in result.runs if v.state == "running"]
    if not left and not running:
        result.eta_s = 0.0
    if not done:
        return
    mean = result.mean_run_s = sum(v.wall_s for v in done) / len(done)
    if not running:
        return
    result.runs_per_hour = len(running) * 3600 / mean
    from suite.sweep.eta import remaining_seconds, run_flops

    # each running run's fraction done (epochs: assume half)
    frac = {id(v): min(v.step / v.steps, 1.0) if v.step is not None and v.steps else 0.5 for v in running}
    flops = {id(v): run_flops(v.run) for v in [*done, *left, *running]}
    if all(f is not None for f in flops.values()):  # each run's time from its shape (eta.remaining_seconds)
        result.eta_s = remaining_seconds([(flops[id(v)], v.wall_s) for v in done], [flops[id(v)] for v in left],
                                         [(flops[id(v)], frac[id(v)]) for v in running], len(running))
        return
    work = len(left) * mean
    for v in running:
        work += mean * (1 - frac[id(v)])
    result.eta_s = work / len(running)


def _resolved_ids(runs: list[Run]) -> list[str]:
    """The runs' ids as ``suite run`` names their folders on this machine, for a folder without ``run_ids.json``."""
    def auto() -> str:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    try:
        return [r.run_id for r in resolve_runs(runs, None, auto)]
    except RunnerError:  # two runs that resolve to one: the ids as the file gives them
        return [r.run_id for r in runs]


def _slurm_view(out: Path, now: float) -> SlurmView | None:
    """What ``slurm/submission.json`` and ``claims/`` say, or None for a sweep that never used Slurm."""
    from suite.sweep.slurm_jobs import read_submission

    record = read_submission(out)
    if record is None:
        return None
    lease = record.get("lease_s") if isinstance(record.get("lease_s"), (int, float)) else None
    ages = []
    for claim in (out / claims.CLAIMS).glob("*.json"):
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
