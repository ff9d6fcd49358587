"""The chance that the deep study (ablations/deep.yaml) decides its two questions, before its runs.

    python scripts/deep_power.py [results/default] > results/deep/power.md

From the gain the main job confirmed at depth 48 (its per-seed LayerScale - Pre-LN differences, with their
uncertainty: suite.analysis.assurance), for a range of gains at depth 192 (a share of the confirmed one)
and per-seed SDs there (a multiple of the confirmed one): the share of simulated studies on n seeds that
Holm decides (a) the gain at 192 and (b) its change from depth 48.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import NoReturn

import numpy as np

from suite.analysis.assurance import Evidence, change_assurance, seed_gains
from suite.results import AnalysisError, AnalysisWarning, run_records

SCHEME, BASELINE, DEPTH, SEEDS = "layerscale-cait", "preln", 48, (6, 8, 10)
GAINS, SDS = (1.0, 0.72, 0.5), (1.0, 1.5, 2.0)
PLANNED = (0.5, 1.5, 8)  # the gain's share, the SD's multiple and the seeds ablations/deep.yaml plans for


def gains(root: Path) -> np.ndarray:
    """Per seed, LayerScale's test score minus Pre-LN's at depth 48, in points; a bad folder ends in one line."""
    return seed_gains(read(root), SCHEME, BASELINE, [DEPTH])[DEPTH]


def read(root: Path) -> list[dict]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AnalysisWarning)
            return run_records(root, from_csv=True)
    except AnalysisError as err:
        refuse(str(err))


def refuse(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def folder(doc: str, default: str | None = None) -> Path:
    """The one argument of a power script: a results folder (``--help`` prints ``doc``)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", type=Path, **({"nargs": "?", "default": default} if default else {}))
    return p.parse_args().folder


def paired(root: Path, compute):
    """``compute()``, or one line saying which runs ``root`` lacks (fewer than 2 seeds with both arms)."""
    try:
        return compute()
    except AnalysisError as err:  # it names its own fix
        refuse(f"{root}: {err}")
    except ValueError as err:
        refuse(f"{root}: {err}: it needs {SCHEME} and {BASELINE} runs on the same seeds at the depths compared")


def main(root: Path) -> None:
    base = paired(root, lambda: Evidence.of(gains(root)))
    print(f"# Chance that the deep study decides its questions, simulated before its runs from {root}\n")
    print(f"The gain confirmed at depth {DEPTH}: {base.mean:+.1f} points, per-seed SD {base.sd:.1f}, {base.n} seeds. "
          f"Each row draws the true gain at depth {DEPTH} and its SD from that evidence (assurance, 20,000 studies), "
          f"the gain at 192 as a share of it and the SD there as a multiple; Holm over (a) the gain at 192 and "
          f"(b) its change from {DEPTH} (a true null when the share is 100%). Planned for: share "
          f"{PLANNED[0]:.0%}, SD x{PLANNED[1]:g}, {PLANNED[2]} seeds.\n")
    print("| gain at 192 | SD at 192 | " + " | ".join(f"(a), (b) at {n} seeds" for n in SEEDS) + " |")
    print("|--:|--:|" + "--:|" * len(SEEDS))
    for share in GAINS:
        for sd in SDS:
            cells = []
            for n in SEEDS:
                a, b = change_assurance(base, share, sd, n)
                cells.append(f"{100 * a:.0f}%, {100 * b:.0f}%")
            print(f"| {share:.0%} ({share * base.mean:+.1f}) | x{sd:g} ({sd * base.sd:.1f}) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(folder(__doc__, "results/default"))
