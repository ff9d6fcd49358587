"""How every finished run scores: one rule, used by every table, figure and finding.

A run that ended ``ok`` scores its measured accuracy; a run that ``diverged`` or ``failed`` scores
chance, ``1 / model.num_classes``, whatever accuracy it measured: it did not demonstrably learn, so a
user of the scheme gets nothing from it. An ``error`` run (an exception) scores nothing (``None``): it
says nothing about the scheme. Validation and test are scored alike. The rule and why:
docs/statistics.md ("One score").
"""

from __future__ import annotations

import math
from typing import Any


def chance(run: dict[str, Any]) -> float | None:
    """``1 / model.num_classes``, or None when the summary does not say."""
    classes = run.get("model.num_classes")
    return 1.0 / classes if isinstance(classes, int) and not isinstance(classes, bool) and classes > 0 else None


def selection_split(runs: list[dict[str, Any]]) -> str:
    """``val`` when every ``ok`` run measured a validation accuracy, else ``test``: the split a learning
    rate (or any other setting) is chosen on."""
    return "val" if all(r.get("val_acc") is not None for r in runs if r["status"] == "ok") else "test"


def score(run: dict[str, Any], split: str = "test") -> float | None:
    """A run's ``test`` (or ``val``) score under the rule above; None for ``error`` or a missing value."""
    if run["status"] == "error":
        return None
    if run["status"] in ("diverged", "failed"):
        return chance(run)
    value = run.get(f"{split}_acc")
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None
