"""``suite run FILE --refine``: extend the learning-rate grid past any best rate that sits at its edge.

A best learning rate at the smallest or largest rate tested says only that the optimum may lie
outside the grid. After the ablation's runs are done, each cell (scheme x the other keys) whose best
rate (chosen on validation, :mod:`suite.analysis.lr`) is at an edge gets one more rate past that
edge, at the cell's own spacing there (rates 2x apart get the next 2x), for every seed of the cell;
the runs train, the cells are judged again, and so on until every best rate is interior or
:data:`MAX_ROUNDS` rounds have run. A cell that never beats chance is left alone (its "best" rate is
a tie broken towards the smaller one, not an optimum). The tables mark any best rate still at an edge.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Callable

from suite import store
from suite.sweep.folder import RunnerError
from suite.sweep.spec import Run, SpecError, load_ablation
from suite.sweep.sweep import Report, SweepOptions, run_sweep

MAX_ROUNDS = 3
LR = "train.lr"


def past_edge(rates: list[float], side: str) -> float:
    """The next rate past the ``lowest`` / ``highest`` tested one, at the grid's spacing there (3
    significant digits). E.g. ([1e-3, 2e-3, 4e-3], "highest") -> 8e-3."""
    rates = sorted(rates)
    if len(rates) < 2:
        raise ValueError("an edge needs at least 2 rates")
    if side == "lowest":
        value = rates[0] * rates[0] / rates[1]
    else:
        value = rates[-1] * rates[-1] / rates[-2]
    return float(f"{value:.3g}")


def edge_cells(out: Path) -> list[dict[str, Any]]:
    """The cells of the results in ``out`` whose best learning rate is at an edge (and above chance):
    ``{"variant", "keys": {key: value}, "lr": edge rate, "new": rate to add}``."""
    from suite.analysis.grouping import group_keys
    from suite.analysis.load import load_runs
    from suite.analysis.lr import lr_table

    runs = load_runs(out)
    keys = group_keys(runs)
    variants = sorted({r["variant"] for r in runs})
    table = lr_table(runs, keys, "preln" if "preln" in variants else variants[0])
    if table is None:
        return []
    rest = [k for k in keys if k not in ("variant", LR)]
    cells = []
    for _, row in table.iterrows():
        if not row["best_lr_at_edge"] or not row["above_chance"]:
            continue
        where = {k: row[k] for k in rest}
        rates = sorted({float(r[LR]) for r in runs if r["variant"] == row["variant"] and r["status"] != "error"
                        and all(r.get(k) == v for k, v in where.items())})
        cells.append({"variant": row["variant"], "keys": where, "lr": float(row["best_lr"]),
                      "new": past_edge(rates, row["best_lr_at_edge"])})
    return cells


def _extra_runs(ablation, cell: dict[str, Any]) -> list[Run]:
    """The cell's runs at the edge rate, copied to the new rate (one per seed)."""
    out = []
    for run in ablation.runs:
        summary = {"variant": run.variant, LR: run.cfg.train.lr, **dict(run.point)}
        if run.variant != cell["variant"] or not math.isclose(run.cfg.train.lr, cell["lr"], rel_tol=1e-9):
            continue
        if any(k in summary and summary[k] != v for k, v in cell["keys"].items()):
            continue
        cfg = dataclasses.replace(run.cfg, train=dataclasses.replace(run.cfg.train, lr=cell["new"]))
        point = {**run.point, LR: cell["new"]}
        label = run.label.replace(f"lr={run.point.get(LR)}", f"lr={cell['new']}")
        out.append(dataclasses.replace(run, cfg=cfg, run_id=store.run_id(cfg), point=point, label=label))
    return out


def run_refine(path: str | Path, out: str | Path | None, options: SweepOptions, report: Report | None = None,
               notify: Callable[[str], None] = lambda line: None):
    """Run the ablation, then refine its learning-rate grid (module docstring) for up to
    :data:`MAX_ROUNDS` rounds. Returns the last sweep and the cells still at an edge."""
    ablation = load_ablation(path, max_runs=options.max_runs)
    if LR not in ablation.grid:
        raise SpecError([f"{path}: grid: --refine extends the {LR} axis, and this ablation has none; add "
                         f"`grid: {{{LR}: [...]}}`"])
    if options.dry_run or options.only:
        raise RunnerError("--refine with --dry-run or --only: which rates it adds depends on the results; drop them")
    sweep = run_sweep(ablation, out, options, report=report, notify=notify)
    out = sweep.out
    cells: list[dict[str, Any]] = []
    for round_ in range(MAX_ROUNDS):
        if sweep.stopped:
            return sweep, cells
        cells = edge_cells(out)
        if not cells:
            notify(f"refine: every best learning rate is interior (after {round_} round(s))")
            return sweep, cells
        extra = [run for cell in cells for run in _extra_runs(ablation, cell)]
        for cell in cells:
            keys = "".join(f" {k}={v}" for k, v in cell["keys"].items())
            notify(f"refine round {round_ + 1}: {cell['variant']}{keys}: best rate {cell['lr']:g} is at an edge; "
                   f"adding {cell['new']:g}")
        ablation = dataclasses.replace(ablation, runs=ablation.runs + extra)
        sweep = run_sweep(dataclasses.replace(ablation, runs=extra), out, options, report=report, notify=notify)
    cells = [] if sweep.stopped else edge_cells(out)
    if cells:
        notify(f"refine: {len(cells)} cell(s) still at an edge after {MAX_ROUNDS} rounds (the limit); the tables "
               f"mark them")
    return sweep, cells
