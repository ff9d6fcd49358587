"""suite.analysis (load, grouping, summary, tables, figures) and `suite analyze`, on run folders written
here per results/README.md."""

import argparse
import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from suite.analysis import stats
from suite.analysis import markup as report
from suite.analysis.analyze import analyze
from suite.grouping import group_keys
from suite.results import AnalysisError, AnalysisWarning, run_records
from suite.cli import analyze as analyze_cli
from suite.cli import main as analyze_cli_main


def write_run(root: Path, variant: str, depth: int, seed: int, status: str = "ok", acc: float | None = 0.9,
              lr: float = 1e-3, step_time: float | None = 10.0, ablation: str | None = "demo",
              scales: bool = False, steps: int = 30, val_acc: float | None = None, extra: dict | None = None) -> Path:
    """One finished run folder: summary.json (schema 1) and a short metrics.jsonl."""
    residual = {"layerscale": "layerscale"}.get(variant, variant)
    config = {"model.depth": depth, "model.residual": residual, "model.dim": 32, "model.layerscale.init": "cait",
              "train.lr": lr, "train.betas": [0.9, 0.999], "data.name": "mnist5k", "device": "cpu", "seed": seed,
              "model.num_classes": 10}
    run_id = f"{variant[:4]}{depth:03d}{seed:02d}{int(lr * 1e5):03d}"
    folder = root / "runs" / run_id
    folder.mkdir(parents=True)
    summary = {
        "schema": 1, "run_id": run_id, "ablation": ablation, "variant": variant, **config, "status": status,
        "diverged_step": 20 if status == "diverged" else None,
        "diverged_reason": "nonfinite" if status == "diverged" else None,
        "error": "RuntimeError: out of memory" if status == "error" else None, "steps_done": steps,
        "final_train_loss": 0.5, "test_acc": acc if status in ("ok", "failed") else None, "best_test_acc": acc,
        "val_acc": (acc if val_acc is None else val_acc) if status in ("ok", "failed") else None,
        "step_time_ms": step_time, "throughput": None, "peak_mem_mb": 1.0, "num_params": 100,
        # provenance differs between runs and must never become a group key
        "wall_s": 1.0 + seed, "git_commit": f"c{seed}", "hostname": f"host{seed}", "started_at": f"t{seed}",
        "suite_version": "0.1.0", "torch_version": "2", "python_version": "3", "device_name": "cpu",
        **(extra or {}),
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    lines = []
    for step in range(0, steps + 1, 10):
        loss = None if status == "diverged" and step >= 20 else 2.3 / (1 + step / 10) + 0.01 * seed  # as store writes NaN
        blocks = [{"block": b, "scale_mean": 1e-5 * (1 + step) * (1 + b) if scales else None, "scale_max": None,
                   "attn_ratio": 0.1, "mlp_ratio": 0.1, "out_rms": 1.0} for b in range(depth)]
        lines.append(json.dumps({"kind": "train", "step": step, "loss": loss, "lr": lr, "grad_norm": 1.0,
                                 "blocks": blocks}))
    lines.append(json.dumps({"kind": "eval", "step": steps, "test_loss": 0.4, "test_acc": acc}))
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture
def grid(tmp_path: Path) -> Path:
    """preln/layerscale at depth 6 and 12, a single-seed rezero at 6, rezero at 24 without a baseline.

    preln at depth 12 diverges every time; one layerscale run errors; one fails. Seeds 0-2 are
    shared, so layerscale is compared with preln by paired t-tests.
    """
    root = tmp_path / "demo"
    for seed, acc in enumerate([0.90, 0.91, 0.92]):
        write_run(root, "preln", 6, seed, acc=acc, step_time=10.0 + seed)
        write_run(root, "preln", 12, seed, status="diverged", step_time=20.0)
        write_run(root, "layerscale", 6, seed, acc=acc + 0.03 + 0.01 * (seed == 1), step_time=11.0 + seed,
                  scales=True)
    write_run(root, "layerscale", 6, 3, status="error", step_time=None)
    write_run(root, "layerscale", 12, 0, acc=0.92, scales=True)
    write_run(root, "layerscale", 12, 1, acc=0.93, scales=True)
    write_run(root, "layerscale", 12, 2, status="failed", acc=0.11, scales=True)
    write_run(root, "rezero", 6, 0, acc=0.85)
    write_run(root, "rezero", 24, 0, acc=0.80)
    write_run(root, "rezero", 24, 1, acc=0.82)
    return root


def quiet_analyze(root: Path, expect_warning: bool = True, **kw) -> pd.DataFrame:
    """``analyze`` without figures, expecting (and swallowing) its warnings."""
    kw.setdefault("figures", False)
    if not expect_warning:
        return analyze(root, **kw)
    with pytest.warns(AnalysisWarning):
        return analyze(root, **kw)


def row(summary: pd.DataFrame, variant: str, depth: int) -> pd.Series:
    sel = summary[(summary["variant"] == variant) & (summary["model.depth"] == depth)]
    assert len(sel) == 1
    return sel.iloc[0]


# ----------------------------------------------------------------------------- grouping and statistics


def test_group_keys_ignore_seed_provenance_and_variant_implied_keys(grid):
    runs = run_records(grid)
    assert group_keys(runs) == ["variant", "model.depth"]  # not model.residual, git_commit, hostname, seed
    assert group_keys(runs, by=["model.depth"]) == ["variant", "model.depth"]
    with pytest.raises(AnalysisError, match="did you mean 'model.depth'"):
        group_keys(runs, by=["model.dept"])
    with pytest.raises(AnalysisError, match="cannot be grouped by seed"):
        group_keys(runs, by=["seed"])


def test_how_a_run_was_executed_never_splits_a_group(grid):
    """Runs resumed with other --threads or on another device are the same runs (same run id)."""
    runs = run_records(grid)
    for i, r in enumerate(runs):
        r.update({"train.threads": 1 + i % 2, "device": ["cpu", "cuda"][i % 2], "data.num_workers": i % 3})
    assert group_keys(runs) == ["variant", "model.depth"]


def test_summary_values(grid):
    summary = quiet_analyze(grid)
    base6, ls6, ls12 = row(summary, "preln", 6), row(summary, "layerscale", 6), row(summary, "layerscale", 12)
    base12 = row(summary, "preln", 12)
    assert list(summary["variant"]) == ["preln", "preln", "layerscale", "layerscale", "rezero", "rezero"]
    assert (ls6["n"], ls6["n_ok"], ls6["n_error"]) == (3, 3, 1)  # the error run is out of the rates
    assert base6["acc_mean"] == pytest.approx(0.91) and base6["acc_std"] == pytest.approx(0.01)
    # every run ok: the t interval of the scores
    assert (base6["acc_ci_low"], base6["acc_ci_high"]) == pytest.approx(stats.t_interval([0.90, 0.91, 0.92]))
    # One score: diverged and failed runs at chance (1/10), ok runs as measured; survivors apart.
    assert base12["acc_mean"] == pytest.approx(0.1) and base12["acc_n"] == 3 and base12["ok_acc_n"] == 0
    assert ls12["acc_mean"] == pytest.approx((0.92 + 0.93 + 0.1) / 3)
    assert ls12["ok_acc_mean"] == pytest.approx(0.925) and ls12["ok_acc_n"] == 2
    # Paired t-tests on seed-matched differences, not Welch.
    ls6_acc, base6_acc = [0.93, 0.95, 0.95], [0.90, 0.91, 0.92]
    # 3 pairs, every run ok: the SD pooled over the table's all-ok arms (here only depth 6's two: 2 df, the
    # paired t's own); layerscale at 12 has a failed run and keeps its own paired t
    assert ls6["acc_test"] == "paired t, pooled SD (2 df)" and ls6["acc_pairs"] == 3 and ls6["acc_diff_df"] == 2
    assert ls12["acc_test"] == "paired t" and ls6["acc_verdict"] == ls12["acc_verdict"] == "too few seeds"
    assert ls6["acc_p"] == pytest.approx(sps.ttest_rel(ls6_acc, base6_acc).pvalue)
    # the printed interval is simultaneous over the table's 2 score tests: 97.5%, which agrees with Bonferroni
    ci = sps.ttest_rel(ls6_acc, base6_acc).confidence_interval(1 - 0.05 / 2)
    assert (ls6["acc_diff"], ls6["acc_diff_ci_low"], ls6["acc_diff_ci_high"]) == pytest.approx(
        (np.mean(ls6_acc) - np.mean(base6_acc), ci.low, ci.high))
    assert ls12["acc_p"] == pytest.approx(sps.ttest_rel([0.92, 0.93, 0.1], [0.1, 0.1, 0.1]).pvalue)
    # Rates: diverged, failed and not ok, each with Wilson intervals and Fisher tests.
    assert (ls12["n_failed"], ls12["failed_rate"]) == (1, pytest.approx(1 / 3))
    assert ls12["diverged_p"] == pytest.approx(2 / 20)  # 0/3 vs 3/3
    assert ls12["not_ok_p"] == pytest.approx(sps.fisher_exact([[1, 2], [3, 0]]).pvalue)
    assert ls12["failed_p"] == pytest.approx(1.0)
    assert (base12["not_ok_ci_low"], base12["not_ok_ci_high"]) == stats.wilson_interval(3, 3)
    assert base12["diverged_step_median"] == 20
    # Bonferroni over this table's rate tests: [1 (ls 6), 0.1 (ls 12), 1 (rezero 6)], rezero 24 has no test
    assert ls12["diverged_p_adj"] == pytest.approx(0.3)
    # The score family: ls 6 and ls 12 (rezero 6, a single run, gets no test).
    assert math.isnan(row(summary, "rezero", 6)["acc_p"]) and ls6["acc_p_m"] == 2
    assert [ls6["acc_p_adj"], ls12["acc_p_adj"]] == pytest.approx([2 * ls6["acc_p"], min(1, 2 * ls12["acc_p"])])
    assert (ls6["acc_diff_ci_low"] > 0) == (ls6["acc_p_adj"] < 0.05)
    # Step time: medians only, with how many runs were contended; no ratio.
    assert ls6["step_time_ms"] == 12.0 and ls6["n_timed"] == 3 and ls6["n_contended"] == 0
    assert "overhead" not in summary.columns


def test_welch_when_seeds_do_not_match(tmp_path):
    for seed, acc in enumerate([0.80, 0.82, 0.81]):
        write_run(tmp_path, "preln", 6, seed, acc=acc)
        write_run(tmp_path, "layerscale", 6, seed + 10, acc=acc + 0.05 + 0.01 * seed)
    ls = row(quiet_analyze(tmp_path, expect_warning=False), "layerscale", 6)
    assert ls["acc_test"] == "Welch t" and ls["acc_pairs"] == 0
    assert ls["acc_p"] == pytest.approx(sps.ttest_ind([0.85, 0.88, 0.88], [0.80, 0.82, 0.81], equal_var=False).pvalue)


def test_single_seed_and_missing_baseline(grid):
    summary = quiet_analyze(grid)
    single = row(summary, "rezero", 6)
    assert single["acc_n"] == 1 and math.isnan(single["acc_ci_low"]) and math.isnan(single["acc_std"])
    orphan = row(summary, "rezero", 24)
    assert not orphan["has_baseline"]
    assert all(math.isnan(orphan[c]) for c in ("acc_p", "diverged_p", "not_ok_p", "not_ok_p_adj"))


def test_summary_csv_columns(grid):
    quiet_analyze(grid)
    columns = pd.read_csv(grid / "tables" / "summary.csv").columns
    wanted = ["variant", "model.depth", "n", "n_error", "acc_n", "acc_mean", "acc_std", "acc_ci_low", "acc_ci_high",
              "acc_test", "acc_pairs", "acc_diff", "acc_diff_ci_low", "acc_diff_ci_high", "acc_p", "acc_p_adj",
              "n_not_ok", "not_ok_rate", "not_ok_p_adj", "n_diverged", "diverged_rate", "diverged_ci_low",
              "diverged_p_adj", "n_failed", "failed_rate", "failed_p_adj", "ok_acc_mean", "ok_acc_ci_low",
              "step_time_ms", "n_contended"]
    assert set(wanted) <= set(columns)
    runs = pd.read_csv(grid / "runs.csv")
    assert len(runs) == 16 and {"git_commit", "test_acc", "status", "run_dir", "score", "val_score"} <= set(runs.columns)
    failed = runs[runs["status"] == "failed"].iloc[0]
    assert failed["test_acc"] == pytest.approx(0.11) and failed["score"] == pytest.approx(0.1)  # one score: chance


# ----------------------------------------------------------------------------- tables


def test_markdown_cells(grid):
    quiet_analyze(grid)
    md = (grid / "tables" / "summary.md").read_text()
    assert "| scheme | depth 6 | depth 12 | depth 24 |" in md
    low, high = (100 * x for x in stats.score_interval([0.90, 0.91, 0.92], [True] * 3, 0.1))
    floor_high = 100 * stats.score_interval([0.1] * 3, [False] * 3, 0.1)[1]
    assert (f"| preln (baseline) | 91.0 [{low:.1f}, {high:.1f}]<br>not ok 0/3 | 10.0 [10.0, {floor_high:.1f}]<br>"
            f"not ok 3/3 | not run |") in md
    assert "**94.3** [" in md and "]<br>not ok 0/3 · err 1" in md  # best at depth 6; 3 seeds: no mark
    assert "**65.0** [" in md and "<br>not ok 1/3" in md  # a failed run scores chance
    assert "85.0 [no interval: 1 run]<br>not ok 0/1" in md
    assert "No `preln` runs at depth 24: no tests there." in md
    assert "| layerscale | 12.0 ms | 10.0 ms | not run |" in md and "×" not in md  # medians, no ratios


def test_latex_is_escaped_and_compiles(grid, tmp_path):
    quiet_analyze(grid)
    tex = (grid / "tables" / "summary.tex").read_text()
    assert r"\toprule" in tex and r"\textbf{94.3}" in tex and r"$^{\dagger}$" in tex
    assert "---" in tex and r"score (\%)" in tex and r"[95\% interval: Student-t when every run is ok" in tex
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex not installed")
    (tmp_path / "doc.tex").write_text(report.standalone_latex(tex))
    done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]


