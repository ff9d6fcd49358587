"""Learning-rate transfer across depth: best rate per depth, regret, slope, with bootstrap intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from suite.analysis.transfer import reading, transfer_table

KEYS = ["variant", "model.depth", "train.lr"]
RATES = [1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2]


def run(variant, depth, lr, seed, val, test=None, status="ok"):
    return {"variant": variant, "model.depth": depth, "train.lr": lr, "seed": seed, "status": status,
            "val_acc": val, "test_acc": val if test is None else test, "model.num_classes": 10}


def curve(peak: float, lr: float) -> float:
    """An accuracy that peaks at ``peak`` and falls 0.1 per doubling away from it."""
    return 0.9 - 0.1 * abs(math.log2(lr / peak))


def runs_where_the_peak_moves(seeds=3, noise=0.0):
    """preln: its best rate halves per doubling of depth; flat: the best rate stays at 4e-3."""
    rng = np.random.default_rng(1)
    out = []
    for depth, shift in ((4, 1.0), (8, 0.5), (16, 0.25)):
        for lr in RATES:
            for s in range(seeds):
                e = noise * rng.standard_normal()
                out.append(run("preln", depth, lr, s, curve(8e-3 * shift, lr) + e))
                out.append(run("flat", depth, lr, s, curve(4e-3, lr) + e))
    return out


def test_best_rate_slope_and_regret_when_the_peak_moves_and_when_it_does_not():
    t = transfer_table(runs_where_the_peak_moves(), KEYS, "preln").set_index(["variant", "model.depth"])
    assert [t.loc[("preln", d), "best_lr"] for d in (4, 8, 16)] == [8e-3, 4e-3, 2e-3]
    assert t.loc[("preln", 4), "slope"] == pytest.approx(-1.0)  # halves per doubling
    # at depth 16, depth 4's rate (8e-3) is two doublings off the peak: 0.2 lost
    assert t.loc[("preln", 16), "regret"] == pytest.approx(0.2)
    assert t.loc[("preln", 8), "regret"] == pytest.approx(0.1)
    assert t.loc[("preln", 4), "regret"] == 0.0
    assert t.loc[("preln", 8), "shallow_lr"] == 8e-3 and t.loc[("preln", 8), "shallow_depth"] == 4
    assert [t.loc[("flat", d), "best_lr"] for d in (4, 8, 16)] == [4e-3] * 3
    assert t.loc[("flat", 16), "slope"] == 0.0 and t.loc[("flat", 16), "regret"] == 0.0
    # no noise: every resample chooses the same rates, so the intervals are points
    assert t.loc[("preln", 16), "best_lr_low"] == pytest.approx(2e-3)
    assert t.loc[("preln", 16), "best_lr_high"] == pytest.approx(2e-3)
    assert (t.loc[("preln", 4), "slope_low"], t.loc[("preln", 4), "slope_high"]) == pytest.approx((-1.0, -1.0))
    assert (t["best_lr_at_edge"] == "").all()


def test_bootstrap_intervals_cover_the_point_and_widen_with_noise():
    t = transfer_table(runs_where_the_peak_moves(seeds=4, noise=0.08), KEYS, "preln")
    for _, r in t.iterrows():
        assert r["best_lr_low"] <= r["best_lr"] <= r["best_lr_high"]
        assert {r["best_lr_low"], r["best_lr_high"]} <= set(RATES)
        assert r["slope_low"] <= r["slope_high"]
        if not math.isnan(r["regret_low"]):
            assert r["regret_low"] <= r["regret_high"]
    assert (t["slope_high"] - t["slope_low"]).max() > 0  # noise moves some choices
    again = transfer_table(runs_where_the_peak_moves(seeds=4, noise=0.08), KEYS, "preln")
    assert t.equals(again)  # seeded: a rerun gives the same numbers


def test_chosen_on_validation_and_regret_measured_on_test():
    runs = []
    for depth in (4, 8):
        for s in range(2):
            runs += [run("preln", depth, 1e-3, s, val=0.8, test=0.5), run("preln", depth, 2e-3, s, val=0.7, test=0.9)]
    t = transfer_table(runs, KEYS, "preln").set_index("model.depth")
    assert t.loc[4, "best_lr"] == 1e-3 and t.loc[4, "test_at_best"] == pytest.approx(0.5)
    assert t.loc[4, "selected_on"] == "val"


def test_a_shallow_rate_not_run_deeper_leaves_the_regret_empty_and_diverged_runs_score_chance():
    runs = [run("preln", 4, lr, s, 0.9 if lr == 8e-3 else 0.5) for lr in (4e-3, 8e-3) for s in range(2)]
    runs += [run("preln", 8, lr, s, 0.6) for lr in (1e-3, 2e-3) for s in range(2)]
    runs += [run("preln", 8, 4e-3, s, 0.95, status="diverged") for s in range(2)]  # scores chance: 0.1
    t = transfer_table(runs, KEYS, "preln").set_index("model.depth")
    assert math.isnan(t.loc[8, "regret"]) and t.loc[8, "best_lr"] == 1e-3


def test_nothing_without_two_depths_or_a_rate_axis():
    runs = [run("preln", 4, lr, s, 0.5) for lr in RATES for s in range(2)]
    assert transfer_table(runs, KEYS, "preln") is None
    assert transfer_table(runs, ["variant", "model.depth"], "preln") is None


def test_analyze_writes_the_transfer_tables_figures_and_findings(tmp_path):
    import json

    from suite.analysis.analyze import analyze

    for i, r in enumerate(runs_where_the_peak_moves(seeds=2)):
        folder = tmp_path / "runs" / f"r{i:04d}"
        folder.mkdir(parents=True)
        r = {**r, "schema": 1, "run_id": f"r{i:04d}", "ablation": "demo", "model.residual": "preln",
             "data.name": "mnist5k", "steps_done": 10, "step_time_ms": 1.0}
        (folder / "summary.json").write_text(json.dumps(r))
    analyze(tmp_path)
    md = (tmp_path / "tables" / "transfer.md").read_text()
    assert "Learning-rate transfer across depth" in md and "Best-rate slope over depth" in md
    assert "-1.00 [-1.00, -1.00]" in md and "falls with depth" in md
    assert (tmp_path / "tables" / "transfer.csv").exists() and (tmp_path / "tables" / "transfer.tex").exists()
    for name in ("best_lr_vs_depth", "val_vs_lr_by_depth"):
        assert (tmp_path / "figures" / f"{name}.png").stat().st_size > 1000
    text = (tmp_path / "findings.md").read_text()
    assert "## Learning-rate transfer across depth" in text
    assert "Best rate within a factor 1.41 per doubling of depth over the whole bootstrap interval (exploratory): flat." in text
    assert "Best rate falls with depth (retune when deeper): preln." in text
    assert "depth 16: using depth 4's best rate (0.008) instead of this depth's own costs +20.0 points" in text


def test_one_seed_gives_points_without_intervals():
    t = transfer_table(runs_where_the_peak_moves(seeds=1), KEYS, "preln")
    assert t["best_lr_low"].isna().all() and t["slope_low"].isna().all() and t["regret_low"].isna().all()
    assert t.set_index(["variant", "model.depth"]).loc[("preln", 4), "slope"] == pytest.approx(-1.0)


def test_reading_needs_the_whole_interval_near_zero_to_say_transfers():
    import pandas as pd

    def rows(low, high, edge=""):
        return pd.DataFrame([{"slope": (low + high) / 2, "slope_low": low, "slope_high": high, "best_lr_at_edge": edge}])

    assert reading(rows(-0.5, 0.5)) == "transfers"
    assert reading(rows(-0.5, 0.5 + 1e-12)) == "transfers"  # log-scale rounding of a half-step slope
    assert reading(rows(-1.5, 0.0)) == "undecided"  # contains 0, yet allows a fall of 2^1.5 per doubling
    assert reading(rows(-1.0, -0.5)) == "falls with depth"
    assert reading(rows(0.5, 1.0)) == "rises with depth"
    assert reading(rows(0.0, 0.0, edge="highest")) == "at the grid's edge"
    assert reading(rows(math.nan, math.nan).assign(slope=0.0)) == "no interval"
