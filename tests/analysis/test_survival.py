"""Time to learn: Kaplan-Meier medians by hand, the log-rank test against statsmodels, the table and findings."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from statsmodels.duration.survfunc import survdiff

from suite.analysis.analyze import analyze
from suite.analysis.survival import km, logrank, times

from test_analyze import write_run


def run(first, status="ok", steps=300, diverged=None):
    return {"status": status, "steps_to_learn": first, "steps_done": steps, "diverged_step": diverged}


def test_censoring_and_the_kaplan_meier_median_by_hand():
    runs = [run(50), run(100), run(None, "failed"), run(None, "diverged", 120, 120), run(200)]
    t, e = times(runs)
    assert list(t) == [50, 100, 300, 120, 200] and list(e) == [1, 1, 0, 0, 1]
    # S(50) = 4/5, S(100) = 4/5 * 3/4 = 0.6, (120 censored), S(200) = 0.6 * 1/2 = 0.3: the median is 200
    assert km(runs)["median"] == 200 and km(runs)["n_learned"] == 3
    never = km([run(None, "failed"), run(None, "failed")])
    assert never["n_learned"] == 0 and math.isnan(never["median"])


def test_logrank_is_statsmodels_survdiff():
    a = [run(50), run(60), run(80), run(None, "failed")]
    b = [run(150), run(200), run(None, "failed"), run(None, "failed")]
    ta, ea = times(a)
    tb, eb = times(b)
    chi2, p = survdiff(np.r_[ta, tb], np.r_[ea, eb], np.r_[[0] * 4, [1] * 4])
    assert logrank(a, b) == pytest.approx((chi2, p))
    assert all(math.isnan(x) for x in logrank([run(None, "failed")], [run(None, "failed")]))
    assert all(math.isnan(x) for x in logrank([run(30), run(30)], [run(30), run(30)]))  # no variance: no test


def test_the_learn_table_and_findings(tmp_path):
    firsts = {"preln": [150, 200, None], "layerscale": [50, 60, 80]}
    for variant, values in firsts.items():
        for seed, first in enumerate(values):
            folder = write_run(tmp_path, variant, 12, seed, status="ok" if first else "failed",
                               acc=0.9 if first else 0.1)
            s = json.loads((folder / "summary.json").read_text())
            s.update(steps_to_learn=first, steps_done=300)
            (folder / "summary.json").write_text(json.dumps(s))
    analyze(tmp_path, figures=True, formats=("csv", "md"))
    learn = pd.read_csv(tmp_path / "tables" / "learn.csv").set_index("variant")
    assert learn.loc["layerscale", "median"] == 60 and learn.loc["preln", "n_learned"] == 2
    assert learn.loc["layerscale", "logrank_p"] == pytest.approx(
        logrank([run(f) for f in firsts["layerscale"]], [run(f, "ok" if f else "failed") for f in firsts["preln"]])[1])
    text = (tmp_path / "findings.md").read_text()
    assert "- depth 12: median time to learn 60 steps [" in text and "(3/3 learned) vs 200 steps" in text
    assert "| layerscale | 60 [" in (tmp_path / "tables" / "learn.md").read_text()
    assert (tmp_path / "figures" / "time_to_learn.png").stat().st_size > 5_000


def _learned_at(root, variant, lr, seed, first):
    folder = write_run(root, variant, 12, seed, lr=lr)
    s = json.loads((folder / "summary.json").read_text())
    s.update({"steps_to_learn": first, "steps_done": 30, "train.eval_every": 10, "train.steps": 30})
    (folder / "summary.json").write_text(json.dumps(s))


def test_every_run_learning_at_its_first_evaluation_is_said_once(tmp_path):
    for variant in ("preln", "layerscale"):
        for seed in range(3):
            _learned_at(tmp_path / "all", variant, 1e-3, seed, 10)
            _learned_at(tmp_path / "all", variant, 1e-2, seed, 10)
    analyze(tmp_path / "all", figures=False, formats=("md",))
    text = (tmp_path / "all" / "findings.md").read_text()
    line = ("every run learned by its first evaluation (step 10): time to learn cannot tell these schemes apart at "
            "this evaluation schedule")
    assert text.count(line) == 1 and "median time to learn" not in text
    table = (tmp_path / "all" / "tables" / "learn.md").read_text()
    assert "Every run learned by its first evaluation (step 10)" in table
    # one rate where it tells nothing, one where it does: one line for the first, the medians for the second
    for variant in ("preln", "layerscale"):
        for seed in range(3):
            _learned_at(tmp_path / "mix", variant, 1e-3, seed, 10)
            _learned_at(tmp_path / "mix", variant, 1e-2, seed, 10 if variant == "layerscale" else 20 + 10 * (seed > 0))
    analyze(tmp_path / "mix", figures=False, formats=("md",))
    text = (tmp_path / "mix" / "findings.md").read_text()
    assert text.count(f"- time to learn: {line}") == 1 and text.count("median time to learn") == 1
    assert text.index(f"- time to learn: {line}") < text.index("train.lr = 0.01") < text.index("median time to learn")
