"""``findings.md``: the declared question's answer first, in words; then every other comparison as an exploratory
estimate without verdict words (docs/statistics.md, "The primary comparison, and everything else")."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from statistics import mean, median

import pandas as pd

from suite.analysis import crossfit
from suite.declared import RULES, same_value
from suite.grouping import DEPTH, LR, group_of, same_group, sections, section_keys, sort_value, variant_order
from suite.analysis.markup import MD, fmt_rate, fmt_value, md, section_title
from suite.results import readable_ablation, score
from suite.analysis.endpoints import Answer, endpoint
from suite.analysis.endpoints.base import pts
from suite.analysis.products import FINDINGS, TABLES, Analysis, FindingsSection
from suite.analysis.primary_text import paragraph, verdict_table
from suite.analysis.sensitivity import sensitivity_lines
from suite.analysis.separation import separation_lines
from suite.analysis.stats import fisher_min_p
from suite.analysis.survival import first_eval_line, uninformative
from suite.analysis.transfer import DRIFT, READINGS, TRANSFER_MARGIN, reading

ALPHA = 0.05


def _adj(row: pd.Series, p: str) -> str:
    """``row``'s ``{p}_adj``: ``adjusted p = 0.020, Bonferroni x6`` or ``no test``."""
    adj, m = row[f"{p}_adj"], row[f"{p}_m"]
    if math.isnan(adj):
        return "no test"
    return ("adjusted p < 0.001" if adj < 0.001 else f"adjusted p = {adj:.3f}") + f", Bonferroni x{int(m)}"


def _interval(row: pd.Series, diff: str, p: str) -> str:
    """``row``'s interval of ``diff`` (``{diff}_ci_low``, ``{diff}_ci_high``), simultaneous over ``{p}_m`` tests."""
    low, high = row[f"{diff}_ci_low"], row[f"{diff}_ci_high"]
    if math.isnan(low):
        return "no interval"
    level = "95% CI" if row[f"{p}_m"] <= 1 else "simultaneous 95% CI"
    return f"{level} [{pts(low)}, {pts(high)}]"


def _where(row: pd.Series) -> str:
    return f"depth {fmt_value(row[DEPTH])}" if DEPTH in row else "all runs"


def _at(where: dict) -> str:
    """A declared cell's keys and values: ``depth 12 lr 0.001``."""
    return " ".join(md(f"{str(name).rsplit('.', 1)[-1]} {fmt_value(v)}") for name, v in where.items())


def _versus(part: pd.DataFrame, keys: list[str], baseline: str):
    """Each scheme but the baseline, with its rows that have a baseline, each paired with the baseline's row."""
    base = part[part["variant"] == baseline]
    for variant in variant_order(list(part["variant"]), baseline):
        if variant != baseline:
            rows = part[(part["variant"] == variant) & part["has_baseline"]]
            yield variant, [(row, (base[base[DEPTH] == row[DEPTH]] if DEPTH in keys else base).iloc[0])
                            for _, row in rows.iterrows()]


def score_line(row: pd.Series, base: pd.Series) -> str:
    """One cell's score against the baseline's: an estimate, its simultaneous interval, adjusted p."""
    if not row["acc_test"]:
        return f"{_where(row)}: score not compared (no runs to score on one side)"
    test = row["acc_test"] + (f" on {row['acc_pairs']} seed pairs" if row["acc_pairs"] else "")
    clipped = ", clipped to what two scores can differ by" if row.get("acc_diff_ci_clipped") is True else ""
    few = "; fewer than 4 seeds per arm: an estimate, no verdict" if row.get("acc_verdict") == "too few seeds" else ""
    pairs, n_base = row.get("acc_pairs"), base.get("acc_n")
    # a table read back holds numpy integers, which are not ints: pd.notna, not isinstance, says it is a count
    subset = (f"; the difference is over the {int(pairs)} seeds both ran, the baseline's mean over its {int(n_base)}"
              if pairs and n_base is not None and pd.notna(n_base) and int(n_base) != int(pairs) else "")
    return (f"{_where(row)}: score {100 * row['acc_mean']:.1f}% vs {100 * base['acc_mean']:.1f}%, difference "
            f"{pts(row['acc_diff'])} points ({_interval(row, 'acc_diff', 'acc_p')}{clipped}; {test}, "
            f"{_adj(row, 'acc_p')}{few}{subset})")


