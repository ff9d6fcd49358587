"""``suite plan DIR``: the seeds each comparison needs, planned from the runs so far (suite/analysis/plan.py)."""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

from suite.cli.checks import fail


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", help="folder of runs (one ablation), e.g. results/default")
    parser.add_argument("--effect", type=float, default=5.0, metavar="POINTS",
                        help="score difference to detect, in points (default: %(default)s; the primary comparison "
                             "uses its declared margin when it has one)")
    parser.add_argument("--power", type=float, default=0.8, metavar="P", help="power wanted (default: %(default)s)")
    parser.add_argument("--baseline", metavar="VARIANT", default=None, help="variant to compare against (default: preln)")


def run(args: argparse.Namespace) -> int:
    from suite.results import AnalysisError, AnalysisWarning
    from suite.analysis.plan import plan_table, render

    if not 0 < args.effect < 100:
        return fail(f"--effect {args.effect}: expected points in (0, 100), e.g. 5")
    if not 0 < args.power < 1:
        return fail(f"--power {args.power}: expected a probability in (0, 1), e.g. 0.8")
    if args.dir.endswith((".yaml", ".yml")) and not Path(args.dir).is_dir():  # an ablation file, before any run
        return fail(f"{args.dir}: suite plan plans from the runs of a results folder; before any run, `suite cost "
                    f"{args.dir}` says what the file costs, and `suite run {args.dir}` makes the runs to plan from")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AnalysisWarning)  # `suite analyze` reports damaged summaries
        try:
            frame = plan_table(args.dir, args.effect / 100, args.power, args.baseline)
        except AnalysisError as err:
            return fail(str(err))
    print(render(frame, args.power))
    return 0
