"""Co-primary comparisons: up to 3 declared questions tested as one family, Holm's step-down.

Every difference test and every declared margin's TOST is one hypothesis of the family, so the chance of any false
claim stays at ``ALPHA``; each interval is printed at the level of the Holm step that decided its test, so it excludes
the null exactly when its verdict says so (docs/statistics.md, "Co-primary comparisons"). One comparison alone is
tested at alpha.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from statsmodels.stats.multitest import multipletests

from suite.analysis.sequential import Looks
from suite.analysis.endpoints import Answer, endpoint
from suite.analysis.primary import evaluate
from suite.declared import ALPHA, Primary, as_list


def holm(p: Sequence[float], alpha: float = ALPHA) -> tuple[np.ndarray, np.ndarray]:
    """(Holm-adjusted p, step level), each (m,): ``alpha / (m - j)`` for the rejected j-th smallest p, ``alpha /
    (m - r)`` for the rest. A nan p (no test made) still counts in m, its alpha spent by declaring it; its adjusted p
    is nan."""
    p = np.asarray(p, float)
    m = p.size
    if m == 0:
        return np.array([]), np.array([])
    filled = np.where(np.isnan(p), 1.0, p)
    adjusted = multipletests(filled, alpha=alpha, method="holm")[1]
    order = np.argsort(filled, kind="stable")
    rejected = int(np.sum(adjusted < alpha))
    levels = np.empty(m)
    for j, i in enumerate(order):
        levels[i] = alpha / (m - j) if j < rejected else alpha / (m - rejected)
    return np.where(np.isnan(p), math.nan, adjusted), levels


def evaluate_all(runs: list[dict[str, Any]], declared: Primary | list[Primary],
                 rounds: Looks | list[int] | None = None) -> list[Answer]:
    """Answer every declared comparison: alone for one, as a Holm family for several; ``rounds`` (a group-sequential
    design) only for a single comparison."""
    primaries = as_list(declared)
    if len(primaries) == 1:
        answer = evaluate(runs, primaries[0], rounds)
        if answer.decision == "equivalent" and answer.look < 0:
            _tost_interval(runs, answer, ALPHA)
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
            again = evaluate(runs, a.primary, alpha=float(level))
            a.low, a.high, a.level = again.low, again.high, again.level
    for i, a in enumerate(answers):
        _decide(a, m)
        if a.decision == "equivalent":
            _tost_interval(runs, a, tost_levels[i])
    return answers


def _tost_interval(runs: list[dict[str, Any]], a: Answer, level: float) -> None:
    """An equivalence gets its own test's interval: TOST at ``level`` is the ``1 - 2 level`` interval."""
    again = evaluate(runs, a.primary, alpha=2 * level)
    a.low, a.high, a.level = again.low, again.high, again.level


def _decide(a: Answer, m: int) -> None:
    """The family's verdict for one comparison, and the seeds that would decide it at alpha / m."""
    if a.p_adj < ALPHA:
        a.decision = "difference"
    elif a.tost_p_adj < ALPHA:
        a.decision = "equivalent"
    else:
        a.decision = "undecided"
    a.seeds_needed = math.nan
    if a.decision != "undecided" or math.isnan(a.p):
        return
    endpoint(a.primary.endpoint).plan(a, ALPHA / m)
