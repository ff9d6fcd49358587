"""``suite run FILE``: expand an ablation into runs and bring every run to a final status.

Exit status: 0 when every selected run has a summary (whatever its status, even ``diverged`` or
``error``: those are results, reported at the end); 2 for a user error (nothing runs); 130 when
interrupted (Ctrl-C / SIGTERM; run the same command again to finish).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from suite.cli.checks import at_least
from suite import store
from suite.store import STATUSES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ablation", metavar="FILE", help="ablation YAML, e.g. ablations/default.yaml")
    parser.add_argument("--out", metavar="DIR", help="results folder (default: results/<name>)")
    parser.add_argument("--workers", type=int, metavar="N",
                        help="parallel runs (local backend; default: one per GPU, else 1)")
    parser.add_argument("--pack", type=int, default=1, metavar="N",
                        help="train up to N runs that differ only in seed (lr, weight decay, LayerScale init) as one "
                             "stacked model in one worker (torch.func; runs without drop-path; local backend)")
    parser.add_argument("--runs-per-gpu", type=int, metavar="K",
                        help="runs sharing each GPU at once: K workers per GPU locally, num_gpus=1/K per Ray task "
                             "(small models leave a GPU mostly idle; see docs/backends/local.md on CUDA MPS)")
    parser.add_argument("--threads", type=int, metavar="N",
                        help="torch CPU threads per run (default: cores // workers locally, 1 per Ray task); "
                             "a Ray CPU task reserves this many CPUs")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], help="overrides every run's device")
    parser.add_argument("--backend", choices=["local", "ray", "slurm"], default="local",
                        help="local worker processes (default), Ray tasks (pip install -e '.[ray]') or a Slurm job "
                             "array of workers through submitit (pip install -e '.[slurm]'; docs/backends/slurm.md)")
    parser.add_argument("--ray-address", metavar="ADDR",
                        help="Ray cluster to join, e.g. 10.0.0.1:6379 (default: start a local one)")
    parser.add_argument("--ray-timeout", type=float, default=30.0, metavar="S",
                        help="give up connecting to Ray after this many seconds (default: %(default)s)")
    slurm = parser.add_argument_group("Slurm backend (--backend slurm; --workers is the number of array tasks)")
    slurm.add_argument("--slurm-partition", metavar="NAME", help="partition to submit to (default: the cluster's)")
    slurm.add_argument("--slurm-time", type=int, default=240, metavar="MIN",
                       help="time limit of each worker job in minutes; a worker that reaches it checkpoints its run "
                            "and is requeued (default: %(default)s)")
    slurm.add_argument("--slurm-gpus-per-job", type=int, metavar="N",
                       help="GPUs per worker (default: 1, or 0 with --device cpu)")
    slurm.add_argument("--slurm-array-parallelism", type=int, default=64, metavar="N",
                       help="worker jobs running at once (default: %(default)s)")
    slurm.add_argument("--slurm-opt", action="append", metavar="KEY=VALUE",
                       help="any other sbatch option, passed as --KEY=VALUE, e.g. --slurm-opt account=myproj "
                            "--slurm-opt qos=low (repeat)")
    slurm.add_argument("--slurm-lease", type=float, default=600.0, metavar="S",
                       help="a run whose worker has not renewed its claim for this long is taken over by another "
                            "(default: %(default)s)")
    slurm.add_argument("--slurm-detach", action="store_true",
                       help="exit after submitting; `suite status DIR` watches, `suite run` again collects")
    slurm.add_argument("--slurm-cluster", choices=["slurm", "local"], default="slurm",
                       help="local: submitit's local executor, the same workers as processes on this machine")
    slurm.add_argument("--slurm-poll", type=float, default=10.0, metavar="S", help=argparse.SUPPRESS)
    parser.add_argument("--max-runs", type=int, default=None, metavar="N",
                        help="refuse an ablation of more runs than this (default: 100,000)")
    parser.add_argument("--dry-run", action="store_true", help="list the runs and their state; run nothing")
    parser.add_argument("--only", action="append", metavar="EXPR",
                        help="run a subset: key=value[,key=value] (comma = and; repeat --only = or); keys: "
                             "variant, seed or a dotted config key, e.g. --only variant=preln,model.depth=12")
    parser.add_argument("--retry-errors", action="store_true", help="rerun runs whose status is error")
    parser.add_argument("--rerun-stale", action="store_true",
                        help="rerun finished runs that another git commit of the suite made")


def run(args: argparse.Namespace) -> int:
    from suite.config import ConfigError
    from suite.sweep import folder
    from suite.sweep.plan import auto_device, plan, resolve_runs
    from suite.sweep.spec import SpecError, load_ablation, parse_only, select

    try:
        problem = (at_least(args, 1, "workers", "threads", "max_runs", "slurm_time", "slurm_array_parallelism",
                            "runs_per_gpu", "pack")
                   or at_least(args, 0, "slurm_gpus_per_job") or at_least(args, 0.1, "ray_timeout", "slurm_poll")
                   or at_least(args, 1.0, "slurm_lease"))
        if problem:
            raise SpecError([problem])
        slurm = slurm_options(args)
        ablation = load_ablation(args.ablation, max_runs=args.max_runs)
        runs = select(ablation.runs, parse_only(args.only or [], ablation))
        kind = getattr(args, "kind", "train")  # `suite propagate` measures the same runs instead
        runs = [dataclasses.replace(r, kind=kind) for r in runs]
        if not runs:
            raise SpecError([f"--only: {' | '.join(args.only)}: matches none of the {len(ablation.runs)} runs; "
                             f"list them with --dry-run"])
        out = Path(args.out) if args.out else Path("results") / ablation.name
        folder.check_out(out, ablation)
        # A dry run asks no Ray cluster: `auto` is then what this machine has.
        backend = "local" if args.dry_run else args.backend
        if args.backend == "slurm":  # the workers' nodes, not this login node, decide what `auto` is
            runs = resolve_runs(runs, args.device, "cuda" if slurm.gpus_per_job else "cpu")
        else:
            runs = resolve_runs(runs, args.device, lambda: auto_device(backend, args.ray_address, args.ray_timeout))
        todo, done, other = folder.split_done(runs, out, args.retry_errors, args.rerun_stale, store.git_commit())
        if other:
            made = ", ".join(f"{sha[:10]}: {n}" for sha, n in sorted(other.items(), key=lambda kv: -kv[1]))
            what = ("they will be run again (--rerun-stale)" if args.rerun_stale else
                    "their results are kept; pass --rerun-stale to run them again with this code")
            print(f"warning: {sum(other.values())} finished runs were made by other versions of the suite "
                  f"({made}); {what}", file=sys.stderr)
        if args.dry_run:
            _print_plan(runs, done, out, ablation, todo)
            return 0
        if not todo:  # nothing to run: write nothing, so a read-only results folder is fine
            return _sweep(runs, todo, done, out, None)
        if args.backend != "slurm":
            from suite.sweep.slurm_backend import live_jobs

            busy = live_jobs(out)
            if busy:
                raise folder.RunnerError(f"{out}: Slurm jobs {', '.join(busy[:4])} are still working on these runs; "
                                         f"wait for them, cancel them, or pass --backend slurm to attach to them")
        todo, execute = plan(todo, backend=args.backend, device=args.device, workers=args.workers,
                             threads=args.threads, ray_address=args.ray_address, ray_timeout=args.ray_timeout,
                             slurm=slurm, runs_per_gpu=args.runs_per_gpu, pack=args.pack,
                             notify=lambda line: print(line, flush=True))
        with folder.prepare_out(out, ablation):
            return _sweep(runs, todo, done, out, execute)
    except (ConfigError, folder.RunnerError) as err:
        for line in str(err).splitlines():
            print(f"error: {line}", file=sys.stderr)
        return 2


def slurm_options(args: argparse.Namespace):
    """The ``--slurm-*`` options as :class:`~suite.sweep.slurm_backend.SlurmOptions`.

    Raises:
        SpecError: a ``--slurm-opt`` that is not ``KEY=VALUE``.
    """
    from suite.sweep.slurm_backend import SlurmOptions
    from suite.sweep.spec import SpecError

    sbatch = {}
    for item in getattr(args, "slurm_opt", None) or []:
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("-")
        if not sep or not key:
            raise SpecError([f"--slurm-opt {item}: expected KEY=VALUE (an sbatch option without its --), "
                             f"e.g. --slurm-opt account=myproj"])
        sbatch[key.replace("-", "_")] = value
    gpus = getattr(args, "slurm_gpus_per_job", None)
    cluster = getattr(args, "slurm_cluster", "slurm")
    if gpus is None:
        if args.device == "cpu":
            gpus = 0
        elif cluster == "local":  # the local executor's jobs get this machine's GPUs, if it has any
            from suite.sweep.plan import visible_gpus

            gpus = 1 if visible_gpus() else 0
        else:
            gpus = 1
    return SlurmOptions(cluster=cluster, partition=getattr(args, "slurm_partition", None),
                        time_min=getattr(args, "slurm_time", 240), gpus_per_job=gpus,
                        array_parallelism=getattr(args, "slurm_array_parallelism", 64), sbatch=sbatch,
                        lease_s=getattr(args, "slurm_lease", 600.0), detach=getattr(args, "slurm_detach", False),
                        poll_s=getattr(args, "slurm_poll", 10.0))


def _sweep(runs: list, todo: list, done: dict, out: Path, execute) -> int:
    from suite.sweep.slurm_backend import Detached

    progress = Progress(len(runs), done, len(todo))
    main_thread = threading.current_thread() is threading.main_thread()  # signals can only be set there
    old_term = signal.signal(signal.SIGTERM, _raise_interrupt) if main_thread else None  # stop as on Ctrl-C
    # A process started in the background of a non-interactive shell inherits SIGINT *ignored*
    # (POSIX), and Python then never raises KeyboardInterrupt: a sweep must still stop on Ctrl-C.
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler) if main_thread else None
    try:
        if todo:
            execute(todo, out, progress)
    except Detached as left:  # the Slurm jobs go on without us
        progress.close()
        print(f"{progress.counts_text()} so far; {left}", file=sys.stderr)
        return left.code
    except KeyboardInterrupt:
        progress.close()
        left = len(runs) - progress.finished
        print(f"interrupted: {progress.counts_text()}; {left} runs left, run the same command again to "
              f"finish them -> {out}", file=sys.stderr)
        return 130
    finally:
        progress.close()
        if main_thread:
            signal.signal(signal.SIGTERM, old_term)
            signal.signal(signal.SIGINT, old_int)
    print(progress.summary(out))
    if progress.counts["error"]:
        print(f"{progress.counts['error']} runs ended in error: see {out}/runs/<run_id>/summary.json (error) and "
              f"log.txt; rerun them with --retry-errors", file=sys.stderr)
    return 0


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


class Progress:
    """Counts by status; a tqdm bar over runs on a terminal, else one line per finished run."""

    def __init__(self, total: int, done: dict[str, dict], todo: int) -> None:
        self.total, self.todo, self.skipped, self.n = total, todo, len(done), 0
        self.counts: collections.Counter = collections.Counter({s: 0 for s in STATUSES})
        self.counts.update(s.get("status") for s in done.values())
        self.t0 = time.perf_counter()
        self.bar = None
        if sys.stderr.isatty() and todo:
            from tqdm import tqdm

            self.bar = tqdm(total=todo, unit="run", dynamic_ncols=True)

    @property
    def finished(self) -> int:
        return self.skipped + self.n

    def __call__(self, run, result: dict[str, Any]) -> None:
        self.n += 1
        status = result.get("status") or "error"
        self.counts[status] += 1
        elapsed = time.perf_counter() - self.t0
        eta = _duration(elapsed / self.n * (self.todo - self.n))
        line = f"[{self.n}/{self.todo}] {status:<8} {run.label}  {_detail(result)}  ({result.get('wall_s') or 0:.1f} s)"
        if self.bar is None:
            print(f"{line}  eta {eta}", flush=True)
            return
        self.bar.set_postfix_str(self.counts_text(short=True), refresh=False)
        self.bar.update(1)
        if status == "error":
            self.bar.write(line)

    def counts_text(self, short: bool = False) -> str:
        if short:
            return " ".join(f"{s[:4]}={self.counts[s]}" for s in STATUSES)
        return ", ".join(f"{self.counts[s]} {s}" for s in STATUSES)

    def summary(self, out: Path) -> str:
        return (f"{self.total} runs: {self.counts_text()} (skipped {self.skipped} already done) "
                f"in {_duration(time.perf_counter() - self.t0)} -> {out}")

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


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    h, m = s // 3600, s // 60 % 60
    return f"{h}h{m:02d}m{s % 60:02d}s" if h else f"{m}m{s % 60:02d}s"


def _print_plan(runs: list, done: dict, out: Path, ablation, todo: list) -> None:
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
    print(f"{selected}: {len(done)} already done, {len(todo)} to run -> {out}")
