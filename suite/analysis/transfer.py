"""Learning-rate transfer across depth: per scheme and depth the best rate, the regret of the shallowest depth's rate,
and the jackknifed slope of the peak rate on depth (docs/statistics.md, "Learning-rate transfer across depth")."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from suite.analysis import lrpeak
from suite.grouping import DEPTH, LR, ordered_groups
from suite.analysis.lr import lr_cell, complete_seeds
from suite.analysis.pooled import MIN_SEEDS
from suite.results import selection_split

RESAMPLES = 2000  # bootstrap resamples (seeded: a rerun writes the same numbers)
# A slope whose whole interval lies strictly within +/- this reads "transfers". It must be wider than one grid step
# (0.5 on the 2x grid) and below 1, so a best rate halving per doubling cannot read "transfers" (docs/statistics.md).
TRANSFER_MARGIN = 0.75

COLUMNS = [
    "n_seeds", "n_lr", "best_lr", "best_lr_low", "best_lr_high", "best_lr_at_edge", "test_at_best",
    "shallow_depth", "shallow_lr", "test_at_shallow_lr", "regret", "regret_low", "regret_high",
    "slope", "slope_low", "slope_high", "slope_depths",
    "peak_lr", "n_seeds_min", "slope_step", "slope_vs_base", "slope_vs_base_low", "slope_vs_base_high", "drift_vs_base",
]


def _arrays(cell: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list] | None:
    """Rates, validation / test scores (rates x seeds) over the seeds scored at every rate, those seeds; or None."""
    if "_val" not in cell:
        return None
    val, seeds = complete_seeds(cell)
    if not seeds:
        return None
    rates = np.array(sorted(val))
    v = np.array([[val[lr][s] for s in seeds] for lr in rates], dtype=float)
    t = np.array([[cell["_test_by_lr"][lr][s] for s in seeds] for lr in rates], dtype=float)
    return rates, v, t, seeds


def _choose(v: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """Index of the best rate for each row of seed picks (resamples x n); the smallest rate on ties."""
    means = v[:, picks].mean(axis=-1)  # (rates, resamples)
    return np.argmax(means, axis=0)


def _edge(index: int, n: int) -> str:
    if n < 2:
        return ""
    return "lowest" if index == 0 else "highest" if index == n - 1 else ""


def _group(by_depth: dict[float, list[dict[str, Any]]], split: str, resamples: int,
           rng: np.random.Generator) -> tuple[list[dict[str, Any]], list[lrpeak.Curve]]:
    """The rows of one scheme (one value of the other keys), one per depth, and its validation curves."""
    depths = sorted(by_depth)
    data = {d: _arrays(lr_cell(by_depth[d], split)) for d in depths}
    rows: list[dict[str, Any]] = []
    boots: dict[float, np.ndarray] = {}  # depth -> best-rate index per resample
    tests: dict[float, np.ndarray] = {}  # depth -> mean test score per rate per resample
    curves: list[lrpeak.Curve] = []
    for d in depths:
        row: dict[str, Any] = {DEPTH: d, **{c: math.nan for c in COLUMNS}, "best_lr_at_edge": "", "slope_depths": 0,
                               "drift_vs_base": ""}
        if data[d] is None:
            rows.append(row)
            continue
        rates, v, t, seeds = data[d]
        n = v.shape[1]
        best = int(_choose(v, np.arange(n)[None, :])[0])
        picks = rng.integers(0, n, (resamples, n))
        boots[d] = _choose(v, picks)
        tests[d] = t[:, picks].mean(axis=-1)  # (rates, resamples)
        chosen = np.sort(boots[d])  # the interval's ends are rates that were tested (outward rounding)
        low, high = (rates[chosen[int(0.025 * resamples)]], rates[chosen[int(np.ceil(0.975 * resamples)) - 1]]) \
            if n > 1 else (math.nan, math.nan)
        curves.append(lrpeak.Curve(float(d), rates, v, tuple(seeds)))
        row.update(n_seeds=n, n_lr=len(rates), best_lr=float(rates[best]), best_lr_low=float(low),
                   best_lr_high=float(high), best_lr_at_edge=_edge(best, len(rates)),
                   test_at_best=float(t[best].mean()), peak_lr=math.exp(lrpeak.peak(rates, v.mean(axis=1))))
        rows.append(row)
    scored = [d for d in depths if data[d] is not None]
    if not scored:
        return rows, curves
    shallow = scored[0]
    s_rates = data[shallow][0]
    s_best = s_rates[int(_choose(data[shallow][1], np.arange(data[shallow][1].shape[1])[None, :])[0])]
    for row in rows:
        d = row[DEPTH]
        row.update(shallow_depth=shallow, shallow_lr=float(s_best))
        if data.get(d) is None:
            continue
        rates, v, t, _ = data[d]
        where = np.flatnonzero(np.isclose(rates, s_best, rtol=1e-9))
        if not where.size:
            continue
        at = int(where[0])
        row.update(test_at_shallow_lr=float(t[at].mean()), regret=row["test_at_best"] - float(t[at].mean()))
        # Bootstrap: the shallow depth's choice and this depth's choice, each on its own resample.
        s_pick = s_rates[boots[shallow]]
        idx = np.searchsorted(rates, s_pick)
        ok = (idx < len(rates)) & np.isclose(rates[np.minimum(idx, len(rates) - 1)], s_pick, rtol=1e-9)
        cols = np.arange(tests[d].shape[1])
        own = tests[d][boots[d], cols]
        other = np.where(ok, tests[d][np.minimum(idx, len(rates) - 1), cols], np.nan)
        diff = (own - other)[ok]
        if row["n_seeds"] > 1 and diff.size:
            row["regret_low"], row["regret_high"] = (float(q) for q in np.quantile(diff, [0.025, 0.975]))
    if len(curves) >= 2:
        point, low, high = lrpeak.jackknife(lambda s: lrpeak.slope(curves, s), _seeds(curves))
        fewest = min(0 if math.isnan(r["n_seeds"]) else r["n_seeds"] for r in rows)  # every depth, with a curve or not
        for row in rows:
            row.update(slope=point, slope_low=low, slope_high=high, slope_depths=len(curves), n_seeds_min=fewest,
                       slope_step=lrpeak.grid_step(curves))
    return rows, curves


def _seeds(curves: list[lrpeak.Curve]) -> list:
    """Every seed of any curve, once (the jackknife leaves each out of every curve it is in)."""
    return list(dict.fromkeys(s for c in curves for s in c.seeds))


READINGS = {
    "falls with depth": "the best rate falls with depth",
    "rises with depth": "the best rate rises with depth",
    "transfers": f"within +/-{TRANSFER_MARGIN}: the rate transfers (it moves by less than a factor "
                 f"{2 ** TRANSFER_MARGIN:.2f} per doubling of depth)",
    "undecided": "undecided: the interval contains 0 but allows a larger shift; more seeds or depths decide it",
    "grid too coarse": f"no transfer verdict: one grid step moves the slope by at least the +/-{TRANSFER_MARGIN} "
                       "margin (a finer grid of rates, or depths further apart)",
    "at the grid's edge": "no verdict: a best rate is at the edge of the grid, so the slope is bounded by it "
                          "(`suite run --refine` extends the grid)",
    "too few seeds": f"no verdict: fewer than {MIN_SEEDS} seeds scored at every rate at some depth",
    "no interval": "no interval: the seeds agree exactly, or a depth has one seed",
}  # what each reading says, for findings.md and the tables


def reading(rows: pd.DataFrame) -> str:
    """One scheme's transfer in a few words from its rows: a key of :data:`READINGS`, ``""`` below two depths."""
    r = rows.iloc[0]
    if math.isnan(r["slope"]):
        return ""
    if (rows["best_lr_at_edge"] != "").any():
        return "at the grid's edge"
    if r["n_seeds_min"] < MIN_SEEDS:
        return "too few seeds"
    low, high = r["slope_low"], r["slope_high"]
    if math.isnan(low):
        return "no interval"
    if high < 0:
        return "falls with depth"
    if low > 0:
        return "rises with depth"
    if r["slope_step"] >= TRANSFER_MARGIN:
        return "grid too coarse"
    return "transfers" if -TRANSFER_MARGIN < low and high < TRANSFER_MARGIN else "undecided"


