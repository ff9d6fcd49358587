"""The chance that a confirmation design decides its questions, simulated from a tuning study's runs.

    python scripts/design_power.py results/tune > results/tune/power.md

For the main job (ablations/default.yaml): at each arm's tuned rate (the best on validation, as
`rates_from` takes it), each cell's test score is drawn as its tuning mean plus normal noise with the SD
pooled over the tuning runs at each cell's two best rates (independent across cells: pessimistic for paired
tests); (a) LS - Pre-LN at depth 48 and (b) (LS - Pre-LN at 48) - (LS - Pre-LN at 12) get a paired t, Holm.
Tuning gaps are optimistic (the best of several rates, on 2 seeds), so the table also shows them halved.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
from scipy import stats as sps

from suite.results import AnalysisWarning, load_runs, score

SCHEMES, DEPTHS, SIMULATIONS, ALPHA = ("preln", "layerscale-cait"), (12, 48), 4000, 0.05


def cells(root: Path) -> tuple[dict[tuple, float], float, dict[tuple, float]]:
    """Each (scheme, depth)'s mean test score at its best validation rate, the pooled SD, and the rates."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AnalysisWarning)
        runs = [r for r in load_runs(root, from_csv=True) if r["status"] != "error"]
    means, rates, resid = {}, {}, []
    for s in SCHEMES:
        for d in DEPTHS:
            by_lr: dict[float, list[dict]] = {}
            for r in runs:
                if r["variant"] == s and r["model.depth"] == d:
                    by_lr.setdefault(float(r["train.lr"]), []).append(r)
            val = {lr: np.mean([score(r, "val") for r in rs]) for lr, rs in by_lr.items()}
            order = sorted(val, key=lambda lr: (-val[lr], lr))
            best = order[0]
            means[s, d], rates[s, d] = float(np.mean([score(r) for r in by_lr[best]])), best
            for lr in order[:2]:
                xs = [score(r) for r in by_lr[lr]]
                resid += list(np.asarray(xs) - np.mean(xs))
    dof = len(resid) - 2 * len(means)
    return means, float(np.sqrt(np.sum(np.square(resid)) / max(dof, 1))), rates


def decided(n: int, gap48: float, inter: float, sd: float, rng: np.random.Generator) -> tuple[float, float, float]:
    """Share of simulated designs of ``n`` seeds that decide (a), (b) and both (Holm over the two)."""
    base = rng.normal(0.0, sd, size=(SIMULATIONS, 4, n))  # preln12, ls12, preln48, ls48
    a = gap48 + base[:, 3] - base[:, 2]
    b = a - (gap48 - inter + base[:, 1] - base[:, 0])
    p = np.stack([2 * sps.t.sf(np.abs(x.mean(1) / (x.std(1, ddof=1) / np.sqrt(n))), n - 1) for x in (a, b)], 1)
    lo, hi = p.min(1), p.max(1)
    both = (lo < ALPHA / 2) & (hi < ALPHA)
    first = lo < ALPHA / 2
    da = np.where(p[:, 0] <= p[:, 1], first, both)
    db = np.where(p[:, 1] < p[:, 0], first, both)
    return float(da.mean()), float(db.mean()), float(both.mean())


def main(root: Path) -> None:
    means, sd, rates = cells(root)
    gap48 = means["layerscale-cait", 48] - means["preln", 48]
    inter = gap48 - (means["layerscale-cait", 12] - means["preln", 12])
    rng = np.random.default_rng(0)
    print(f"# Chance that the main job decides its questions, simulated from {root}\n")
    print("Tuned rates and tuning test means: " + "; ".join(
        f"{s} depth {d}: lr {rates[s, d]:g}, {100 * means[s, d]:.1f}%" for s in SCHEMES for d in DEPTHS) + ".")
    print(f"Pooled per-run SD {100 * sd:.1f} points; (a) LS - Pre-LN at 48: {100 * gap48:+.1f} points; "
          f"(b) interaction: {100 * inter:+.1f} points. {SIMULATIONS} simulated designs per row, Holm over (a), (b).\n")
    print("| seeds | effects | (a) decided | (b) decided | both |\n|--:|:--|--:|--:|--:|")
    for shrink, label in ((1.0, "as tuned"), (0.5, "halved")):
        for n in (6, 8, 10, 12):
            da, db, both = decided(n, shrink * gap48, shrink * inter, sd, rng)
            print(f"| {n} | {label} | {100 * da:.0f}% | {100 * db:.0f}% | {100 * both:.0f}% |")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "results/tune"))
