"""``suite propagate FILE``: signal propagation at initialisation and over the first steps (docs/propagation.md): an
ablation's runs measured instead of trained, with ``suite run``'s options less :data:`TRAINING_ONLY`."""

from __future__ import annotations

import argparse
from typing import Any

from suite.cli import run as run_cli

INTERMIXED = True  # key=value overrides may follow the options, as in `suite run`

# `suite run` options a propagation sweep would ignore: not offered (an argparse error, not a silent no-op).
TRAINING_ONLY = {"--pack": ("pack", 1), "--refine": ("refine", False)}


class _Without:
    """``parser`` (or one of its groups) that drops the arguments named in :data:`TRAINING_ONLY`."""

    def __init__(self, parser: Any) -> None:
        self.parser = parser

    def add_argument(self, *names: str, **kw: Any) -> Any:
        if names == ("ablation",):  # its example: a file made for this command
            kw["help"] = "ablation YAML, e.g. ablations/propagation.yaml"
        if "help" in kw:  # no packs here
            kw["help"] = kw["help"].replace(" (or pack)", "")
        return None if any(name in TRAINING_ONLY for name in names) else self.parser.add_argument(*names, **kw)

    def add_argument_group(self, *args: Any, **kw: Any) -> "_Without":
        return _Without(self.parser.add_argument_group(*args, **kw))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``suite run`` that a propagation sweep honours."""
    run_cli.add_arguments(_Without(parser))


def run(args: argparse.Namespace) -> int:
    for dest, default in TRAINING_ONLY.values():  # what `suite run` reads of them: their defaults
        setattr(args, dest, default)
    args.kind = "propagation"
    return run_cli.run(args)
