"""Figures by their structure (shared axes, limits, where the legend sits), not by their pixels; and
`suite analyze` on a folder where nothing finished."""

import argparse

import numpy as np
import pandas as pd
import pytest

from suite.analysis import figures as fig
from suite.cli import analyze as analyze_cli
from test_analyze import write_run

DEPTH, LR = "model.depth", "train.lr"
COLORS = fig.scheme_colors(["preln", "postln", "layerscale"])


def _no_overlap(a, b) -> bool:
    return a.x1 <= b.x0 or b.x1 <= a.x0 or a.y1 <= b.y0 or b.y1 <= a.y0


def test_a_folder_where_every_run_errored_analyzes_without_figures_or_a_traceback(tmp_path, capsys):
    for variant in ("preln", "layerscale"):
        for lr in (1e-3, 1e-2):
            for seed in range(2):
                write_run(tmp_path, variant, 6, seed, status="error", lr=lr, step_time=None)
    parser = argparse.ArgumentParser()
    analyze_cli.add_arguments(parser)
    assert analyze_cli.run(parser.parse_args([str(tmp_path)])) == 0
    assert "no figures: every run ended in error" in capsys.readouterr().err
    assert not (tmp_path / "figures").exists() and (tmp_path / "tables" / "lr.md").exists()


def test_block_profile_panels_each_have_their_own_y_range():
    rows = [{"variant": v, DEPTH: d, "block": b, "stream_rms": scale * (1 + b)}
            for v, scale in (("preln", 1.0), ("postln", 1e6), ("layerscale", 1e-3)) for d in (4, 8) for b in range(d)]
    figure = fig.block_profiles(pd.DataFrame(rows), "stream_rms", "RMS", COLORS, "t")
    axes = figure.axes[:3]
    assert not any(axes[0].get_shared_y_axes().joined(axes[0], other) for other in axes[1:])
    for ax, scale in zip(axes, (1.0, 1e6, 1e-3)):  # each panel spans its own data, not the widest panel's
        bottom, top = ax.get_ylim()
        assert bottom > scale / 10 and top < scale * 80
    fig.plt.close(figure)


def test_one_wide_interval_does_not_set_the_axis_of_a_quantity_vs_depth():
    frame = pd.DataFrame([{"variant": "preln", DEPTH: d, "grad_ratio_mean": m, "grad_ratio_ci_low": lo,
                                          "grad_ratio_ci_high": hi}
                          for d, m, lo, hi in ((4, 2.0, 1.5, 2.5), (8, 4.0, 3.0, 5.0), (16, 8.0, 1e-9, 1e9))])
    figure = fig.quantity_vs_depth(frame, "grad_ratio", "ratio", COLORS, "t", log_y=True)
    bottom, top = figure.axes[0].get_ylim()
    assert 0.1 < bottom < 2.0 and 8.0 < top < 200  # the means and a decade around them, not 1e-9 .. 1e9
    assert any("cut at its edge" in t.get_text() for t in figure.texts)
    fig.plt.close(figure)
    assert fig.robust_limits(np.array([2.0, 4.0]), np.array([1.5, 3.0]), np.array([2.5, 5.0]), log=True) == (
        pytest.approx(1.5 / (5 / 1.5) ** 0.05), pytest.approx(5.0 * (5 / 1.5) ** 0.05))  # narrow intervals: whole
    assert fig.robust_limits(np.array([np.nan]), np.array([1.0]), np.array([2.0]), log=False) is None


def test_the_accuracy_vs_lr_legend_covers_no_panel():
    rows = [{"variant": v, DEPTH: d, LR: lr, "n": 3, "n_not_ok": 0, "test_mean": acc, "test_ci_low": acc - 0.02,
             "test_ci_high": acc + 0.02}
            for v in COLORS for d in (6, 12) for lr, acc in ((1e-3, 0.9), (3e-3, 0.93), (1e-2, 0.95))]
    figure = fig.accuracy_vs_lr(pd.DataFrame(rows), COLORS, "t")
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    legend = figure.axes[-1].get_legend().get_window_extent(renderer)
    assert all(_no_overlap(legend, ax.get_window_extent(renderer)) for ax in figure.axes)
    fig.plt.close(figure)


