"""Learning-rate transfer across depth: best rate per depth, regret, the slope of the peak rate with its
jackknife interval, the contrast with the baseline, and the error rates of the words."""

from __future__ import annotations

import math

import numpy as np
import pytest

from suite.analysis import lrpeak
from suite.analysis.transfer import TRANSFER_MARGIN, drift, reading, transfer_table

KEYS = ["variant", "model.depth", "train.lr"]
RATES = [1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2]


def run(variant, depth, lr, seed, val, test=None, status="ok"):
    return {"variant": variant, "model.depth": depth, "train.lr": lr, "seed": seed, "status": status,
            "val_acc": val, "test_acc": val if test is None else test, "model.num_classes": 10}


def curve(peak: float, lr: float) -> float:
    """An accuracy that peaks at ``peak`` and falls 0.1 per doubling away from it."""
    return 0.9 - 0.1 * abs(math.log2(lr / peak))


def runs_where_the_peak_moves(seeds=3, noise=0.0, centred=False):
    """preln: its best rate halves per doubling of depth; flat: the best rate stays at 4e-3. With
    ``centred`` the noise averages to 0 over the seeds at every rate (means, best rates and regrets as
    without noise, yet leaving a seed out moves the curve)."""
    rng = np.random.default_rng(1)
    out = []
    for depth, shift in ((4, 1.0), (8, 0.5), (16, 0.25)):
        for lr in RATES:
            errors = noise * rng.standard_normal(seeds)
            errors = errors - errors.mean() if centred else errors
            for s in range(seeds):
                e = errors[s]
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
    assert t.loc[("flat", 16), "slope"] == pytest.approx(0.0, abs=1e-12) and t.loc[("flat", 16), "regret"] == 0.0
    # the curves are symmetric about a tested rate, so the fitted peak is that rate
    assert list(t["peak_lr"]) == pytest.approx(list(t["best_lr"]))
    # no noise: every resample chooses the same rates, so the bootstrap intervals are points; leaving a
    # seed out changes nothing, so the jackknife gives no interval (rather than a zero-width one)
    assert t.loc[("preln", 16), "best_lr_low"] == pytest.approx(2e-3)
    assert t.loc[("preln", 16), "best_lr_high"] == pytest.approx(2e-3)
    assert t["slope_low"].isna().all() and (t["n_seeds_min"] == 3).all() and (t["best_lr_at_edge"] == "").all()
    assert t.loc[("flat", 4), "slope_vs_base"] == pytest.approx(1.0)
    assert t.loc[("flat", 4), "drift_vs_base"] == "too few seeds"
    assert t.loc[("preln", 4), "drift_vs_base"] == "" and math.isnan(t.loc[("preln", 4), "slope_vs_base"])
    assert t.loc[("preln", 4), "slope_step"] == pytest.approx(0.5)  # rates 2x apart over two doublings of depth


def test_bootstrap_intervals_cover_the_point_and_widen_with_noise():
    t = transfer_table(runs_where_the_peak_moves(seeds=4, noise=0.08), KEYS, "preln")
    for _, r in t.iterrows():
        assert r["best_lr_low"] <= r["best_lr"] <= r["best_lr_high"]
        assert {r["best_lr_low"], r["best_lr_high"]} <= set(RATES)
        assert r["slope_low"] < r["slope"] < r["slope_high"]
        if not math.isnan(r["regret_low"]):
            assert r["regret_low"] <= r["regret_high"]
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

    for i, r in enumerate(runs_where_the_peak_moves(seeds=4, noise=0.01, centred=True)):
        folder = tmp_path / "runs" / f"r{i:04d}"
        folder.mkdir(parents=True)
        r = {**r, "schema": 1, "run_id": f"r{i:04d}", "ablation": "demo", "model.residual": "preln",
             "data.name": "mnist5k", "steps_done": 10, "step_time_ms": 1.0}
        (folder / "summary.json").write_text(json.dumps(r))
    analyze(tmp_path)
    md = (tmp_path / "tables" / "transfer.md").read_text()
    assert "Learning-rate transfer across depth" in md and "Best-rate slope over depth" in md
    assert "falls with depth (3 depths)" in md and "transfers (3 depths)" in md
    assert (tmp_path / "tables" / "transfer.csv").exists() and (tmp_path / "tables" / "transfer.tex").exists()
    for name in ("best_lr_vs_depth", "val_vs_lr_by_depth"):
        assert (tmp_path / "figures" / f"{name}.png").stat().st_size > 1000
    text = (tmp_path / "findings.md").read_text()
    assert "## Learning-rate transfer across depth" in text
    assert "Best rate falls with depth (retune when deeper): preln." in text
    assert "depth 16: using depth 4's best rate (0.008) instead of this depth's own costs +20.0 points" in text