def test_reruns_are_byte_identical(grid):
    quiet_analyze(grid)
    files = ["runs.csv", "findings.md", *(f"tables/{kind}.{fmt}" for kind in ("summary", "trends", "aggregate")
                                          for fmt in ("csv", "md", "tex"))]
    first = {f: (grid / f).read_bytes() for f in files}
    quiet_analyze(grid)
    assert {f: (grid / f).read_bytes() for f in files} == first


def test_formats_select_files(grid):
    quiet_analyze(grid, formats=("md",))
    assert (grid / "tables" / "summary.md").exists()
    assert not (grid / "tables" / "summary.csv").exists() and not (grid / "tables" / "summary.tex").exists()
    with pytest.raises(AnalysisError, match="unknown table format 'html'"):
        analyze(grid, formats=("html",), figures=False)


# ----------------------------------------------------------------------------- refusals


def test_mixed_ablations_are_refused(tmp_path):
    write_run(tmp_path / "a", "preln", 6, 0, ablation="deep")
    write_run(tmp_path / "b", "preln", 6, 0, ablation="wide")
    with pytest.raises(AnalysisError, match=r"mixes runs of 2 ablations \(deep: 1 runs, wide: 1 runs\).*"
                                            r"e.g. suite analyze .*/a"):
        analyze(tmp_path, figures=False)
    # both in one runs/ folder: the fix is a folder each, not this folder again
    write_run(tmp_path / "c", "preln", 6, 0, ablation="deep")
    write_run(tmp_path / "c", "preln", 6, 1, ablation="wide")
    with pytest.raises(AnalysisError, match=r"give each ablation its own results folder"):
        analyze(tmp_path / "c", figures=False)


