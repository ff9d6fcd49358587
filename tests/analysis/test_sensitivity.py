"""The declared frontier-slope verdict under other definitions of not ok (suite.analysis.sensitivity)."""

from __future__ import annotations

import numpy as np

from suite.analysis.sensitivity import DEFINITIONS, sensitivity_frame, sensitivity_lines
from suite.declared import Primary


def runs() -> list[dict]:
    """Pre-LN's edge stays at 2e-2; LayerScale's falls from 8e-2 at depth 12 to 5e-3 at 192 (noisy edges)."""
    rng = np.random.default_rng(0)
    out = []
    for variant, edge in (("preln", lambda d: 2e-2), ("ls", lambda d: 8e-2 * (12 / d))):
        for depth in (12, 48, 192):
            for lr in np.geomspace(1e-3, 3.2e-1, 6):
                for seed in range(3):
                    bad = np.log10(lr / edge(depth)) + rng.normal(0, 0.3) > 0
                    out.append({"variant": variant, "model.depth": depth, "train.lr": float(lr), "seed": seed,
                                "status": "failed" if bad else "ok", "judged_on": "val",
                                "val_acc": 0.1 if bad else (0.22 if seed == 0 else 0.4),
                                "stream_rms_peak": 900.0 if bad else (500.0 if seed == 1 and lr > 0.01 else 5.0),
                                "attn_logit_peak": 3.0})
    return out


def test_each_definition_refits_the_declared_comparison_and_counts_its_own_not_ok():
    frame = sensitivity_frame(runs(), [Primary("ls", "preln", endpoint="frontier_slope")])
    assert list(frame["definition"]) == list(DEFINITIONS)
    row = frame.set_index("definition")
    declared = row.loc["as declared"]
    assert declared["decided"] and declared["high"] < 0  # LayerScale's frontier falls faster
    assert row.loc["floor 25%", "n_not_ok"] > declared["n_not_ok"]  # seed 0's ok runs sit at 22%
    assert row.loc["floor 15%", "n_not_ok"] == declared["n_not_ok"]
    assert row.loc["stream", "n_not_ok"] > declared["n_not_ok"]  # seed 1's ok runs whose stream peaked at 500
    assert row.loc["logit", "n_not_ok"] == declared["n_not_ok"]
    text = "\n".join(sensitivity_lines(frame))
    assert "- **as declared** (the status" in text and "decided" in text


def test_nothing_without_a_declared_frontier_slope_comparison():
    assert sensitivity_frame(runs(), None) is None
    assert sensitivity_frame(runs(), Primary("ls", "preln", endpoint="frontier")) is None
    assert sensitivity_lines(None) == []


def test_the_as_declared_row_is_decided_in_the_whole_declared_family(monkeypatch):
    """It ran Holm over the frontier-slope comparisons alone: with a second declared comparison, a slope at p = 0.04
    read 'decided' in the sensitivity table and 'undecided' (adjusted p 0.08) in the verdict (an outside review)."""
    from suite.analysis import depthslope
    from suite.analysis.coprimary import evaluate_all
    from suite.declared import Primary

    rs = runs()
    for r in rs:
        r["test_acc"] = r["val_acc"]
    declared = [Primary("ls", "preln", endpoint="frontier_slope"),
                Primary("ls", "preln", where={"model.depth": 12}, endpoint="frontier")]
    real = depthslope.difference

    def at_p(*args, **kw):  # the real fit, its p set where alone it decides and in a family of two it does not
        f = real(*args, **kw)
        return depthslope.SlopeDifference(f.estimate, f.low, f.high, 0.04, f.note)

    monkeypatch.setattr(depthslope, "difference", at_p)
    verdict = evaluate_all(rs, declared)[0]
    row = sensitivity_frame(rs, declared).set_index("definition").loc["as declared"]
    assert verdict.decision == "undecided" and row["p"] == 0.04 and not row["decided"]


def test_comparisons_over_different_runs_each_say_their_own_counts():
    """Two declared slopes over different cells: the heading took the first one's counts for both."""
    import pandas as pd

    from suite.analysis.sensitivity import COLUMNS

    rows = [{"definition": "as declared", "meaning": "the status", "comparison": c, "n_not_ok": k, "n": n,
             "estimate": -0.5, "low": -0.9, "high": -0.1, "p": 0.01, "decided": True, "note": ""}
            for c, k, n in (("a vs b", 3, 10), ("c vs b", 7, 20))]
    text = "\n".join(sensitivity_lines(pd.DataFrame(rows, columns=COLUMNS)))
    assert "- **as declared** (the status): a vs b (3 of 10 not ok): -0.50" in text and "c vs b (7 of 20 not ok)" in text
    same = "\n".join(sensitivity_lines(pd.DataFrame(rows[:1] * 2, columns=COLUMNS)))
    assert "(the status; 3 of 10 not ok): a vs b: -0.50" in same