DRIFT = {
    "less": "its best rate drifts less with depth than {base}'s",
    "more": "its best rate drifts more with depth than {base}'s",
    "undecided": "its drift with depth is not distinguishable from {base}'s",
    "at the grid's edge": "not compared with {base}'s: a best rate at the grid's edge",
    "too few seeds": f"not compared with {{base}}'s: fewer than {MIN_SEEDS} seeds at some depth",
    "no interval": "not compared with {base}'s: no interval",
}  # what each drift comparison says; format with base=the baseline


def drift(scheme: list[lrpeak.Curve], base: list[lrpeak.Curve], alpha: float = 0.05) -> tuple[float, float, float, str]:
    """(the scheme's slope minus the baseline's, low, high, a :data:`DRIFT` key); "less" needs the jackknife
    intervals of ``s - b`` and ``s + b`` to exclude 0 with opposite signs (intersection-union test)."""
    shared = sorted({c.depth for c in scheme} & {c.depth for c in base})
    if len(shared) < 2:
        return (math.nan, math.nan, math.nan, "")
    s = [c for c in scheme if c.depth in shared]
    b = [c for c in base if c.depth in shared]
    seeds = _seeds(s + b)
    diff = lrpeak.jackknife(lambda k: lrpeak.slope(s, k) - lrpeak.slope(b, k), seeds, alpha)
    if any(_edge(lrpeak.best_index(c.val.mean(axis=1)), len(c.rates)) for c in s + b):
        return (*diff, "at the grid's edge")
    if min(c.val.shape[1] for c in s + b) < MIN_SEEDS:
        return (*diff, "too few seeds")
    total = lrpeak.jackknife(lambda k: lrpeak.slope(s, k) + lrpeak.slope(b, k), seeds, alpha)
    if math.isnan(diff[1]) or math.isnan(total[1]):
        return (*diff, "no interval")
    d_sign = 1 if diff[1] > 0 else -1 if diff[2] < 0 else 0
    t_sign = 1 if total[1] > 0 else -1 if total[2] < 0 else 0
    word = "undecided" if not (d_sign and t_sign) else ("less" if d_sign != t_sign else "more")
    return (*diff, word)


