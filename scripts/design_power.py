"""The honest chance that a rerun of the main job on fresh seeds decides its questions, from its confirmed runs.

    python scripts/design_power.py results/default > results/default/power.md

From the confirmation's per-seed differences (LayerScale - Pre-LN at depth 48, and that gain minus the same
at depth 12): the share of simulated reruns on n fresh seeds that decide (a) the gain at 48 and (b) the
interaction, each with the effect and SD fixed at the estimates (power) and drawn from their uncertainty
(assurance: suite.analysis.assurance, docs/statistics.md#the-honest-chance-of-a-rerun); (a) alone, and
(a), (b) as one Holm family. It replaces results/tune/power.md, which planned from the 2-seed tuning gaps
(+9.9 points for (b)) and promised (b) 89% at 10 seeds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from deep_power import folder, paired, read  # scripts/ is on the path: the same one-line refusal of a bad folder
from suite.analysis.assurance import Evidence, assurance, seed_gains

SCHEME, BASELINE, DEEP, SHALLOW = "layerscale-cait", "preln", 48, 12
SEEDS = (6, 8, 10, 12, 17, 20, 26)


def differences(root: Path) -> tuple[np.ndarray, np.ndarray]:
    """Per seed with all four runs, in points: (a) the gain at DEEP, (b) that gain minus the gain at SHALLOW."""
    gain = seed_gains(read(root), SCHEME, BASELINE, [DEEP, SHALLOW])
    return gain[DEEP], gain[DEEP] - gain[SHALLOW]


def main(root: Path) -> None:
    a, b = paired(root, lambda: [Evidence.of(x) for x in differences(root)])
    print(f"# Chance that a rerun of the main job decides its questions, from the confirmed runs in {root}\n")
    print(f"(a) {SCHEME} - {BASELINE} at depth {DEEP}: {a.mean:+.1f} points, per-seed SD {a.sd:.1f}; (b) that gain "
          f"minus the same at depth {SHALLOW}: {b.mean:+.1f} points, SD {b.sd:.1f}; {a.n} seeds. Power fixes each "
          f"effect and SD at its estimate; assurance draws them from their uncertainty (20,000 simulated reruns "
          f"per cell; docs/statistics.md#the-honest-chance-of-a-rerun). A question is kept as declared only at an "
          f"assurance of 80% or more at the seeds the main job runs.\n")
    print("| seeds | (a) alone: power, assurance | Holm family power: (a), (b) | Holm family assurance: (a), (b) |")
    print("|--:|--:|--:|--:|")
    for n in SEEDS:
        alone = [assurance([a], n, uncertain=u)[0] for u in (False, True)]
        family = [assurance([a, b], n, uncertain=u) for u in (False, True)]
        print(f"| {n} | {100 * alone[0]:.0f}%, {100 * alone[1]:.0f}% | {100 * family[0][0]:.0f}%, "
              f"{100 * family[0][1]:.0f}% | {100 * family[1][0]:.0f}%, {100 * family[1][1]:.0f}% |")


if __name__ == "__main__":
    main(folder(__doc__, "results/default"))
