"""``suite analyze DIR``: tables (md, tex, csv) and figures from a folder of finished runs."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from suite import store
from suite.analysis.analyze import FORMATS, analyze
from suite.grouping import DEFAULT_BASELINE
from suite.results import ABLATION_FILE, AnalysisError, AnalysisWarning
from suite.cli.checks import fail


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``suite analyze`` arguments to ``parser``."""
    parser.add_argument("dir", help="folder of runs (one ablation), e.g. results/default")
    parser.add_argument("--baseline", metavar="VARIANT", default=None,
                        help=f"variant to test against (default: {DEFAULT_BASELINE}, required if absent)")
    parser.add_argument("--by", metavar="KEY", nargs="+", default=None,
                        help="group by these keys (plus variant) instead of every key that varies, e.g. model.depth")
    parser.add_argument("--formats", default=",".join(FORMATS),
                        help="comma list of table formats: md, tex, csv (default: all)")
    parser.add_argument("--no-figures", dest="figures", action="store_false",
                        help="draw no figures (and remove those an earlier analysis drew, so that figures/ and the "
                             "report show only this analysis)")
    parser.add_argument("--force", action="store_true",
                        help="analyse an unfinished sweep even where that overwrites outputs committed to git")


def run(args: argparse.Namespace) -> int:
    """Run ``suite analyze`` from parsed arguments; returns the exit code (2 on a user error)."""
    formats = tuple(f.strip() for f in str(args.formats).split(",") if f.strip())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AnalysisWarning)
        try:
            summary = analyze(args.dir, baseline=args.baseline, by=args.by, formats=formats,
                              figures=args.figures, force=args.force)
        except (AnalysisError, store.UnsafeFile) as err:  # UnsafeFile: a link planted in the folder, a FIFO
            return fail(str(err))
        except OSError as err:
            if store.no_space(err):
                raise  # the CLI's one line for a full disk
            name = Path(err.filename or args.dir)
            if name.name in (store.SUMMARY, store.METRICS, ABLATION_FILE):  # read, never written by an analysis
                return fail(f"cannot read {name} ({store.error_reason(err)}); fix or remove it, then `suite analyze` "
                            f"again")
            return fail(f"cannot write the outputs ({err}); check the folder's permissions")  # a read-only folder
    for w in caught:
        if issubclass(w.category, AnalysisWarning):
            print(f"suite analyze: warning: {w.message}", file=sys.stderr)
        else:  # not ours (numpy, matplotlib): show it as Python would have
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    print(f"{len(summary)} groups by {', '.join(summary.attrs['keys'])}; baseline {summary.attrs['baseline']}")
    if summary.attrs.get("primary") is not None:
        from suite.analysis.markup import md_plain
        from suite.analysis.primary_text import paragraph

        print(md_plain(paragraph(summary.attrs["primary"])))
    for path in summary.attrs["written"]:
        print(f"wrote {path}")
    return 0
