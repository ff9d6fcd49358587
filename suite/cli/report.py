"""``suite report DIR [--compare OTHER]``: one self-contained HTML page of an analysed results folder."""

from __future__ import annotations

import argparse

from suite.cli.checks import fail


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``suite report`` arguments to ``parser``."""
    parser.add_argument("dir", help="a results folder `suite analyze` has written into, e.g. results/default")
    parser.add_argument("--compare", metavar="OTHER", default=None,
                        help="a second analysed folder: write DIR/compare.html, showing what changed in the ablation "
                             "file and which cells moved (report.html is left as it is)")


def run(args: argparse.Namespace) -> int:
    """Write ``DIR/report.html`` (with ``--compare``: ``DIR/compare.html``, warning on stderr where the two
    folders cannot be compared key by key or cell by cell); exit 2 on a user error."""
    from suite.analysis.load import AnalysisError
    from suite.analysis.report import write_report

    import sys

    try:
        path = write_report(args.dir, args.compare, warn=lambda line: print(f"warning: {line}", file=sys.stderr))
    except AnalysisError as err:
        return fail(str(err))
    except OSError as err:  # e.g. a read-only results folder (a full disk is DiskFull, handled by the CLI)
        return fail(f"cannot write {args.dir}/report.html ({err.strerror or err}); check the folder's permissions")
    print(f"wrote {path} (self-contained: open it in any browser)")
    return 0
