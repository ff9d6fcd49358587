"""``suite analyze DIR``: tables (md, tex, csv) and figures from a folder of finished runs."""

from __future__ import annotations

import argparse
import sys
import warnings

from suite.analysis.analyze import FORMATS, analyze
from suite.analysis.grouping import DEFAULT_BASELINE
from suite.analysis.load import AnalysisError, AnalysisWarning


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``suite analyze`` arguments to ``parser``."""
    parser.add_argument("dir", help="folder of runs (one ablation), e.g. results/default")
    parser.add_argument("--baseline", metavar="VARIANT", default=None,
                        help=f"variant to test against (default: {DEFAULT_BASELINE}, required if absent)")
    parser.add_argument("--by", metavar="KEY", nargs="+", default=None,
                        help="group by these keys (plus variant) instead of every key that varies, e.g. model.depth")
    parser.add_argument("--formats", default=",".join(FORMATS),
                        help="comma list of table formats: md, tex, csv (default: all)")
    parser.add_argument("--power", action="store_true",
                        help="also tabulate the seeds per cell needed to detect the differences below with 80%% power")
    parser.add_argument("--power-diff", type=float, default=5.0, metavar="POINTS",
                        help="accuracy difference to detect, in points, by a paired t-test (default: %(default)s)")
    parser.add_argument("--power-rates", default="0.1,0.5", metavar="P1,P2",
                        help="not-ok rates of a scheme and the baseline to tell apart, Fisher (default: %(default)s)")
    parser.add_argument("--no-figures", dest="figures", action="store_false", help="skip the figures")


def run(args: argparse.Namespace) -> int:
    """Run ``suite analyze`` from parsed arguments; returns the exit code (2 on a user error)."""
    formats = tuple(f.strip() for f in str(args.formats).split(",") if f.strip())
    try:
        rates = tuple(float(x) for x in str(args.power_rates).split(","))
    except ValueError:
        rates = ()
    if len(rates) != 2 or not all(0 <= r <= 1 for r in rates) or rates[0] == rates[1]:
        print(f"suite analyze: error: --power-rates {args.power_rates}: expected two different rates in [0, 1], "
              f"e.g. 0.1,0.5", file=sys.stderr)
        return 2
    if not (0 < args.power_diff <= 100):
        print(f"suite analyze: error: --power-diff {args.power_diff}: expected points in (0, 100], e.g. 5",
              file=sys.stderr)
        return 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AnalysisWarning)
        try:
            summary = analyze(args.dir, baseline=args.baseline, by=args.by, formats=formats,
                              power=args.power, figures=getattr(args, "figures", True),
                              power_diff=args.power_diff / 100, power_rates=rates)
        except AnalysisError as err:
            print(f"suite analyze: error: {err}", file=sys.stderr)
            return 2
        except OSError as err:  # e.g. a read-only results folder
            print(f"suite analyze: error: cannot write the outputs ({err}); check the folder's permissions",
                  file=sys.stderr)
            return 2
    for w in caught:
        if issubclass(w.category, AnalysisWarning):
            print(f"suite analyze: warning: {w.message}", file=sys.stderr)
        else:  # not ours (numpy, matplotlib): show it as Python would have
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    print(f"{len(summary)} groups by {', '.join(summary.attrs['keys'])}; baseline {summary.attrs['baseline']}")
    for path in summary.attrs["written"]:
        print(f"wrote {path}")
    return 0
