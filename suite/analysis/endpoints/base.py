"""What every endpoint shares: the :class:`Answer`, the :class:`Endpoint` interface, the words their texts share."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from suite.declared import ALPHA, DEFAULT_EFFECT, ENDPOINTS, Primary, same_value


@dataclass
class Answer:
    """A declared comparison's result (``decision``: ``difference``, ``equivalent`` or ``undecided``)."""

    primary: Primary
    decision: str = "undecided"
    estimate: float = math.nan  # scheme - baseline (a fraction, a rate difference, a ratio or a slope difference)
    low: float = math.nan  # its interval (at `level`)
    high: float = math.nan
    p: float = math.nan
    test: str = ""
    tost_p: float = math.nan  # the equivalence test's, where the endpoint has one
    level: float = 1 - ALPHA  # of the printed interval (the level of the Holm step that decided it)
    effect: float = DEFAULT_EFFECT  # planned for
    seeds_needed: float = math.nan
    note: str = ""
    family: int = 1  # hypotheses in the co-primary Holm family (1: this comparison alone)
    p_adj: float = math.nan  # Holm-adjusted p of the difference test
    tost_p_adj: float = math.nan  # Holm-adjusted p of the equivalence test

    def seeds_run(self) -> int:
        """The seeds it has, counted as its plan counts ``seeds_needed`` (0: the endpoint counts none)."""
        return 0

    def powered(self) -> bool:
        """Undecided with at least the seeds its plan asks for: an effect of the planned size would probably have
        been decided, so the difference is likely smaller (not a verdict: only a declared margin's test says so)."""
        return math.isfinite(self.seeds_needed) and 0 < self.seeds_needed <= self.seeds_run()

    def powered_words(self) -> str:
        """The sentence an undecided answer's plan ends with when :meth:`powered`, else ""."""
        if not self.powered():
            return ""
        why = "" if self.primary.margin is not None else " (no equivalence margin is declared, so that is no verdict)"
        return (" That many have run: a difference of the planned size would probably have been decided, "
                f"so this one is likely smaller{why}.")


class Endpoint:
    """One kind of declared comparison (:data:`suite.declared.ENDPOINTS`); subclasses implement what raises."""

    name: ClassVar[str] = ""
    what: ClassVar[str] = ""  # what is compared, in findings.md's opening
    answer: ClassVar[type[Answer]] = Answer
    effect: ClassVar[float] = DEFAULT_EFFECT  # the effect the seeds are planned for

    def test(self, answer: Answer, runs: list[dict[str, Any]], a: list[dict[str, Any]], b: list[dict[str, Any]],
             alpha: float) -> None:
        """Fill and decide ``answer`` from the cell's scheme runs ``a`` and baseline runs ``b`` (no errors, both
        non-empty); plan it at ``ALPHA`` if undecided."""
        raise NotImplementedError

    def plan(self, answer: Answer, alpha: float) -> None:
        """Set the seeds that would decide an undecided answer tested at ``alpha`` (none by default)."""

    def verdict(self, answer: Answer) -> str:
        """The answer in words: its verdict in bold, then the numbers behind it."""
        raise NotImplementedError

    def decided(self, answer: Answer) -> str:
        """A decided difference in a few plain words (the verdict table)."""
        raise NotImplementedError

    def cells(self, answer: Answer) -> tuple[str, str]:
        """The verdict table's estimate and interval cells."""
        raise NotImplementedError

    def plan_row(self, answer: Answer, effect: float, power: float, alpha: float) -> dict[str, Any]:
        """``suite plan``'s row past its comparison, endpoint, role and alpha (:data:`suite.analysis.plan.COLUMNS`)."""
        raise NotImplementedError

    def effect_words(self) -> str | None:
        """What the plan's seeds would detect, when it is not the row's effect in points."""
        return None

    def paired_cells(self, primary: Primary) -> list[tuple[str, dict[str, Any]]]:
        """The (variant, where) cells whose seeds a paired test matches ([] when it pairs none)."""
        return []


def endpoint(name: str) -> Endpoint:
    """The registered endpoint ``name`` (:data:`suite.declared.ENDPOINTS`)."""
    return ENDPOINTS.get(name)()


def runs_in(runs: list[dict[str, Any]], variant: str, where: dict[str, Any],
            errors: bool = False) -> list[dict[str, Any]]:
    """The runs of ``variant`` in the cell ``where`` (errored ones only with ``errors``)."""
    return [r for r in runs if r.get("variant") == variant and (errors or r["status"] != "error")
            and all(same_value(r.get(k), v) for k, v in where.items())]


def pts(x: float) -> str:
    return f"{100 * x:+.1f}"


def p_text(p: float) -> str:
    return "no test" if math.isnan(p) else "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def ps(p: float, adjusted: float, family: int) -> str:
    """``p = 0.004`` alone; ``p = 0.004, Holm-adjusted p = 0.012`` in a family."""
    return p_text(p) if family == 1 or math.isnan(p) else f"{p_text(p)}, Holm-adjusted {p_text(adjusted)}"


def level(a: Answer) -> str:
    return f"{100 * a.level:.3g}%"


def at_step(a: Answer) -> str:
    """`` at alpha = 0.0167 (Holm's first step)`` for a family's answer, "" alone."""
    return f" at alpha = {ALPHA / a.family:.3g} (Holm's first step)" if a.family > 1 else ""
