"""Per cell (a group without the rate): the best rate, cross-fitted against the baseline's, the LR sensitivity and
the stability frontier (docs/statistics.md, "Learning rates: each scheme at its best, and how wide a range trains")."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from suite.analysis import crossfit, doseresponse, pooled, stats
from suite.grouping import LR, group_of, ordered_groups, sort_value
from suite.analysis.stats import adjust_family
from suite.results import best_rate, chance, score, selection_split
from suite.analysis.summary import compare_accuracy

AGREE_RESAMPLES = 2000  # seed resamples for best_lr_agree (seeded: reruns agree)
MIN_SENS_RATES = 2  # rates in common that a sensitivity is measured over, at least

MAX_NOT_OK = 0.5  # the frontier: the largest rate with at most this share of not-ok runs

COLUMNS = [
    "is_baseline", "has_baseline", "selected_on", "n_lr", "lr_tested_min", "lr_tested_max",
    "best_lr", "best_lr_at_edge", "val_at_best", "above_chance",
    "test_n", "test_mean", "test_ci_low", "test_ci_high",
    "test_pairs", "test_diff", "test_diff_ci_low", "test_diff_ci_high", "test_diff_sd", "test_p", "test_p_adj",
    "test_p_m", "test_diff_ci_clipped", "test_verdict", "test_xfit_mean", "test_xfit_base_mean", "test_xfit_lrs",
    "test_xfit_base_lrs",
    "best_lr_agree",
    "sens_lr_min", "sens_lr_max", "sens_n_lr", "sens_n", "sens_mean", "sens_ci_low", "sens_ci_high",
    "sens_diff", "sens_diff_ci_low", "sens_diff_ci_high", "sens_diff_ci_clipped", "sens_p", "sens_p_adj", "sens_p_m",
    "lr_stable_max", "censored", "lr50", "lr50_ci_low", "lr50_ci_high", "lr50_censored", "frontier_p",
    "frontier_p_adj", "frontier_p_m",
]


def lr_cell(runs: list[dict[str, Any]], split: str) -> dict[str, Any]:
    """Everything about one cell's runs, keyed by learning rate."""
    by_lr: dict[float, list[dict[str, Any]]] = {}
    for r in runs:
        by_lr.setdefault(float(r[LR]), []).append(r)
    lrs = sorted(by_lr)
    val = {lr: [(r.get("seed"), score(r, split)) for r in by_lr[lr]] for lr in lrs}
    val = {lr: [(s, x) for s, x in pairs if x is not None] for lr, pairs in val.items()}
    out: dict[str, Any] = {"n_lr": len(lrs), "lr_tested_min": lrs[0], "lr_tested_max": lrs[-1],
                           "_seeds": sorted({r.get("seed") for r in runs}, key=sort_value)}

    live = {lr: [r for r in by_lr[lr] if r["status"] != "error"] for lr in lrs}
    stable = [lr for lr in lrs if live[lr] and sum(r["status"] != "ok" for r in live[lr]) <= MAX_NOT_OK * len(live[lr])]
    out["lr_stable_max"] = max(stable) if stable else math.nan
    out["censored"] = bool(stable) and max(stable) == lrs[-1]
    doses = [(lr, int(r["status"] != "ok")) for lr in lrs for r in live[lr]]
    out["_doses"] = doses
    f = doseresponse.frontier([d for d, _ in doses], [b for _, b in doses])
    out.update(lr50=f.lr50, lr50_ci_low=f.low, lr50_ci_high=f.high, lr50_censored=f.censored)
    found = best_rate(runs, split)
    if found is None:
        out.update(best_lr=math.nan, best_lr_at_edge="", val_at_best=math.nan, above_chance=False, _test=[])
        return out
    best, best_mean, edge, chance = found
    out["above_chance"] = found.above_chance
    out["_chance"] = chance
    test = [(r.get("seed"), score(r, "test"), r["status"] == "ok") for r in by_lr[best]]
    test = [(s, x, ok) for s, x, ok in test if x is not None]
    out.update(best_lr=best, best_lr_at_edge=edge, val_at_best=best_mean, _test=[(s, x) for s, x, _ in test],
               _test_interval=stats.score_interval([x for _, x, _ in test], [ok for *_, ok in test], chance),
               _val=val, _test_by_lr={lr: {r.get("seed"): score(r, "test") for r in by_lr[lr]} for lr in lrs})
    return out


