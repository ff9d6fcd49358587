"""The primary comparison an ablation declares (``primary:``, docs/ablations.md): read it, and test one by its
endpoint's class (a list of them is one Holm family: :mod:`suite.analysis.coprimary`). The rules: docs/statistics.md,
"The primary comparison, and everything else"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from suite.analysis.endpoints import Answer, endpoint
from suite.analysis.endpoints.base import runs_in
from suite.declared import ALPHA, Primary, parse
from suite.results import ABLATION_FILE, AnalysisError, recorded_ablation

__all__ = ["Answer", "Primary", "evaluate", "read"]


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
    variants, grid = data.get("variants") or {}, data.get("grid") or {}
    if not (isinstance(variants, dict) and all(isinstance(k, str) for k in variants) and isinstance(grid, dict)
            and all(isinstance(k, str) and isinstance(v, list) for k, v in grid.items())):
        raise AnalysisError(f"{path}: its variants or grid are not as an ablation file has them (variants by name, "
                            f"grid a list per key); restore it or run `suite run` again")
    parsed = parse(data["primary"], str(path), list(variants), grid, problems)
    if problems:
        raise AnalysisError(problems[0])
    return parsed


def evaluate(runs: list[dict[str, Any]], primary: Primary, alpha: float = ALPHA) -> Answer:
    """Test the primary comparison on ``runs``, alone at ``ALPHA``, by its endpoint's class; ``alpha`` sets the
    printed interval's level (a family prints each at its Holm step's)."""
    kind = endpoint(primary.endpoint)
    answer = kind.answer(primary, effect=kind.effect)
    a, b = (runs_in(runs, v, primary.where) for v in (primary.scheme, primary.baseline))
    if not a or not b:
        answer.note = f"no runs of {primary.scheme if not a else primary.baseline} there"
        return answer
    kind.test(answer, runs, a, b, alpha)
    return answer

