"""How a run that did not diverge is judged: on held-out data, by a test, not by its training loss.

A run *learned* at an evaluation when its held-out accuracy (validation, else test: ``judged_on``) is significantly
above always guessing the largest class (one-sided exact binomial test at :data:`suite.learned.ALPHA`). ``ok``: it
learned at its final evaluation and scored at least :data:`FLOOR` x the largest class share (the test alone passed
nearly input-blind models); else ``failed``: ``never_learned``, ``collapsed`` (learned earlier, not at the last) or
``too_low``. ``steps_to_learn``: the first step it learned (None: censored). Details: docs/training.md ("Statuses").
"""

from __future__ import annotations

from collections.abc import Sequence

from suite.learned import learned

FLOOR = 2.0  # ok needs a final held-out accuracy of at least FLOOR x the largest class share


def judge(history: Sequence[tuple[int, float]], n: int, majority: float) -> tuple[str, str | None, int | None]:
    """The outcome from evaluations ``(step, held-out accuracy)``: (``ok`` or ``failed``, ``failed_reason`` or None,
    ``steps_to_learn`` or None)."""
    passed = [step for step, acc in history if learned(acc, n, majority)]
    first = passed[0] if passed else None
    if history and learned(history[-1][1], n, majority):
        if history[-1][1] >= FLOOR * majority - 1e-12:
            return "ok", None, first
        return "failed", "too_low", first
    return "failed", "collapsed" if passed else "never_learned", first
