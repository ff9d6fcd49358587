"""``suite report DIR``: one self-contained HTML page of an analysed results folder."""

from __future__ import annotations

import argparse
import sys

from suite.cli.checks import fail


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``suite report`` arguments to ``parser``."""
    parser.add_argument("dir", help="a results folder `suite analyze` has written into, e.g. results/default")


def run(args: argparse.Namespace) -> int:
    """Write ``DIR/report.html``; exit 2 on a user error."""
    from suite.results import AnalysisError
    from suite.analysis.report import write_report

    try:
        path = write_report(args.dir, warn=lambda line: print(f"warning: {line}", file=sys.stderr))
    except AnalysisError as err:
        return fail(str(err))
    except OSError as err:  # a file that cannot be read, or a read-only folder (a full disk: DiskFull, the CLI's)
        page = f"{args.dir}/report.html"
        name = getattr(err, "filename", None)
        if name and not str(name).endswith((".html", ".tmp")):  # not the page itself, nor its temp file
            return fail(f"cannot read {name} ({err.strerror or err}); fix or remove it, then `suite report` again")
        if isinstance(err, IsADirectoryError):
            return fail(f"cannot write {page}: a folder of that name is in the way; move it aside")
        return fail(f"cannot write {page} ({err.strerror or err}); check the folder's permissions")
    print(f"wrote {path} (self-contained: open it in any browser)")
    return 0