def rate_line(row: pd.Series, base: pd.Series) -> str:
    floor = fisher_min_p(int(row["n"]), int(base["n"])) if row["n"] and base["n"] else math.nan
    reach = (f"; {row['n']} vs {base['n']} runs can reach p = {floor:.2f} at best, so no rate difference can "
             f"show here" if floor >= ALPHA else "")
    return (f"{_where(row)}: not ok {row['n_not_ok']}/{row['n']} vs {base['n_not_ok']}/{base['n']} "
            f"(Fisher's exact test, {_adj(row, 'not_ok_p')}{reach})")


def _median(r: pd.Series) -> str:
    if math.isnan(r["median"]):
        return f"not reached ({r['n_learned']}/{r['n']} learned)"
    if math.isnan(r["median_ci_low"]) and math.isnan(r["median_ci_high"]):
        return f"{r['median']:.0f} steps, no interval ({r['n_learned']}/{r['n']} learned)"
    high = "not reached" if math.isnan(r["median_ci_high"]) else f"{r['median_ci_high']:.0f}"
    low = "?" if math.isnan(r["median_ci_low"]) else f"{r['median_ci_low']:.0f}"
    return f"{r['median']:.0f} steps [{low}, {high}] ({r['n_learned']}/{r['n']} learned)"


def learn_line(row: pd.Series, base: pd.Series) -> str:
    """Time to learn against the baseline's: Kaplan-Meier medians and the log-rank test."""
    return f"{_where(row)}: median time to learn {_median(row)} vs {_median(base)} (log-rank {_adj(row, 'logrank_p')})"


def _learn_pair(learn: pd.DataFrame | None, keys: list[str], row: pd.Series,
                baseline: str) -> tuple[pd.Series, pd.Series] | None:
    """The time-to-learn rows of a summary row's group and of the baseline's group at the same keys."""
    if learn is None:
        return None
    match = learn[[same_group(r, row, keys) for _, r in learn.iterrows()]]  # None matches None (a NaN in a frame)
    base = learn[[same_group(r, row, keys[1:]) and r["variant"] == baseline for _, r in learn.iterrows()]]
    return (match.iloc[0], base.iloc[0]) if len(match) and len(base) else None


def trend_lines(row: pd.Series, baseline: str) -> list[str]:
    out = []
    if not math.isnan(row["acc_interaction"]):
        bound = (f"; {row['bound']}: one side scores {'chance' if row['bound'] == 'floor' else '100%'} in every "
                 f"run of a depth, so the difference there is truncated and not tested" if row["bound"] else "")
        what = ("change of the difference from " + row["acc_interaction_kind"].replace("->", " to ")
                if row["acc_interaction_kind"].startswith("depth") else "slope of the difference per doubling")
        out.append(f"depth interaction with {md(baseline)} ({what}): {pts(row['acc_interaction'])} points "
                   f"({_interval(row, 'acc_interaction', 'acc_interaction_p')}; {row['acc_interaction_test']}, "
                   f"{_adj(row, 'acc_interaction_p')}{bound})")
    if not math.isnan(row["not_ok_slope_diff"]):
        out.append(f"not-ok log-odds per doubling, minus {md(baseline)}'s: {row['not_ok_slope_diff']:+.2f} "
                   f"(binomial GLM interaction, {_adj(row, 'not_ok_slope_diff_p')})")
    return out


def aggregate_line(row: pd.Series, baseline: str) -> str:
    if math.isnan(row["poi"]):
        return (f"across depths: IQM score {100 * row['iqm']:.1f}%; P(a run beats {md(baseline)}'s) not reported "
                f"({row['poi_pairs']} seed pairs, fewer than 10)")
    interval = ("no interval" if math.isnan(row["poi_ci_low"])
                else f"95% stratified bootstrap CI [{row['poi_ci_low']:.2f}, {row['poi_ci_high']:.2f}]")
    return (f"across depths: P(the run beats {md(baseline)}'s with the same seed and depth) = {row['poi']:.2f} "
            f"({interval}; 0.5 = no tendency; {row['poi_pairs']} pairs); IQM score {100 * row['iqm']:.1f}%")


def _frontier(row: pd.Series) -> str:
    if row["lr50_censored"]:
        return f"{row['lr50_censored']} the rates tested"
    if math.isnan(row["lr50"]):
        return "not estimable"
    return f"{row['lr50']:.2g} [{row['lr50_ci_low']:.2g}, {row['lr50_ci_high']:.2g}]"