def transfer_table(runs: list[dict[str, Any]], keys: list[str], baseline: str,
                   resamples: int = RESAMPLES, seed: int = 0) -> pd.DataFrame | None:
    """One row per scheme x depth (x the other keys), :data:`COLUMNS`; None unless depth and rate vary (2+ depths)."""
    if DEPTH not in keys or LR not in keys:
        return None
    rest = [k for k in keys if k not in (LR, DEPTH)]
    split = selection_split(runs)
    groups: dict[tuple, dict[float, list[dict[str, Any]]]] = {}
    for g, members in ordered_groups([r for r in runs if r.get(LR) is not None and r.get(DEPTH) is not None],
                                     rest, baseline).items():
        for r in members:
            groups.setdefault(g, {}).setdefault(float(r[DEPTH]), []).append(r)
    if not any(len(by_depth) >= 2 for by_depth in groups.values()):
        return None
    rng = np.random.default_rng(seed)
    rows, curves = [], {}
    for g in groups:
        group_rows, curves[g] = _group(groups[g], split, resamples, rng)
        rows += [{**dict(zip(rest, g)), **row, "selected_on": split} for row in group_rows]
    for row in rows:
        g = tuple(row[k] for k in rest)
        base = (baseline,) + g[1:]
        if g[0] != baseline and base in curves:
            diff, low, high, word = drift(curves[g], curves[base])
            row.update(slope_vs_base=diff, slope_vs_base_low=low, slope_vs_base_high=high, drift_vs_base=word)
    frame = pd.DataFrame(rows)
    frame[DEPTH] = [int(d) if float(d).is_integer() else d for d in frame[DEPTH]]
    cols = [k for k in keys if k != LR]
    return frame[cols + COLUMNS + ["selected_on"]]
