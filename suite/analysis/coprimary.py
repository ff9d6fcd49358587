"""Co-primary comparisons: up to 3 declared questions (their difference tests and TOSTs) as one Holm family, each
interval at the level of the Holm step that decided it (docs/statistics.md, "The primary comparison, and everything
else"); one comparison alone is tested at alpha."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from statsmodels.stats.multitest import multipletests

from suite.analysis.endpoints import Answer, endpoint
from suite.analysis.primary import evaluate
from suite.declared import ALPHA, Primary, as_list


def holm(p: Sequence[float], alpha: float = ALPHA) -> tuple[np.ndarray, np.ndarray]:
    """(Holm-adjusted p, step level): ``alpha / (m - j)`` for the rejected j-th smallest p, ``alpha / (m - r)`` for
    the rest. A nan p (no test made) still counts in m; its adjusted p is nan."""
    p = np.asarray(p, float)
    m = p.size
    if m == 0:
        return np.array([]), np.array([])
    filled = np.where(np.isnan(p), 1.0, p)
    adjusted = multipletests(filled, alpha=alpha, method="holm")[1]
    order = np.argsort(filled, kind="stable")
    rejected = int(np.sum(adjusted < alpha))
    levels = np.empty(m)
    levels[order] = alpha / (m - np.minimum(np.arange(m), rejected))
    return np.where(np.isnan(p), math.nan, adjusted), levels


def evaluate_all(runs: list[dict[str, Any]], declared: Primary | list[Primary]) -> list[Answer]:
    """Answer every declared comparison: alone for one, as a Holm family for several."""
    primaries = as_list(declared)
    if len(primaries) == 1:
        answer = evaluate(runs, primaries[0])
        if answer.decision == "equivalent":  # TOST at alpha is the 1 - 2 alpha interval
            _interval(runs, answer, 2 * ALPHA)
        return [answer]
    answers = [evaluate(runs, pr) for pr in primaries]
    tost_levels: dict[int, float] = {}
    tests = [(i, "difference", a.p) for i, a in enumerate(answers)]
    tests += [(i, "equivalent", a.tost_p) for i, a in enumerate(answers) if a.primary.margin is not None]
    adjusted, levels = holm([p for _, _, p in tests])
    m = len(tests)
    for (i, kind, _), adj, level in zip(tests, adjusted, levels):
        a = answers[i]
        a.family = m
        if kind == "equivalent":
            a.tost_p_adj, tost_levels[i] = float(adj), float(level)
            continue
        a.p_adj = float(adj)
        if level != ALPHA and not math.isnan(a.low):  # the interval at its Holm step's level
            _interval(runs, a, float(level))
    for i, a in enumerate(answers):  # the family's verdicts; an undecided one planned at alpha / m
        a.decision = ("undecided" if getattr(a, "few", False)  # too few seed pairs with runs at chance: no verdict
                      else "difference" if a.p_adj < ALPHA else "equivalent" if a.tost_p_adj < ALPHA else "undecided")
        a.seeds_needed = math.nan
        if a.decision == "undecided" and not math.isnan(a.p):
            endpoint(a.primary.endpoint).plan(a, ALPHA / m)
        elif a.decision == "equivalent":  # its TOST's interval
            _interval(runs, a, 2 * tost_levels[i])
    return answers


def _interval(runs: list[dict[str, Any]], a: Answer, alpha: float) -> None:
    """Re-print ``a``'s interval at level ``1 - alpha``."""
    again = evaluate(runs, a.primary, alpha=alpha)
    a.low, a.high, a.level = again.low, again.high, again.level
