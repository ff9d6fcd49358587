"""Which diagnostic separates not-ok runs from ok ones (issue 60): the AUC is the Mann-Whitney U over all
pairs, ties half, read in the direction the not-ok runs lie, found from the runs (entropy and output logits fall in
failing runs, the stream grows)."""

import math

import pytest
from scipy.stats import mannwhitneyu

from suite import store
from suite.analysis.separation import auc, oriented, separation_frame, separation_lines


def test_auc_is_the_mann_whitney_u_over_all_pairs():
    bad, good = [5.0, 7.0, 7.0, 30.0], [1.0, 7.0, 2.0, 3.0, 9.0]
    u = mannwhitneyu(bad, good).statistic
    assert auc(bad, good) == pytest.approx(u / (len(bad) * len(good)))
    assert auc([10.0], [1.0, 2.0]) == 1.0 and auc([0.1], [1.0]) == 0.0
    assert math.isnan(auc([], [1.0]))
    assert oriented(0.0) == (1.0, "lower") and oriented(0.75) == (0.75, "higher") and oriented(0.5) == (0.5, "neither")
    assert oriented(0.25) == (0.75, "lower") and oriented(math.nan)[1] == ""


def test_a_diagnostic_that_falls_in_failing_runs_ranks_by_how_well_it_separates_not_by_a_fixed_direction():
    """The frontier's output logits are smaller in every failed run (median 0.55 against 1.33): a perfect separator
    the other way, which a fixed 'higher is bad' direction scored 0.02 and printed last."""
    runs = [{"variant": "ls", "status": s, "logit_rms_peak": lo, "stream_rms_peak": st, "attn_entropy_low": e}
            for s, lo, st, e in [("ok", 1.3, 9.0, 0.8), ("ok", 1.4, 30.0, 0.9), ("ok", 1.2, 12.0, 0.06),
                                 ("failed", 0.5, 20.0, 0.05), ("failed", 0.6, 700.0, 0.08)]]
    ls = separation_frame(runs).set_index("diagnostic")
    assert ls.loc["logit_rms_peak", "auc"] == 1.0 and ls.loc["logit_rms_peak", "not_ok_side"] == "lower"
    assert ls.loc["stream_rms_peak", "auc"] == pytest.approx(5 / 6)  # 20 lies under one of the three ok runs
    assert ls.loc["stream_rms_peak", "not_ok_side"] == "higher"
    assert ls.loc["attn_entropy_low", "not_ok_side"] == "lower"
    text = "\n".join(separation_lines(separation_frame(runs)))
    assert "- **ls** (2 not ok of 5): logit_rms_peak 1.00, lower when not ok (median 1.3 ok, 0.55 not ok)" in text
    assert "not a cause" in text


def _run(variant: str, status: str, logit: float, stream: float) -> dict:
    return {"variant": variant, "status": status, "attn_logit_peak": logit, "stream_rms_peak": stream}


def test_the_stream_separates_where_the_logit_does_not():
    runs = [_run("ls", "ok", 40.0, 5.0), _run("ls", "ok", 45.0, 8.0), _run("ls", "failed", 42.0, 300.0),
            _run("ls", "failed", 43.0, 900.0), _run("preln", "ok", 10.0, 3.0), _run("preln", "diverged", 90.0, 50.0),
            _run("ls", "error", math.nan, math.nan)]
    frame = separation_frame(runs)
    ls = frame[frame["variant"] == "ls"].set_index("diagnostic")
    assert ls.loc["stream_rms_peak", "auc"] == 1.0 and ls.loc["attn_logit_peak", "auc"] == 0.5
    assert set(frame["variant"]) == {"ls", "preln", "all"} and ls.loc["stream_rms_peak", "n_ok"] == 2
    text = "\n".join(separation_lines(frame))
    assert "- **ls** (2 not ok of 4): stream_rms_peak 1.00" in text
    assert separation_frame([_run("ls", "ok", 1.0, 1.0)]) is None


def test_the_summary_vocabulary_is_the_engines():
    from suite.engine.divergence import REASONS

    assert set(store.DIVERGED_REASONS) == set(REASONS)
    assert store.summary_problem({"failed_reason": "unstable", "steps_to_learn": 40, "train.steps": 300}) is None
    for bad in ({"failed_reason": "bogus"}, {"steps_to_learn": -5}, {"steps_to_learn": 301, "train.steps": 300},
                {"attn_logit_peak": math.inf}, {"stream_rms_peak": "abc"}):
        assert store.summary_problem(bad) is not None, bad


def test_a_diagnostic_missing_from_some_runs_says_its_own_counts():
    """The scheme's heading took the first diagnostic's counts: 1 not ok of 3 where 3 of 5 runs were judged."""
    from suite.store import DIAGNOSTIC_PEAKS

    k0, k1 = DIAGNOSTIC_PEAKS[0], DIAGNOSTIC_PEAKS[1]
    runs = [{"variant": "a", "status": "ok", k0: 1.0, k1: 1.0}, {"variant": "a", "status": "ok", k0: 2.0, k1: 2.0},
            {"variant": "a", "status": "diverged", k1: 9.0}, {"variant": "a", "status": "diverged", k1: 8.0},
            {"variant": "a", "status": "failed", k0: 5.0, k1: 7.0}]
    line = separation_lines(separation_frame(runs))[-2]
    assert line.startswith("- **a**: ") and "1 not ok of 3)" in line and "3 not ok of 5)" in line
    whole = separation_lines(separation_frame([r for r in runs if k0 in r]))[-2]
    assert whole.startswith("- **a** (1 not ok of 3): ")
