"""Trends with depth: the score's OLS slope on log2(depth), and a scheme's not-ok slope against the baseline's, the
interaction of a binomial GLM ``y ~ x + g + x:g``. Pure functions."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Slope:
    """A slope (or a difference of slopes) with its ``1 - alpha`` interval and two-sided p-value."""

    estimate: float
    low: float
    high: float
    p: float


NO_SLOPE = Slope(math.nan, math.nan, math.nan, math.nan)


def _design(x1: np.ndarray, x2: np.ndarray | None) -> np.ndarray:
    if x2 is None:
        return np.column_stack([np.ones_like(x1), x1])
    x = np.concatenate([x1, x2])
    g = np.concatenate([np.ones_like(x1), np.zeros_like(x2)])
    return np.column_stack([np.ones_like(x), x, g, x * g])


def linear_slope(x: Sequence[float], y: Sequence[float], alpha: float = 0.05) -> Slope:
    """OLS slope of ``y`` on ``x`` with its t interval; all nan unless x takes at least 2 values and n >= 3."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.size < 3 or np.unique(x).size < 2:
        return NO_SLOPE
    import statsmodels.api as sm

    fit = sm.OLS(y, _design(x, None)).fit()
    low, high = fit.conf_int(alpha)[1]
    return Slope(float(fit.params[1]), float(low), float(high), float(fit.pvalues[1]))


def logistic_slope_difference(x1: Sequence[float], k1: Sequence[int], x2: Sequence[float], k2: Sequence[int],
                              alpha: float = 0.05) -> Slope:
    """Difference of the log-odds slopes of not ok (x2, k2 the baseline's); all nan under (quasi-)separation."""
    x1, k1, x2, k2 = (np.asarray(v, dtype=float) for v in (x1, k1, x2, k2))
    if np.unique(x1).size < 2 or np.unique(x2).size < 2:
        return NO_SLOPE
    if k1.min() == k1.max() or k2.min() == k2.max():  # all-or-none in a group: separated
        return NO_SLOPE
    import statsmodels.api as sm
    from statsmodels.tools.sm_exceptions import ConvergenceWarning, PerfectSeparationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error", PerfectSeparationWarning)
        warnings.simplefilter("error", ConvergenceWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            fit = sm.GLM(np.concatenate([k1, k2]), _design(x1, x2), family=sm.families.Binomial()).fit()
        except (PerfectSeparationWarning, ConvergenceWarning, ValueError, np.linalg.LinAlgError):
            return NO_SLOPE
    se = float(fit.bse[3])
    if not math.isfinite(se) or se > 50:  # quasi-separation: the estimate is not identified
        return NO_SLOPE
    low, high = fit.conf_int(alpha)[3]
    return Slope(float(fit.params[3]), float(low), float(high), float(fit.pvalues[3]))
