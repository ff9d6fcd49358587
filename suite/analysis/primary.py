"""The primary comparison an ablation declares, its test and its answer in words.

An ablation file may declare one question (``primary:``, docs/ablations.md), or a list of up to 3 tested as one
Holm family (:mod:`suite.analysis.coprimary`). :func:`evaluate` tests one comparison alone at 0.05 and answers
``difference``, ``equivalent`` (TOST within the margin) or ``undecided`` (with the seeds that would decide it); each
endpoint is a class in :mod:`suite.analysis.endpoints`. A folder with ``sequential.json`` is group-sequential: each
look is tested at the boundary of the information it reached, never at a fixed p < 0.05. The rules:
docs/statistics.md, "The primary comparison, and everything else".
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
    """The primary comparison(s) declared in ``folder/ablation.yaml``, as :func:`parse` returns them."""
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
    """The planned seed counts and the looks taken (``sequential.json``), or None for a fixed design."""
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
    """Test the primary comparison on ``runs``, alone at ``ALPHA``, by its endpoint's class. ``rounds``: a
    group-sequential design (:func:`read_design`), its planned seed counts alone, or None for a fixed design;
    ``alpha`` sets the printed interval's level (a family prints each at its Holm step's)."""
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
    """One look of ``suite run --until-decided``, given the planned ``rounds`` and the (seeds, pairs) ``taken``."""
    return evaluate(runs, primary, sequential.Looks(tuple(rounds), tuple(taken)))
