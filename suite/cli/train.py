"""``suite train [CONFIG.yaml] [--out DIR] [--device ...] [key=value ...]``: one run, one folder. Alone it trains
:data:`DEMO`, a CPU-sized first run, not the typed defaults (which sweeps' run ids depend on)."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Callable, Iterator

INTERMIXED = True  # key=value overrides may follow the options

from suite.cli.checks import fail, file_and_overrides, writable_dir


# What `suite train` alone trains: a first run sized for a CPU, one thread (docs/training.md has its time and why).
DEMO = ("model.residual=layerscale", "model.depth=12", "train.steps=200", "train.threads=1")
DEMO_TIME = "about 1.5 minutes on 2 busy CPU cores (93 s: results/reference/train_demo.txt)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", help="run config YAML (omit: the typed defaults of suite/config.py, "
                                                  "or the demo run below when no key=value is given either)")
    parser.add_argument("overrides", nargs="*", default=[], metavar="key=value",
                        help="dotted overrides applied after the file, e.g. model.depth=24 train.lr=1e-3")
    parser.add_argument("--out", help="run folder (default: results/train/<run_id>)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], help="overrides the config's device")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="--progress: tqdm's bar on stderr; --no-progress: nothing; default: the bar when "
                             "stderr is a terminal, else a line on stdout (step, loss, steps/s, eta) every "
                             "--progress-every seconds")
    parser.add_argument("--progress-every", type=float, default=10.0, metavar="S",
                        help="seconds between progress lines (default: %(default)s)")
    parser.epilog = (f"With no CONFIG and no key=value, suite train trains a CPU-sized demo run, not the typed "
                     f"defaults: {' '.join(DEMO)} on the default data (embedded MNIST-5k), {DEMO_TIME}. "
                     f"Give a file or any key=value to start from the typed defaults instead (`suite config` "
                     f"prints them).")


def sweep_owner(out: str | Path) -> str | None:
    """Why ``suite train`` must not write into ``out``, a sweep's run folder (two processes would train one run, or an
    idle sweep's folder would get a summary without the ``variant`` the analysis groups by); None when it is not one."""
    from suite.results import ABLATION_FILE
    from suite.sweep import claims
    from suite.sweep.sweep import SweepOptions

    out = Path(os.path.realpath(out))  # a link to a sweep's run folder is that folder
    for root in (out, out.parent):  # the sweep's own folder, or its runs/: a run there is no run folder
        if (root / ABLATION_FILE).is_file() and (root == out or out.name == "runs"):
            return (f"--out {out}: is {'the results folder' if root == out else 'the runs/ folder'} of the sweep in "
                    f"{root}, not a run folder; pass --out DIR for this run (or `suite run` to add runs there)")
    if out.parent.name != "runs":
        return None
    root = out.parent.parent
    claim = claims.claim_path(root, out.name)
    if _locked(root / ".lock") or claims.dead(claim, SweepOptions().lease) is False:
        return (f"--out {out}: a sweep is training this run (a `suite run` or one of its workers holds {root}); "
                f"wait for it to finish (`suite status {root}`) or pass another --out")
    if (root / ABLATION_FILE).exists():
        return (f"--out {out}: is a run folder of the sweep in {root}; `suite run` trains it there and records its "
                f"variant and ablation (--only, --retry-errors), or pass another --out")
    return None


