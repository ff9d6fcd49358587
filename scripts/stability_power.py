"""The chance that a stability study's declared frontier-slope question is decided, by simulation.

    python scripts/stability_power.py results/stability > results/stability/power.md
    python scripts/stability_power.py results/stability --plan ablations/frontier.yaml > results/frontier/plan_power.md

The model is suite.analysis.depthslope's: a run is not ok with probability expit(b (log10 lr - x0) + c_s + d_s
(log10 depth - z0)), one rate steepness b, a frontier line per scheme, whose slope on log depth is -d_s / b.
Each simulated study draws every run's outcome from such a model and is tested as `suite analyze` tests it
(profile penalised likelihood ratio on the slope difference, in one model of every scheme's runs).

Without --plan: the committed study's own grid and fit, its question (LayerScale against Pre-LN) with the slope
difference as fitted or set to +/-0.5.

With --plan FILE: a study not yet run, on FILE's grid and seeds (every run it would make), its co-primary
questions tested together under Holm as `suite analyze` tests them. Pre-LN and LayerScale (CaiT) keep the rate
steepness and the frontiers at the centre depth fitted to the folder's runs; the slope differences are set, not
fitted: 0 (the chance of a false decision), and conservative effects of 0.25 and 0.5 (the earlier study's
2-seed estimate is not used). The depth-aware LayerScale starts from CaiT's frontier at depth 12 (the two are
one scheme there). Prints Markdown.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np
from scipy.special import expit

from suite.analysis import depthslope
from suite.results import AnalysisWarning, load_runs

SCHEME, BASELINE, SIMULATIONS, ALPHA = "layerscale-cait", "preln", 100, 0.05
DEPTH_AWARE = "layerscale-depth"


def fitted(root: Path) -> tuple[depthslope.DepthFrontier, list[dict]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AnalysisWarning)
        runs = [r for r in load_runs(root, from_csv=True) if r["status"] != "error"
                and r["variant"] in (SCHEME, BASELINE)]
    model = depthslope.fit([float(r["train.lr"]) for r in runs], [float(r["model.depth"]) for r in runs],
                           [r["variant"] for r in runs], [int(r["status"] != "ok") for r in runs])
    return model, runs


def draw(rng: np.random.Generator, cells: list[tuple[str, float, float, int]], lines: dict[str, tuple[float, float]],
         b: float, centre: tuple[float, float]) -> tuple[list, list, list, list]:
    """One simulated study: each cell (scheme, rate, depth, runs) drawn from the model with each scheme's
    (c, d) in ``lines``."""
    x0, z0 = centre
    lrs, depths, names, bad = [], [], [], []
    for s, lr, depth, n in cells:
        c, d = lines[s]
        p = expit(b * (np.log10(lr) - x0) + c + d * (np.log10(depth) - z0))
        for y in rng.random(n) < p:
            lrs.append(lr), depths.append(depth), names.append(s), bad.append(int(y))
    return lrs, depths, names, bad


def committed(root: Path) -> None:
    model, runs = fitted(root)
    seeds_now = len({r["seed"] for r in runs})
    cells = sorted({(r["variant"], float(r["train.lr"]), float(r["model.depth"])) for r in runs})
    b, k = model.beta[0], model.schemes
    c = dict(zip(k, model.beta[1:1 + len(k)]))
    d = dict(zip(k, model.beta[1 + len(k):]))
    difference = model.slopes[SCHEME].slope - model.slopes[BASELINE].slope
    rng = np.random.default_rng(0)
    print(f"# Chance that the stability study decides its declared question, simulated from {root}\n")
    print(f"Fitted frontier slopes on log depth: {SCHEME} {model.slopes[SCHEME].slope:+.2f}, {BASELINE} "
          f"{model.slopes[BASELINE].slope:+.2f} (difference {difference:+.2f}); rate steepness {b:.2f} per decade; "
          f"{len(cells)} cells (scheme x rate x depth) as run, {seeds_now} seeds now. {SIMULATIONS} simulated "
          f"studies per row, each tested at alpha {ALPHA} as `suite analyze` tests it.\n")
    print("| true difference of slopes | seeds per cell | decided (p < 0.05) |\n|--:|--:|--:|")
    for delta in (difference, 0.5, -0.5):
        lines = {s: (c[s], d[s]) for s in k}
        lines[SCHEME] = (c[SCHEME], d[BASELINE] - delta * b)  # slope = -d / b
        for n in (2, 4, 8):
            hits = sum(depthslope.difference(*draw(rng, [(*cell, n) for cell in cells], lines, b, model.centre),
                                             SCHEME, BASELINE).p < ALPHA for _ in range(SIMULATIONS))
            print(f"| {delta:+.2f}{' (as fitted)' if delta == difference else ''} | {n} | {100 * hits / SIMULATIONS:.0f}% |")


def holm(ps: list[float], alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down decisions for the family ``ps``."""
    order = sorted(range(len(ps)), key=ps.__getitem__)
    decided = [False] * len(ps)
    for step, i in enumerate(order):
        if ps[i] >= alpha / (len(ps) - step):
            break
        decided[i] = True
    return decided