def test_missing_baseline_is_one_line_exit_2(tmp_path, capsys):
    for seed in range(2):
        write_run(tmp_path, "postln", 6, seed)
        write_run(tmp_path, "rezero", 6, seed)
    parser = argparse.ArgumentParser()
    analyze_cli.add_arguments(parser)
    assert analyze_cli.run(parser.parse_args([str(tmp_path), "--no-figures"])) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--baseline VARIANT" in err and "postln, rezero" in err
    assert analyze_cli.run(parser.parse_args([str(tmp_path), "--no-figures", "--baseline", "postl"])) == 2
    assert "did you mean 'postln'" in capsys.readouterr().err
    assert analyze_cli.run(parser.parse_args([str(tmp_path), "--no-figures", "--baseline", "postln"])) == 0
    assert "wrote" in capsys.readouterr().out


def test_empty_folder_and_duplicates(tmp_path):
    with pytest.raises(AnalysisError, match="no usable summary.json found"):
        analyze(tmp_path, figures=False)
    with pytest.raises(AnalysisError, match="no such folder"):
        analyze(tmp_path / "nope", figures=False)
    src = write_run(tmp_path, "preln", 6, 0)
    shutil.copytree(src, tmp_path / "copy")
    with pytest.raises(AnalysisError, match="appears twice"):
        analyze(tmp_path, figures=False)


