"""``suite propagate FILE``: signal propagation at initialisation and over the first steps.

The runs of an ablation file, each measured by :func:`suite.engine.propagation.propagate` instead
of trained (``train.steps`` is the number of optimizer steps followed, 5 in
``ablations/propagation.yaml``); the same options, resuming and exit codes as ``suite run``. Then
``suite analyze DIR`` draws the propagation tables and figures. See docs/propagation.md.
"""

from __future__ import annotations

import argparse

from suite.cli import run as run_cli

add_arguments = run_cli.add_arguments  # the options of `suite run`


def run(args: argparse.Namespace) -> int:
    args.kind = "propagation"
    return run_cli.run(args)
