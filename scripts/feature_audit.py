"""Which config keys and command-line flags nothing committed uses: the list issue 63 asks to act on (give each
feature a use in a study, a doc example or a README command, or remove it).

    python scripts/feature_audit.py [OUT.md]     # default: results/reference/feature_audit.md

A config key counts as *set by a study* when a committed ablation file (``ablations/*.yaml``, ``ablations/base/``)
sets it in ``base``, a variant or the grid; as *in the docs* when its dotted name, or its last part in backticks,
appears in README.md or ``docs/``. A flag counts as *shown* when it appears in README.md, ``docs/``, the Makefile or ``.ci/run`` (a
substring search: a flag named only in a sentence counts too, so the unused list is the sure part).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _texts(paths: list[Path]) -> str:
    return "\n".join(p.read_text(errors="replace") for p in paths if p.is_file())


def config_keys() -> list[str]:
    from suite.config import RunConfig, flatten, to_dict

    return sorted(flatten(to_dict(RunConfig())))


def keys_set_by_studies() -> set[str]:
    from suite.config import flatten

    found: set[str] = set()
    for path in sorted((ROOT / "ablations").rglob("*.yaml")):
        data = yaml.safe_load(path.read_text()) or {}
        if not isinstance(data, dict):
            continue
        parts = [data.get("base")] + list((data.get("variants") or {}).values())
        if "model" in data or "train" in data or "data" in data:  # a base file (ablations/base/*.yaml)
            parts.append({k: data[k] for k in ("model", "train", "data") if k in data})
        for part in parts:
            if isinstance(part, dict):
                found.update(flatten(part))
        found.update(str(k) for k in (data.get("grid") or {}))
    return found


def flags() -> dict[str, list[str]]:
    from suite.cli import COMMANDS

    out = {}
    for name, (module, _) in COMMANDS.items():
        parser = argparse.ArgumentParser(add_help=False)
        importlib.import_module(module).add_arguments(parser)
        out[name] = sorted({o for a in parser._actions if a.help != argparse.SUPPRESS  # hidden: for tests only
                            for o in a.option_strings if o.startswith("--")})
    return out


def audit() -> tuple[list[tuple[str, bool, bool]], list[tuple[str, str, bool]]]:
    docs = _texts([ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))])
    shown = docs + _texts([ROOT / "Makefile", ROOT / ".ci" / "run"])
    studies = keys_set_by_studies()
    # named: the dotted key, or its last part in backticks (the docs' tables shorten `train.x`, `y`, `z`)
    keys = [(k, k in studies, k in docs or f"`{k.rsplit('.', 1)[-1]}`" in docs) for k in config_keys()]
    cli = [(cmd, flag, flag in shown) for cmd, fs in flags().items() for flag in fs]
    return keys, cli


def markdown(keys, cli) -> str:
    unused_keys = [k for k, study, doc in keys if not study and not doc]
    unshown = [f"`suite {c} {f}`" for c, f, ok in cli if not ok]
    lines = ["# Features nothing committed uses", "",
             "Written by `python scripts/feature_audit.py` (issue 63). A config key is used when a committed ablation "
             "sets it or the docs name it; a flag when the README, docs/, the Makefile or .ci/run name it.", "",
             f"**{sum(s for _, s, _ in keys)} of {len(keys)} config keys** are set by a committed study; "
             f"**{len(unused_keys)}** are neither set by one nor named in the docs: "
             f"{', '.join(f'`{k}`' for k in unused_keys) or 'none'}.", "",
             f"**{len(cli) - len(unshown)} of {len(cli)} flags** are named in the README, docs/, the Makefile or "
             f".ci/run; **{len(unshown)}** are not: {', '.join(unshown) or 'none'}.", "",
             "| config key | set by a study | named in the docs |", "|---|:-:|:-:|"]
    lines += [f"| `{k}` | {'yes' if s else '-'} | {'yes' if d else '-'} |" for k, s, d in keys]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    import argparse

    from suite.store import atomic_write_text

    parser = argparse.ArgumentParser(prog="feature_audit.py", description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=ROOT / "results" / "reference" / "feature_audit.md",
                        help="the Markdown file to write (default: %(default)s)")
    out = parser.parse_args(argv).out
    if not out.parent.is_dir():
        print(f"feature_audit: {out.parent}: no such folder; pass a file in an existing folder", file=sys.stderr)
        return 2

    keys, cli = audit()
    try:
        atomic_write_text(out, markdown(keys, cli))
    except OSError as err:
        print(f"feature_audit: {out}: cannot write it ({err.strerror}); pass another file")
        return 2
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
