"""Learning-rate transfer across depth: does the best rate at a shallow depth stay best when deeper?

Used when ``model.depth`` and ``train.lr`` are both group keys. For each scheme (and each value of
the other keys), at every depth:

- **best rate**: the rate with the highest mean validation score (:mod:`suite.analysis.lr`'s rule:
  ties go to the smaller rate; the score is :func:`suite.analysis.score.score`), with a percentile
  bootstrap interval: resample the depth's seeds with replacement and choose again; its ends are
  tested rates (the 2.5% and 97.5% order statistics of the choices).
- **transfer regret**: the mean test score at the depth's own best rate minus the mean test score
  at the rate that was best at the *shallowest* depth (both chosen on validation), in the same
  bootstrap (each depth's seeds resampled independently, both choices made again). 0 = the
  shallow rate transfers; positive = tuning again at this depth pays. Empty where the shallow
  rate was not run at this depth.
- **transfer slope**: least-squares slope of log(best rate) on log(depth) over the depths, with its
  bootstrap interval. 0 = the rate transfers; -1 = the best rate halves when the depth doubles.
  :func:`reading` words it; "transfers" needs the whole interval within +/- 0.5, not only 0 inside it.

Seeds at one depth are resampled together across rates (a seed scored at every rate of that depth
counts), so a rate's seeds stay paired. A percentile bootstrap over few seeds under-covers
(docs/statistics.md): read these intervals as exploratory, and a 2-seed interval as a range of what
was seen.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from suite.analysis.grouping import DEPTH, LR, ordered_groups
from suite.analysis.score import selection_split
from suite.analysis.lr import _cell, _complete

RESAMPLES = 2000  # bootstrap resamples (seeded: a rerun writes the same numbers)
# A slope whose whole interval lies within +/- this reads "transfers": the best rate moves by less than
# a factor 2^0.5 per doubling of depth. An interval that merely contains 0 is not evidence of transfer.
TRANSFER_MARGIN = 0.5

COLUMNS = [
    "n_seeds", "n_lr", "best_lr", "best_lr_low", "best_lr_high", "best_lr_at_edge", "test_at_best",
    "shallow_depth", "shallow_lr", "test_at_shallow_lr", "regret", "regret_low", "regret_high",
    "slope", "slope_low", "slope_high", "slope_depths",
]


def _arrays(cell: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Rates (ascending) and validation / test scores as (rates x seeds) arrays, over the seeds scored
    at every rate; None without such a seed."""
    if "_val" not in cell:
        return None
    val, seeds = _complete(cell)
    if not seeds:
        return None
    rates = np.array(sorted(val))
    v = np.array([[val[lr][s] for s in seeds] for lr in rates], dtype=float)
    t = np.array([[cell["_test_by_lr"][lr][s] for s in seeds] for lr in rates], dtype=float)
    return rates, v, t


