"""The primary comparison an ablation declares, its test and its answer in words.

An ablation file may declare one question (``primary:``, docs/ablations.md): a scheme, a baseline,
where (fixed values of grid keys, e.g. the deepest depth), an endpoint and optionally an
equivalence margin; or a list of up to 3 such questions, tested as one family
(:mod:`suite.analysis.coprimary`, Holm). :func:`evaluate` tests one comparison at ``alpha`` = 0.05
and decides one of three answers:

- ``difference``: the test has p < alpha (the paired t-test, Welch's where seeds do not match; the
  cross-fitted t for ``best_lr_score``); the 95% interval printed beside it excludes 0, by construction.
- ``equivalent``: not a difference, and the two one-sided tests (TOST) put the difference within
  ``+/- margin`` (its 90% interval lies inside the margin).
- ``undecided``: neither; the answer names the seeds that would decide it (its endpoint's ``plan``).

Each endpoint is a class (:mod:`suite.analysis.endpoints`: score, best_lr_score, interaction,
not_ok_rate, frontier, frontier_slope). With ``suite run --until-decided`` the folder holds ``sequential.json``, the group-sequential
design and the looks taken so far (:mod:`suite.analysis.sequential`); each look is tested at the
boundary of the information it reached (seed pairs / the most the study allows), never at a fixed
p < 0.05, and its p-value and interval account for every look.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from suite import store
from suite.analysis import sequential
from suite.analysis.endpoints import Answer, endpoint
from suite.analysis.endpoints.base import runs_in
from suite.declared import ALPHA, MAX_SEEDS, SEQUENTIAL, Primary, parse, taken_looks
from suite.results import ABLATION_FILE, AnalysisError, recorded_ablation

__all__ = ["Answer", "Primary", "evaluate", "look", "read", "read_design"]


def read(folder: str | Path) -> Primary | list[Primary] | None:
    """The primary comparison(s) declared in ``folder/ablation.yaml`` (written by ``suite run``), as
    :func:`parse` returns them."""
    path = Path(folder) / ABLATION_FILE
    try:
        data = recorded_ablation(folder)
    except ValueError as err:
        raise AnalysisError(f"{path}: cannot read it ({err}); restore it or run `suite run` again") from None
    if data.get("primary") is None:
        return None
    problems: list[str] = []
    grid = data.get("grid") if isinstance(data.get("grid"), dict) else {}
    parsed = parse(data["primary"], str(path), list(data.get("variants") or {}), grid, problems)
    if problems:
        raise AnalysisError(problems[0])
    return parsed


def read_design(folder: str | Path) -> sequential.Looks | None:
    """The planned seed counts of each look and the looks taken (``sequential.json``), or None for a
    fixed design."""
    path = Path(folder) / SEQUENTIAL
    if not path.is_file():
        return None
    try:
        data = store.read_json(path)
        rounds, looks = data["rounds"], data.get("looks") or []
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise AnalysisError(f"{path}: not a sequential design ({err}); delete it to analyse as a fixed design") from None
    if not (isinstance(rounds, list) and rounds and all(isinstance(n, int) and 2 <= n <= MAX_SEEDS for n in rounds)
            and rounds == sorted(set(rounds))):
        raise AnalysisError(f"{path}: rounds: expected increasing seed counts from 2 to {MAX_SEEDS:,}; delete it to "
                            f"analyse as a fixed design")
    return sequential.Looks(tuple(rounds), taken_looks(looks, path))


def evaluate(runs: list[dict[str, Any]], primary: Primary,
             rounds: sequential.Looks | list[int] | None = None, alpha: float = ALPHA) -> Answer:
    """Test the primary comparison on ``runs`` (see the module docstring), alone at ``ALPHA``, by its
    endpoint's class (:mod:`suite.analysis.endpoints`).

    Args:
        runs: as returned by :func:`suite.results.run_records`.
        primary: the declared comparison.
        rounds: a group-sequential design (``sequential.json`` as :func:`read_design` reads it: the
            planned rounds and the looks taken), its planned seed counts alone (no look taken yet), or
            None for a fixed design.
        alpha: the printed interval's level is ``1 - alpha`` (a family prints each at its Holm step's).
    """
    looks = rounds if isinstance(rounds, sequential.Looks) else sequential.Looks(tuple(rounds)) if rounds else None
    kind = endpoint(primary.endpoint)
    answer = kind.answer(primary, rounds=list(looks.rounds) if looks else [], effect=kind.effect)
    a, b = (runs_in(runs, v, primary.where) for v in (primary.scheme, primary.baseline))
    if not a or not b:
        answer.note = f"no runs of {primary.scheme if not a else primary.baseline} there"
        return answer
    kind.test(answer, runs, a, b, alpha, looks)
    return answer


def look(runs: list[dict[str, Any]], primary: Primary, rounds: list[int],
         taken: tuple[tuple[int, int], ...]) -> Answer:
    """One look of ``suite run --until-decided`` (:mod:`suite.sweep.until`): the comparison tested at its
    boundary, given the planned ``rounds`` of seeds and the (seeds, pairs) of the looks ``taken`` before it."""
    return evaluate(runs, primary, sequential.Looks(tuple(rounds), tuple(taken)))
