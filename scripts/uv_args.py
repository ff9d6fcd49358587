"""Print the `uv pip install` options that make uv install from where pip is configured to.

uv reads neither pip.conf nor PIP_* variables. `make install` runs uv (the same wheels as pip, much
faster), so this script turns what ``python -m pip config list`` reports (the index,
extra indexes, find-links and constraint files of every pip.conf and PIP_* variable, the variables
first, then ``[install]``, then ``[global]``, as pip ranks them) into uv's options. uv is also told
to pick the best version across all indexes, which is what pip does.

Run: ``python scripts/uv_args.py`` (prints the options on one line; nothing configured: only the
index strategy, and uv uses PyPI as pip would).
"""

from __future__ import annotations

import ast
import subprocess
import sys

OPTIONS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
           "constraint": "--constraint"}
RANK = (":env:", "install", "global")  # pip's precedence: the first section that sets a key wins


def parse(listing: str) -> dict[str, list[str]]:
    """{pip option: values} from ``pip config list`` lines such as ``global.find-links='/opt/wheels'``."""
    found: dict[tuple[str, str], list[str]] = {}
    for line in listing.splitlines():
        key, sep, value = line.partition("=")
        section, _, name = key.rpartition(".")
        if sep and name in OPTIONS and section in RANK:
            try:
                found[section, name] = str(ast.literal_eval(value)).split()
            except (ValueError, SyntaxError):  # not as pip prints it: uv is left on its default for this key
                continue
    return {name: next(found[s, name] for s in RANK if (s, name) in found)
            for name in OPTIONS if any((s, name) in found for s in RANK)}


def uv_args(options: dict[str, list[str]]) -> list[str]:
    """uv's command-line options for pip's ``options``."""
    args = ["--index-strategy", "unsafe-best-match"]
    for name, values in options.items():
        for value in values[:1] if name == "index-url" else values:
            args += [OPTIONS[name], value]
    return args


def main() -> int:
    listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    print(" ".join(uv_args(parse(listing))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