def test_loss_curves_show_every_depth_one_panel_each(tmp_path):
    runs = []
    for variant in ("preln", "layerscale"):
        for depth in (2, 4, 8):
            folder = write_run(tmp_path, variant, depth, 0)
            runs.append({"variant": variant, DEPTH: depth, "seed": 0, "run_id": folder.name, "status": "ok",
                         "run_dir": f"runs/{folder.name}"})
    (path, _) = fig._loss_figure(tmp_path, runs, COLORS, tmp_path / "figures", "", "")
    assert path.name == "loss_vs_step.png"
    figure = fig.loss_curves({d: {"preln": [(pd.DataFrame({"step": [0, 10], "loss": [2.3, 1.0]}), "ok")]}
                              for d in (2, 4, 8)}, COLORS, "t")
    visible = [ax for ax in figure.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["depth 2", "depth 4", "depth 8"]
    fig.plt.close(figure)


def test_a_section_whose_runs_all_errored_beside_a_healthy_one_draws_the_healthy_one(tmp_path):
    """best_lr_vs_depth took min() of no rates and the analysis died before analysis.json (an outside review)."""
    from suite.analysis.analyze import analyze

    for seed in range(2):
        for depth in (6, 12):
            for lr in (1e-3, 3e-3):
                for v in ("preln", "layerscale"):
                    write_run(tmp_path / "a", v, depth, seed, lr=lr, extra={"model.layerscale.init": "a"})
                    write_run(tmp_path / "b", v, depth, seed + 10, status="error", lr=lr,
                              extra={"model.layerscale.init": "b"})
    analyze(tmp_path)
    names = {p.name for p in (tmp_path / "figures").glob("*.png")}
    assert "best_lr_vs_depth-model.layerscale.init-a.png" in names and (tmp_path / "analysis.json").is_file()


def test_names_that_safe_characters_would_merge_or_lengthen_past_a_file_name_stay_apart():
    """'ls a' and 'ls/a' wrote one scales_ls-a.png (the second overwrote the first); 90 CJK characters gave a file
    name over 255 bytes (OSError)."""
    from suite.analysis.markup import SAFE_BYTES, safe

    assert safe("preln") == "preln" and safe("-model.depth-48-train.lr-0.001") == "-model.depth-48-train.lr-0.001"
    assert safe("ls a") != safe("ls/a") and safe("ls a").startswith("ls-a-")
    long = "层" * 90
    assert len(safe(long).encode()) <= SAFE_BYTES and safe(long) != safe(long[:-1])


def test_accuracy_vs_lr_draws_the_interval_the_tables_give_the_same_cell():
    """It drew a t interval over a mixture of ok runs and runs at chance, clipped to [0, 1]: [0.0, 1.0] where
    accuracy_vs_depth drew [0.254, 0.915] for the same runs."""
    from suite.analysis.lr import lr_curves
    from suite.analysis.summary import summarize

    runs = [{"variant": "preln", "model.depth": 6, "train.lr": 1e-3, "seed": s, "status": st, "test_acc": acc,
             "model.num_classes": 10} for s, (st, acc) in enumerate([("ok", 0.9), ("ok", 0.85), ("diverged", None)])]
    keys = ["variant", "model.depth", "train.lr"]
    curve, table = lr_curves(runs, keys).iloc[0], summarize(runs, keys, "preln").iloc[0]
    assert (curve["test_ci_low"], curve["test_ci_high"]) == pytest.approx((table["acc_ci_low"], table["acc_ci_high"]))
    assert curve["test_mean"] == pytest.approx(table["acc_mean"])


def test_a_profile_flat_to_float_precision_is_drawn_flat():
    """A panel whose values differ in their last bits zoomed in on them: a jagged line, ticks '1, 1, 1, 0.999999'."""
    rows = [{"variant": v, DEPTH: 4, "block": b, "stream_rms": 1.0 + (1e-7 * (b % 2) if v == "postln" else 0.1 * b)}
            for v in ("preln", "postln") for b in range(4)]
    figure = fig.block_profiles(pd.DataFrame(rows), "stream_rms", "RMS", COLORS, "t")
    preln, postln = figure.axes[:2]
    bottom, top = postln.get_ylim()
    assert np.log10(top / bottom) >= fig.MIN_SPAN * 0.999  # a tenth of a decade at least
    bottom, top = preln.get_ylim()
    assert bottom > 0.9 and top < 1.5  # a panel that varies keeps its own range
    fig.plt.close(figure)
