"""How a run that did not diverge is judged: on held-out data, by a test, not by its training loss.

A run *learned* at an evaluation when its held-out accuracy is significantly above what always
guessing the most frequent class would score: a one-sided exact binomial test of the number correct
against ``n`` trials at the largest class share, at :data:`suite.learned.ALPHA` = 0.01. With 450 held-out images
and a largest share of 0.11 that takes 14.7% or more (tests/engine/test_outcome.py).

- ``ok``: it learned at its final evaluation, by a margin: the final held-out accuracy is also at least
  :data:`FLOOR` x the largest class share (twice what always guessing that class scores: 20% on the
  embedded MNIST-5k's validation split, 400 images of which the largest class is 40). The test alone passed runs at 14%: on 450 images a model whose outputs barely
  depend on the input clears it, and the broken runs of an outside probe (attention logits grown to
  187-422, nearly constant outputs) scored 19%; healthy runs of the default score 40-80%;
- ``failed`` with ``failed_reason`` ``never_learned`` (at no evaluation), ``collapsed`` (at an
  earlier evaluation, then no longer at the last) or ``too_low`` (it passed the test at its last
  evaluation, under the floor); the summary's ``crossed`` lists the diagnostics that passed their bounds
  beside it (:mod:`suite.engine.diagnostics`);
- ``steps_to_learn``: the step of the first evaluation at which it learned; ``None`` (censored at
  the last evaluation) when it never did. It tells "slow" from "unstable", which one status cannot.

A run whose *training* loss went back to chance after it had learned is not judged here: it diverged
(``collapse``, :mod:`suite.engine.divergence`). A held-out split too small for the test to pass even
at 100% accuracy (:func:`can_pass`) is refused before any run (``suite.config.validate``), so no run is
ever ``failed`` for that.

The held-out split is the validation split; a run without one (``data.val_fraction: 0``) is judged
on the test split, and its summary says so (``judged_on``). Pure functions of the evaluation history.
"""

from __future__ import annotations

from collections.abc import Sequence

from suite.learned import learned

FLOOR = 2.0  # ok needs a final held-out accuracy of at least FLOOR x the largest class share


def judge(history: Sequence[tuple[int, float]], n: int, majority: float) -> tuple[str, str | None, int | None]:
    """The outcome of a run that did not diverge, from its evaluations ``(step, held-out accuracy)``.

    Returns:
        (``ok`` or ``failed``, ``failed_reason`` or None, ``steps_to_learn`` or None).
    """
    passed = [step for step, acc in history if learned(acc, n, majority)]
    first = passed[0] if passed else None
    if history and learned(history[-1][1], n, majority):
        if history[-1][1] >= FLOOR * majority - 1e-12:
            return "ok", None, first
        return "failed", "too_low", first
    return "failed", "collapsed" if passed else "never_learned", first