def sensitivity(cell: dict[str, Any], rates: list[float]) -> list[tuple[Any, float]]:
    """(seed, normalised LR sensitivity over ``rates``) per seed scored once at every rate; [] when not measurable."""
    val = cell.get("_val") or {}
    if len(rates) < MIN_SENS_RATES or any(not val.get(lr) for lr in rates):
        return []
    best_mean = max(float(np.mean([x for _, x in val[lr]])) for lr in rates)
    gain = best_mean - cell["_chance"]
    if gain <= 1e-9:
        return []
    per_seed: dict[Any, dict[float, float]] = {}
    for lr in rates:
        for seed, x in val[lr]:
            per_seed.setdefault(seed, {})[lr] = x
    complete = [s for s, xs in per_seed.items() if len(xs) == len(rates) and
                all(len([1 for t, _ in val[lr] if t == s]) == 1 for lr in rates)]
    return [(s, float(np.mean([(best_mean - per_seed[s][lr]) / gain for lr in rates])))
            for s in sorted(complete, key=sort_value)]


def _best_rate(val: dict[float, dict[Any, float]], seeds: list[Any]) -> float:
    """The rate with the highest mean validation score over ``seeds`` (ties: the smaller)."""
    means = {lr: np.mean([xs[s] for s in seeds]) for lr, xs in val.items()}
    top = max(means.values())
    return min(lr for lr, m in means.items() if m == top)


def complete_seeds(cell: dict[str, Any]) -> tuple[dict[float, dict[Any, float]], list[Any]]:
    """A cell's validation scores by rate and seed, and the seeds scored at every rate (val and test)."""
    val = {lr: dict(pairs) for lr, pairs in cell["_val"].items() if pairs}  # a rate whose runs all ended error: none
    seeds = set.intersection(*(set(v) for v in val.values())) if val else set()
    seeds = {s for s in seeds if all(cell["_test_by_lr"][lr].get(s) is not None for lr in val)}
    return val, sorted(seeds, key=sort_value)


def choice_agreement(cell: dict[str, Any], resamples: int = AGREE_RESAMPLES, seed: int = 0) -> float:
    """How often a bootstrap of the seeds picks the same best rate; nan with fewer than 3 seeds scored at every rate."""
    val, seeds = complete_seeds(cell)
    if len(seeds) < 3:
        return math.nan
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(seeds), (resamples, len(seeds)))
    return float(np.mean([_best_rate(val, [seeds[j] for j in pick]) == cell["best_lr"] for pick in picks]))


def common_rates(cells: list[dict[str, Any]]) -> list[float]:
    """The rates every one of ``cells`` scored a run at (on the selection split), ascending."""
    sets = [{lr for lr, pairs in (c.get("_val") or {}).items() if pairs} for c in cells]
    return sorted(set.intersection(*sets)) if sets else []


def _rates(rates: list[float]) -> str:
    return " / ".join("nan" if math.isnan(r) else f"{r:g}" for r in rates)


def _interval(values: list[float], clip: bool) -> tuple[int, float, float, float]:
    """n, mean and t interval within [0, 1], widened for a sensitivity (not ``clip``) to any value past it."""
    x = np.array(values, dtype=float)
    low, high = stats.t_interval(x)
    if x.size > 1 and not math.isnan(low):
        lo, hi = (0.0, 1.0) if clip else (min(0.0, float(x.min())), max(1.0, float(x.max())))
        low, high = max(low, lo), min(high, hi)
    return int(x.size), float(x.mean()) if x.size else math.nan, low, high