# ----------------------------------------------------------------------------- power and frontier


def test_plan_gives_the_seeds_each_comparison_needs(grid, capsys):
    from suite.analysis.plan import plan_table
    from suite.cli import plan as plan_cli

    frame = plan_table(grid, effect=0.05)
    ls6 = frame[frame["comparison"].str.startswith("layerscale vs preln, depth 6") & (frame["endpoint"] == "score")].iloc[0]
    sd = np.std(np.array([0.93, 0.95, 0.95]) - np.array([0.90, 0.91, 0.92]), ddof=1)
    assert ls6["sd"] == pytest.approx(sd) and ls6["planning_sd"] == pytest.approx(stats.sd_upper(sd, 2))
    assert ls6["alpha"] == pytest.approx(0.025)  # one of the 2 score comparisons of its table
    assert ls6["seeds_needed"] == stats.paired_seeds_needed(0.05, stats.sd_upper(sd, 2), 0.8, 0.025)
    rate = frame[frame["comparison"].str.startswith("layerscale vs preln, depth 12") & (frame["endpoint"] == "not_ok_rate")].iloc[0]
    assert rate["min_p"] == pytest.approx(0.1)  # 3 vs 3: Fisher can never reach 0.05
    parser = argparse.ArgumentParser()
    plan_cli.add_arguments(parser)
    assert plan_cli.run(parser.parse_args([str(grid)])) == 0
    assert "| layerscale vs preln, depth 6 | score | exploratory |" in capsys.readouterr().out
    assert plan_cli.run(parser.parse_args([str(grid), "--power", "2"])) == 2
    assert "--power 2.0: expected a probability" in capsys.readouterr().err