def lr_lines(row: pd.Series, base: pd.Series, baseline: str) -> list[str]:
    """One cell of the learning-rate analysis against the baseline's cell, as estimates."""
    where = _where(row)
    on = "validation" if row["selected_on"] == "val" else "TEST (no validation split)"
    out = []
    if math.isnan(row["best_lr"]) or math.isnan(base["best_lr"]):
        out.append(f"{where}: best learning rate not compared (no runs to score on one side)")
    else:
        test = f"cross-fitted paired t on {row['test_pairs']} seed pairs" if row["test_pairs"] else "Welch t"
        agree = (f"; resampling the seeds, the same rate wins {100 * row['best_lr_agree']:.0f}% of the time "
                 f"({md(baseline)}'s: {100 * base['best_lr_agree']:.0f}%)"
                 if not math.isnan(row["best_lr_agree"]) and not math.isnan(base["best_lr_agree"]) else "")
        xfit = ""
        if isinstance(row.get("test_xfit_lrs"), str) and not math.isnan(row.get("test_xfit_mean", math.nan)):
            xfit = (f"; cross-fitted (each half of the seeds at the rate the other half chose: "
                    f"{row['test_xfit_lrs']} vs {row['test_xfit_base_lrs']}) {100 * row['test_xfit_mean']:.1f}% vs "
                    f"{100 * row['test_xfit_base_mean']:.1f}%")
        if math.isnan(row["test_diff"]):  # cross-fitting needs seeds scored on both sides in each half
            diff = "difference not estimated (too few seeds scored on both sides to cross-fit)"
        else:
            diff = (f"{pts(row['test_diff'])} points ({_interval(row, 'test_diff', 'test_p')}; {test}, "
                    f"{_adj(row, 'test_p')}{agree})")
        out.append(f"{where}: at its best learning rate ({fmt_value(row['best_lr'])}, selected on {on}) test "
                   f"{100 * row['test_mean']:.1f}% vs {100 * base['test_mean']:.1f}% at {md(baseline)}'s "
                   f"({fmt_value(base['best_lr'])}){xfit}: {diff}")
    never = [md(name) for name, r in ((row["variant"], row), (baseline, base)) if not r["above_chance"]]
    if never:
        out.append(f"{where}: LR sensitivity not compared ({' and '.join(never)} never beat chance at any rate)")
    elif row["sens_n"] and base["sens_n"]:
        out.append(f"{where}: LR sensitivity {100 * row['sens_mean']:.0f}% vs {100 * base['sens_mean']:.0f}% of the "
                   f"gain over chance lost at an untuned rate: {pts(row['sens_diff'])} points "
                   f"({_interval(row, 'sens_diff', 'sens_p')}; {_adj(row, 'sens_p')})")
    test = "" if math.isnan(row["frontier_p"]) else f"; curves differ: Wald test, {_adj(row, 'frontier_p')}"
    out.append(f"{where}: stability frontier (the rate where half of the runs end not ok, Firth logistic "
               f"regression, 95% CI) {_frontier(row)} vs {_frontier(base)}{test}")
    return out


def _sections(frame: pd.DataFrame, keys: list[str], heading: str) -> list[tuple[pd.DataFrame, list[str]]]:
    """``frame``'s sections over ``keys`` but the rate: its rows and ``heading`` with its title, if any key splits."""
    rest = [k for k in keys if k != LR]
    return [(part, [heading.format(md(section_title(label, section_keys(rest)))), ""] if section_keys(rest) else [])
            for label, part in sections(frame, rest)]


def _lr_section(lr: pd.DataFrame, keys: list[str], baseline: str) -> list[str]:
    lines = ["### Each scheme at its own best learning rate", "",
             f"Selected on validation accuracy; reported on test. Not-ok runs score chance. {crossfit.SENTENCE} "
             f"Tables: tables/lr.md.", ""]
    for part, head in _sections(lr, keys, "#### {}"):
        lines += head
        for variant, pairs in _versus(part, keys, baseline):
            said = [f"- {text}" for row, b in pairs for text in lr_lines(row, b, baseline)]
            lines += [f"**{md(variant)}** vs {MD.code(baseline)}:", "", *said, ""]
    return lines + ["### At each learning rate", ""]


