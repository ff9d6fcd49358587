"""What ``make gpu-check`` needs before its first step, each missing piece said in one line with its fix.

A fresh offline GPU box fails late and expensively without these: minutes into the check, with a
traceback, on a lease that may not allow a second try. So they are checked first (scripts/gpu_check.py
prints every line that applies and exits 2):

- Python >= 3.11: the suite reads TOML with ``tomllib`` (3.11's standard library);
- ``import torchvision`` works: timm, and with it the timm arms and the suite's models, imports it;
- a C compiler: Triton builds a small C launcher the first time it compiles (``CC``, else ``gcc`` or
  ``clang`` on PATH, the order Triton looks in), and every compiled step compiles;
- free disk for the compile caches, the runs and the logs.

This file must import on any Python 3 (no 3.11-only syntax or modules): it is what says that the
Python is too old.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from pathlib import Path
from typing import Callable, Mapping

MIN_PYTHON = (3, 11)
MIN_FREE_GIB = 4  # compile caches (~1 GiB cold), the runs' folders, logs and the temporary sweeps
GIB = 2**30


def python_problem(version: tuple | None = None, executable: str | None = None) -> str | None:
    """One line if ``version`` (default: this Python's) is older than :data:`MIN_PYTHON`."""
    version, executable = tuple(version or sys.version_info), executable or sys.executable
    if version[:2] >= MIN_PYTHON:
        return None
    return (f"python: {executable} is Python {version[0]}.{version[1]}; the suite needs 3.11 or newer (tomllib). "
            f"Fix: make gpu-check PYTHON=python3.11 (or newer), USE_SYSTEM_TORCH=1 with a Python that has torch")


def torchvision_for(torch_version: str) -> str | None:
    """The torchvision release built for ``torch_version`` (2.X.Y -> 0.(X+15).Y, e.g. 2.11.0+cu130 -> 0.26.0),
    or None for a version not of that form."""
    parts = torch_version.split("+")[0].split(".")
    if len(parts) < 3 or parts[0] != "2" or not all(p.isdigit() for p in parts[1:3]):
        return None
    return f"0.{int(parts[1]) + 15}.{parts[2]}"


def installed_version(name: str) -> str | None:
    """``name``'s installed distribution version, or None (read from metadata: nothing is imported)."""
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def torchvision_problem(import_module: Callable[[str], object] | None = None,
                        torch_version: str | None = None) -> str | None:
    """One line if ``import torchvision`` fails (missing, or built for another torch or CUDA)."""
    try:
        (import_module or importlib.import_module)("torchvision")
        return None
    except Exception as err:  # ImportError, or torchvision's RuntimeError on a CUDA mismatch, or a bad .so
        said = f"{type(err).__name__}: " + (str(err).splitlines() or [""])[0][:160]
    torch_version = torch_version or installed_version("torch") or "?"
    match = torchvision_for(torch_version)
    wheel = f"torchvision=={match}" if match else "the torchvision release built for it"
    return (f"torchvision: `import torchvision` failed ({said}); timm needs it. "
            f"Fix: install {wheel} for torch {torch_version}: offline, `make wheelhouse` on a machine with "
            f"internet puts its wheel in wheelhouse/, copy that folder here and run make gpu-check USE_SYSTEM_TORCH=1")


def compiler_problem(environ: Mapping[str, str] | None = None,
                     which: Callable[[str], str | None] | None = None) -> str | None:
    """One line if Triton would find no C compiler: ``CC`` unset (or not an executable), no gcc or clang on PATH."""
    environ, which = os.environ if environ is None else environ, which or shutil.which
    cc = environ.get("CC")
    if cc:
        if which(cc) is not None:
            return None
        return (f"C compiler: CC={cc} is not an executable on PATH; Triton compiles its launcher with it. "
                f"Fix: point CC at a C compiler (e.g. CC=/usr/bin/gcc) or unset it")
    if which("gcc") or which("clang"):
        return None
    cc_on_path = which("cc")
    fix = (f"export CC={cc_on_path} (a C compiler Triton does not look for by itself)" if cc_on_path else
           "install gcc (apt-get install gcc; offline: the box's image must bring one) or set CC=/path/to/a/c/compiler")
    return f"C compiler: no gcc or clang on PATH and CC unset; Triton's first compile needs one. Fix: {fix}"


def _existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def disk_problem(paths: list[Path], need_gib: float = MIN_FREE_GIB,
                 disk_usage: Callable[[Path], object] | None = None) -> str | None:
    """One line naming the first of ``paths`` (or the folder it would be made in) whose disk has less
    than ``need_gib`` GiB free."""
    disk_usage = disk_usage or shutil.disk_usage
    for path in paths:
        where = _existing(path)
        free = disk_usage(where).free
        if free < need_gib * GIB:
            return (f"disk: {free / GIB:.1f} GiB free on the disk of {where} (for {path}); gpu-check needs "
                    f"{need_gib:g} GiB there for compile caches, runs and logs. Fix: free space there, or pass "
                    f"OUT=<a folder on a disk with {need_gib:g} GiB free> (TMPDIR too, if that is the full one)")
    return None


def problems(out: Path, temp: Path) -> list[str]:
    """Every problem, one line each, in the order above (Python first); [] when all is well."""
    found = [python_problem()]
    if found[0] is None:
        found += [torchvision_problem(), compiler_problem(), disk_problem([out, temp])]
    return [p for p in found if p is not None]
