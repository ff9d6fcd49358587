"""suite plan: seeds from the point SD and from its upper limit; a zero SD said as such."""

import math
from pathlib import Path

from suite.analysis import stats
from suite.analysis.endpoints.score import crossfit_plan
from suite.analysis.plan import COLUMNS, _row, render

import pandas as pd


def test_seeds_from_the_point_sd_and_from_its_upper_limit():
    """The mechanisms primary: SD 5.1 points from 2 pairs (1 df). Planned at the upper limit (20.1
    points) it asked for 129 seeds (130 from the rounded SD); at the point SD 11; both are printed."""
    row = _row("ls vs preln", "score", "primary", 0.05, 2, 0.051, 0.05, 0.8)
    assert row["planning_sd"] == stats.sd_upper(0.051, 1) and round(100 * row["planning_sd"], 1) == 20.1
    assert row["seeds_needed_point"] == stats.paired_seeds_needed(0.05, 0.051) == 11
    assert row["seeds_needed"] == stats.paired_seeds_needed(0.05, stats.sd_upper(0.051, 1)) == 130
    assert row["note"] == "" and set(row) == set(COLUMNS)
    text = render(pd.DataFrame([row], columns=COLUMNS), 0.8)
    assert "| seeds (point sd) | seeds (upper sd) |" in text and "| 5.1 | 20.1 | 11 | 130 |" in text
    assert "| primary | 5 points | 0.0500 |" in text  # the effect each row's seeds would detect, named


def test_an_exploratory_best_rate_row_is_planned_as_its_cross_fitted_test():
    """The best-rate score is cross-fitted (each half picks the other's rate): its SD has n - 2 degrees of freedom and
    its test the power of n / 2 pairs, so its plan doubles the paired t's, as the declared comparison's does."""
    from suite.analysis.plan import plan_table

    frame = plan_table(Path(__file__).resolve().parents[2] / "results" / "mechanisms")
    rows = frame[(frame["endpoint"] == "best_lr_score") & (frame["role"] == "exploratory")]
    assert len(rows) and rows["note"].str.contains("cross-fitted: twice the seeds of a paired t", regex=False).all()
    row = _row("ls vs preln, depth 12", "best_lr_score", "exploratory", 0.05, 4, 0.051, 0.05, 0.8, crossfit_plan)
    assert row["planning_sd"] == stats.sd_upper(0.051, 2)
    assert row["seeds_needed_point"] == 2 * stats.paired_seeds_needed(0.05, 0.051) == 22
    assert row["seeds_needed"] == 2 * stats.paired_seeds_needed(0.05, stats.sd_upper(0.051, 2))
    assert row["note"] == "cross-fitted: twice the seeds of a paired t"


def test_equal_not_ok_rates_need_no_seeds_rather_than_over_ten_thousand():
    """Hostile round six: 6/6 against 6/6 (the frontier study, depth 96 at 3.2e-2) printed "> 10,000" seeds
    beside "nothing to detect"."""
    from pathlib import Path

    from suite.analysis.plan import plan_table

    frame = plan_table(Path(__file__).resolve().parents[2] / "results" / "frontier")
    equal = frame[frame["note"].str.contains("6/6 vs 6/6; equal rates: nothing to detect", regex=False)]
    assert len(equal) >= 1 and equal["seeds_needed"].isna().all()
    text = render(frame, 0.8)
    assert "> 10,000" not in text and "| 0.5 in slope |" in text and "| the rates seen |" in text


def test_a_zero_sd_is_not_called_fewer_than_two_pairs():
    row = _row("completep vs preln, depth 12", "score", "exploratory", 0.05 / 19, 3, 0.0, 0.05, 0.8)
    assert math.isnan(row["seeds_needed"]) and math.isnan(row["seeds_needed_point"])
    assert row["note"].startswith("every seed pair differs by the same amount (SD 0")
    one = _row("x vs preln", "score", "exploratory", 0.05, 1, math.nan, 0.05, 0.8)
    assert one["note"] == "fewer than 2 seed pairs: no SD"