def test_trends_and_aggregates(grid):
    quiet_analyze(grid)
    trends = pd.read_csv(grid / "tables" / "trends.csv").set_index("variant")
    # preln: 91% at depth 6, 10% at depth 12 (diverged at chance): -81 points per doubling, exactly.
    assert trends.loc["preln", "acc_slope"] == pytest.approx(-0.81)
    ls_x = np.log2([6, 6, 6, 12, 12, 12])
    ls_y = np.array([0.93, 0.95, 0.95, 0.92, 0.93, 0.1])
    assert trends.loc["layerscale", "acc_slope"] == pytest.approx(sps.linregress(ls_x, ls_y).slope)
    # the interaction, paired by seed: (ls 12 - preln 12) - (ls 6 - preln 6) per seed
    per_seed = [(0.92 - 0.1) - (0.93 - 0.90), (0.93 - 0.1) - (0.95 - 0.91), (0.1 - 0.1) - (0.95 - 0.92)]
    ls = trends.loc["layerscale"]
    assert ls["acc_interaction"] == pytest.approx(np.mean(per_seed)) and ls["acc_interaction_test"] == "paired t"
    assert ls["acc_interaction_kind"] == "depth 6->12"
    # preln sits at chance in every run at depth 12: a floor, so an estimate but no test
    assert ls["bound"] == "floor" and math.isnan(ls["acc_interaction_p"])
    assert math.isnan(trends.loc["layerscale", "not_ok_slope_diff"])  # preln is separated by depth
    agg = pd.read_csv(grid / "tables" / "aggregate.csv").set_index("variant")
    # P(improvement) only from seed-matched pairs, and only at 10 or more: here 6
    assert agg.loc["layerscale", "poi_pairs"] == 6 and math.isnan(agg.loc["layerscale", "poi"])
    assert agg.loc["preln", "iqm"] == pytest.approx(np.mean([0.1, 0.1, 0.9, 0.91]))  # 6 runs, 1 cut per end


def test_findings_without_a_primary_are_estimates_without_verdicts(grid):
    quiet_analyze(grid)
    text = (grid / "findings.md").read_text()
    assert text.index("No primary comparison is declared") < text.index("## Exploratory comparisons")
    summary = pd.read_csv(grid / "tables" / "summary.csv")
    ls6 = summary[(summary["variant"] == "layerscale") & (summary["model.depth"] == 6)].iloc[0]
    assert (f"- depth 6: score 94.3% vs 91.0%, difference +3.3 points (simultaneous 95% CI "
            f"[{100 * ls6['acc_diff_ci_low']:+.1f}, {100 * ls6['acc_diff_ci_high']:+.1f}]; paired t, pooled SD (2 df) "
            f"on 3 seed pairs, adjusted p = 0.020, Bonferroni x2; fewer than 4 seeds per arm: an estimate, "
            f"no verdict)") in text
    assert ("- depth 12: not ok 1/3 vs 3/3 (Fisher's exact test, adjusted p = 1.000, Bonferroni x3; 3 vs 3 runs can "
            "reach p = 0.10 at best, so no rate difference can show here)") in text
    assert "- depth 6: score 85.0% vs 91.0%, difference -6.0 points (no interval; Welch t, no test)" in text
    for verdict in ("no detectable difference", "higher than", "lower than", "holds up better"):
        assert verdict not in text


