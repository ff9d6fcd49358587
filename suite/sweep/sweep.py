"""The sweep as a library call: :func:`run_sweep` brings every run of an ablation to a summary. Where the workers run
is the backend's business (:mod:`suite.sweep.backends`); the rest is the same for every backend."""

from __future__ import annotations

import collections
import copy
import dataclasses
import math
import os
import signal
import warnings
from pathlib import Path
from typing import Callable

from suite import store
from suite.results import recorded_ablation
from suite.sweep import claims, folder
from suite.sweep.backends import backend as get_backend
from suite.sweep.eta import starting_line
from suite.sweep.folder import RunnerError
from suite.sweep.launcher import Detached, Launcher, Placement
from suite.sweep.options import SweepOptions
from suite.sweep.plan import resolve_runs
from suite.sweep.spec import Ablation, Run, SpecError, load_ablation, parse_only, select
from suite.sweep.worker import RESULT_KEYS, Worker, group, record_lost, signal_handlers

ROUNDS = 3  # rounds of workers in a row that finish no run before the runs left are recorded as error (or --attempts)


@dataclasses.dataclass
class Sweep:
    """What :func:`run_sweep` found and did."""

    name: str
    out: Path
    ablation: Ablation
    runs: list[Run]  # every selected run
    todo: list[Run]  # those that had no final summary
    done: dict[str, dict]  # run id -> summary of the runs skipped as done
    other: dict[str, int]  # git commit -> finished runs another version of the suite made
    results: dict[str, dict] = dataclasses.field(default_factory=dict)  # run id -> result, finished this time
    stale: dict[str, str] = dataclasses.field(default_factory=dict)  # summaries todo replaces (folder.replaced)
    stopped: str | None = None  # why the sweep ended before every run had a summary (Ctrl-C, detached)
    code: int = 0  # the exit status `suite run` gives: 0, or 130 after Ctrl-C

    def __repr__(self) -> str:  # the dataclass's would print every run's config
        counts = ", ".join(f"{n} {s}" for s, n in self.counts().items() if n)
        stopped = f", stopped: {self.stopped}" if self.stopped else ""
        return f"Sweep({self.name!r}, {str(self.out)!r}, {len(self.runs)} runs: {counts or 'none finished'}{stopped})"

    def counts(self) -> collections.Counter:
        """Runs per status, done before and finished now."""
        counts = collections.Counter({s: 0 for s in store.STATUSES})
        counts.update(s.get("status") or "error" for s in [*self.done.values(), *self.results.values()])
        return counts

    def then(self, later: "Sweep") -> "Sweep":
        """This sweep and ``later`` as one: another round into the same folder over these runs and more (--refine's),
        which found this one's results done."""
        results = {**self.results, **later.results}
        return dataclasses.replace(later, todo=self.todo + later.todo, results=results,
                                   done={k: v for k, v in later.done.items() if k not in results})


Report = Callable[[Sweep, Run, dict], None]