def _choose(v: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """Index of the best rate for each row of seed picks (resamples x n): highest mean validation
    score, the first (smallest rate) on ties."""
    means = v[:, picks].mean(axis=-1)  # (rates, resamples)
    return np.argmax(means, axis=0)


def _slope(depths: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """Least-squares slope of log(rate) on log(depth); ``rates`` is (..., depths)."""
    x = np.log(depths)
    x = x - x.mean()
    y = np.log(rates)
    return (y - y.mean(axis=-1, keepdims=True)) @ x / (x @ x)


def _edge(index: int, n: int) -> str:
    if n < 2:
        return ""
    return "lowest" if index == 0 else "highest" if index == n - 1 else ""


def _group(by_depth: dict[float, list[dict[str, Any]]], split: str, resamples: int,
           rng: np.random.Generator) -> list[dict[str, Any]]:
    """The rows of one scheme (one value of the other keys): one per depth."""
    depths = sorted(by_depth)
    data = {d: _arrays(_cell(by_depth[d], split)) for d in depths}
    rows: list[dict[str, Any]] = []
    boots: dict[float, np.ndarray] = {}  # depth -> best-rate index per resample
    tests: dict[float, np.ndarray] = {}  # depth -> mean test score per rate per resample
    for d in depths:
        row: dict[str, Any] = {DEPTH: d, **{c: math.nan for c in COLUMNS}, "best_lr_at_edge": "", "slope_depths": 0}
        if data[d] is None:
            rows.append(row)
            continue
        rates, v, t = data[d]
        n = v.shape[1]
        best = int(_choose(v, np.arange(n)[None, :])[0])
        picks = rng.integers(0, n, (resamples, n))
        boots[d] = _choose(v, picks)
        tests[d] = t[:, picks].mean(axis=-1)  # (rates, resamples)
        chosen = np.sort(boots[d])  # the interval's ends are rates that were tested (outward rounding)
        low, high = (rates[chosen[int(0.025 * resamples)]], rates[chosen[int(np.ceil(0.975 * resamples)) - 1]]) \
            if n > 1 else (math.nan, math.nan)
        row.update(n_seeds=n, n_lr=len(rates), best_lr=float(rates[best]), best_lr_low=float(low),
                   best_lr_high=float(high), best_lr_at_edge=_edge(best, len(rates)),
                   test_at_best=float(t[best].mean()))
        rows.append(row)
    scored = [d for d in depths if data[d] is not None]
    if not scored:
        return rows
    shallow = scored[0]
    s_rates = data[shallow][0]
    s_best = s_rates[int(_choose(data[shallow][1], np.arange(data[shallow][1].shape[1])[None, :])[0])]
    for row in rows:
        d = row[DEPTH]
        row.update(shallow_depth=shallow, shallow_lr=float(s_best))
        if data.get(d) is None:
            continue
        rates, v, t = data[d]
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
    if len(scored) >= 2:
        dep = np.array(scored, dtype=float)
        point = float(_slope(dep, np.array([rows[depths.index(d)]["best_lr"] for d in scored])))
        sampled = np.stack([data[d][0][boots[d]] for d in scored], axis=-1)  # (resamples, depths)
        slopes = _slope(dep, sampled)
        low, high = np.quantile(slopes, [0.025, 0.975])
        if min(data[d][1].shape[1] for d in scored) < 2:  # one seed somewhere: nothing to resample
            low = high = math.nan
        for row in rows:
            row.update(slope=point, slope_low=float(low), slope_high=float(high), slope_depths=len(scored))
    return rows


def reading(rows: pd.DataFrame) -> str:
    """One scheme's transfer in a few words, from its rows of :func:`transfer_table`:

    - ``falls with depth`` / ``rises with depth``: the slope's interval excludes 0;
    - ``transfers``: the interval lies within +/- :data:`TRANSFER_MARGIN`;
    - ``undecided``: it contains 0 but allows a larger shift (more seeds, or more depths);
    - ``at the grid's edge``: a best rate is the smallest or largest rate tested, so the slope is
      bounded by the grid (``suite run --refine`` extends it); no verdict;
    - ``no interval``: a depth has one seed; ``""``: fewer than two depths.
    """
    r = rows.iloc[0]
    if math.isnan(r["slope"]):
        return ""
    if (rows["best_lr_at_edge"] != "").any():
        return "at the grid's edge"
    low, high = r["slope_low"], r["slope_high"]
    if math.isnan(low):
        return "no interval"
    if high < 0:
        return "falls with depth"
    if low > 0:
        return "rises with depth"
    near = TRANSFER_MARGIN + 1e-9  # slopes of rates on a 2x grid land on multiples of 0.5, up to rounding
    return "transfers" if -near <= low and high <= near else "undecided"


def transfer_table(runs: list[dict[str, Any]], keys: list[str], baseline: str,
                   resamples: int = RESAMPLES, seed: int = 0) -> pd.DataFrame | None:
    """One row per scheme x depth (x the other keys): best rate, regret, slope, with intervals.

    Args:
        runs: as returned by :func:`suite.analysis.load.load_runs`.
        keys: group keys; nothing is computed unless both ``model.depth`` and ``train.lr`` are among
            them and there are at least two depths.
        baseline: the baseline variant (listed first).
        resamples, seed: the bootstrap.

    Returns:
        None when there is nothing to compute; else the keys without ``train.lr`` then
        :data:`COLUMNS` (documented in docs/statistics.md). Scores are fractions; rates as run.
    """
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
    rows = []
    for g in groups:
        for row in _group(groups[g], split, resamples, rng):
            rows.append({**dict(zip(rest, g)), **row, "selected_on": split})
    frame = pd.DataFrame(rows)
    frame[DEPTH] = [int(d) if float(d).is_integer() else d for d in frame[DEPTH]]
    cols = [k for k in keys if k != LR]
    return frame[cols + COLUMNS + ["selected_on"]]
