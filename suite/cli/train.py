"""``suite train CONFIG.yaml [--out DIR] [--device ...] [key=value ...]``: one run, one folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

INTERMIXED = True  # key=value overrides may follow the options

from suite.cli.checks import fail, file_and_overrides, writable_dir


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", help="run config YAML (omit to use the typed defaults)")
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="dotted overrides applied after the file, e.g. model.depth=24 train.lr=1e-3")
    parser.add_argument("--out", help="run folder (default: results/train/<run_id>)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], help="overrides the config's device")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bar (default: when stderr is a terminal)")


def run(args: argparse.Namespace) -> int:
    from suite import store
    from suite.config import ConfigError, load_config

    path, overrides = file_and_overrides(args.config, args.overrides)
    try:
        cfg = load_config(path, overrides)
    except ConfigError as err:
        return fail(str(err))
    from suite.engine import train  # torch and the engine: seconds, so after a config error is ruled out

    if args.device:  # after the overrides, so that `device=cpu --device cuda` is not a key given twice
        cfg.device = args.device
    from suite.engine.trackers import missing

    problem = missing(cfg.train.log_to)
    if problem:
        return fail(problem)
    from suite.config import resolve_precision
    from suite.engine.resources import resolve_device

    try:  # precision `auto` resolved once, for this machine, before the run id names the folder
        device = resolve_device(cfg.device)
        cfg = resolve_precision(cfg, device.type)
    except (RuntimeError, ConfigError) as err:  # device cuda without a GPU; fp16 where it is not offered
        return fail(str(err))
    from suite.engine.resources import memory_problem

    problem = memory_problem(cfg, device)  # before anything is allocated: a blow-up is one line, not a crash
    if problem:
        return fail(problem)
    out = Path("results") / "train" / store.run_id(cfg) if args.out is None else args.out  # --out '' is refused
    problem = writable_dir(out, "--out")
    out = Path(out)
    if problem:
        return fail(problem)
    held = store.other_run(out, store.run_id(cfg))
    if held:  # a finished result of another experiment is not overwritten silently
        return fail(f"--out {out}: holds the finished {held} of another config; pass another --out, or delete "
                    f"the folder to reuse it")
    summary = train(cfg, out, progress=args.progress)
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
