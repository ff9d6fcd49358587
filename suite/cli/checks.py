"""Checks of command-line values that argparse's types cannot express, shared by the subcommands: each returns the
one-line problem or ``None``, which the subcommand reports with :func:`fail` before any work starts."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from pathlib import Path


def shown(text: object) -> str:
    """``text`` for a terminal: a control character from a results folder (an escape sequence, a line break) is
    shown as its escape (``\\x1b``), never sent."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def fail(*problems: str) -> int:
    """Print each problem as one ``error:`` line on stderr; returns 2, the exit status of a user error."""
    for problem in problems:
        print("error: " + shown(problem), file=sys.stderr)
    return 2


def at_least(args: argparse.Namespace, minimum: float, *flags: str) -> str | None:
    """The first of ``flags`` (attribute names) whose value is set and below ``minimum`` or not finite."""
    for flag in flags:
        value = getattr(args, flag)
        if value is not None and not (math.isfinite(value) and value >= minimum):
            return f"--{flag.replace('_', '-')} {value}: must be >= {minimum:g}"
    return None


def at_most(args: argparse.Namespace, maximum: float, *flags: str) -> str | None:
    """The first of ``flags`` whose value is set and above ``maximum`` (a bound that catches a typo's extra zeros)."""
    for flag in flags:
        value = getattr(args, flag)
        if value is not None and value > maximum:
            return f"--{flag.replace('_', '-')} {value}: must be <= {maximum:g}"
    return None


def writable_dir(path: str | Path, flag: str) -> str | None:
    """Create ``path`` if needed; the problem if it cannot be a folder this process writes into."""
    if not str(path).strip():  # Path("") is ".": an empty --out would write into the working folder
        return f"{flag} {str(path)!r}: empty; pass a folder"
    path = Path(path)
    if path.exists() and not path.is_dir():
        return f"{flag} {path}: is a file, not a folder; pass a folder"
    if path.is_symlink() and not path.exists():
        return f"{flag} {path}: a link to {os.readlink(path)}, which does not exist; pass a folder"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        return f"{flag} {path}: cannot create the folder ({err.strerror or err}); pass a writable folder"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"{flag} {path}: the folder is not writable; pass a writable folder"
    return None


def file_and_overrides(path: str | None, overrides: list[str]) -> tuple[str | None, list[str]]:
    """``suite train`` / ``suite config``'s FILE and overrides: a first argument with ``=`` naming no file is one."""
    # os.path.exists, not Path.exists: a name longer than the file system takes (255 bytes) is no file, not an error
    if path is not None and "=" in path and not os.path.exists(path):
        return None, [path, *overrides]
    key_like = path is not None and re.fullmatch(r"(model|data|train)\.[a-z_.]+|seed|device", path)  # `model.depth 4`
    if key_like and overrides and not os.path.exists(path):
        from suite.config import ConfigError

        raise ConfigError(f"{path}: no such file; to set a key write {path}={overrides[0]} (no spaces around '=')")
    return path, list(overrides)