def run_sweep(ablation: str | Path | dict | Ablation, out: str | Path | None = None,
              options: SweepOptions | None = None, report: Report | None = None,
              notify: Callable[[str], None] = lambda line: None) -> Sweep:
    """Bring every selected run of ``ablation`` (a file, a dict or an :class:`Ablation`) to a summary in ``out``
    (default ``results/<name>``); a rerun resumes. ``report(sweep, run, result)`` is called per summary, ``notify``
    with the backend's lines; ``stopped`` says why it ended early. ConfigError (SpecError, RunnerError) for a bad
    ablation or option; DiskFull when no space is left (finished runs stay intact)."""
    opts = options or SweepOptions()
    _check(opts)
    backend = get_backend(opts.backend)
    backend.check(opts)
    if not isinstance(ablation, Ablation):
        ablation = load_ablation(ablation, max_runs=opts.max_runs, overrides=opts.overrides)
    filters = parse_only(opts.only, ablation)
    out = Path(out) if out else Path("results") / ablation.name
    folder.check_out(out, ablation)
    every = [dataclasses.replace(r, kind=opts.kind) for r in ablation.runs]
    if not opts.dry_run:
        opts = backend.settle(opts)
    where = get_backend("local") if opts.dry_run else backend  # a dry run asks no Ray cluster
    every = resolve_runs(every, opts.device, lambda: where.auto_device(opts))
    runs = [r for r, raw in zip(every, ablation.runs) if select([raw], filters)]
    if not runs:
        raise SpecError([f"--only: {' | '.join(opts.only)}: matches none of the {len(ablation.runs)} runs; "
                         f"list them with --dry-run"])
    todo, done, other = folder.split_done(runs, out, opts.retry_errors, opts.rerun_stale, store.git_commit())
    sweep = Sweep(ablation.name, out, ablation, runs, todo, done, other)
    from suite.sweep.preflight import preflight

    # The device and its memory are checked only where the workers run on this machine.
    problems = preflight(todo, str(ablation.path), check_device=not opts.dry_run and backend.runs_here(opts),
                         device=opts.device, pack=opts.pack or 1)
    if problems:  # every run that would only end in `error`, before any starts
        raise SpecError(problems)
    if other:
        made = ", ".join(f"{sha[:10]}: {n}" for sha, n in sorted(other.items(), key=lambda kv: -kv[1]))
        what = ("they will be run again (--rerun-stale)" if opts.rerun_stale else
                "their results are kept; pass --rerun-stale to run them again with this code")
        warnings.warn(f"{sum(other.values())} finished runs were made by other versions of the suite ({made}); "
                      f"{what}", store.SuiteWarning, stacklevel=2)
    if (out / "runs").is_dir() and (strays := {e.name for e in os.scandir(out / "runs") if e.is_dir()}
                                    - {r.run_id for r in every}):
        warnings.warn(f"{out / 'runs'}: {len(strays)} run folders are not runs of this file as it is now (of an "
                      f"earlier version of it?); `suite analyze` reads them too, so move them away or pass --out DIR "
                      f"for a separate study", store.SuiteWarning, stacklevel=2)
    if opts.dry_run:
        return sweep
    if not todo:  # nothing to run: write nothing (a read-only results folder is fine), unless the file changed
        _record_ablation(out, ablation, [r.run_id for r in every])
        return sweep
    backend.refuse_beside(out)
    worker, placement, n = _plan(sweep, opts)  # its problems (a missing tracker) before anything is written
    # SIGTERM stops a sweep as Ctrl-C does; SIGINT raises KeyboardInterrupt even if the shell started us with it
    # ignored (a background process of a non-interactive shell).
    stops = {signal.SIGTERM: signal.default_int_handler, signal.SIGINT: signal.default_int_handler}
    with folder.prepare_out(out, ablation, [r.run_id for r in every]), signal_handlers(stops):
        # The folder's lock is ours only now: a sweep that held it until a moment ago may have finished runs since
        # they were counted above, and clearing their folders as stale would delete those results.
        left, done, _ = folder.split_done(runs, out, opts.retry_errors, opts.rerun_stale, store.git_commit())
        if len(left) < len(sweep.todo):
            sweep.todo = left
            sweep.done.update(done)
            if not left:
                return sweep
            worker, placement, n = _plan(sweep, opts)
        sweep.stale = worker.stale = folder.replaced(out, sweep.todo)
        try:
            _drive(sweep, worker, placement, n, report, notify)
        except Detached as left:
            sweep.stopped, sweep.code = str(left), left.code
        except KeyboardInterrupt:
            sweep.stopped, sweep.code = "interrupted", 130
    return sweep


def _record_ablation(out: Path, ablation: Ablation, run_ids: list[str]) -> None:
    """Bring ``out/ablation.yaml`` up to date when every run is done but the file changed (a warning if unwritable)."""
    try:
        recorded = recorded_ablation(out) or None
    except ValueError:
        recorded = None
    if recorded == ablation.resolved or not out.is_dir():
        return
    try:
        with folder.prepare_out(out, ablation, run_ids):
            pass
    except (RunnerError, store.DiskFull) as err:
        warnings.warn(f"{out}/ablation.yaml: not updated to the file's current content ({err})", store.SuiteWarning,
                      stacklevel=3)


def _check(opts: SweepOptions) -> None:
    for f in dataclasses.fields(opts):  # the limits the flags state, for callers that pass no flags
        value, meta, flag = getattr(opts, f.name), f.metadata, "--" + f.name.replace("_", "-")
        engine = f.name.split("_", 1)[0]  # a --ray-* or --slurm-* flag given for another backend would do nothing
        if engine in ("ray", "slurm") and engine != opts.backend and meta.get("help") and value != (
                f.default if f.default is not dataclasses.MISSING else f.default_factory()):
            raise RunnerError(f"{flag}: an option of --backend {engine}, and this sweep runs on --backend "
                              f"{opts.backend}; add --backend {engine} or drop {flag}")
        if value is None:
            continue
        if meta.get("choices") and value not in meta["choices"]:
            raise RunnerError(f"{flag} {value}: unknown; use {', '.join(meta['choices'])}")
        if "min" in meta and not (math.isfinite(value) and value >= meta["min"]):
            raise SpecError([f"{flag} {value}: must be >= {meta['min']:g}"])
        if "max" in meta and value > meta["max"]:
            raise SpecError([f"{flag} {value}: must be <= {meta['max']:g}"])


