"""The LR50 a depth's runs show without a model (suite.analysis.stability.measured_lr50)."""

import math

import pytest

from suite.analysis.stability import measured_lr50


def test_it_interpolates_on_log_rate_where_the_not_ok_share_first_reaches_a_half():
    # 0/2 not ok at 1e-2, 2/2 at 4e-2: a half is half-way on log rate, at 2e-2
    assert measured_lr50([1e-2, 1e-2, 4e-2, 4e-2], [0, 0, 1, 1]) == (pytest.approx(2e-2), "")
    # 1/4 at 1e-2 and 3/4 at 2e-2: again half-way, at sqrt(2) x 1e-2
    rate, _ = measured_lr50([1e-2] * 4 + [2e-2] * 4, [1, 0, 0, 0, 1, 1, 1, 0])
    assert rate == pytest.approx(1e-2 * math.sqrt(2))
    # exactly a half at a rate tried: that rate
    assert measured_lr50([1e-2, 2e-2, 2e-2, 4e-2], [0, 1, 0, 1])[0] == pytest.approx(2e-2)
    # the first crossing counts, not a later recovery
    assert measured_lr50([1, 2, 4], [0, 1, 0])[0] == pytest.approx(math.sqrt(2))


def test_it_says_when_the_half_lies_outside_the_rates_run():
    assert measured_lr50([1e-2, 2e-2], [1, 1])[1] == "below" and math.isnan(measured_lr50([1e-2, 2e-2], [1, 1])[0])
    assert measured_lr50([1e-2, 2e-2], [0, 0])[1] == "above"
    assert measured_lr50([], [])[1] == "" and math.isnan(measured_lr50([], [])[0])