def transfer_lines(rows: pd.DataFrame, baseline: str = "the baseline") -> list[str]:
    """One scheme's learning-rate transfer in words: its best rate by depth, the slope, the regret."""
    r0 = rows.iloc[0]
    by_depth = ", ".join(f"{fmt_rate(r['best_lr'])} at depth {fmt_value(r[DEPTH])}"
                         + (f" ({r['best_lr_at_edge']} tested)" if r["best_lr_at_edge"] else "")
                         for _, r in rows.iterrows() if not math.isnan(r["best_lr"]))
    if not by_depth:
        return ["no depth has a seed scored at every rate"]
    out = [f"best rate {by_depth}"]
    if verdict := reading(rows):
        ci = "" if math.isnan(r0["slope_low"]) else f" [{r0['slope_low']:+.2f}, {r0['slope_high']:+.2f}]"
        out.append(f"slope of log(peak rate) on log(depth) {r0['slope']:+.2f}{ci}: {READINGS[verdict]}")
    if isinstance(r0.get("drift_vs_base"), str) and r0["drift_vs_base"]:
        ci = ("" if math.isnan(r0["slope_vs_base_low"])
              else f" [{r0['slope_vs_base_low']:+.2f}, {r0['slope_vs_base_high']:+.2f}]")
        out.append(f"slope minus the baseline's {r0['slope_vs_base']:+.2f}{ci}: "
                   f"{DRIFT[r0['drift_vs_base']].format(base=md(baseline))}")
    for _, r in rows[rows[DEPTH] != r0["shallow_depth"]].iterrows():
        if math.isnan(r["regret"]):
            out.append(f"depth {fmt_value(r[DEPTH])}: the shallow depth's rate ({fmt_rate(r['shallow_lr'])}) "
                       "was not run")
            continue
        ci = "" if math.isnan(r["regret_low"]) else f" [{100 * r['regret_low']:+.1f}, {100 * r['regret_high']:+.1f}]"
        out.append(f"depth {fmt_value(r[DEPTH])}: using depth {fmt_value(r['shallow_depth'])}'s best rate "
                   f"({fmt_rate(r['shallow_lr'])}) instead of this depth's own costs "
                   f"{100 * r['regret']:+.1f} points{ci}")
    return out


def _transfer_section(tr: pd.DataFrame, keys: list[str], baseline: str) -> list[str]:
    intro = ["## Learning-rate transfer across depth", "",
             "Does the rate tuned at the shallowest depth stay best when the network is deeper? Best rates chosen on "
             "validation, regret on test, each with a 95% percentile-bootstrap interval over seeds (descriptions: with "
             "few seeds they under-cover); the slope of the peak rate on depth with a 95% jackknife interval over "
             "seeds, read only from 4 seeds (docs/statistics.md gives its simulated error rates). Tables: "
             "tables/transfer.md; figures: best_lr_vs_depth, val_vs_lr_by_depth.", ""]
    lines, verdicts = [], {}
    for part, head in _sections(tr, keys, "### {}"):
        lines += head
        for variant in variant_order(list(part["variant"]), baseline):
            rows = part[part["variant"] == variant]
            lines += [f"**{md(variant)}**:", ""] + [f"- {t}" for t in transfer_lines(rows, baseline)] + [""]
            verdicts.setdefault(reading(rows), []).append(md(variant))
    said = {"transfers": f"Best rate within a factor {2 ** TRANSFER_MARGIN:.2f} per doubling of depth over the whole "
                         f"jackknife interval (exploratory)",
            "falls with depth": "Best rate falls with depth (retune when deeper)",
            "rises with depth": "Best rate rises with depth (retune when deeper)",
            "undecided": "Undecided (the slope's interval contains 0 but allows a larger shift)",
            "at the grid's edge": "No verdict, a best rate at the grid's edge",
            "no interval": "No interval",
            "too few seeds": "No verdict, fewer than 4 seeds at some depth",
            "grid too coarse": "No transfer verdict, the grid of rates too coarse for the margin"}
    summary = " ".join(f"{text}: {', '.join(verdicts[key])}." for key, text in said.items() if verdicts.get(key))
    return intro + ([summary, ""] if summary else []) + lines


def findings(analysis: Analysis, tables: list[Path] | tuple = ()) -> str:
    """The text of ``findings.md`` (deterministic, like the tables): a title, the :func:`parts`, the table index."""
    lines = [f"# Findings: {md(analysis.title)}", ""] + [line for _, part in parts(analysis) for line in part]
    return "\n".join(lines + table_index(tables)).rstrip() + "\n"


def superseded_lines(root: Path) -> list[str]:
    """A first line naming the study that replaces this one (``superseded_by:`` in ablation.yaml); none otherwise."""
    text = readable_ablation(root).get("superseded_by")
    if not isinstance(text, str) or not text.strip():
        return []
    said = md(" ".join(text.split())[:500])
    return [f"> **Superseded** by {said}. What follows is kept as it was analysed; read the study that replaces "
            f"it for the answer.", ""]