def _plan(sweep: Sweep, opts: SweepOptions) -> tuple[Worker, Placement, int]:
    """The worker (its packs with device and threads set), where the backend places it, and the number of workers."""
    from suite.engine.trackers import missing

    todo = sweep.todo
    if problem := missing(sorted({name for r in todo for name in r.cfg.train.log_to})):  # before writing or submitting
        raise RunnerError(problem)
    placement = get_backend(opts.backend).place(sweep.out, todo, opts)
    packs = group(todo, opts.pack)
    n = max(1, min(placement.workers, len(packs)))  # fewer packs than workers: start fewer
    # Threads as the whole selection would get them: a resumed run keeps its thread count (and so its last digits).
    whole = max(1, min(placement.workers, len(group(sweep.runs, opts.pack))))
    threads = placement.threads or max(1, (os.cpu_count() or 1) // whole)
    placement.threads = threads

    def prepared(run: Run) -> Run:  # execution-only keys: the run id (and so the folder) does not change
        cfg = copy.deepcopy(run.cfg)
        cfg.device = opts.device or cfg.device
        cfg.train.threads = cfg.train.threads or threads
        return dataclasses.replace(run, cfg=cfg)

    worker = Worker(str(sweep.out.resolve()), [[prepared(r) for r in pack] for pack in packs], lease_s=opts.lease,
                    attempts=opts.attempts, threads=threads, gpus=placement.gpus,
                    poll_s=opts.poll or placement.poll_s, grace_s=placement.grace_s, pack=opts.pack or 1)
    return worker, placement, n


def _drive(sweep: Sweep, worker: Worker, placement: Placement, n: int, report: Report | None,
           notify: Callable[[str], None]) -> None:
    """Start workers whenever none is left and runs are; report each summary as it appears."""
    out, launcher = sweep.out, placement.launcher
    pending = {r.run_id: r for r in sweep.todo}

    def collect() -> None:
        for run_id in list(pending):
            summary = folder.finished(out, pending[run_id], sweep.stale)
            if summary is not None:
                run = pending.pop(run_id)
                sweep.results[run_id] = result = {k: summary.get(k) for k in RESULT_KEYS}
                if report is not None:
                    report(sweep, run, result)

    attached = launcher.attach()
    if attached:
        notify(f"attached to {attached} workers still running from an earlier `suite run`")
    else:  # no worker of ours is alive: their claims are dead
        claims.clear(out, [p[0].run_id for p in worker.packs])
    heads = {r.run_id: p[0].run_id for p in worker.packs for r in p}  # a pack's claim is its first run's
    fruitless, left_at_start, started, own = 0, len(pending), bool(attached), False
    rounds = max(ROUNDS, worker.attempts)  # a worker may die on one run --attempts times
    try:
        while True:
            collect()
            if pending and not launcher.running():
                collect()  # what the last workers finished just before they ended
                if started:
                    fruitless = 0 if len(pending) < left_at_start else fruitless + 1
                if fruitless == rounds:
                    for run in list(pending.values()):
                        record_lost(run, out, _lost_reason(out, launcher, heads[run.run_id], rounds))
                    collect()
                    return
                packs = [p for p in worker.packs if any(r.run_id in pending for r in p)]
                # Every worker has ended: their claims are dead. The first round after attaching starts counting
                # attempts again, as a sweep that attached to none does (an error run retried would else be spent).
                (claims.clear if attached and not own else claims.expire)(out, [p[0].run_id for p in packs])
                if not started:  # what the sweep is doing, before its first run ends
                    notify(starting_line(sweep.ablation, [r for p in packs for r in p], min(n, len(packs)),
                                         worker.threads, placement.device))
                line = launcher.start(dataclasses.replace(worker, packs=packs), min(n, len(packs)))
                started, own, left_at_start = True, True, len(pending)
                if line:
                    notify(line)
            if not pending:
                return
            launcher.wait(worker.poll_s)
    except KeyboardInterrupt:
        launcher.stop()  # local: workers checkpoint and exit; Ray: cancelled; Slurm: Detached, the jobs go on
        collect()
        raise
    finally:
        launcher.close()


def _lost_reason(out: Path, launcher: Launcher, head: str, rounds: int = ROUNDS) -> str:
    """Why a run no round of workers finished: its workers died on it, or none could start."""
    claim = claims.read(claims.claim_path(out, head))
    if not isinstance(claim.get("attempt"), int):
        return (f"no worker finished any run in {rounds} rounds of workers in a row (each failed or was killed); "
                f"see {out / 'workers'}")
    how = launcher.exit_of(claim.get("pid"))
    return f"worker died {claim['attempt']} times on this run{f' (last: {how})' if how else ''}; see {out / 'workers'}"
