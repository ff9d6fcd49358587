"""``findings.md``: the comparisons a reader cares about, in words, generated from the tables.

One line per comparison of a scheme with the baseline: recipe accuracy per depth (paired or Welch
t-test), the not-ok rate per depth (Fisher), the trend with depth (OLS interaction) and the
aggregate over depths (probability of improvement); with a learning-rate axis, first each scheme at its
own best learning rate, its LR sensitivity and its stability frontier (``lr.py``). Each names its test and Holm-adjusted p. A
difference is worded as one only when that p is below 0.05; otherwise "no detectable difference",
with the interval, so a reader sees how large a difference the data cannot rule out.
"""

from __future__ import annotations

import math

import pandas as pd

from suite.analysis.grouping import DEPTH, LR, sections, section_keys, variant_order
from suite.analysis.markup import fmt_value

ALPHA = 0.05


def _p(p: float) -> str:
    """``Holm p = 0.020``, ``Holm p < 0.001``, or ``no test``."""
    return "no test" if math.isnan(p) else ("Holm p < 0.001" if p < 0.001 else f"Holm p = {p:.3f}")


def _verdict(p: float, estimate: float, more: str, less: str) -> str:
    if math.isnan(p):
        return "not tested (too few runs)"
    if p < ALPHA:
        return more if estimate > 0 else less
    return "no detectable difference"


def _points(x: float) -> str:
    return f"{100 * x:+.1f}"


def accuracy_line(row: pd.Series, baseline: str) -> str:
    """One cell's recipe-accuracy comparison, e.g. ``depth 24: 66.2% vs 40.0%, +26.2 points ...``."""
    where = f"depth {fmt_value(row[DEPTH])}" if DEPTH in row else "all runs"
    if not row["acc_test"]:
        return f"{where}: accuracy not compared (no runs to score on one side)"
    interval = ("no interval" if math.isnan(row["acc_diff_ci_low"])
                else f"95% CI [{_points(row['acc_diff_ci_low'])}, {_points(row['acc_diff_ci_high'])}]")
    test = f"{row['acc_test']}" + (f" on {row['acc_pairs']} seed pairs" if row["acc_pairs"] else "")
    verdict = _verdict(row["acc_p_holm"], row["acc_diff"], f"higher than {baseline}", f"lower than {baseline}")
    return (f"{where}: recipe accuracy {100 * row['acc_mean']:.1f}% vs {100 * row['_base_acc']:.1f}%: {verdict} "
            f"(difference {_points(row['acc_diff'])} points, {interval}; {test}, {_p(row['acc_p_holm'])})")


def rate_line(row: pd.Series, baseline: str) -> str:
    where = f"depth {fmt_value(row[DEPTH])}" if DEPTH in row else "all runs"
    verdict = _verdict(row["not_ok_p_holm"], row["not_ok_rate"] - row["_base_rate"],
                       f"more often not ok than {baseline}", f"less often not ok than {baseline}")
    return (f"{where}: not ok {row['n_not_ok']}/{row['n']} vs {row['_base_n_not_ok']}/{row['_base_n']}: {verdict} "
            f"(Fisher's exact test, {_p(row['not_ok_p_holm'])})")


def trend_lines(row: pd.Series, baseline: str) -> list[str]:
    out = []
    if not math.isnan(row["acc_slope_diff"]):
        verdict = _verdict(row["acc_slope_diff_p_holm"], row["acc_slope_diff"],
                           f"accuracy holds up better with depth than {baseline}'s",
                           f"accuracy falls faster with depth than {baseline}'s")
        out.append(f"trend: accuracy slope {_points(row['acc_slope'])} points per doubling of depth: {verdict} "
                   f"(difference {_points(row['acc_slope_diff'])}, 95% CI "
                   f"[{_points(row['acc_slope_diff_ci_low'])}, {_points(row['acc_slope_diff_ci_high'])}]; OLS "
                   f"interaction, {_p(row['acc_slope_diff_p_holm'])})")
    if not math.isnan(row["not_ok_slope_diff"]):
        verdict = _verdict(row["not_ok_slope_diff_p_holm"], row["not_ok_slope_diff"],
                           f"fails more steeply with depth than {baseline}", f"fails less steeply with depth than {baseline}")
        out.append(f"trend: not-ok log-odds per doubling {row['not_ok_slope_diff']:+.2f} against {baseline}: "
                   f"{verdict} (binomial GLM interaction, {_p(row['not_ok_slope_diff_p_holm'])})")
    else:
        out.append("trend: not-ok trend not compared (never or always not ok on one side, or separated by depth)")
    return out


