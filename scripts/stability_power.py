"""The chance that a stability study's declared frontier-slope question is decided, by simulation.

    python scripts/stability_power.py results/frontier > results/frontier/power.md
    python scripts/stability_power.py results/stability --plan ablations/frontier.yaml > results/frontier/plan_power.md

The model is suite.analysis.depthslope's: a run is not ok with probability expit(b (log10 lr - x0) + c_s + d_s
(log10 depth - z0)), one rate steepness b, a frontier line per scheme, whose slope on log depth is -d_s / b.
Each simulated study draws every run's outcome from such a model and is tested as `suite analyze` tests it
(profile penalised likelihood ratio on the slope difference, in one model of every scheme's runs).

Without --plan: a study that has run, on its own grid and seeds (and 2x and 3x as many), its declared frontier-slope
questions tested together under Holm, with the differences as fitted and halved: the seeds a rerun would need.

With --plan FILE: a study not yet run, on FILE's grid and seeds (every run it would make), its co-primary
questions tested together under Holm as `suite analyze` tests them. Pre-LN and LayerScale (CaiT) keep the rate
steepness and the frontiers at the centre depth fitted to the folder's runs; the slope differences are set, not
fitted: 0 (the chance of a false decision), and conservative effects of 0.25 and 0.5 (the earlier study's
2-seed estimate is not used). The depth-aware LayerScale starts from CaiT's frontier at depth 12 (the two are
one scheme there). Prints Markdown.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
from scipy.special import expit

from suite.analysis import depthslope
from suite.analysis.assurance import holm_decided
from suite.analysis.markup import md
from suite.results import AnalysisError, AnalysisWarning, run_records

SCHEME, BASELINE, SIMULATIONS, ALPHA = "layerscale-cait", "preln", 100, 0.05
DEPTH_AWARE = "layerscale-depth"


def fitted(root: Path, variants: tuple[str, ...] | None = (SCHEME, BASELINE)) -> tuple[depthslope.DepthFrontier, list[dict]]:
    """The model of ``root``'s runs (of ``variants`` only, or every variant's as `suite analyze` fits it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AnalysisWarning)
        runs = [r for r in run_records(root, from_csv=True) if r["status"] != "error"
                and (variants is None or r["variant"] in variants)]
    model = depthslope.fit([float(r["train.lr"]) for r in runs], [float(r["model.depth"]) for r in runs],
                           [r["variant"] for r in runs], [int(r["status"] != "ok") for r in runs])
    return model, runs


def lines_for(model: depthslope.DepthFrontier, root: Path, schemes: set[str]) -> None:
    """AnalysisError unless ``model`` was fitted and each of ``schemes`` has a frontier line in it to simulate from."""
    if model.note:
        raise AnalysisError(f"{root}: its runs fit no frontier model ({model.note}); nothing to simulate from")
    missing = sorted(v for v in schemes if v not in model.schemes or not np.isfinite(model.slopes[v].slope))
    if missing:
        raise AnalysisError(f"{root}: no frontier line for {', '.join(missing)} in its runs (every run ok, one depth "
                            f"or one rate, or no run of it); pass a study that ran them over rates and depths")


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
    from suite.analysis.primary import read

    declared = read(root)
    questions = [(p.scheme, p.baseline) for p in (declared if isinstance(declared, list) else [declared])
                 if p is not None and p.endpoint == "frontier_slope"]
    model, runs = fitted(root, None)  # first: a folder that is not a results folder is said as such
    if not questions:
        raise AnalysisError(f"{root}/ablation.yaml: declares no frontier_slope comparison; nothing to simulate "
                            f"(a study with `endpoint: frontier_slope`, e.g. results/frontier)")
    lines_for(model, root, {v for q in questions for v in q})
    cells: dict[tuple[str, float, float], int] = {}
    for r in runs:
        cell = (r["variant"], float(r["train.lr"]), float(r["model.depth"]))
        cells[cell] = cells.get(cell, 0) + 1
    seeds_now = len({r["seed"] for r in runs})
    b, k = model.beta[0], model.schemes
    c = dict(zip(k, model.beta[1:1 + len(k)]))
    slope = {v: model.slopes[v].slope for v in k}
    print(f"# Chance that a rerun of {md(root)} decides its declared questions, simulated on its own grid\n")
    print(f"The model fitted to its runs (as `suite analyze` fits it, every scheme in one model): rate steepness "
          f"{b:.2f} per decade; frontier slopes on log depth " + ", ".join(f"{md(v)} {slope[v]:+.2f}" for v in k)
          + f". The grid is the study's: {len(cells)} cells (scheme x rate x depth), {len(runs)} runs, {seeds_now} "
          f"seeds. Each simulated rerun draws every run from the model (its cells, each with the seeds of the row) "
          f"and tests the questions as one family under Holm at alpha {ALPHA}; {SIMULATIONS} per row. 'As "
          f"fitted' takes the fitted differences as the truth; 'halved' each at half its size (a fitted "
          f"difference that decided a study tends to overstate the truth).\n")
    names = " | ".join(f"{md(s)} vs {md(t)} ({slope[s] - slope[t]:+.2f} as fitted): decided" for s, t in questions)
    print(f"| truth | seeds per cell | {names} |\n|:--|--:|" + "--:|" * len(questions))
    rng = np.random.default_rng(0)
    # every slope scaled around one reference (a baseline no question compares): each question's difference x factor,
    # whatever order the questions are declared in
    ref = next((t for _, t in questions if t not in {s for s, _ in questions}), questions[0][1])
    for label, factor in (("as fitted", 1.0), ("halved", 0.5)):
        truth = {v: slope[ref] + factor * (slope[v] - slope[ref]) for v in k}
        lines = {v: (c[v], -truth[v] * b) for v in k}
        for n in (seeds_now, 2 * seeds_now, 3 * seeds_now):
            ps = np.ones((SIMULATIONS, len(questions)))
            for i in range(SIMULATIONS):
                study = draw(rng, [(*cell, round(m * n / seeds_now)) for cell, m in cells.items()], lines, b,
                             model.centre)
                ps[i] = [depthslope.difference(*study, s, t).p for s, t in questions]
            said = " | ".join(f"{100 * h:.0f}%" for h in holm_decided(ps, ALPHA).mean(axis=0))
            print(f"| {label} | {n}{' (as run)' if n == seeds_now else ''} | {said} |")