@pytest.fixture
def lr_grid(tmp_path: Path) -> Path:
    root = tmp_path / "lr"
    plan = {  # (variant, depth, lr) -> statuses of three seeds
        ("preln", 6, 1e-3): ["ok", "ok", "ok"],
        ("preln", 6, 3e-3): ["ok", "ok", "diverged"],
        ("preln", 6, 1e-2): ["ok", "diverged", "diverged"],
        ("preln", 12, 1e-3): ["diverged"] * 3,
        ("preln", 12, 3e-3): ["diverged"] * 3,
        ("preln", 12, 1e-2): ["diverged"] * 3,
        ("layerscale", 6, 1e-3): ["ok"] * 3,
        ("layerscale", 6, 3e-3): ["ok"] * 3,
        ("layerscale", 6, 1e-2): ["ok"] * 3,
        ("layerscale", 12, 1e-3): ["ok", "ok", "failed"],
        ("layerscale", 12, 3e-3): ["diverged", "failed", "ok"],
        ("layerscale", 12, 1e-2): ["diverged"] * 3,
    }
    for (variant, depth, lr), statuses in plan.items():
        for seed, status in enumerate(statuses):
            write_run(root, variant, depth, seed, status=status, lr=lr, acc=0.9 + 0.01 * seed)
    return root


def test_learning_rate_table_best_rate_sensitivity_frontier(lr_grid):
    summary = analyze(lr_grid, figures=False)
    assert summary.attrs["keys"] == ["variant", "model.depth", "train.lr"]
    lr = pd.read_csv(lr_grid / "tables" / "lr.csv").set_index(["variant", "model.depth"])
    assert (lr["selected_on"] == "val").all()
    p6, l6, p12, l12 = (lr.loc[k] for k in [("preln", 6), ("layerscale", 6), ("preln", 12), ("layerscale", 12)])
    # preln at depth 6: mean validation score .91 / .6367 / .3667 (diverged runs at chance, 0.1)
    assert (p6["best_lr"], p6["best_lr_at_edge"], p6["val_at_best"]) == (1e-3, "lowest", pytest.approx(0.91))
    # sensitivity: the mean shortfall from the best, as a share of the best's gain over chance (0.91 - 0.1)
    assert p6["test_mean"] == pytest.approx(0.91) and p6["sens_mean"] == pytest.approx(
        (0 + (0.91 - 0.6366667) + (0.91 - 0.3666667)) / 3 / 0.81)
    assert p6["sens_n"] == 3 and p6["sens_ci_low"] < p6["sens_mean"] < p6["sens_ci_high"]
    # layerscale at depth 6 trains at every rate: sensitivity 0, ties go to the smaller rate
    assert (l6["best_lr"], l6["sens_mean"]) == (1e-3, pytest.approx(0.0))
    assert l6["test_diff"] == pytest.approx(0.0) and math.isnan(l6["test_p"])  # identical seeds: no spread, no test
    # depth 12: preln diverged everywhere (at chance); layerscale best at 1e-3: .90, .91 and a failed run at chance
    assert p12["test_mean"] == pytest.approx(0.1) and math.isnan(p12["lr_stable_max"])
    assert l12["best_lr"] == 1e-3 and l12["test_mean"] == pytest.approx((0.90 + 0.91 + 0.1) / 3)
    # cross-fitted: seed 1 is scored at 3e-3, the rate seeds 0 and 2 chose (0.51 > 0.50), where it failed
    assert l12["test_diff"] == pytest.approx((0.8 + 0.0 + 0.0) / 3) and l12["test_pairs"] == 3
    assert l12["test_xfit_lrs"] == "0.001 / 0.003"
    best12 = (0.90 + 0.91 + 0.1) / 3
    assert l12["sens_mean"] == pytest.approx((best12 - (0.6366667 + 0.3733333 + 0.1) / 3) / (best12 - 0.1))
    # frontier: the largest rate with at most half of the runs not ok
    assert (p6["lr_stable_max"], bool(p6["censored"])) == (3e-3, False)
    assert (l6["lr_stable_max"], bool(l6["censored"])) == (1e-2, True)
    assert l12["lr_stable_max"] == 1e-3
    md = (lr_grid / "tables" / "lr.md").read_text()
    for caption in ("### At the best learning rate", "### LR sensitivity", "### Stability frontier"):
        assert caption in md
    # the frontier: a Firth dose-response estimate, censored where the rates cannot place it; the step beside it
    assert "| preln (baseline) | 0.0059 [0.0014, 0.025]<br>step: 0.003 | below 0.001<br>step: — |" in md
    assert "| layerscale | above 0.01<br>step: ≥0.01 | 0.0016 [0.0004, 0.0067]<br>step: 0.001 |" in md
    assert "lr 0.001 (lowest tested)" in md
    assert (lr_grid / "tables" / "lr.tex").read_text().count("\\begin{table}") == 3
    text = (lr_grid / "findings.md").read_text()
    assert text.index("### Each scheme at its own best learning rate") < text.index("### At each learning rate")
    assert ("- depth 12: stability frontier (the rate where half of the runs end not ok, Firth logistic regression, "
            "95% CI) 0.0016 [0.0004, 0.0067] vs below the rates tested; curves differ: Wald test") in text
    assert "- depth 12: LR sensitivity not compared (preln never beat chance at any rate)" in text
    assert not p12["above_chance"] and l12["above_chance"]
    md = (lr_grid / "tables" / "summary.md").read_text()
    assert "### Accuracy and stability (train.lr = 0.001)" in md
    # Bonferroni families are per table (per learning rate), not over the whole grid
    for rate in (1e-3, 3e-3, 1e-2):
        part = summary[summary["train.lr"] == rate]
        assert part["diverged_p_adj"].to_numpy() == pytest.approx(stats.bonferroni(part["diverged_p"]), nan_ok=True)


