"""How a run that did not diverge is judged: by a test on held-out accuracy, not by its training loss.

``ok`` when its final held-out accuracy beats the largest class share significantly (:mod:`suite.learned`) and
reaches :func:`floor`; else ``failed`` (``never_learned``, ``collapsed``, ``too_low``). docs/training.md ("Statuses").
"""

from __future__ import annotations

from collections.abc import Sequence

from suite.learned import learned

FLOOR = 2.0  # ok needs a final held-out accuracy of at least FLOOR x the largest class share ...
ROOM = 0.5  # ... or, where that is higher, ROOM of the way from that share to 100% (2 classes: 75%, not 100%)


def floor(majority: float) -> float:
    """The least final held-out accuracy an ``ok`` run has: ``FLOOR`` x the largest class share, at most ``ROOM`` of
    the way from it to 1 (the cap binds only past a share of 1/3: two classes, or one class over a third of them)."""
    return min(FLOOR * majority, majority + ROOM * (1 - majority))


def judge(history: Sequence[tuple[int, float]], n: int, majority: float) -> tuple[str, str | None, int | None]:
    """From evaluations ``(step, held-out accuracy)``: (status, ``failed_reason``, ``steps_to_learn``)."""
    passed = [step for step, acc in history if learned(acc, n, majority)]
    first = passed[0] if passed else None
    if history and learned(history[-1][1], n, majority):
        if history[-1][1] >= floor(majority) - 1e-12:
            return "ok", None, first
        return "failed", "too_low", first
    return "failed", "collapsed" if passed else "never_learned", first