def lr_table(runs: list[dict[str, Any]], keys: list[str], baseline: str) -> pd.DataFrame | None:
    """One row per cell, the cell keys then :data:`COLUMNS`, baseline first; None without a ``train.lr`` key."""
    if LR not in keys:
        return None
    rest = [k for k in keys if k != LR]
    split = selection_split(runs)
    groups = ordered_groups([r for r in runs if r.get(LR) is not None], rest, baseline)
    ordered = list(groups)
    cells = {g: lr_cell(groups[g], split) for g in ordered}
    strata: dict[tuple, list[dict[str, Any]]] = {}
    for g in ordered:
        strata.setdefault(g[1:], []).append(cells[g])
    common = {k: common_rates(v) for k, v in strata.items()}
    for g in ordered:  # every scheme of a stratum over the same rates: those all of them ran
        rates = common[g[1:]]
        cells[g]["_sens"] = sensitivity(cells[g], rates) if len(rates) >= MIN_SENS_RATES else []
        cells[g]["_sens_rates"] = rates if len(rates) >= MIN_SENS_RATES else []
    rows, diffs, bounds = [], {"test": [], "sens": []}, []
    for g in ordered:
        cell, base = cells[g], cells.get((baseline,) + g[1:])
        is_base = g[0] == baseline
        row: dict[str, Any] = {**dict(zip(rest, g)), "is_baseline": is_base, "has_baseline": base is not None,
                               "selected_on": split}
        row.update({k: v for k, v in cell.items() if not k.startswith("_")})
        sens_rates = cell["_sens_rates"]
        row.update(sens_lr_min=sens_rates[0] if sens_rates else math.nan,
                   sens_lr_max=sens_rates[-1] if sens_rates else math.nan, sens_n_lr=len(sens_rates))
        for name, values, clip in (("test", cell["_test"], True), ("sens", cell["_sens"], False)):
            n, mean, low, high = _interval([x for _, x in values], clip)
            if name == "test" and "_test_interval" in cell:
                low, high = cell["_test_interval"]
            row.update({f"{name}_n": n, f"{name}_mean": mean, f"{name}_ci_low": low, f"{name}_ci_high": high})
            diff, sd, fit = stats.NO_DIFFERENCE, math.nan, None
            if not is_base and base is not None and values and base[f"_{name}"]:
                if name == "test":
                    fit = crossfit.compare(cell, base)
                    if fit is not None:
                        diff, sd = fit.diff, fit.sd
                else:
                    diff, sd = compare_accuracy(values, base[f"_{name}"])
            row.update({f"{name}_diff": diff.estimate, f"{name}_diff_ci_low": diff.low,
                        f"{name}_diff_ci_high": diff.high, f"{name}_p": diff.p})
            diffs[name].append(diff if diff.test else None)
            if name == "test":
                row.update(test_pairs=diff.n_pairs, test_diff_sd=sd,
                           test_xfit_mean=fit.scheme_mean if fit else math.nan,
                           test_xfit_base_mean=fit.base_mean if fit else math.nan,
                           test_xfit_lrs=_rates(list(fit.scheme_lrs)) if fit else "",
                           test_xfit_base_lrs=_rates(list(fit.base_lrs)) if fit else "")
        row["frontier_p"] = math.nan
        if not is_base and base is not None:
            (la, ba), (lb, bb) = (zip(*c["_doses"]) if c["_doses"] else ((), ()) for c in (cell, base))
            row["frontier_p"] = doseresponse.curves_differ(la, ba, lb, bb)
        row["best_lr_agree"] = choice_agreement(cell) if "_val" in cell else math.nan
        rows.append(row)
        bounds.append({"test": 1.0 - (cell.get("_chance") or 0.0), "sens": 1.0})
    frame = pd.DataFrame(rows)
    adjust_family(frame, rest, "test_p", diffs["test"], "test_diff")
    adjust_family(frame, rest, "sens_p", diffs["sens"], "sens_diff")
    adjust_family(frame, rest, "frontier_p")
    for name in ("test", "sens"):  # no interval past what a difference can be: scores lie in [chance, 1]; +/-100%
        ends = [pooled.clip(lo, hi, bound[name])
                for lo, hi, bound in zip(frame[f"{name}_diff_ci_low"], frame[f"{name}_diff_ci_high"], bounds)]
        frame[f"{name}_diff_ci_low"] = [e[0] for e in ends]
        frame[f"{name}_diff_ci_high"] = [e[1] for e in ends]
        frame[f"{name}_diff_ci_clipped"] = [e[2] for e in ends]
    seeds = [int(pairs) if pairs == pairs and pairs > 0 else int(n)
             for pairs, n in zip(frame["test_pairs"], frame["test_n"])]
    frame["test_verdict"] = [pooled.verdict(d, p, k) for d, p, k in zip(frame["test_diff"], frame["test_p_adj"], seeds)]
    return frame[rest + COLUMNS]


def lr_curves(runs: list[dict[str, Any]], keys: list[str]) -> pd.DataFrame:
    """Per group (keys with ``train.lr``): mean test score, its interval (the tables' mixture rule, as
    :func:`~suite.analysis.stats.score_interval`) and not-ok k/n, for ``accuracy_vs_lr``."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in runs:
        if r["status"] != "error":
            groups.setdefault(group_of(r, keys), []).append(r)
    rows = []
    for g, members in groups.items():
        scored = [(x, r["status"] == "ok") for r, x in ((r, score(r, "test")) for r in members) if x is not None]
        floor = next((c for c in map(chance, members) if c is not None), 0.0)
        low, high = stats.score_interval([x for x, _ in scored], [ok for _, ok in scored], floor)
        mean = float(np.mean([x for x, _ in scored])) if scored else math.nan
        rows.append({**dict(zip(keys, g)), "n": len(members), "n_not_ok": sum(r["status"] != "ok" for r in members),
                     "test_mean": mean, "test_ci_low": low, "test_ci_high": high})
    return pd.DataFrame(rows, columns=keys + ["n", "n_not_ok", "test_mean", "test_ci_low", "test_ci_high"])