def test_the_best_rate_is_chosen_on_validation_never_on_test(tmp_path):
    for variant in ("preln", "layerscale"):
        for seed in range(3):
            # 1e-3 looks best on validation, 1e-2 would look best on test
            write_run(tmp_path, variant, 6, seed, lr=1e-3, acc=0.80 + 0.01 * seed, val_acc=0.95)
            write_run(tmp_path, variant, 6, seed, lr=1e-2, acc=0.99, val_acc=0.90 + 0.01 * seed)
    analyze(tmp_path, figures=False)
    lr = pd.read_csv(tmp_path / "tables" / "lr.csv")
    assert (lr["best_lr"] == 1e-3).all() and lr["test_mean"].to_numpy() == pytest.approx([0.81, 0.81])


def test_runs_without_a_validation_split_are_selected_on_test_and_say_so(tmp_path):
    for seed in range(2):
        for lr in (1e-3, 1e-2):
            for variant in ("preln", "layerscale"):
                folder = write_run(tmp_path, variant, 6, seed, lr=lr, acc=0.5 + lr * 10)
                s = json.loads((folder / "summary.json").read_text())
                s["val_acc"] = None
                (folder / "summary.json").write_text(json.dumps(s))
    analyze(tmp_path, figures=False)
    lr = pd.read_csv(tmp_path / "tables" / "lr.csv")
    assert (lr["selected_on"] == "test").all() and (lr["best_lr"] == 1e-2).all()
    assert "TEST (the runs have no validation split)" in (tmp_path / "tables" / "lr.md").read_text()


# ----------------------------------------------------------------------------- figures (slow-ish: once)


def test_figures_are_written(grid, capsys):
    parser = argparse.ArgumentParser()
    analyze_cli.add_arguments(parser)
    assert analyze_cli.run(parser.parse_args([str(grid), "--formats", "csv"])) == 0
    assert "warning: 1 run(s) ended in error" in capsys.readouterr().err
    names = {p.name for p in (grid / "figures").iterdir()}
    for stem in ("accuracy_vs_depth", "not_ok_vs_depth", "scales_layerscale", "loss_vs_step"):
        assert {f"{stem}.png", f"{stem}.pdf"} <= names
    assert not any(n.startswith("accuracy_vs_lr") for n in names)  # no learning-rate axis here
    assert "scales_preln.png" not in names  # no scales logged for Pre-LN
    assert (grid / "figures" / "accuracy_vs_depth.png").stat().st_size > 10_000


def test_learning_rate_figures_are_written(lr_grid):
    analyze(lr_grid, formats=["csv"])
    names = {p.name for p in (lr_grid / "figures").iterdir()}
    assert {"accuracy_vs_lr.png", "accuracy_vs_lr.pdf", "frontier_vs_depth.png", "frontier_vs_depth.pdf"} <= names
    assert (lr_grid / "figures" / "accuracy_vs_lr.png").stat().st_size > 10_000