def table_index(tables: list[Path] | tuple) -> list[str]:
    """Each table written, in :data:`suite.analysis.products.TABLES` order, linked (Markdown, else CSV, else LaTeX)."""
    names = {(f.stem, f.suffix[1:]) for f in tables}
    lines = [f"- [{kind.title}](tables/{kind.name}.{fmt}): {kind.caption}." for kind in TABLES.values()
             if (fmt := next((x for x in ("md", "csv", "tex") if (kind.name, x) in names), None))]
    return ["## Tables", "", *lines, ""] if lines else []


def parts(analysis: Analysis) -> list[tuple[FindingsSection, list[str]]]:
    """The parts of ``findings.md`` in order: (:data:`suite.analysis.products.FINDINGS` entry, Markdown lines)."""
    if analysis.propagation:  # signal-propagation runs: tables and figures only, nothing to compare in words
        return []
    frames, keys, baseline = analysis.frames, analysis.keys, analysis.baseline
    out = [(FINDINGS["answer"], answer_block(analysis))]
    if _present(frames.get("stability")):
        out.append((FINDINGS["depth"], depth_lines(frames["stability"], keys, baseline)))
    out += [(FINDINGS["causes"], cause_lines(analysis.runs, keys)),
            (FINDINGS["separation"], separation_lines(frames.get("diagnostics"))),
            (FINDINGS["sensitivity"], sensitivity_lines(frames.get("sensitivity")))]
    if _present(frames.get("transfer")):
        out.append((FINDINGS["transfer"], _transfer_section(frames["transfer"], keys, baseline)))
    return out + [(FINDINGS["exploratory"], _exploratory(analysis.summary, keys, baseline, frames))]


def _present(frame: pd.DataFrame | None) -> bool:
    return frame is not None and not frame.empty


def answer_block(analysis: Analysis) -> list[str]:
    """The answer block of ``findings.md`` and the report: :func:`answer_lines` with the lines around it."""
    answer = superseded_lines(analysis.root) + answer_lines(analysis.answer, analysis.runs)
    if analysis.answer is None:
        return answer
    if rates := tuned_rates_line(analysis.root):
        line = regime(analysis.runs)
        at = answer.index(line) + 2 if line in answer else 0
        answer[at:at] = [rates, ""]
    answers = analysis.answer if isinstance(analysis.answer, list) else [analysis.answer]
    for extra in (declared_cells_line(answers, analysis.runs), inits_line(answers, analysis.runs)):
        if extra:
            answer += [extra, ""]
    return answer


def _in_cell(run: dict, variant: str, where: dict) -> bool:
    return run.get("variant") == variant and all(same_value(run.get(k), v) for k, v in where.items())


def declared_cells_line(answers: list[Answer], runs: list[dict]) -> str:
    """Each declared paired cell's not-ok runs and the one-sided Clopper-Pearson 95% upper bound on its failure rate."""
    from scipy.stats import beta

    seen, cells = set(), []
    for a in answers:
        for variant, where in endpoint(a.primary.endpoint).paired_cells(a.primary):  # [] unless paired
            key = (variant, tuple(sorted((k, str(v)) for k, v in where.items())))
            if key in seen:
                continue
            seen.add(key)
            inside = [r for r in runs if _in_cell(r, variant, where) and r.get("status") != "error"]
            if not inside:
                continue
            k = sum(r.get("status") in ("failed", "diverged") for r in inside)
            upper = 1.0 if k == len(inside) else float(beta.ppf(0.95, k + 1, len(inside) - k))
            bound = f"one-sided 95% upper bound {100 * upper:.0f}%"
            cells.append(f"{md(variant)} {_at(where)}: {k}/{len(inside)} ({bound})")
    if not cells:
        return ""
    return ("*Failures in the declared cells* (runs diverged or failed, of those run; a paired t scores them at "
            "chance, so its level assumes failures are rare in each cell, and a cell near its bound would weaken "
            f"that): {'; '.join(cells)}.")


