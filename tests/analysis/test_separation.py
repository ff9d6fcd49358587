"""Which diagnostic separates not-ok runs from ok ones (issue 60): the AUC is the Mann-Whitney U over all
pairs, ties half, and a diagnostic that falls in failing runs (attention entropy) is read the other way."""

import math

import pytest
from scipy.stats import mannwhitneyu

from suite import store
from suite.analysis.separation import auc, separation_frame, separation_lines


def test_auc_is_the_mann_whitney_u_over_all_pairs():
    bad, good = [5.0, 7.0, 7.0, 30.0], [1.0, 7.0, 2.0, 3.0, 9.0]
    u = mannwhitneyu(bad, good).statistic
    assert auc(bad, good) == pytest.approx(u / (len(bad) * len(good)))
    assert auc([10.0], [1.0, 2.0]) == 1.0 and auc([0.1], [1.0], low_is_bad=True) == 1.0
    assert math.isnan(auc([], [1.0]))


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