def _locked(path: Path) -> bool:
    """Whether another process holds an exclusive ``flock`` on ``path`` (taken shared and let go at once to look)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops a lock we took
    return False


def run(args: argparse.Namespace) -> int:
    from suite import store
    from suite.config import ConfigError, load_config, resolve_precision

    try:
        problem = args.out and sweep_owner(args.out)  # before the folder is created, and before torch
    except OSError as err:  # a folder on the way this user may not look into
        problem = f"--out {args.out}: cannot look there ({err.strerror or err}); pass --out DIR with a folder you can write"
    if problem:
        return fail(problem)
    if not 0 < args.progress_every < float("inf"):
        return fail(f"--progress-every {args.progress_every:g}: must be a number of seconds above 0")
    try:
        path, overrides = file_and_overrides(args.config, args.overrides)
    except ConfigError as err:
        return fail(str(err))
    if path is None and not overrides:
        overrides = list(DEMO)
        print(f"suite train: no config and no key=value: training the CPU-sized demo run ({' '.join(DEMO)}; "
              f"{DEMO_TIME.split(' (')[0]}); see `suite train --help`", flush=True)
    try:
        cfg = load_config(path, overrides)
    except ConfigError as err:
        return fail(str(err))
    from suite.engine import train  # torch and the engine: seconds, so after a config error is ruled out
    from suite.engine.compiled import solo_graph_problem
    from suite.engine.lifecycle import StopRun
    from suite.engine.resources import memory_problem, resolve_device
    from suite.engine.trackers import missing

    if args.device:  # after the overrides, so that `device=cpu --device cuda` is not a key given twice
        cfg.device = args.device
    if problem := missing(cfg.train.log_to):
        return fail(problem)
    try:  # precision `auto` resolved once, for this machine, before the run id names the folder
        device = resolve_device(cfg.device)
        cfg = resolve_precision(cfg, device.type)
    except (RuntimeError, ConfigError) as err:  # device cuda without a GPU; fp16 where it is not offered
        return fail(str(err))
    from suite.data import DataError, check_present

    try:  # a dataset on disk that is not there, said before a run folder is made (as a sweep's preflight does)
        check_present(cfg.data)
    except DataError as err:
        return fail(f"data.name {cfg.data.name}: {err}")
    if cfg.model.backend == "timm":  # what timm's ViT cannot express, said before the run starts (as preflight does)
        from suite.models.timm_bridge import timm_init_values

        try:
            timm_init_values(cfg.model)
        except ValueError as err:
            return fail(f"model.backend timm: {err}; or use model.backend: suite")
    problem = solo_graph_problem(cfg.train.compile, device.type) or memory_problem(cfg, device)  # before anything
    if problem:                                                            # is allocated: one line, not a crash
        return fail(problem)
    out = Path("results") / "train" / store.run_id(cfg) if args.out is None else args.out  # --out '' is refused
    if problem := writable_dir(out, "--out"):
        return fail(problem)
    out = Path(out)
    if held := store.run_folder_problem(out, cfg):  # nothing else's is ever overwritten silently
        return fail(f"--out {out}: {held}; pass another --out, or delete the folder to reuse it")
    done = store.read_summary(out) if (out / store.SUMMARY).is_file() else None
    if done is not None and done["status"] in store.FINAL_STATUSES:  # as `suite run` skips a finished run
        print(f"already finished: {out} ({done['status']}, started {done.get('started_at')}); delete the folder "
              f"to train it again", file=sys.stderr)
        return _said(done, out)
    on_step = None
    if args.progress is None and not sys.stderr.isatty():  # a log file, a pipe, a batch job: lines, not a bar
        from suite.cli.progress_lines import ProgressLines

        total = cfg.train.steps if cfg.train.epochs is None else None  # epochs: the data's size decides
        print(f"training run {store.run_id(cfg)} ({total or 'epochs of'} steps, {device}) -> {out}", flush=True)
        on_step = ProgressLines(out, total, args.progress_every)
    progress = bool(args.progress) if on_step else args.progress
    try:
        with checkpoint_on_ctrl_c(on_step) as stepped:
            summary = train(cfg, out, progress=progress, on_step=stepped)
    except StopRun:
        print(f"\ninterrupted: {out} saved its last step; the same command resumes it from there (Ctrl-C twice: "
              f"stop at once, unsaved)", file=sys.stderr)
        return 130
    return _said(summary, out)


@contextlib.contextmanager
def checkpoint_on_ctrl_c(on_step: Callable[[int], None] | None) -> Iterator[Callable[[int], None]]:
    """An ``on_step`` that, after a first Ctrl-C, ends the run at its next step with a checkpoint (as a sweep's runs
    do on SIGTERM); a second Ctrl-C interrupts at once."""
    from suite.engine.lifecycle import StopRun

    asked: list[bool] = []

    def first(signum, frame):
        asked.append(True)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # the second is a plain KeyboardInterrupt

    def stepped(step: int) -> None:
        if on_step is not None:
            on_step(step)
        if asked:
            raise StopRun("interrupted", save=True)

    stepped.progress = on_step  # what it passes each step on to (progress lines, or None)
    if threading.current_thread() is not threading.main_thread():
        yield stepped
        return
    previous = signal.signal(signal.SIGINT, first)
    try:
        yield stepped
    finally:
        signal.signal(signal.SIGINT, previous)


def _said(summary: dict, out: Path) -> int:
    """The run's last line (its status, score, divergence and step time) and the exit code."""
    line = f"{summary['status']}: {out}"
    if summary["status"] == "error":
        print(f"{line}\n  {summary['error']}", file=sys.stderr)
        return 1
    acc = summary["test_acc"]
    extra = f" test_acc={acc:.4f}" if acc is not None else ""
    if summary["diverged_step"] is not None:
        extra += f" diverged at step {summary['diverged_step']} ({summary['diverged_reason']})"
    if summary["step_time_ms"] is not None:
        extra += f" step={summary['step_time_ms']:.1f} ms"
    print(line + extra)
    return 0
