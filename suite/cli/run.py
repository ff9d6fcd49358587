"""``suite run FILE``: expand an ablation into runs and bring every run to a final status (:func:`run_sweep`). Exits 0
when every selected run has a summary (any status: those are results), unless every run made this time ended in
``error`` (1); 2 for a user error (nothing runs); 130 when interrupted (run the same command again to finish)."""

from __future__ import annotations

import argparse
import collections
import dataclasses
import sys
import time
from typing import Any

INTERMIXED = True  # key=value overrides may follow the options

from suite import store
from suite.config import ConfigError
from suite.sweep.eta import fit_seconds, queue_seconds, run_flops
from suite.sweep.folder import run_dir
from suite.sweep.refine import run_refine
from suite.sweep.status import format_duration
from suite.sweep.sweep import SweepOptions, run_sweep
from suite.cli.checks import fail


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ablation, ``--out`` and one flag per :class:`SweepOptions` field with help (its default and text)."""
    parser.add_argument("ablation", metavar="FILE", help="ablation YAML, e.g. ablations/default.yaml")
    parser.add_argument("overrides", nargs="*", default=[], metavar="key=value",
                        help="set in every run as in the file's base:, e.g. train.log_to=[tensorboard] (a key the "
                             "grid or a variant sets is refused)")
    parser.add_argument("--out", metavar="DIR", help="results folder (default: results/<name>)")
    parser.add_argument("--refine", action="store_true",
                        help="then add learning rates past any best rate at the grid's edge, at the grid's spacing, "
                             "until every best rate is interior (at most refine.max_rounds rounds, 4 by default; "
                             "docs/ablations.md)")
    slurm = parser.add_argument_group("Slurm backend (--backend slurm; --workers is the number of array tasks)")
    defaults = SweepOptions()
    for f in dataclasses.fields(SweepOptions):
        kw = {k: v for k, v in f.metadata.items() if k not in ("aliases", "min", "max", "hidden")}
        if not kw.get("help"):
            continue
        if f.metadata.get("hidden"):
            kw["help"] = argparse.SUPPRESS
        default = getattr(defaults, f.name)
        if isinstance(default, bool):
            kw["action"] = "store_true"
        elif isinstance(default, list):
            kw["action"] = "append"
        else:
            kw.setdefault("type", {"int": int, "float": float}.get(str(f.type).split(" ")[0]))
            kw.setdefault("metavar", {int: "N", float: "S"}.get(kw["type"]))
            if default is not None:
                kw["help"] += " (default: %(default)s)"
        (slurm if f.name.startswith("slurm_") else parser).add_argument(
            "--" + f.name.replace("_", "-"), *f.metadata.get("aliases", []), dest=f.name, default=default, **kw)


def options(args: argparse.Namespace) -> SweepOptions:
    """The parsed flags as :class:`SweepOptions` (a flag's dest is its field's name)."""
    return SweepOptions(**{f.name: getattr(args, f.name) for f in dataclasses.fields(SweepOptions)
                           if hasattr(args, f.name)})


def run(args: argparse.Namespace) -> int:
    progress = Progress(getattr(args, "workers", None))
    try:
        if args.refine:
            sweep, _ = run_refine(args.ablation, args.out, options(args), report=progress, notify=_notify)
        else:
            sweep = run_sweep(args.ablation, args.out, options(args), report=progress, notify=_notify)
    except ConfigError as err:
        return fail(*str(err).splitlines())
    finally:
        progress.close()
    if args.dry_run:
        _print_plan(sweep)
        return 0
    counts = sweep.counts()
    if sweep.stopped == "interrupted":
        print(f"interrupted: {_counts_text(sweep)}; {len(sweep.runs) - sum(counts.values())} runs left, run the "
              f"same command again to finish them -> {sweep.out}", file=sys.stderr)
    elif sweep.stopped:
        print(f"{_counts_text(sweep)} so far; {sweep.stopped}", file=sys.stderr)
    else:
        print(f"{len(sweep.runs)} run{'' if len(sweep.runs) == 1 else 's'}: {_counts_text(sweep)} "
              f"in {format_duration(time.perf_counter() - progress.t0)} -> {sweep.out}")
        if counts["error"]:
            print(f"{counts['error']} runs ended in error: see {sweep.out}/runs/<run_id>/summary.json (error) and "
                  f"log.txt; rerun them with --retry-errors", file=sys.stderr)
        failed = [r for r in sweep.todo if (sweep.results.get(r.run_id) or {}).get("status", "error") == "error"]
        if sweep.todo and len(failed) == len(sweep.todo):  # nothing but errors: the sweep itself failed
            first = failed[0]
            print(f"error: every run ended in error; the first, {first.label}: "
                  f"{(sweep.results.get(first.run_id) or {}).get('error') or 'no message'}", file=sys.stderr)
            return 1
    return sweep.code


def _notify(line: str) -> None:
    print(line, flush=True)


def _counts_text(sweep) -> str:
    """E.g. ``12 ok, 0 diverged, 3 failed, 0 error this call; 48 skipped (already done: 45 ok, 3 failed)``."""
    made = collections.Counter(r.get("status") or "error" for r in sweep.results.values())
    done = collections.Counter(s.get("status") or "error" for s in sweep.done.values())
    text = ", ".join(f"{made[s]} {s}" for s in store.STATUSES) + " this call"
    if not done:
        return f"{text}; 0 skipped"
    before = ", ".join(f"{done[s]} {s}" for s in store.STATUSES if done[s])
    return f"{text}; {len(sweep.done)} skipped (already done: {before})"


class Progress:
    """A tqdm bar over runs on a terminal, else one line per finished run."""

    def __init__(self, workers: int | None = None) -> None:
        self.t0 = time.perf_counter()
        self.bar = None
        self.workers = workers  # --workers, when given: the runs left are queued over them
        self.flops: dict[str, float | None] = {}  # each run's training FLOPs, computed once

    def __call__(self, sweep, run, result: dict[str, Any]) -> None:
        n, todo = len(sweep.results), len(sweep.todo)
        status = result.get("status") or "error"
        line = f"[{n}/{todo}] {status:<8} {run.label}  {_detail(result)}  ({result.get('wall_s') or 0:.1f} s)"
        if not sys.stderr.isatty():
            print(f"{line}  eta {format_duration(self.eta(sweep))}", flush=True)
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=todo, unit="run", dynamic_ncols=True)
        self.bar.set_postfix_str(" ".join(f"{s[:4]}={n}" for s, n in sweep.counts().items()), refresh=False)
        self.bar.update(1)
        if status == "error":
            self.bar.write(line)

    def eta(self, sweep) -> float:
        """Time left, runs weighted by FLOPs (:func:`fit_seconds`) lest shallow ones set the pace; else by count."""
        elapsed = time.perf_counter() - self.t0
        # a later round (--refine) brings runs of its own
        self.flops.update({r.run_id: run_flops(r) for r in sweep.todo if r.run_id not in self.flops})
        finished = [r for r in sweep.todo if r.run_id in sweep.results]
        left = [r for r in sweep.todo if r.run_id not in sweep.results]
        fit = fit_seconds([(self.flops[r.run_id], sweep.results[r.run_id].get("wall_s") or 0.0) for r in finished
                           if self.flops[r.run_id] is not None and sweep.results[r.run_id].get("status") != "error"])
        if fit is None or any(self.flops[r.run_id] is None for r in sweep.todo):
            return elapsed / max(len(finished), 1) * len(left)
        work = {r.run_id: fit[0] + fit[1] * self.flops[r.run_id] for r in sweep.todo}
        if self.workers:
            return queue_seconds([work[r.run_id] for r in left], min(self.workers, max(len(left), 1)))
        done = sum(work[r.run_id] for r in finished)
        return elapsed * sum(work[r.run_id] for r in left) / done if done > 0 else 0.0

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _detail(result: dict[str, Any]) -> str:
    if result.get("status") == "error":
        return str(result.get("error"))
    if result.get("status") == "diverged":
        return f"diverged at step {result.get('diverged_step')} ({result.get('diverged_reason')})"
    acc = result.get("test_acc")
    if acc is None and result.get("stream_growth") is not None:  # a propagation run
        grad = result.get("grad_ratio")
        return f"stream x{result['stream_growth']:.3g}" + (f"  grad first/last {grad:.3g}" if grad is not None else "")
    return f"acc={acc:.3f}" if acc is not None else ""


def _state(out, run, done: dict[str, dict]) -> str:
    """A run's line in the plan: done (with its status), to resume (a checkpoint is there), or to run."""
    if run.run_id in done:
        return f"done ({done[run.run_id]['status']})"
    folder = run_dir(out, run)
    if (folder / store.CHECKPOINT).is_file():
        step = store.last_logged_step(folder)
        return f"to resume (from step {step})" if step is not None else "to resume"
    return "to run"


def _print_plan(sweep) -> None:
    runs, done, ablation = sweep.runs, sweep.done, sweep.ablation
    keys = list(ablation.grid)
    header = ["run_id", "variant", *keys, "seed", "state"]
    rows = [[r.run_id, r.variant, *(str(r.point[k]) for k in keys), str(r.seed), _state(sweep.out, r, done)]
            for r in runs]
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    for row in [header, *rows]:
        print("  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip())
    selected = ablation.describe()
    if len(runs) != len(ablation.runs):
        selected = f"{len(runs)} of {selected} selected"
    print(f"{selected}: {len(done)} already done, {len(sweep.todo)} to run -> {sweep.out}")
