"""The learning test: did a model beat always guessing the largest class on held-out data? A one-sided exact binomial
test at :data:`ALPHA`; scipy.special only (scipy.stats takes seconds to import)."""

from __future__ import annotations

import math

from scipy import special

ALPHA = 0.01


def learned(acc: float, n: int, majority: float, alpha: float = ALPHA) -> bool:
    """Whether ``acc`` on ``n`` examples beats guessing the largest class (share ``majority``) at level ``alpha``."""
    if n <= 0:
        return False
    correct = round(acc * n)
    return bool(special.bdtrc(correct - 1, n, majority) < alpha)  # = P(X > correct - 1)


def can_pass(n: int, majority: float, alpha: float = ALPHA) -> bool:
    """Whether a held-out split of ``n`` examples can show learning at all (100% accuracy passes)."""
    return learned(1.0, n, majority, alpha)


def smallest_passing(majority: float, alpha: float = ALPHA) -> int:
    """The fewest examples at largest class share ``majority`` with which 100% accuracy passes."""
    if majority <= 0:
        return 1
    if majority >= 1:
        return 0  # never: one class
    return math.floor(math.log(alpha) / math.log(majority)) + 1