def test_one_seed_gives_points_without_intervals():
    t = transfer_table(runs_where_the_peak_moves(seeds=1), KEYS, "preln")
    assert t["best_lr_low"].isna().all() and t["slope_low"].isna().all() and t["regret_low"].isna().all()
    assert t.set_index(["variant", "model.depth"]).loc[("preln", 4), "slope"] == pytest.approx(-1.0)


def test_reading_needs_strict_inclusion_a_margin_wider_than_a_grid_step_and_four_seeds():
    import pandas as pd

    def rows(low, high, edge="", seeds=4, step=0.5):
        return pd.DataFrame([{"slope": (low + high) / 2, "slope_low": low, "slope_high": high, "best_lr_at_edge": edge,
                              "n_seeds_min": seeds, "slope_step": step}])

    assert TRANSFER_MARGIN == 0.75
    assert reading(rows(-0.5, 0.5)) == "transfers"
    assert reading(rows(-0.75, 0.5)) == "undecided"  # strict: an end on the margin is not inside it
    assert reading(rows(-0.7, 0.7, step=1.0)) == "grid too coarse"  # one step moves the slope by 1 > 0.75
    assert reading(rows(-1.5, 0.0)) == "undecided"  # contains 0, yet allows a fall of 2^1.5 per doubling
    assert reading(rows(-1.0, -0.5)) == "falls with depth"
    assert reading(rows(0.5, 1.0)) == "rises with depth"
    assert reading(rows(-1.0, -0.5, seeds=3)) == "too few seeds"
    assert reading(rows(0.0, 0.0, edge="highest")) == "at the grid's edge"
    assert reading(rows(math.nan, math.nan).assign(slope=0.0)) == "no interval"


def test_the_peak_of_a_quadratic_between_tested_rates_and_the_grid_step_by_hand():
    rates = 2.0 ** np.arange(8) * 1e-4
    true = math.log(3e-3)  # between 1.6e-3 and 3.2e-3
    means = -((np.log(rates) - true) ** 2)
    assert lrpeak.peak(rates, means) == pytest.approx(true)
    assert lrpeak.peak(rates, -((np.log(rates) - math.log(1e-4)) ** 2)) == pytest.approx(math.log(1e-4))  # edge
    curves = [lrpeak.Curve(float(d), rates, np.zeros((8, 2)), (0, 1)) for d in (4, 8, 16)]
    assert lrpeak.grid_step(curves) == pytest.approx(0.5)
    assert lrpeak.grid_step(curves[:2]) == pytest.approx(1.0)  # two depths a doubling apart


def _study(rng, b, n, noise, step_loss, asym, rates=2.0 ** np.arange(8) * 1e-4, depths=(4, 8, 16), start=3.0):
    """One simulated scheme: at each depth a curve peaking at a random place between tested rates, the
    peak moving by ``b`` per doubling of depth, losing ``step_loss`` per squared grid step from it (twice
    that above the peak when ``asym``), with a per-seed offset and run noise."""
    x = np.log2(depths)
    p = start + rng.random() + b * (x - x[0])
    curves = []
    for j, d in enumerate(depths):
        dk = np.arange(len(rates))[:, None] - p[j]
        c = np.where(dk > 0, 2 * step_loss, step_loss) if asym else step_loss
        v = 0.6 - c * dk ** 2 + 0.02 * rng.standard_normal((1, n)) + noise * rng.standard_normal((len(rates), n))
        curves.append(lrpeak.Curve(float(d), rates, v, tuple(range(n))))
    return curves


