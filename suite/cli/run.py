"""``suite run FILE``: expand an ablation into runs and bring every run to a final status.

The work is :func:`suite.sweep.sweep.run_sweep`; this module parses flags into its
:class:`~suite.sweep.sweep.SweepOptions` (whose fields give every default) and prints.

Exit status: 0 when every selected run has a summary (whatever its status, even ``diverged`` or
``error``: those are results, reported at the end); 2 for a user error (nothing runs); 130 when
interrupted (Ctrl-C / SIGTERM; run the same command again to finish).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import sys
import time
from typing import Any

from suite.store import STATUSES
from suite.sweep.status import format_duration
from suite.sweep.sweep import SweepOptions

D = SweepOptions()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ablation", metavar="FILE", help="ablation YAML, e.g. ablations/default.yaml")
    parser.add_argument("--out", metavar="DIR", help="results folder (default: results/<name>)")
    parser.add_argument("--backend", choices=["local", "ray", "slurm"], default=D.backend,
                        help="the same workers as local processes (default), Ray tasks (pip install -e '.[ray]') or "
                             "a Slurm job array through submitit (pip install -e '.[slurm]'); docs/backends/")
    parser.add_argument("--workers", type=int, metavar="N",
                        help="workers, each training one run (or pack) at a time (default: one per GPU, else 1, "
                             "locally; as many as fit on Ray; one per run up to --slurm-array-parallelism on Slurm)")
    parser.add_argument("--pack", type=int, default=D.pack, metavar="N",
                        help="train up to N runs that differ only in seed (lr, weight decay, LayerScale init) as one "
                             "stacked model in one worker (torch.func; runs without drop-path)")
    parser.add_argument("--runs-per-gpu", type=int, metavar="K",
                        help="runs sharing each GPU at once: K workers per GPU locally, num_gpus=1/K per Ray task "
                             "(small models leave a GPU mostly idle; see docs/backends/local.md on CUDA MPS)")
    parser.add_argument("--threads", type=int, metavar="N",
                        help="torch CPU threads per worker (default: cores // workers locally, else 1); "
                             "a Ray CPU task reserves this many CPUs")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], help="overrides every run's device")
    parser.add_argument("--lease", "--slurm-lease", dest="lease", type=float, default=D.lease, metavar="S",
                        help="a run whose worker has not renewed its claim for this long is taken over by another "
                             "(default: %(default)s)")
    parser.add_argument("--attempts", type=int, default=D.attempts, metavar="N",
                        help="a run whose workers died N times is recorded as error (default: %(default)s)")
    parser.add_argument("--poll", "--slurm-poll", dest="poll", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--ray-address", metavar="ADDR",
                        help="Ray cluster to join, e.g. 10.0.0.1:6379 (default: start a local one)")
    parser.add_argument("--ray-timeout", type=float, default=D.ray_timeout, metavar="S",
                        help="give up connecting to Ray after this many seconds (default: %(default)s)")
    slurm = parser.add_argument_group("Slurm backend (--backend slurm; --workers is the number of array tasks)")
    slurm.add_argument("--slurm-partition", metavar="NAME", help="partition to submit to (default: the cluster's)")
    slurm.add_argument("--slurm-time", type=int, default=D.slurm_time, metavar="MIN",
                       help="time limit of each worker job in minutes; a worker that reaches it checkpoints its run "
                            "and is requeued (default: %(default)s)")
    slurm.add_argument("--slurm-gpus-per-job", type=int, metavar="N",
                       help="GPUs per worker (default: 1, or 0 with --device cpu)")
    slurm.add_argument("--slurm-array-parallelism", type=int, default=D.slurm_array_parallelism, metavar="N",
                       help="worker jobs running at once (default: %(default)s)")
    slurm.add_argument("--slurm-opt", action="append", default=[], metavar="KEY=VALUE",
                       help="any other sbatch option, passed as --KEY=VALUE, e.g. --slurm-opt account=myproj "
                            "--slurm-opt qos=low (repeat)")
    slurm.add_argument("--slurm-detach", action="store_true",
                       help="exit after submitting; `suite status DIR` watches, `suite run` again collects")
    slurm.add_argument("--slurm-cluster", choices=["slurm", "local"], default=D.slurm_cluster,
                       help="local: submitit's local executor, the same workers as processes on this machine")
    parser.add_argument("--max-runs", type=int, metavar="N",
                        help="refuse an ablation of more runs than this (default: 100,000)")
    parser.add_argument("--dry-run", action="store_true", help="list the runs and their state; run nothing")
    parser.add_argument("--only", action="append", default=[], metavar="EXPR",
                        help="run a subset: key=value[,key=value] (comma = and; repeat --only = or); keys: "
                             "variant, seed or a dotted config key, e.g. --only variant=preln,model.depth=12")
    parser.add_argument("--retry-errors", action="store_true", help="rerun runs whose status is error")
    parser.add_argument("--rerun-stale", action="store_true",
                        help="rerun finished runs that another git commit of the suite made")


def options(args: argparse.Namespace) -> SweepOptions:
    """The parsed flags as :class:`SweepOptions` (a flag's dest is its field's name)."""
    return SweepOptions(**{f.name: getattr(args, f.name) for f in dataclasses.fields(SweepOptions)
                           if hasattr(args, f.name)})


def run(args: argparse.Namespace) -> int:
    from suite.config import ConfigError
    from suite.sweep.sweep import run_sweep

    progress = Progress()
    try:
        sweep = run_sweep(args.ablation, args.out, options(args), report=progress,
                          notify=lambda line: print(line, flush=True))
    except ConfigError as err:
        for line in str(err).splitlines():
            print(f"error: {line}", file=sys.stderr)
        return 2
    finally:
        progress.close()
    if args.dry_run:
        _print_plan(sweep)
        return 0
    counts = sweep.counts()
    if sweep.stopped == "interrupted":
        print(f"interrupted: {_counts_text(counts)}; {len(sweep.runs) - sum(counts.values())} runs left, run the "
              f"same command again to finish them -> {sweep.out}", file=sys.stderr)
    elif sweep.stopped:
        print(f"{_counts_text(counts)} so far; {sweep.stopped}", file=sys.stderr)
    else:
        print(f"{len(sweep.runs)} runs: {_counts_text(counts)} (skipped {len(sweep.done)} already done) "
              f"in {format_duration(time.perf_counter() - progress.t0)} -> {sweep.out}")
        if counts["error"]:
            print(f"{counts['error']} runs ended in error: see {sweep.out}/runs/<run_id>/summary.json (error) and "
                  f"log.txt; rerun them with --retry-errors", file=sys.stderr)
    return sweep.code


def _counts_text(counts: collections.Counter) -> str:
    return ", ".join(f"{counts[s]} {s}" for s in STATUSES)


class Progress:
    """A tqdm bar over runs on a terminal, else one line per finished run."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.bar = None

    def __call__(self, sweep, run, result: dict[str, Any]) -> None:
        n, todo = len(sweep.results), len(sweep.todo)
        status = result.get("status") or "error"
        eta = format_duration((time.perf_counter() - self.t0) / n * (todo - n))
        line = f"[{n}/{todo}] {status:<8} {run.label}  {_detail(result)}  ({result.get('wall_s') or 0:.1f} s)"
        if not sys.stderr.isatty():
            print(f"{line}  eta {eta}", flush=True)
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=todo, unit="run", dynamic_ncols=True)
        self.bar.set_postfix_str(" ".join(f"{s[:4]}={n}" for s, n in sweep.counts().items()), refresh=False)
        self.bar.update(1)
        if status == "error":
            self.bar.write(line)

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


def _print_plan(sweep) -> None:
    runs, done, ablation = sweep.runs, sweep.done, sweep.ablation
    keys = list(ablation.grid)
    header = ["run_id", "variant", *keys, "seed", "state"]
    rows = [[r.run_id, r.variant, *(str(r.point[k]) for k in keys), str(r.seed),
             f"done ({done[r.run_id]['status']})" if r.run_id in done else "to run"] for r in runs]
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    for row in [header, *rows]:
        print("  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip())
    selected = ablation.describe()
    if len(runs) != len(ablation.runs):
        selected = f"{len(runs)} of {selected} selected"
    print(f"{selected}: {len(done)} already done, {len(sweep.todo)} to run -> {sweep.out}")
