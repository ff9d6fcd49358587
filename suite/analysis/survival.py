"""Time to learn: Kaplan-Meier estimates and log-rank tests of ``steps_to_learn``, a run that never learned censored
at its last evaluation (docs/statistics.md, "Time to learn")."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from suite.grouping import ordered_groups
from suite.analysis.stats import adjust_family

COLUMNS = ["is_baseline", "has_baseline", "n", "n_learned", "median", "median_ci_low", "median_ci_high",
           "logrank_chi2", "logrank_p", "logrank_p_adj", "logrank_p_m", "first_eval", "all_first"]


def times(runs: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """(time, learned) per run: the step it learned at, or the step it was censored at."""
    e = [int(r.get("steps_to_learn") is not None) for r in runs]
    t = [float(r["steps_to_learn"] if learned else r.get("diverged_step") if r["status"] == "diverged"
               and r.get("diverged_step") is not None else r.get("steps_done") or 0) for r, learned in zip(runs, e)]
    return np.array(t), np.array(e)


def first_evaluation(run: dict[str, Any]) -> float:
    """The step of a run's first evaluation (its last step when it evaluates only at the end); nan when unknown."""
    every = run.get("train.eval_every")
    total = run.get("train.steps") or run.get("steps_done")
    if every and run.get("train.eval_schedule") == "log":  # 5, 10, 20, ... below eval_every (docs/training.md)
        every = min(every, 5)
    if every and total:
        return float(min(every, total))
    return float(every or total or math.nan)


def all_first(runs: list[dict[str, Any]]) -> tuple[float, bool]:
    """(the runs' common first evaluation step or nan, whether every one learned at it)."""
    firsts = {first_evaluation(r) for r in runs}
    step = firsts.pop() if len(firsts) == 1 else math.nan
    same = not math.isnan(step) and all(r.get("steps_to_learn") == step for r in runs)
    return step, bool(runs) and same


def km(runs: list[dict[str, Any]]) -> dict[str, float]:
    """The median steps to learn with its 95% interval (nan: not reached / unbounded)."""
    from statsmodels.duration.survfunc import SurvfuncRight

    t, e = times(runs)
    out = {"n": int(t.size), "n_learned": int(e.sum()), "median": math.nan, "median_ci_low": math.nan,
           "median_ci_high": math.nan}
    if not e.any():
        return out
    sf = SurvfuncRight(t, e)
    median = float(sf.quantile(0.5))
    with np.errstate(divide="ignore", invalid="ignore"):  # log(-log S) at S = 0 or 1: an unbounded end
        low, high = sf.quantile_ci(0.5)
    out.update(median=median if math.isfinite(median) else math.nan,
               median_ci_low=float(low) if math.isfinite(low) else math.nan,
               median_ci_high=float(high) if math.isfinite(high) else math.nan)
    return out


def logrank(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> tuple[float, float]:
    """Log-rank test of two cells' times to learn: (chi-square, p); nan when the times carry no information."""
    from statsmodels.duration.survfunc import survdiff

    ta, ea = times(a)
    tb, eb = times(b)
    if not (ea.any() or eb.any()):
        return math.nan, math.nan
    try:
        chi2, p = survdiff(np.r_[ta, tb], np.r_[ea, eb], np.r_[np.zeros(ta.size), np.ones(tb.size)])
    except np.linalg.LinAlgError:  # no variance: e.g. every run of both learned at the same evaluation
        return math.nan, math.nan
    return float(chi2), float(p)


def learn_table(runs: list[dict[str, Any]], keys: list[str], baseline: str) -> pd.DataFrame | None:
    """One row per group: median time to learn, log-rank test against the baseline; None if no run recorded it."""
    live = [r for r in runs if r["status"] != "error" and "steps_to_learn" in r]
    if not live:
        return None
    groups = ordered_groups(live, keys, baseline)
    rows = []
    for g in groups:
        base = groups.get((baseline,) + g[1:])
        is_base = g[0] == baseline
        chi2, p = logrank(groups[g], base) if base is not None and not is_base else (math.nan, math.nan)
        step, first = all_first(groups[g])
        rows.append({**dict(zip(keys, g)), "is_baseline": is_base, "has_baseline": base is not None,
                     **km(groups[g]), "logrank_chi2": chi2, "logrank_p": p, "first_eval": step, "all_first": first})
    frame = pd.DataFrame(rows)
    adjust_family(frame, keys, "logrank_p")
    return frame[keys + COLUMNS]


def uninformative(rows: pd.DataFrame) -> float:
    """The first evaluation step when every run of every row learned at it (the times say nothing), else nan."""
    steps = set(rows["first_eval"])
    if rows.empty or not rows["all_first"].all() or len(steps) != 1:
        return math.nan
    return float(steps.pop())


def first_eval_line(step: float) -> str:
    """The one line that replaces rows of medians without intervals (:func:`uninformative`)."""
    return (f"every run learned by its first evaluation (step {step:.0f}): time to learn cannot tell these "
            f"schemes apart at this evaluation schedule")


def curves(runs: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """The Kaplan-Meier curve of the share of runs that have learned by each step: (steps, share)."""
    from statsmodels.duration.survfunc import SurvfuncRight

    t, e = times(runs)
    if not t.size:
        return np.array([]), np.array([])
    if not e.any():
        return np.array([0.0, t.max()]), np.array([0.0, 0.0])
    sf = SurvfuncRight(t, e)
    return np.r_[0.0, sf.surv_times], np.r_[0.0, 1 - sf.surv_prob]