def planned(root: Path, plan: Path) -> None:
    from suite.sweep.spec import load_ablation

    model, _ = fitted(root)
    ablation = load_ablation(plan)
    questions = [(p.scheme, p.baseline) for p in ablation.primary]
    counts: dict[tuple[str, float, float], int] = {}
    for run in ablation.runs:
        cell = (run.variant, float(run.cfg.train.lr), float(run.cfg.model.depth))
        counts[cell] = counts.get(cell, 0) + 1
    seeds = len(ablation.seeds)
    b, k, (x0, z0) = model.beta[0], model.schemes, model.centre
    c = dict(zip(k, model.beta[1:1 + len(k)]))
    base_slope = model.slopes[BASELINE].slope
    z12 = np.log10(12) - z0
    print(f"# Chance that {plan} decides its declared questions, simulated before its runs\n")
    print(f"The model fitted to {root}'s runs: rate steepness {b:.2f} per decade; {BASELINE}'s frontier slope "
          f"{base_slope:+.2f} on log depth, kept; {SCHEME}'s frontier kept at the centre depth "
          f"{10 ** z0:.3g}, its slope set to {BASELINE}'s plus the effect of (a); {DEPTH_AWARE} from {SCHEME}'s "
          f"frontier at depth 12, its slope {SCHEME}'s plus the effect of (b). The grid is {plan}'s: "
          f"{len(counts)} cells (scheme x rate x depth), {len(ablation.runs)} runs. {SIMULATIONS} simulated "
          f"studies per row, each with its questions tested as one family under Holm at alpha {ALPHA}, as "
          f"`suite analyze` tests them.\n")
    names = " | ".join(f"({'ab'[i]}) {s} vs {t}: decided" for i, (s, t) in enumerate(questions))
    print(f"| effect of (a) | effect of (b) | seeds per cell | {names} |\n|--:|--:|--:|" + "--:|" * len(questions))
    rng = np.random.default_rng(0)
    for delta_a, delta_b in ((0.0, 0.0), (-0.25, 0.25), (-0.5, 0.5), (0.25, 0.25)):
        d_base = -base_slope * b
        d_cait = -(base_slope + delta_a) * b
        d_deep = -(base_slope + delta_a + delta_b) * b
        lines = {BASELINE: (c[BASELINE], d_base), SCHEME: (c[SCHEME], d_cait),
                 DEPTH_AWARE: (c[SCHEME] + (d_cait - d_deep) * z12, d_deep)}  # one line at depth 12
        for n in sorted({max(2, seeds - 2), seeds, seeds + 2}):
            hits = [0] * len(questions)
            for _ in range(SIMULATIONS):
                runs = draw(rng, [(s, lr, depth, n) for (s, lr, depth) in counts], lines, b, (x0, z0))
                ps = [depthslope.difference(*runs, s, t).p for s, t in questions]
                for i, yes in enumerate(holm(ps)):
                    hits[i] += yes
            said = " | ".join(f"{100 * h / SIMULATIONS:.0f}%" for h in hits)
            print(f"| {delta_a:+.2f} | {delta_b:+.2f} | {n}{' (the plan)' if n == seeds else ''} | {said} |")
    print("\nAn effect is a difference of frontier slopes on log depth (LR50 grows as depth^slope): 0.5 is a "
          "stable range that falls 2x more (or less) over each 4x of depth than the other scheme's. The rows at 0 "
          "are each question's chance of a false decision.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default="results/stability", type=Path)
    parser.add_argument("--plan", type=Path, help="an ablation not yet run: simulate its questions on its grid")
    args = parser.parse_args()
    if args.plan:
        planned(args.folder, args.plan)
    else:
        committed(args.folder)


if __name__ == "__main__":
    main()