def aggregate_line(row: pd.Series, baseline: str) -> str:
    if math.isnan(row["poi"]):
        return "across depths: not compared"
    if math.isnan(row["poi_ci_low"]):
        return (f"across depths: P(a run beats {baseline}'s at the same depth) = {row['poi']:.2f}, no interval "
                f"(too few runs to resample)")
    above = row["poi_ci_low"] > 0.5
    below = row["poi_ci_high"] < 0.5
    verdict = "better than" if above else "worse than" if below else "no detectable difference from"
    return (f"across depths: {verdict} {baseline}: P(a run beats {baseline}'s at the same depth) = {row['poi']:.2f} "
            f"(95% stratified bootstrap CI [{row['poi_ci_low']:.2f}, {row['poi_ci_high']:.2f}]; 0.5 = no tendency); "
            f"IQM accuracy {100 * row['iqm']:.1f}%")


def _frontier(row: pd.Series) -> str:
    if math.isnan(row["lr_stable_max"]):
        return "unstable at every rate"
    return ("\u2265" if row["censored"] else "") + fmt_value(row["lr_stable_max"])


def lr_lines(row: pd.Series, base: pd.Series, baseline: str) -> list[str]:
    """One cell of the learning-rate analysis against the baseline's cell, in words."""
    where = f"depth {fmt_value(row[DEPTH])}" if DEPTH in row else "all runs"
    on = "validation" if row["selected_on"] == "val" else "TEST (no validation split)"
    out = []
    if math.isnan(row["best_lr"]) or math.isnan(base["best_lr"]):
        out.append(f"{where}: best learning rate not compared (no runs to score on one side)")
    else:
        interval = ("no interval" if math.isnan(row["test_diff_ci_low"])
                    else f"95% CI [{_points(row['test_diff_ci_low'])}, {_points(row['test_diff_ci_high'])}]")
        test = "paired t" + (f" on {row['test_pairs']} seed pairs" if row["test_pairs"] else "")
        test = test if row["test_pairs"] else "Welch t"
        verdict = _verdict(row["test_p_holm"], row["test_diff"], f"higher than {baseline}", f"lower than {baseline}")
        out.append(f"{where}: at its best learning rate ({fmt_value(row['best_lr'])}, selected on {on}) test "
                   f"{100 * row['test_mean']:.1f}% vs {100 * base['test_mean']:.1f}% at {baseline}'s "
                   f"({fmt_value(base['best_lr'])}): {verdict} (difference {_points(row['test_diff'])} points, "
                   f"{interval}; {test}, {_p(row['test_p_holm'])})")
    never = [name for name, r in ((row["variant"], row), (baseline, base)) if not r["above_chance"]]
    if never:
        out.append(f"{where}: LR sensitivity not compared ({' and '.join(never)} never beat chance at any rate)")
    elif row["sens_n"] and base["sens_n"]:
        interval = ("no interval" if math.isnan(row["sens_diff_ci_low"])
                    else f"95% CI [{_points(row['sens_diff_ci_low'])}, {_points(row['sens_diff_ci_high'])}]")
        verdict = _verdict(row["sens_p_holm"], row["sens_diff"], f"more sensitive to the learning rate than {baseline}",
                           f"less sensitive to the learning rate than {baseline}")
        out.append(f"{where}: LR sensitivity {100 * row['sens_mean']:.1f} vs {100 * base['sens_mean']:.1f} points: "
                   f"{verdict} (difference {_points(row['sens_diff'])}, {interval}; {_p(row['sens_p_holm'])})")
    out.append(f"{where}: stability frontier {_frontier(row)} vs {_frontier(base)} (the largest rate with at most "
               f"half of the runs not ok; not a test)")
    return out