def inits_line(answers: list[Answer], runs: list[dict]) -> str:
    """An interaction arm's LayerScale init per cell where it differs (CaiT's rule sets it by depth); "" if none."""
    from suite.models.layerscale import cait_init

    def start(run: dict) -> str | None:
        init = run.get("model.layerscale.init")
        if run.get("model.residual") != "layerscale" or init is None:
            return None
        if str(init) == "cait" and isinstance(run.get(DEPTH), (int, float)):
            return f"{cait_init(int(run[DEPTH])):g}"
        return str(fmt_value(init))

    parts = []
    for a in answers:
        if not RULES[a.primary.endpoint].versus:
            continue
        for variant in (a.primary.scheme, a.primary.baseline):
            starts = []
            for where in [w for v, w in endpoint(a.primary.endpoint).paired_cells(a.primary) if v == variant]:
                found = sorted({s for r in runs if _in_cell(r, variant, where) and (s := start(r)) is not None})
                if found:
                    starts.append((_at(where), "/".join(found)))
            if len({s for _, s in starts}) > 1:
                parts.append(f"{md(variant)}'s γ starts at "
                             + " and ".join(f"{s} at {at}" for at, s in starts))
    if not parts:
        return ""
    return (f"*Initial scales*: {'; '.join(dict.fromkeys(parts))}, so a gain that changes across those cells "
            f"compares different initialisations as well as different cells.")


def answer_lines(answer: Answer | list[Answer] | None, runs: list[dict] | None = None) -> list[str]:
    """A verdict table, the regime it holds in, then the declared comparisons' paragraph, or why there is none."""
    if answer is not None:
        answers = answer if isinstance(answer, list) else [answer]
        return verdict_table(answers) + [""] + ([regime(runs), ""] if runs else []) + [paragraph(answer), ""]
    return ["No primary comparison is declared (`primary:` in the ablation file, docs/ablations.md), so "
            "nothing below is a test of a hypothesis stated before the runs.", ""]


def regime(runs: list[dict]) -> str:
    """One line on where the answer holds: data, run length, device, and how far the best cell got."""
    def values(key: str) -> str:
        found = sorted({md(fmt_value(r.get(key))) for r in runs if r.get(key) is not None})
        return ", ".join(found) if found else "?"

    cells: dict[tuple, list[float]] = {}
    for r in runs:
        if (x := score(r)) is not None:
            cells.setdefault((r.get("variant"), r.get(DEPTH), r.get(LR)), []).append(x)
    best = max((mean(xs) for xs in cells.values()), default=math.nan)
    reach = f"; the best cell's mean test accuracy is {100 * best:.1f}%" if math.isfinite(best) else ""
    devices = ", ".join(sorted({md(str(r.get("device_name") or r.get("device") or "?").split(":")[0]) for r in runs}))
    judged = [r for r in runs if r.get("status") != "error"]
    not_ok = sum(r.get("status") in ("failed", "diverged") for r in judged)
    failures = (f"; {not_ok} of {len(judged)} runs ended not ok" if not_ok else
                f"; none of the {len(judged)} runs ended not ok, so the scores compare how far each arm got, not "
                f"whether it trained")
    return (f"*Regime*: data {values('data.name')}, {values('train.steps')} steps at batch "
            f"{values('train.batch_size')}, on {devices}{reach}: these are short runs far from "
            f"convergence, so the answer is about early optimisation (how far each arm gets in this many steps at "
            f"its rate), not about final accuracy{failures}.")


def depth_lines(frame: pd.DataFrame, keys: list[str], baseline: str) -> list[str]:
    """``## Stability across depth``: per scheme, its frontier's ends and slope, and where its runs first broke."""
    lines = ["## Stability across depth", "",
             "Where each scheme's runs stop being ok as the network deepens: its LR50 (the rate where half of the "
             "runs end not ok) from one Firth logistic model of every run, not ok on log rate and log depth with a "
             "frontier line per scheme, and its slope on log depth (LR50 grows as depth^slope: 0 = the stable range "
             "does not move, -1 = it halves when the depth doubles) with a 95% profile-likelihood interval; then, at "
             "each depth, the lowest rate at which a run ended not ok, what its runs there commonly showed and their "
             "median largest stream RMS and attention logit. Table: tables/stability.md; figures: phase_diagram, frontier_vs_depth.", ""]
    for part, head in _sections(frame, keys, "**{}**"):
        lines += head
        for v in variant_order(list(part["variant"]), baseline):
            rows = part[part["variant"] == v].sort_values(DEPTH)
            first, last = rows.iloc[0], rows.iloc[-1]
            if pd.isna(first["slope"]):
                head = f"no frontier line ({md(first['note'] or 'nothing to fit')})"
            else:
                move = ("falls with depth" if first["slope_high"] < 0 else "rises with depth" if first["slope_low"] > 0
                        else "no detectable change with depth, its interval allowing a fall or a rise")
                move += " (exploratory: only a declared comparison of two schemes is a verdict)"
                head = (f"LR50 {fmt_rate(first['lr50'])}{_outside(first)} at depth {fmt_value(first[DEPTH])}, "
                        f"{fmt_rate(last['lr50'])}{_outside(last)} at depth {fmt_value(last[DEPTH])}; "
                        f"slope {first['slope']:+.2f} [{first['slope_low']:+.2f}, {first['slope_high']:+.2f}]: {move}")
            broke = [f"{fmt_value(r[DEPTH])} at {fmt_rate(r['first_not_ok_lr'])} ({md(r['first_cause'])}"
                     + (f", stream RMS {r['first_stream_rms']:.3g}" if pd.notna(r.get("first_stream_rms")) else "")
                     + (f", logit {r['first_attn_logit']:.3g}" if pd.notna(r["first_attn_logit"]) else "") + ")"
                     for _, r in rows.iterrows() if pd.notna(r["first_not_ok_lr"])]
            censored = {"below": "below its rates", "above": "above its rates"}
            measured = [f"{fmt_value(r[DEPTH])} " + (fmt_rate(r["lr50_measured"]) if pd.notna(r["lr50_measured"])
                                                     else censored.get(r["lr50_measured_censored"], "-"))
                        for _, r in rows.iterrows()] if "lr50_measured" in rows else []
            said = f"Measured LR50 (its runs, no model), by depth: {'; '.join(measured)}. " if measured else ""
            lines.append(f"- **{md(v)}**: {head}. {said}First not ok, by depth: {'; '.join(broke) or 'never'}.")
        lines.append("")
    return lines


