"""``suite schemes``: what can be chosen for ``model.residual`` and ``data.name``."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # no options


def run(args: argparse.Namespace) -> int:
    from suite.registry import DATASETS, SCHEMES

    for title, registry in (("residual schemes", SCHEMES), ("datasets", DATASETS)):
        print(f"{title} ({registry.key}):")
        width = max(map(len, registry.names()))
        for name in registry.names():
            print(f"  {name:<{width}}  {registry.describe(name)}".rstrip())
    return 0
