"""The chance that the stability study's declared question is decided, simulated from its own runs.

    python scripts/stability_power.py results/stability > results/stability/power.md

ablations/stability.yaml asks whether LayerScale's frontier falls with depth more slowly than Pre-LN's
(`endpoint: frontier_slope`, docs/statistics.md). Each simulated study has the committed study's grid (each
scheme's rates at every depth) and draws every run's not-ok outcome from the model fitted to the committed
runs (suite.analysis.depthslope), with the slope difference as fitted or set to +/-0.5; it is then tested as
the analysis tests it (profile penalised likelihood ratio, alpha 0.05). Prints Markdown.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
from scipy.special import expit

from suite.analysis import depthslope
from suite.results import AnalysisWarning, load_runs

SCHEME, BASELINE, SIMULATIONS, ALPHA = "layerscale-cait", "preln", 100, 0.05


def main(root: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AnalysisWarning)
        runs = [r for r in load_runs(root, from_csv=True) if r["status"] != "error"
                and r["variant"] in (SCHEME, BASELINE)]
    args = ([float(r["train.lr"]) for r in runs], [float(r["model.depth"]) for r in runs],
            [r["variant"] for r in runs], [int(r["status"] != "ok") for r in runs])
    model = depthslope.fit(*args)
    seeds_now = len({r["seed"] for r in runs})
    cells = sorted({(r["variant"], float(r["train.lr"]), float(r["model.depth"])) for r in runs})
    b, (x0, z0), k = model.beta[0], model.centre, model.schemes
    c = dict(zip(k, model.beta[1:1 + len(k)]))
    d = dict(zip(k, model.beta[1 + len(k):]))
    fitted = model.slopes[SCHEME].slope - model.slopes[BASELINE].slope
    rng = np.random.default_rng(0)
    print(f"# Chance that the stability study decides its declared question, simulated from {root}\n")
    print(f"Fitted frontier slopes on log depth: {SCHEME} {model.slopes[SCHEME].slope:+.2f}, {BASELINE} "
          f"{model.slopes[BASELINE].slope:+.2f} (difference {fitted:+.2f}); rate steepness {b:.2f} per decade; "
          f"{len(cells)} cells (scheme x rate x depth) as run, {seeds_now} seeds now. {SIMULATIONS} simulated "
          f"studies per row, each tested at alpha {ALPHA} as `suite analyze` tests it.\n")
    print("| true difference of slopes | seeds per cell | decided (p < 0.05) |\n|--:|--:|--:|")
    for delta in (fitted, 0.5, -0.5):
        slope = {**d, SCHEME: d[BASELINE] - delta * b}  # d_scheme = d_baseline - delta b
        for n in (2, 4, 8):
            hits = 0
            for _ in range(SIMULATIONS):
                lrs, depths, names, bad = [], [], [], []
                for s, lr, depth in cells:
                    p = expit(b * (np.log10(lr) - x0) + c[s] + slope[s] * (np.log10(depth) - z0))
                    for y in rng.random(n) < p:
                        lrs.append(lr), depths.append(depth), names.append(s), bad.append(int(y))
                hits += depthslope.difference(lrs, depths, names, bad, SCHEME, BASELINE).p < ALPHA
            print(f"| {delta:+.2f}{' (as fitted)' if delta == fitted else ''} | {n} | {100 * hits / SIMULATIONS:.0f}% |")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "results/stability"))