def _outside(row: pd.Series) -> str:
    """`` (below the rates run there)`` where the model's LR50 lies past every rate run at that depth, else ""."""
    side = row.get("lr50_outside")
    return f" ({side} the rates run there)" if side in ("below", "above") else ""


# a failed run's reason in words that say what was observed (docs/training.md, Statuses)
OBSERVED = {"never_learned": "did not learn by step {n}", "too_low": "under the floor at step {n}",
            "collapsed": "learned, then lost it by step {n}",
            "unstable": "did not learn by step {n}, logits past 30"}  # runs made before the word was retired


def cause(run: dict) -> str:
    """What was observed of a not-ok run, in a few words: ``did not learn by step 100``, ``diverged: spike``."""
    if run["status"] == "failed":
        steps = run.get("steps_done")
        words = OBSERVED.get(run.get("failed_reason"), "failed")
        return words.format(n=steps if isinstance(steps, int) and not isinstance(steps, bool) else "?")
    reason = run.get("diverged_reason")
    return f"{run['status']}: {reason}" if reason else str(run["status"])


def cause_lines(runs: list[dict], keys: list[str]) -> list[str]:
    """``## Why runs were not ok``: per cell, the not-ok runs by cause and their median peaks; none when all were ok."""
    cells: dict[tuple, list[dict]] = {}
    for r in runs:
        if r["status"] in ("failed", "diverged"):
            cells.setdefault(group_of(r, keys), []).append(r)  # a list value (train.betas) as a tuple
    if not cells:
        return []
    lines = ["## Why runs were not ok", "",
             "Each cell with a run that diverged or failed: how many ended so, by what was observed "
             "(docs/training.md, Statuses), and the medians of those runs' largest residual-stream RMS and "
             "largest attention logit (which of them separates the runs that break: the next section).", "",
             "| " + " | ".join(md(k) for k in keys) + " | not ok, by what was observed | largest stream RMS (median) | "
             "largest attention logit (median) |",
             "|" + ":--|" * (len(keys) + 3)]
    for cell in sorted(cells, key=lambda c: [sort_value(v) for v in c]):
        counted = Counter(cause(r) for r in cells[cell])
        said = []
        for key in ("stream_rms_peak", "attn_logit_peak"):
            peaks = [float(r[key]) for r in cells[cell] if isinstance(r.get(key), (int, float))
                     and not isinstance(r.get(key), bool)]
            said.append(f"{median(peaks):.3g}" if peaks else "not recorded")
        values = " | ".join(md(fmt_value(cells[cell][0].get(k))) for k in keys)
        lines.append(f"| {values} | {', '.join(f'{n} {md(c)}' for c, n in sorted(counted.items()))} | "
                     f"{' | '.join(said)} |")
    return lines + [""]