def _readings(rng, b, n, noise, asym, studies):
    import pandas as pd

    out = []
    for _ in range(studies):
        curves = _study(rng, b, n, noise, 0.02, asym)
        est, low, high = lrpeak.jackknife(lambda s: lrpeak.slope(curves, s), list(range(n)))
        edge = any(lrpeak.best_index(c.val.mean(axis=1)) in (0, len(c.rates) - 1) for c in curves)
        out.append(reading(pd.DataFrame([{"slope": est, "slope_low": low, "slope_high": high, "n_seeds_min": n,
                                          "best_lr_at_edge": "highest" if edge else "",
                                          "slope_step": lrpeak.grid_step(curves)}])))
    return out


@pytest.mark.parametrize("n,noise,asym", [(4, 0.03, False), (8, 0.03, True), (6, 0.04, False)])
def test_a_flat_best_rate_rarely_reads_falls_and_a_halving_one_never_reads_transfers(n, noise, asym):
    """The design's error rates (measured with 3,000 studies in each of 24 settings: docs/statistics.md): slope 0
    read "falls/rises" in 3.5-4.8% at 4, 6 and 8 seeds; slope -1 read "transfers" in at most 0.4%. The old bootstrap
    of the grid's best rates at 2 seeds read "falls/rises" 18% of the time at slope 0."""
    rng = np.random.default_rng(n)
    flat = _readings(rng, 0.0, n, noise, asym, 400)
    read = [r for r in flat if r != "at the grid's edge"]
    moved = sum(r in ("falls with depth", "rises with depth") for r in read) / len(read)
    assert moved <= 0.06
    halving = _readings(rng, -1.0, n, noise, asym, 200)
    assert sum(r == "transfers" for r in halving) / len(halving) <= 0.02
    assert sum(r == "falls with depth" for r in halving) / len(halving) >= 0.5  # and it has the power to say so


def test_drift_compares_each_scheme_with_the_baseline():
    rng = np.random.default_rng(5)
    base = _study(rng, -1.0, 6, 0.01, 0.02, False)
    assert drift(_study(rng, 0.0, 6, 0.01, 0.02, False), base)[3] == "less"
    steep = _study(rng, -2.0, 6, 0.01, 0.02, False, rates=2.0 ** np.arange(10) * 1e-5, start=6.0)
    diff, low, high, word = drift(steep, base)
    assert word == "more" and low < diff < high < 0
    assert drift(_study(rng, 0.0, 3, 0.01, 0.02, False), base)[3] == "too few seeds"
    assert drift(base[:1], base)[3] == ""  # one shared depth: no slope to compare


def test_a_rate_whose_every_run_errored_is_not_tried_so_a_depth_keeps_its_seeds_and_its_edge():
    """At depth 8 the top rate ended error in every seed: its empty column emptied the depth's seeds scored at every
    rate, so the depth left the slope in silence; and the edge rule counted it as tried, so a best rate at the top of
    those that ran read as interior."""
    from suite.results import best_rate

    runs = [r for r in runs_where_the_peak_moves(seeds=4, noise=0.02)
            if not (r["model.depth"] == 8 and r["train.lr"] == RATES[-1])]
    runs += [run(v, 8, RATES[-1], s, None, status="error") for v in ("preln", "flat") for s in range(4)]
    t = transfer_table(runs, KEYS, "preln").set_index(["variant", "model.depth"])
    assert t.loc[("preln", 8), "n_seeds"] == 4 and t.loc[("preln", 8), "n_lr"] == len(RATES) - 1
    assert (t["slope_depths"] == 3).all() and (t["n_seeds_min"] == 4).all()
    top = [run("preln", 8, lr, s, 0.5 + 0.1 * i) for i, lr in enumerate(RATES[:-1]) for s in range(2)]
    assert best_rate(top + [run("preln", 8, RATES[-1], s, None, status="error") for s in range(2)], "val").edge == \
        "highest"
