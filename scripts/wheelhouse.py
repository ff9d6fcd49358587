"""`make wheelhouse`: the wheels an offline GPU machine needs for ``make gpu-check USE_SYSTEM_TORCH=1``.

    python scripts/wheelhouse.py [--python 3.12] [--torch 2.11.0+cu130] [--index URL] [--dest wheelhouse] [SPEC ...]

Downloads, for the machine's Python (``--python``; manylinux x86-64 wheels), into ``--dest``:

- the torchvision release built for the machine's torch (``--torch``; 2.X.Y -> 0.(X+15).Y): timm
  imports it and an image's torch may come without it. PyPI's wheel is built for one CUDA; when the
  machine's torch names another (``+cuNNN``) the wheel is refused in one line, with the index to
  take it from instead (``--index https://download.pytorch.org/whl/cuNNN``);
- SPEC... (``name==version``), or by default every distribution gpu-check needs beside torch, at
  the versions installed here (``scripts/gpu_check.py --wheels``).

``--torch ''`` leaves torchvision out. Prints the folder's size: copy the folder into the checkout on
the machine (docs/gpu-and-ray.md). Exit 2 with one line for a torchvision built for another CUDA.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import zipfile
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent)]

import gpu_check  # noqa: E402
import gpu_prechecks  # noqa: E402

# manylinux tags pip must name one by one to take a wheel for another machine (device README)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")


def cuda_tag(version: str) -> str | None:
    """``cu130`` of ``2.11.0+cu130``; None for a version without a CUDA local label."""
    m = re.search(r"\+(cu\d+)", version)
    return m[1] if m else None


def wheel_version(wheel: Path) -> str | None:
    """torchvision's ``__version__`` as its wheel's ``torchvision/version.py`` states it."""
    with zipfile.ZipFile(wheel) as z:
        text = z.read("torchvision/version.py").decode()
    m = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", text)
    return m[1] if m else None


def cuda_mismatch(torch_version: str, torchvision_version: str | None) -> str | None:
    """One line if the wheel's CUDA major differs from torch's (torchvision refuses to import then)."""
    want, got = cuda_tag(torch_version), cuda_tag(torchvision_version or "")
    if want is None or got is None or want[2:-1] == got[2:-1]:
        return None
    return (f"wheelhouse: torchvision {torchvision_version} is built for CUDA {got[2:-1]}.{got[-1]}, "
            f"the machine's torch {torch_version} for {want[2:-1]}.{want[-1]}, and torchvision refuses to import "
            f"across CUDA majors. "
            f"Fix: make wheelhouse TORCHVISION_INDEX=https://download.pytorch.org/whl/{want}")


def download(specs: list[str], python: str, dest: Path, index: str | None = None) -> None:
    """``pip download`` of ``specs`` (no dependencies: each is named) for CPython ``python`` on x86-64 Linux."""
    platforms = [a for p in PLATFORMS for a in ("--platform", p)]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
           "--python-version", python, "--implementation", "cp", *platforms, "-d", str(dest),
           *(["--index-url", index] if index else []), *specs]
    subprocess.run(cmd, check=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("specs", nargs="*", metavar="SPEC", help="name==version (default: gpu_check.py --wheels)")
    parser.add_argument("--python", default="3.12", help="the machine's Python, X.Y (default: %(default)s)")
    parser.add_argument("--torch", default="2.11.0+cu130",
                        help="the machine's torch version ('' = no torchvision; default: %(default)s)")
    parser.add_argument("--index", help="where to take torchvision from (default: pip's configured indexes)")
    parser.add_argument("--dest", default="wheelhouse", type=Path)
    args = parser.parse_args(argv)
    if not re.fullmatch(r"3\.\d+", args.python):
        parser.error(f"--python {args.python!r}: expected X.Y, e.g. 3.12")
    match = gpu_prechecks.torchvision_for(args.torch) if args.torch else None
    if args.torch and match is None:
        parser.error(f"--torch {args.torch!r}: expected a torch 2.X.Y version, e.g. 2.11.0+cu130")
    args.dest.mkdir(parents=True, exist_ok=True)
    if match:
        download([f"torchvision=={match}"], args.python, args.dest, args.index)
        wheel = next(args.dest.glob(f"torchvision-{match}*-cp{args.python.replace('.', '')}-*.whl"))
        problem = cuda_mismatch(args.torch, wheel_version(wheel))
        if problem:
            wheel.unlink()
            print(problem, file=sys.stderr)
            return 2
        print(f"torchvision {wheel_version(wheel)} for torch {args.torch}: {wheel.name}")
    download(args.specs or gpu_check.wheels(), args.python, args.dest)
    size = sum(p.stat().st_size for p in args.dest.glob("*.whl"))
    print(f"{args.dest}: {len(list(args.dest.glob('*.whl')))} wheels, {size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