def tuned_rates_line(root) -> str:
    """Where each arm's rate came from when taken from a tuning study (``rates:`` in ablation.yaml); "" otherwise."""
    data = readable_ablation(root)
    rates = data.get("rates")
    if not isinstance(rates, list) or not all(isinstance(e, dict) for e in rates):
        return ""
    cells, by_arm = [], {}
    for e in rates:
        where = " ".join(md(f"{str(k).rsplit('.', 1)[-1]} {fmt_value(v)}")
                         for k, v in e.items() if k not in ("variant", LR, "tuning_seeds", "val_score", "at_edge"))
        edge = f" ({md(e['at_edge'])} tried)" if e.get("at_edge") else ""
        variant = md(e.get("variant"))
        cells.append(f"{variant} {where}: {md(fmt_value(e.get(LR)))}{edge}")
        if isinstance(e.get(DEPTH), (int, float)) and isinstance(e.get(LR), (int, float)) and e[LR] > 0:
            by_arm.setdefault(variant, {})[e[DEPTH]] = float(e[LR])
    moves = []
    for variant, at in by_arm.items():
        if len(at) > 1:
            low, high = min(at), max(at)
            ratio = at[low] / at[high]
            how = ("stays at " + fmt_rate(at[low]) if math.isclose(ratio, 1.0) else
                   f"falls {ratio:.3g}x" if ratio > 1 else f"rises {1 / ratio:.3g}x")
            moves.append(f"{variant}'s {how} from depth {fmt_value(low)} to {fmt_value(high)}")
    moved = f" How each arm's rate moves with depth: {'; '.join(moves)}." if moves else ""
    seeds = sorted({s for e in rates for s in e.get("tuning_seeds") or [] if isinstance(s, int)})
    source = data.get("rates_from")
    if not source:
        return (f"*Rates*: each arm at the rate the ablation file registered before its runs (`rates:`): "
                f"{'; '.join(cells)}.{moved}")
    return (f"*Rates*: each arm at its rate chosen on validation in {md(source)}"
            f"{' (tuning seeds ' + ', '.join(map(str, seeds)) + ')' if seeds else ''}, so no rate is scored on "
            f"the seeds that chose it: {'; '.join(cells)}.{moved}")


def _exploratory(summary: pd.DataFrame, keys: list[str], baseline: str, frames: dict) -> list[str]:
    trends, aggregate, lr, learn = (frames.get(k) for k in ("trends", "aggregate", "lr", "learn"))
    lines = ["## Exploratory comparisons", "",
             f"Every scheme against {MD.code(baseline)}. Scores: an ok run at its accuracy, a diverged or failed run at "
             f"chance; error runs left out. Each difference comes with a simultaneous 95% interval and a p-value, "
             f"both Bonferroni-adjusted over the comparisons of its table section (xm), so an interval excludes 0 "
             f"exactly when its adjusted p is below {ALPHA}. These are estimates to read, not verdicts: the "
             f"questions this ablation decides are answered above, in its primary comparison. Methods: "
             f"docs/statistics.md.", ""]
    if learn is not None and not math.isnan(uninformative(learn)):  # one line instead of a row per cell
        lines += [f"Time to learn: {first_eval_line(uninformative(learn))} (evaluate more often, `train.eval_every`, "
                  f"to separate them).", ""]
        learn = None
    if has_lr := _present(lr):
        lines += _lr_section(lr, keys, baseline)
    skeys = section_keys(keys)
    for label, part in sections(summary, keys):
        if not (part["has_baseline"] & ~part["is_baseline"]).any():
            continue  # nothing to compare in this section (e.g. a rate only the baseline ran at)
        if skeys:
            lines += [f"{'####' if has_lr else '###'} {md(section_title(label, skeys))}", ""]
        for variant, pairs in _versus(part, keys, baseline):
            lines += [f"**{md(variant)}** vs {MD.code(baseline)}:", ""]
            learned = [_learn_pair(learn, keys, row, baseline) for row, _ in pairs]
            found = [pair for pair in learned if pair is not None]
            same = uninformative(pd.DataFrame([r for pair in found for r in pair])) if found else math.nan
            for (row, b), pair in zip(pairs, learned):
                lines += [f"- {score_line(row, b)}", f"- {rate_line(row, b)}"]
                if pair is not None and math.isnan(same):
                    lines.append(f"- {learn_line(*pair)}")
            if not math.isnan(same):
                lines.append(f"- time to learn: {first_eval_line(same)}")
            for frame, render in ((trends, trend_lines), (aggregate, lambda r, b: [aggregate_line(r, b)])):
                if frame is None:
                    continue
                sel = frame[frame["variant"] == variant]
                sel = sel[[group_of(r, skeys) == label for _, r in sel.iterrows()]]  # NaN as None, as grouped
                for _, row in sel.iterrows():
                    lines += [f"- {text}" for text in render(row, baseline)]
            lines.append("")
    return lines