def planned(root: Path, plan: Path) -> None:
    from suite.sweep.spec import load_ablation

    model, _ = fitted(root)
    lines_for(model, root, {SCHEME, BASELINE})
    ablation = load_ablation(plan)
    declared = ablation.primary if isinstance(ablation.primary, list) else [ablation.primary] if ablation.primary else []
    questions = [(p.scheme, p.baseline) for p in declared if p.endpoint == "frontier_slope"]
    unknown = sorted({v for q in questions for v in q} - {SCHEME, BASELINE, DEPTH_AWARE})
    if not questions or unknown or len({r.variant for r in ablation.runs} - {SCHEME, BASELINE, DEPTH_AWARE}):
        raise AnalysisError(f"{plan}: simulates only frontier_slope questions among {BASELINE}, {SCHEME} and "
                            f"{DEPTH_AWARE} (the model it starts from knows no other scheme); this file has "
                            + (f"{', '.join(unknown)}" if unknown else "none" if not questions else "other variants"))
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
    names = " | ".join(f"({'ab'[i]}) {md(s)} vs {md(t)}: decided" for i, (s, t) in enumerate(questions))
    print(f"| effect of (a) | effect of (b) | seeds per cell | {names} |\n|--:|--:|--:|" + "--:|" * len(questions))
    rng = np.random.default_rng(0)
    for delta_a, delta_b in ((0.0, 0.0), (-0.25, 0.25), (-0.5, 0.5), (0.25, 0.25)):
        d_base = -base_slope * b
        d_cait = -(base_slope + delta_a) * b
        d_deep = -(base_slope + delta_a + delta_b) * b
        lines = {BASELINE: (c[BASELINE], d_base), SCHEME: (c[SCHEME], d_cait),
                 DEPTH_AWARE: (c[SCHEME] + (d_cait - d_deep) * z12, d_deep)}  # one line at depth 12
        for n in sorted({max(2, seeds - 2), seeds, seeds + 2}):
            ps = np.ones((SIMULATIONS, len(questions)))
            for i in range(SIMULATIONS):
                runs = draw(rng, [(s, lr, depth, n) for (s, lr, depth) in counts], lines, b, (x0, z0))
                ps[i] = [depthslope.difference(*runs, s, t).p for s, t in questions]
            said = " | ".join(f"{100 * h:.0f}%" for h in holm_decided(ps, ALPHA).mean(axis=0))
            print(f"| {delta_a:+.2f} | {delta_b:+.2f} | {n}{' (the plan)' if n == seeds else ''} | {said} |")
    print("\nAn effect is a difference of frontier slopes on log depth (LR50 grows as depth^slope): 0.5 is a "
          "stable range that falls 2x more (or less) over each 4x of depth than the other scheme's. The rows at 0 "
          "are each question's chance of a false decision.")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default="results/frontier", type=Path)
    parser.add_argument("--plan", type=Path, help="an ablation not yet run: simulate its questions on its grid")
    args = parser.parse_args(argv)
    from suite.sweep.spec import SpecError

    try:
        if args.plan:
            planned(args.folder, args.plan)
        else:
            committed(args.folder)
    except (AnalysisError, SpecError) as err:  # a bad folder or ablation file: one line, exit 2
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