def _lr_section(lr: pd.DataFrame, keys: list[str], baseline: str) -> list[str]:
    rest = [k for k in keys if k != LR]
    skeys = section_keys(rest)
    lines = ["## Each scheme at its own best learning rate", "",
             "Selected on validation accuracy; reported on test. Not-ok runs scored at chance. Tables: "
             "tables/lr.md.", ""]
    for label, part in sections(lr, rest):
        if skeys:
            lines += [f"### {', '.join(f'{k} = {fmt_value(v)}' for k, v in zip(skeys, label))}", ""]
        base = part[part["variant"] == baseline]
        for variant in variant_order(list(part["variant"]), baseline):
            if variant == baseline:
                continue
            lines += [f"**{variant}** vs `{baseline}`:", ""]
            for _, row in part[(part["variant"] == variant) & part["has_baseline"]].iterrows():
                b = (base[base[DEPTH] == row[DEPTH]] if DEPTH in rest else base).iloc[0]
                lines += [f"- {text}" for text in lr_lines(row, b, baseline)]
            lines.append("")
    return lines + ["## At each learning rate", ""]


def findings(title: str, summary: pd.DataFrame, keys: list[str], baseline: str,
             trends: pd.DataFrame | None, aggregate: pd.DataFrame | None, lr: pd.DataFrame | None = None) -> str:
    """The text of ``findings.md`` (Markdown; deterministic, like the tables). With a learning-rate
    axis (``lr``, from :func:`suite.analysis.lr.lr_table`) the best-rate comparison comes first."""
    lines = [f"# Findings: {title}", "",
             f"Written by `suite analyze` from tables/*.csv; every scheme against `{baseline}`. Accuracy is recipe "
             f"accuracy (every run that did not error; diverged runs at chance). A difference is stated only at "
             f"Holm-adjusted p < {ALPHA} (Holm over the schemes and depths of one table), or for the comparison "
             f"across depths when its 95% interval excludes 0.5; otherwise \"no detectable difference\", with the "
             f"interval of what the data allows. Methods: docs/statistics.md.", ""]
    if lr is not None and not lr.empty:
        lines += _lr_section(lr, keys, baseline)
    skeys = section_keys(keys)
    for label, part in sections(summary, keys):
        if skeys:
            level = "###" if lr is not None and not lr.empty else "##"
            lines += [f"{level} {', '.join(f'{k} = {fmt_value(v)}' for k, v in zip(skeys, label))}", ""]
        base = part[part["variant"] == baseline]
        for variant in variant_order(list(part["variant"]), baseline):
            if variant == baseline:
                continue
            rows = part[(part["variant"] == variant) & part["has_baseline"]]
            lines.append(f"**{variant}** vs `{baseline}`:")
            lines.append("")
            for _, row in rows.iterrows():
                match = base[base[DEPTH] == row[DEPTH]] if DEPTH in keys else base
                b = match.iloc[0]
                row = row.copy()
                row["_base_acc"], row["_base_rate"] = b["acc_mean"], b["not_ok_rate"]
                row["_base_n_not_ok"], row["_base_n"] = b["n_not_ok"], b["n"]
                lines.append(f"- {accuracy_line(row, baseline)}")
                lines.append(f"- {rate_line(row, baseline)}")
            for frame, render in ((trends, trend_lines), (aggregate, lambda r, b: [aggregate_line(r, b)])):
                if frame is None:
                    continue
                sel = frame[frame["variant"] == variant]
                for k, v in zip(skeys, label):
                    sel = sel[sel[k].map(lambda x: x == v or (x != x and v is None))]
                for _, row in sel.iterrows():
                    lines += [f"- {text}" for text in render(row, baseline)]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"
