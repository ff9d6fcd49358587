"""The scale a learned LayerScale γ settles at, per depth: what a "frozen at the matched scale" arm is
frozen at (ablations/mechanisms.yaml, issue 41).

    python scripts/settled_gamma.py results/mechanisms layerscale-1e-6

For each depth of VARIANT's runs: its best learning rate (:func:`suite.analysis.lr.lr_table`'s rule) and,
over its ok runs at that rate, the mean |γ| at the last logged step (the probes' ``scale_mean`` over
blocks), its mean over seeds and the range over seeds and blocks. Writes ``settled_gamma.md`` into the
folder and prints it; a bad folder or a variant with no γ ends with one line and exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from suite import store
from suite.results import AnalysisError, run_records, read_curves
from suite.grouping import DEPTH, LR
from suite.analysis.lr import lr_table
from suite.analysis.markup import MD


def settled(root: Path, variant: str) -> list[dict]:
    """One dict per depth: depth, best_lr, n (runs), gamma (mean over seeds), seed_min, seed_max,
    block_min, block_max (over the seeds' per-block means), step (the last logged step)."""
    if not (root / "runs").is_dir():  # a committed folder has runs.csv but not the metrics.jsonl this reads
        raise AnalysisError(f"{root}: no runs/ folder; the settled γ is read from each run's runs/<id>/metrics.jsonl, "
                            f"which a committed folder leaves out: run the study's first phase into it")
    runs = [r for r in run_records(root) if r.get("variant") == variant and r.get(LR) is not None]
    if not runs:
        raise AnalysisError(f"{root}: no runs of variant '{variant}' with a learning rate; pass a variant of its "
                            f"ablation.yaml")
    table = lr_table(runs, ["variant", DEPTH, LR], variant)
    out = []
    for _, row in table.iterrows():
        depth, best = int(row[DEPTH]), float(row["best_lr"])
        per_seed, blocks, steps = [], [], []
        for r in runs:
            if int(r[DEPTH]) != depth or float(r[LR]) != best or r["status"] != "ok" or not r.get("run_dir"):
                continue
            curve = read_curves(root / str(r["run_dir"]))[1]
            if curve.empty:
                continue
            last = curve[curve["step"] == curve["step"].max()]
            per_seed.append(float(last["scale_mean"].mean()))
            blocks.append(last["scale_mean"].to_numpy(float))
            steps.append(int(last["step"].iloc[0]))
        if not per_seed:
            raise AnalysisError(f"{root}: variant '{variant}' at depth {depth} logged no γ at its best rate "
                                f"{best:g} (no ok LayerScale run with its run folder); run it first")
        every = np.concatenate(blocks)
        out.append({"depth": depth, "best_lr": best, "n": len(per_seed), "gamma": float(np.mean(per_seed)),
                    "seed_min": min(per_seed), "seed_max": max(per_seed), "block_min": float(every.min()),
                    "block_max": float(every.max()), "step": max(steps)})
    return out


def markdown(variant: str, rows: list[dict]) -> str:
    lines = [f"# Where {MD.code(variant)}'s γ settles", "",
             "Written by " + MD.code(f"python scripts/settled_gamma.py <folder> {variant}") + " from this folder's runs: "
             "at each depth, the variant's best rate (highest mean validation score), and over its ok runs "
             "there the mean |γ| over channels and blocks at the last logged step. The frozen-matched arms "
             "of ablations/mechanisms.yaml are frozen at `gamma` (3 significant digits).", "",
             "| depth | best rate | runs | last step | gamma (mean over seeds) | range over seeds | "
             "range over blocks |", "|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        lines.append(f"| {r['depth']} | {r['best_lr']:g} | {r['n']} | {r['step']} | {r['gamma']:.3g} | "
                     f"{r['seed_min']:.3g} to {r['seed_max']:.3g} | {r['block_min']:.3g} to {r['block_max']:.3g} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path, help="a results folder, e.g. results/mechanisms")
    p.add_argument("variant", help="the learned LayerScale variant, e.g. layerscale-1e-6")
    a = p.parse_args(argv)
    try:
        text = markdown(a.variant, settled(a.folder, a.variant))
        store.atomic_write_text(a.folder / "settled_gamma.md", text)
    except (AnalysisError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