def test_propagation_profiles_average_norms_geometrically_and_cosines_arithmetically(tmp_path):
    from suite import store
    from suite.analysis.propagation import profiles

    runs = []
    for seed, grad in ((0, 1e-8), (1, 1.0)):
        folder = tmp_path / "runs" / f"r{seed}"
        folder.mkdir(parents=True)
        lines = [{"kind": "forward", "block": 0, "stream_rms": 4.0 ** seed, "cls_cos": 0.2 + 0.4 * seed,
                  "mean_cos": 0.5},
                 {"kind": "backward", "block": 0, "grad_stream": grad, "grad_params": 0.0}]
        (folder / "propagation.jsonl").write_text("".join(store.metrics_line(x) for x in lines))
        runs.append({"status": "ok", "run_dir": f"runs/r{seed}", "variant": "postln", "seed": seed})
    out = profiles(tmp_path, runs, ["variant"])
    row = out.iloc[0]
    assert row["grad_stream"] == pytest.approx(1e-4)  # not 0.5: a vanishing seed stays visible on a log axis
    assert row["stream_rms"] == pytest.approx(2.0) and row["cls_cos"] == pytest.approx(0.4)
    assert math.isnan(row["grad_params"])  # zero norms have no logarithm: left out, not averaged as -inf
    (tmp_path / "runs" / "r2").mkdir()  # a run whose records are not here (the folder shared as runs.csv)
    runs.append({"status": "ok", "run_dir": "runs/r2", "variant": "preln", "seed": 0})
    assert set(profiles(tmp_path, runs, ["variant"])["variant"]) == {"postln"}  # was a KeyError
    assert profiles(tmp_path, runs[2:], ["variant"]).empty


# ----------------------------------------------------------------------------- no silent overwrites


def test_an_unfinished_sweep_warns_and_committed_outputs_need_force(grid, capsys):
    ids = [r.name for r in (grid / "runs").iterdir()]
    (grid / "run_ids.json").write_text(json.dumps(ids + ["notyetrun001", "notyetrun002"]))
    with pytest.warns(AnalysisWarning, match=r"the sweep is incomplete \(16 of 18 runs have a summary\)"):
        analyze(grid, figures=False)
    git = ["git", "-C", str(grid), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "findings.md", "tables"], check=True)
    subprocess.run([*git, "commit", "-qm", "reference"], check=True)
    before = (grid / "findings.md").read_text()
    assert analyze_cli_main(["analyze", str(grid), "--no-figures"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "would overwrite findings.md, tables, committed to git" in err
    assert "--force" in err and (grid / "findings.md").read_text() == before
    assert analyze_cli_main(["analyze", str(grid), "--no-figures", "--force"]) == 0
    assert "warning: the sweep is incomplete" in capsys.readouterr().err
    (grid / "run_ids.json").write_text(json.dumps(ids))  # finished: no question asked
    assert analyze_cli_main(["analyze", str(grid), "--no-figures"]) == 0
    assert "incomplete" not in capsys.readouterr().err


def test_a_difference_over_fewer_seeds_than_the_baselines_mean_says_so_from_a_table_read_back():
    """results/deep: frozen-0.025 ran 4 of preln's 8 seeds, so its paired difference (+28.5) is not the difference
    of the two means printed (71.9% - 46.0%); the line says whose seeds each is over. Read back from CSV the counts
    are numpy integers, which an isinstance(int) check missed, and the clause never printed."""
    from suite.analysis.findings import score_line

    frame = pd.read_csv(Path(__file__).parents[2] / "results/deep/tables/summary.csv")
    at = frame[frame["model.depth"] == 192].set_index("variant")
    line = score_line(at.loc["frozen-0.025"], at.loc["preln"])
    assert "the difference is over the 4 seeds both ran, the baseline's mean over its 8" in line
    assert "seeds both ran" not in score_line(at.loc["layerscale-cait"], at.loc["preln"])


def test_when_git_cannot_say_what_is_committed_nothing_is_overwritten(grid, capsys, tmp_path, monkeypatch):
    """A shared folder owned by someone else: git refuses ("dubious ownership"), which read as "nothing committed"
    and let an unfinished sweep's analysis overwrite the committed outputs without --force."""
    ids = [r.name for r in (grid / "runs").iterdir()]
    (grid / "run_ids.json").write_text(json.dumps(ids + ["notyetrun001"]))
    fake = tmp_path / "bin" / "git"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho \"fatal: detected dubious ownership in repository at '$2'\" >&2\nexit 128\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    assert analyze_cli_main(["analyze", str(grid), "--no-figures"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "git cannot say whether analysing it would overwrite" in err and "--force" in err
    assert not (grid / "findings.md").exists()
    assert analyze_cli_main(["analyze", str(grid), "--no-figures", "--force"]) == 0
    fake.write_text("#!/bin/sh\necho 'fatal: not a git repository (or any of the parent directories): .git' >&2\n"
                    "exit 128\n")
    (grid / "run_ids.json").write_text(json.dumps(ids))
    assert analyze_cli_main(["analyze", str(grid), "--no-figures"]) == 0  # outside a repository: nothing to guard
