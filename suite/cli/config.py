"""``suite config [FILE] [key=value ...] [--only FILTER]``: print the fully resolved config of a run, as its
``config.yaml`` will hold it; for an ablation, its first run (or the first ``--only`` selects)."""

from __future__ import annotations

import argparse

from suite.cli.checks import at_least, fail, file_and_overrides, shown
from suite.sweep.spec import MAX_RUNS

INTERMIXED = True  # key=value overrides may follow the options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", metavar="FILE", help="a run config or an ablation YAML (omit: the defaults)")
    parser.add_argument("overrides", nargs="*", default=[], metavar="key=value", help="dotted overrides for a run config")
    parser.add_argument("--max-runs", type=int, default=MAX_RUNS, metavar="N",
                        help="for an ablation: refuse one of more runs than this (default: %(default)s)")
    parser.add_argument("--only", action="append", default=[], metavar="FILTER",
                        help="for an ablation: the first run matching, e.g. --only variant=preln,model.depth=12")


def run(args: argparse.Namespace) -> int:
    from suite import store
    from suite.config import ConfigError, dump_yaml, load_config, read_yaml, resolve_precision

    if problem := at_least(args, 1, "max_runs"):
        return fail(problem)
    try:
        path, overrides = file_and_overrides(args.file, args.overrides)
        raw = read_yaml(path) if path is not None else None
        if isinstance(raw, dict) and _is_ablation(raw):
            if overrides:
                return fail(f"{path}: key=value overrides are for a run config; pick a run of this ablation with "
                            f"--only, e.g. --only variant=preln")
            cfg, header = _ablation_run(path, args.only, args.max_runs)
        else:
            if args.only:
                return fail(f"--only: picks a run of an ablation, and {path or 'no file'} is a run config; drop it")
            cfg = load_config(path, overrides)
            header = shown(f"# {path or 'the defaults'}" + (" with " + " ".join(overrides) if overrides else ""))
    except ConfigError as err:
        return fail(*str(err).splitlines())
    from suite.engine.resources import resolve_device  # torch: after a config error is ruled out

    if cfg.device == "cpu":  # a precision no CPU has (fp16, tf32), refused as `suite train` would
        try:
            resolve_precision(cfg, "cpu")
        except ConfigError as err:
            return fail(f"device cpu: {err}")
    if cfg.train.precision == "auto":
        try:  # as `suite run` would on this machine: the run folder's config.yaml holds the resolved value
            cfg = resolve_precision(cfg, resolve_device(cfg.device).type)
            header += f"\n# train.precision auto resolved for this machine: {cfg.train.precision}"
        except RuntimeError:  # device cuda here without one: left as written
            header += ("\n# train.precision auto: resolved where the run executes (fp32 on CPU; on CUDA bf16 from "
                       "model.dim 128, tf32 below)")
    header += f"\n# run id {store.run_id(cfg)}"
    print(header + "\n" + dump_yaml(cfg), end="")
    return 0


def _is_ablation(raw: dict) -> bool:
    """Whether a file is an ablation: it has a key only an ablation has (``extends`` and ``name`` included)."""
    from suite.sweep.spec import FIELDS

    return any(key in FIELDS for key in raw)


def _ablation_run(path: str, only: list[str], max_runs: int):
    from suite.sweep.spec import SpecError, load_ablation, parse_only, select

    ablation = load_ablation(path, max_runs=max_runs)
    runs = select(ablation.runs, parse_only(only, ablation))
    if not runs:
        raise SpecError([f"--only: {' | '.join(only)}: matches none of the {len(ablation.runs)} runs; "
                         f"list them with suite run {path} --dry-run"])
    run = runs[0]
    which = f"the first of {len(runs)} matching runs" if only else f"run 1 of {len(ablation.runs)}"
    return run.cfg, shown(f"# {path}: {run.label} ({which}; ablation {ablation.name})")
