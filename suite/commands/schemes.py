"""``suite schemes``: what can be chosen for ``model.residual`` and ``data.name``."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # no options


def run(args: argparse.Namespace) -> int:
    from suite.data import DATASETS
    from suite.models.residual import SCHEMES

    print("residual schemes (model.residual):")
    for name in sorted(SCHEMES):
        print(f"  {name}")
    print("datasets (data.name):")
    for name in sorted(DATASETS):
        print(f"  {name}")
    return 0
