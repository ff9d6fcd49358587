"""The analysis as paper tables in Markdown and LaTeX (booktabs), laid out as in the CaiT paper: rows = scheme,
columns = depth, a table per section; each cell format in the table's legend and in ``docs/statistics.md``."""

from __future__ import annotations

from typing import Any

import pandas as pd

from suite.analysis import robust
from suite.analysis.trends import MIN_PAIRS
from suite.analysis.stability import STREAM_GREW
from suite.analysis.survival import first_eval_line, uninformative
from suite.analysis.transfer import DRIFT, reading
from suite.grouping import DEPTH, LR, section_keys, sections, sort_value, variant_order
from suite.analysis.markup import (MD, TEX, Markup, Table, fmt_ms, section_title, fmt_rate, fmt_value, missing,
                                   render_md, render_tex, slug)

ALPHA = 0.05  # marks: Bonferroni-adjusted p below this (the simultaneous interval excludes 0)


def _grid(part: pd.DataFrame, keys: list[str], baseline: str, m: Markup, cell, best_of=None):
    """Pivot one section: rows = variants, columns = depths; ``cell(row, best)`` makes a cell."""
    depths = sorted(set(part[DEPTH]), key=sort_value) if DEPTH in keys else []
    columns = [f"depth {m.data(fmt_value(d))}" for d in depths] or ["all runs"]
    cols = [part[part[DEPTH] == d] for d in depths] or [part]
    bests = [best_of(col) if best_of else None for col in cols]
    rows = []
    for v in variant_order(list(part["variant"]), baseline):
        sels = [(col[col["variant"] == v], best) for col, best in zip(cols, bests)]
        rows.append((_label(m, v, baseline), [cell(s.iloc[0], b) if len(s) else m.esc("not run") for s, b in sels]))
    return m.esc("scheme"), columns, rows


def _label(m: Markup, variant: str, baseline: str) -> str:
    return m.data(variant) + (" (baseline)" if variant == baseline else "")


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _best(values: pd.Series, higher: bool, fmt=_pct) -> str | None:
    """The best of a column's values as ``fmt`` displays them (ties by displayed text); None if nothing stands out."""
    shown = [fmt(x) for x in values if not missing(x)]
    if len(set(shown)) < 2:
        return None
    return max(shown, key=float) if higher else min(shown, key=float)


def _ci(m: Markup, low: float, high: float, scale: float = 100.0, spec: str = ".1f") -> str:
    if missing(low):
        return m.esc("[no interval]")
    return f"[{format(scale * low, spec)}, {format(scale * high, spec)}]"


def _estimate(m: Markup, r: pd.Series, q: str, scale: float = 100.0, spec: str = ".1f") -> str:
    """``r[q]`` and its interval (``{q}_ci_low``, ``{q}_ci_high``), scaled and formatted alike."""
    return f"{format(scale * r[q], spec)} {_ci(m, r[f'{q}_ci_low'], r[f'{q}_ci_high'], scale, spec)}"


def _mean_ci(m: Markup, r: pd.Series, q: str, best: str | None, unit: str = "run") -> str:
    """``{q}_mean`` in % (bold when ``best``) and its interval, or why it has none."""
    text = _pct(r[f"{q}_mean"])
    text = m.bold(text) if text == best else text
    return text + " " + (m.esc(f"[no interval: 1 {unit}]") if r[f"{q}_n"] == 1
                         else _ci(m, r[f"{q}_ci_low"], r[f"{q}_ci_high"]))


def accuracy_tables(summary: pd.DataFrame, keys: list[str], baseline: str, m: Markup) -> list[Table]:
    """Rows = scheme, columns = depth, cells = the score (%) [95% mixture interval] and not ok k/n."""

    def cell(r: pd.Series, best: str | None) -> str:
        acc = (m.dash if r["acc_n"] == 0 or missing(r["acc_mean"])
               else _mean_ci(m, r, "acc", best) + (m.dagger if r.get("acc_verdict") in ("higher", "lower") else ""))
        counts = f"not ok {r['n_not_ok']}/{r['n']}" + (m.ddagger if r["not_ok_p_adj"] < ALPHA else "")
        counts += f"{m.sep}err {r['n_error']}" if r["n_error"] else ""
        return m.lines([acc, counts])

    def notes(part: pd.DataFrame) -> list[str]:
        return [
            f"Cell: the score, the mean test score ({m.esc('%')}) of every run that did not error: an "
            f"{m.code('ok')} run at its test accuracy, a {m.code('diverged')} or {m.code('failed')} run at chance "
            f"(1/classes) [95{m.esc('%')} interval: Student-t when every run is ok; for a mixture with runs at "
            f"chance, Wilson for P(ok) times Student-t for the ok runs, each at 95{m.esc('%')}]; not ok k/n: runs "
            f"that diverged or failed among the n that did not error; err k: runs that raised an error, left out. "
            f"tables/summary.csv also has the survivors-only accuracy (ok_acc_*) and the diverged and failed "
            f"rates separately.",
            f"{m.dagger} accuracy differs from {m.code(baseline)} in the same column: paired t-test on seed-matched "
            f"differences (Welch's t-test where the seeds do not match; below 4 seed pairs with the section's pooled "
            f"SD, and no mark: too few seeds for a verdict); {m.ddagger} not-ok rate differs "
            f"(Fisher's exact test, two-sided); both exploratory, at Bonferroni-adjusted p {m.esc('<')} {ALPHA} "
            f"over this table's score tests and, separately, its rate tests. Bold: best score per column. "
            f"{m.dash}: no run to score.",
        ] + _missing_baseline_note(part, keys, baseline, m)

    return _section_tables(summary, keys, baseline, m, "Accuracy and stability", "tab:acc", cell, notes,
                           lambda col: _best(col["acc_mean"], higher=True))


def _missing_baseline_note(part: pd.DataFrame, keys: list[str], baseline: str, m: Markup) -> list[str]:
    lost = part[~part["has_baseline"] & ~part["is_baseline"]]
    if lost.empty:
        return []
    where = sorted({fmt_value(d) for d in lost[DEPTH]}, key=float) if DEPTH in keys else []
    at = f" at depth {', '.join(where)}" if where else ""
    return [f"No {m.code(baseline)} runs{at}: no tests there."]


def step_time_tables(summary: pd.DataFrame, keys: list[str], baseline: str, m: Markup) -> list[Table]:
    """Rows = scheme, columns = depth, cells = median step time (ms) and how many runs were contended."""
    if summary["step_time_ms"].isna().all():
        return []

    def cell(r: pd.Series, best: str | None) -> str:
        if missing(r["step_time_ms"]):
            return m.dash
        ms = fmt_ms(r["step_time_ms"]) + " ms"
        return m.lines([ms, f"{r['n_contended']}/{r['n_timed']} contended"]) if r["n_contended"] else ms

    def notes(part: pd.DataFrame) -> list[str]:
        return [
            f"Cell: median over runs of each run's median training-step time (ms). The runs of a sweep share "
            f"cores with each other and with anything else on the machine, so these are not an A/B measurement "
            f"and no ratio is given: {m.code('suite bench')} measures what a scheme costs. k/n contended: runs "
            f"whose timed steps got less than 85{m.esc('%')} of their threads' CPU time (timing_cpu_util in "
            f"summary.json); their times measure the machine's load.",
        ]

    return _section_tables(summary, keys, baseline, m, "Step time", "tab:time", cell, notes)


def _selected_on(part: pd.DataFrame) -> str:
    """What the learning-rate tables selected on, in words."""
    return "validation" if (part["selected_on"] == "val").all() else "TEST (the runs have no validation split)"


def best_lr_tables(lr: pd.DataFrame, keys: list[str], baseline: str, m: Markup) -> list[Table]:
    """Rows = scheme, columns = depth, cells = test score (%) at the rate selected on validation."""
    def cell(r: pd.Series, best: str | None) -> str:
        if missing(r["best_lr"]) or r["test_n"] == 0:
            return m.dash
        acc = _mean_ci(m, r, "test", best) + (m.dagger if r["test_p_adj"] < ALPHA else "")
        edge = f" ({r['best_lr_at_edge']} tested)" if r["best_lr_at_edge"] else ""
        return m.lines([acc, m.esc(f"lr {fmt_value(r['best_lr'])}{edge}")])

    def notes(part: pd.DataFrame) -> list[str]:
        on = _selected_on(part)
        return [
            f"Cell: each scheme at its own best learning rate, the rate with the highest mean {on} score "
            f"(ties: the smaller rate); the mean test score ({m.esc('%')}) of its seeds there [95{m.esc('%')} "
            f"mixture interval], diverged and failed runs scored at chance. lowest / highest tested: the "
            f"best rate is at the edge of the grid, so a better one may lie outside it. {m.dagger} differs from "
            f"{m.code(baseline)} at its own best rate: cross-fitted paired t (each half of the seeds scored at "
            f"the rate the other half chose; standard error of half the seeds), exploratory, Bonferroni-adjusted "
            f"p {m.esc('<')} {ALPHA} over this table. Bold: best per column. tables/lr.csv also has how often "
            f"the same rate wins when the seeds are resampled (best_lr_agree); test_xfit_* give each half's rate.",
        ]

    return _section_tables(lr, keys, baseline, m, "At the best learning rate", "tab:bestlr", cell, notes,
                           lambda col: _best(col["test_mean"], higher=True))


def _common_lrs(part: pd.DataFrame) -> str:
    """The learning-rate ranges every scheme of a column ran, in words."""
    spans = sorted({(float(lo), float(hi)) for lo, hi in zip(part["sens_lr_min"], part["sens_lr_max"])
                    if not missing(lo) and not missing(hi)})
    return "; ".join(f"{fmt_value(lo)} to {fmt_value(hi)}" for lo, hi in spans) or "none in common"


def sensitivity_tables(lr: pd.DataFrame, keys: list[str], baseline: str, m: Markup) -> list[Table]:
    """Rows = scheme, columns = depth, cells = normalised LR sensitivity (% of the gain over chance lost)."""
    def cell(r: pd.Series, best: str | None) -> str:
        if r["sens_n"] == 0 or missing(r["sens_mean"]):
            return m.dash
        sens = _mean_ci(m, r, "sens", best, unit="seed") + (m.dagger if r["sens_p_adj"] < ALPHA else "")
        return sens if r["above_chance"] else m.lines([sens, m.esc("never above chance")])

    def notes(part: pd.DataFrame) -> list[str]:
        lrs, on = _common_lrs(part), _selected_on(part)
        return [
            f"Cell: normalised LR sensitivity (after Wortsman et al. 2023), the mean over the learning rates "
            f"every scheme of the column ran ({lrs}) of (best mean {on} score - mean {on} score at that rate) / "
            f"(best mean - chance), in {m.esc('%')}: the share of the scheme's gain over chance that an untuned "
            f"rate loses; 0 = as good at every rate as at the best, 100 = only the best rate learns. "
            f"[95{m.esc('%')} Student-t interval over seeds with a run at every rate.] Only rates all schemes ran "
            f"count, so a column's rows share one range. "
            f"{m.dash}: never above chance, no gain to lose. "
            f"{m.dagger} differs from {m.code(baseline)}: paired t-test over seeds, exploratory, "
            f"Bonferroni-adjusted p {m.esc('<')} {ALPHA} over this table. Bold: lowest per column.",
        ]

    return _section_tables(lr, keys, baseline, m, "LR sensitivity", "tab:sens", cell, notes,  # above chance only
                           lambda col: _best(col["sens_mean"][[bool(a) for a in col["above_chance"]]], higher=False))


def frontier_tables(lr: pd.DataFrame, keys: list[str], baseline: str, m: Markup) -> list[Table]:
    """Rows = scheme, columns = depth, cells = largest stable learning rate."""
    def cell(r: pd.Series, best: str | None) -> str:
        censored = r["lr50_censored"]
        if censored in ("above", "below"):  # outside the rates tested
            dose = m.esc(f"{censored} {fmt_value(r['lr_tested_max' if censored == 'above' else 'lr_tested_min'])}")
        elif missing(r["lr50"]):
            dose = m.dash
        else:
            dose = f"{r['lr50']:.2g} [{r['lr50_ci_low']:.2g}, {r['lr50_ci_high']:.2g}]"
        dose += m.dagger if r["frontier_p_adj"] < ALPHA else ""
        step = (m.dash if missing(r["lr_stable_max"])
                else (m.geq if r["censored"] else "") + fmt_value(r["lr_stable_max"]))
        return m.lines([dose, m.esc(f"step: {step}")])

    def notes(part: pd.DataFrame) -> list[str]:
        lrs = _common_lrs(part)
        return [
            f"Cell: the learning rate at which half of the runs end not ok (diverged or failed), from a Firth "
            f"logistic regression of not ok on log10({m.code(LR)}) over the cell's runs [95{m.esc('%')} interval, "
            f"delta method]; above / below: no run was ever / always not ok, so the rates tested ({lrs}) cannot "
            f"place it. {m.dagger}: the scheme's curve differs from {m.code(baseline)}'s (Wald test of the group "
            f"terms of a joint Firth fit, exploratory, Bonferroni-adjusted p {m.esc('<')} {ALPHA}). step: the "
            f"largest rate with at most half of the runs not ok, a description ({m.geq}: the largest tested; "
            f"{m.dash}: none).",
        ]

    return _section_tables(lr, keys, baseline, m, "Stability frontier", "tab:frontier", cell, notes,
                           lambda col: _best(col["lr_stable_max"], higher=True, fmt=fmt_value))


def settled_gamma_tables(settled: pd.DataFrame, keys: list[str], baseline: str, m: Markup) -> list[Table]:
    """Rows = scheme, columns = depth, cells = where γ settled (mean over blocks, last step), its range; per rate."""

    def cell(r: pd.Series, best: str | None) -> str:
        return m.lines([f"{r['gamma']:.3g}", m.esc(f"blocks {r['block_min']:.3g} to {r['block_max']:.3g}")])

    def notes(part: pd.DataFrame) -> list[str]:
        return [m.esc("Cell: the mean |γ| over the blocks at the last logged step (each block's mean over channels, "
                      "averaged over the group's runs, whether they ended ok or not), and the smallest and largest "
                      "block. Read across a row for depth, across the tables for the rate. Full precision: "
                      "tables/gamma_settled.csv; every logged step: tables/gamma.csv.")]

    return _section_tables(settled, keys, baseline, m, "Where LayerScale's γ settles", "tab:gamma", cell, notes)


def learn_tables(learn: pd.DataFrame, keys: list[str], baseline: str, m: Markup) -> list[Table]:
    """Rows = scheme, columns = depth, cells = Kaplan-Meier median steps to learn [95%] and learned k/n."""

    def cell(r: pd.Series, best: str | None) -> str:
        if missing(r["median"]):
            med = m.esc("not reached")
        elif missing(r["median_ci_low"]) and missing(r["median_ci_high"]):  # e.g. every run learned at one evaluation
            med = f"{fmt_value(int(r['median']))} {m.esc('[no interval]')}"
        else:
            low = "?" if missing(r["median_ci_low"]) else fmt_value(int(r["median_ci_low"]))
            high = m.esc("not reached") if missing(r["median_ci_high"]) else fmt_value(int(r["median_ci_high"]))
            med = f"{fmt_value(int(r['median']))} [{low}, {high}]"
        med += m.dagger if r["logrank_p_adj"] < ALPHA else ""
        return m.lines([med, f"learned {r['n_learned']}/{r['n']}"])

    def notes(part: pd.DataFrame) -> list[str]:
        return [
            f"Cell: the Kaplan-Meier median number of steps until a run first learned (its held-out accuracy above "
            f"always guessing the largest class, binomial test at alpha 0.01), with its 95{m.esc('%')} interval "
            f"(Brookmeyer-Crowley); runs that never learned are censored at their last evaluation (a diverged run at "
            f"its divergence). not reached: fewer than half learned. {m.dagger} time to learn differs from "
            f"{m.code(baseline)}: log-rank test, exploratory, Bonferroni-adjusted p {m.esc('<')} {ALPHA} over this "
            f"table. Curves: figures/time_to_learn*.",
        ] + _first_eval_note(part, m) + _missing_baseline_note(part, keys, baseline, m)

    return _section_tables(learn, keys, baseline, m, "Time to learn", "tab:learn", cell, notes)


def _first_eval_note(part: pd.DataFrame, m: Markup) -> list[str]:
    """One line when every run in the table learned at its first evaluation (the cells then have no interval)."""
    step = uninformative(part)
    if missing(step):
        return []
    line = first_eval_line(step)
    return [m.esc(f"{line[0].upper()}{line[1:]}; evaluate more often (") + m.code("train.eval_every")
            + m.esc(") to separate them.")]


def transfer_tables(tr: pd.DataFrame, keys: list[str], baseline: str, m: Markup) -> list[Table]:
    """Rows = scheme, columns = depth, cells = best rate [95% bootstrap] and transfer regret."""
    def cell(r: pd.Series, best: str | None) -> str:
        if missing(r["best_lr"]):
            return m.dash
        lr = f"lr {fmt_rate(r['best_lr'])}"
        lr += f" [{fmt_rate(r['best_lr_low'])}, {fmt_rate(r['best_lr_high'])}]" if not missing(r["best_lr_low"]) else ""
        lr += f" ({r['best_lr_at_edge']} tested)" if r["best_lr_at_edge"] else ""
        if r[DEPTH] == r["shallow_depth"]:
            regret = "tuned here"
        elif missing(r["regret"]):
            regret = f"regret: lr {fmt_rate(r['shallow_lr'])} not run"
        else:
            regret = f"regret {_pct(r['regret'])} {_ci(m, r['regret_low'], r['regret_high'])}"
        return m.lines([m.esc(lr), m.esc(regret)])

    def notes(part: pd.DataFrame) -> list[str]:
        on = _selected_on(part)
        return [
            f"Cell: the best learning rate at this depth (highest mean {on} score, ties: the smaller) [95{m.esc('%')} "
            f"percentile bootstrap over seeds, choosing again]; regret: the test score ({m.esc('%')} points) lost by "
            f"using the rate that was best at the shallowest depth instead of this depth's own best [95{m.esc('%')} "
            f"bootstrap]. 0 = the shallow rate transfers. Exploratory; with few seeds the bootstrap under-covers.",
        ]

    return _section_tables(tr, keys, baseline, m, "Learning-rate transfer across depth", "tab:transfer", cell, notes)


def slope_tables(tr: pd.DataFrame, keys: list[str], baseline: str, m: Markup) -> list[Table]:
    """Rows = scheme: the slope of log(best rate) on log(depth) with its bootstrap interval."""
    fkeys = [k for k in keys if k != LR]
    first = tr.drop_duplicates([k for k in fkeys if k != DEPTH]) if len(tr) else tr

    def cells(r: pd.Series, is_base: bool) -> list[str]:
        if missing(r["slope"]):
            return [m.dash, m.dash, m.dash]
        rows = tr[tr["variant"] == r["variant"]]
        for k in section_keys(fkeys):
            rows = rows[rows[k] == r[k]]
        ci = "[no interval]" if missing(r["slope_low"]) else f"[{r['slope_low']:+.2f}, {r['slope_high']:+.2f}]"
        vs = m.dash
        if not is_base and isinstance(r.get("drift_vs_base"), str) and r["drift_vs_base"]:
            vci = ("" if missing(r["slope_vs_base_low"])
                   else f" [{r['slope_vs_base_low']:+.2f}, {r['slope_vs_base_high']:+.2f}]")
            vs = m.esc(f"{r['slope_vs_base']:+.2f}{vci}: ") + DRIFT[r["drift_vs_base"]].format(base=m.data(baseline))
        return [m.esc(f"{r['slope']:+.2f} {ci}"), m.esc(f"{reading(rows)} ({int(r['slope_depths'])} depths)"), vs]

    notes = [
        f"Slope: least-squares slope of log(peak rate) on log(depth) [95{m.esc('%')} jackknife interval over seeds]; "
        f"0 = the best rate does not move with depth, -1 = it halves when the depth doubles. transfers: the whole "
        f"interval strictly within {m.esc('+/-')}0.75; falls / rises: it excludes 0; undecided: it contains 0 but "
        f"allows more; grid too coarse: one grid step moves the slope by 0.75 or more; too few seeds: fewer than 4 "
        f"at some depth; at the grid's edge: a best rate is the smallest or largest tested, so the grid bounds the "
        f"slope. Exploratory.",
    ]
    return _row_tables(first, fkeys, baseline, m, "Best-rate slope over depth", "tab:slope",
                       ["slope [95% CI]", "reading", "minus the baseline's slope [95% CI]"], cells, notes)


def _peaks(r: pd.Series) -> str:
    """`` (stream RMS 936, logit 149)``: the medians of the diagnostics of the first not-ok runs ("" if none)."""
    said = [f"{name} {r[key]:.3g}" for key, name in (("first_stream_rms", "stream RMS"), ("first_attn_logit", "logit"))
            if key in r and not missing(r[key])]
    return f" ({', '.join(said)})" if said else ""


def stability_tables(frame: pd.DataFrame, keys: list[str], baseline: str, m: Markup) -> list[Table]:
    """Rows = scheme, columns = depth, cells = the runs' first not ok, not ok by cause, measured and model LR50."""
    def cell(r: pd.Series, best: str | None) -> str:
        lr50 = (f"{fmt_rate(r['lr50'])} [{fmt_rate(r['lr50_low'])}, {fmt_rate(r['lr50_high'])}]"
                if not missing(r["lr50"]) else "-")
        if r.get("lr50_outside") in ("below", "above"):
            lr50 += f", {r['lr50_outside']} the rates run (the line extrapolates)"
        causes = ", ".join(f"{int(r[c])} {w}" for c, w in (("n_not_learned", "did not learn"), ("n_stream_grew",
                           STREAM_GREW), ("n_diverged", "diverged")) if r[c])
        through = (f"ok through {fmt_rate(r['ok_through_lr'])}; " if not missing(r.get("ok_through_lr"))
                   else "not ok at its lowest rate; ")
        first = (f"{through}first not ok at {fmt_rate(r['first_not_ok_lr'])}: {r['first_cause']}{_peaks(r)}"
                 if not missing(r["first_not_ok_lr"]) else "every run ok")
        censored = r.get("lr50_measured_censored")
        measured = (fmt_rate(r["lr50_measured"]) if not missing(r.get("lr50_measured"))
                    else f"{censored} the rates run" if censored in ("below", "above") else "-")
        counts = f"not ok {int(r['n_not_ok'])}/{int(r['n'])}" + (f": {causes}" if causes else "")
        return m.lines([m.esc(t) for t in (first, counts, f"measured LR50 {measured}", f"model's LR50 {lr50}")])

    def notes(part: pd.DataFrame) -> list[str]:
        slopes = part.drop_duplicates("variant")
        said = "; ".join(
            f"{m.data(v)}: " + (m.esc(f"{s:+.2f} [{lo:+.2f}, {hi:+.2f}]") if not missing(s) else m.data(note or "-"))
            for v, s, lo, hi, note in zip(slopes["variant"], slopes["slope"], slopes["slope_low"],
                                          slopes["slope_high"], slopes["note"]))
        first = part.iloc[0]
        checks = ("" if missing(first["parallel_p"]) else
                  f" Checks (Wald): parallel curves over rate p = {first['parallel_p']:.2f}"
                  + ("" if missing(first["linear_p"]) else f", a straight frontier in log depth p = "
                                                             f"{first['linear_p']:.2f}") + ".")
        return [m.esc(
            "Cell: what the runs at that depth show (the highest rate tried below the first not-ok run, then the "
            "lowest rate at which a run ended not ok, what its runs there commonly showed and their median largest "
            "stream RMS and attention logit; the runs not ok by what was observed, docs/training.md), the measured "
            "LR50: where the share of its runs not ok at that depth first reaches a half, interpolated on log rate "
            "between the rates tried, no model; then the model's LR50: the rate where half of the runs end not ok on "
            "the scheme's frontier line, from one Firth logistic model of not ok on log rate and log depth with a "
            "line per scheme [95% pointwise band], which pools every depth and can differ from the runs at one "
            "depth. Frontier slope on log depth (LR50 grows as depth^slope) [95% profile-likelihood interval]: ")
                + f"{said}.{m.esc(checks)}"]

    return _section_tables(frame, keys, baseline, m, "Stability frontier across depth", "tab:stability", cell, notes)


def propagation_tables(frame: pd.DataFrame, keys: list[str], baseline: str, m: Markup) -> list[Table]:
    """One table per propagation quantity: rows = scheme, columns = depth, cells = mean over seeds [95% interval]."""
    from suite.analysis.propagation import LOG_SCALE, QUANTITIES

    out = []
    for q, meaning in QUANTITIES.items():
        def cell(r: pd.Series, best: str | None, q=q) -> str:
            if missing(r[f"{q}_mean"]):
                return m.dash
            text = f"{r[f'{q}_mean']:.3g}"
            if r["n"] > 1 and not missing(r[f"{q}_ci_low"]):
                text += f" [{r[f'{q}_ci_low']:.3g}, {r[f'{q}_ci_high']:.3g}]"
            bad = r["n_diverged"] + r["n_error"]
            return m.lines([text, f"{bad} of {r['n'] + bad} not ok"]) if bad else text

        def notes(part: pd.DataFrame, q=q, meaning=meaning) -> list[str]:
            mean = "geometric mean over seeds [95% Student-t interval of log10, back-transformed]" if q in LOG_SCALE \
                else "mean over seeds [95% Student-t interval]"
            return [f"{m.code(q)}: {m.esc(meaning)}. Cell: {m.esc(mean)}, runs that ended ok; docs/propagation.md "
                    f"defines every quantity."]

        out += _section_tables(frame, keys, baseline, m, q, f"tab:prop-{q.replace('_', '-')}", cell, notes)
    return out


def _row_tables(frame: pd.DataFrame, keys: list[str], baseline: str, m: Markup, caption: str, label: str,
                columns: list[str], cells, notes: list[str]) -> list[Table]:
    """One table per section with one row per scheme (trends, aggregates)."""
    skeys = section_keys(keys)
    out = []
    for values, part in sections(frame, keys):  # one table per section: depth is a column of the table
        rows = [(_label(m, v, baseline), cells(part[part["variant"] == v].iloc[0], v == baseline))
                for v in variant_order(list(part["variant"]), baseline)]
        out.append(Table(_caption(m, caption, values, skeys), label + slug(values, skeys), m.esc("scheme"),
                         [m.esc(c) for c in columns], rows, notes))
    return out


def trend_tables(trends: pd.DataFrame, keys: list[str], baseline: str, m: Markup) -> list[Table]:
    """Rows = scheme: its score slope per doubling of depth, the interaction with the baseline, not-ok trend."""

    def cells(r: pd.Series, is_base: bool) -> list[str]:
        slope = m.dash if missing(r["acc_slope"]) else _estimate(m, r, "acc_slope", spec="+.1f")
        if is_base:
            return [slope, "baseline", "baseline"]
        diff = m.dash if missing(r["acc_interaction"]) else (
            _estimate(m, r, "acc_interaction", spec="+.1f") + (m.dagger if r["acc_interaction_p_adj"] < ALPHA else "")
            + (f" {m.esc(r['acc_interaction_kind'])}" if r["acc_interaction_kind"] else "")
            + (f" ({r['bound']}: no test)" if r["bound"] else ""))
        bad = m.esc("not estimable") if missing(r["not_ok_slope_diff"]) else (
            _estimate(m, r, "not_ok_slope_diff", 1.0, "+.2f")
            + (m.ddagger if r["not_ok_slope_diff_p_adj"] < ALPHA else ""))
        return [slope, diff, bad]

    notes = [
        f"Score slope: the scheme's own least-squares slope in points per doubling of depth [95{m.esc('%')} "
        f"interval], a description. Interaction with {m.code(baseline)}: how the scheme's difference from "
        f"{m.code(baseline)} changes with depth; with two depths (depth A->B) the difference at B minus the "
        f"difference at A, in points; with more, the slope of the differences per doubling. Paired by seed where "
        f"every seed ran in every cell (seed effects cancel), else Welch-Satterthwaite (no pooled variance); "
        f"[simultaneous 95{m.esc('%')} interval, Bonferroni over this table's schemes]. floor / ceiling: one "
        f"side scores chance / 100{m.esc('%')} in every run of some depth, where a difference is truncated: no "
        f"test. Not-ok column: the difference in the log-odds of ending not ok per doubling (binomial GLM "
        f"interaction). {m.dagger}, {m.ddagger}: exploratory, Bonferroni-adjusted p {m.esc('<')} {ALPHA}. Not "
        f"estimable: never or always not ok on one side (the log-odds run off to infinity).",
    ]
    return _row_tables(trends, keys, baseline, m, "Trends with depth", "tab:trend",
                       ["score slope", f"interaction with {baseline}", "not-ok log-odds slope, minus baseline's"],
                       cells, notes)


def aggregate_tables(agg: pd.DataFrame, keys: list[str], baseline: str, m: Markup) -> list[Table]:
    """Rows = scheme: IQM of the score over all depths, probability of improving on the baseline."""

    def cells(r: pd.Series, is_base: bool) -> list[str]:
        iqm = _estimate(m, r, "iqm")
        if is_base:
            return [iqm, "baseline"]
        if missing(r["poi"]):
            return [iqm, m.esc(f"not reported: {r['poi_pairs']} seed pairs (< {MIN_PAIRS})")]
        return [iqm, _estimate(m, r, "poi", 1.0, ".2f")]

    notes = [
        f"Across every depth of the section (Agarwal et al. 2021): the interquartile mean of the score "
        f"({m.esc('%')}) of all the scheme's runs, and the probability that the scheme's run beats "
        f"{m.code(baseline)}'s run with the same seed at the same depth (ties count half), averaged over depths; "
        f"0.5 = no tendency; only from {MIN_PAIRS} or more seed pairs (with fewer it moves in steps too coarse to "
        f"read). [95{m.esc('%')} stratified bootstrap intervals: runs (pairs) resampled within their depth, "
        f"10,000 resamples, seed 0.] No interval: fewer than {robust.MIN_RUNS} runs of a scheme or "
        f"{robust.MIN_PER_STRATUM} at one of its depths, too few to resample soundly.",
    ]
    return _row_tables(agg, keys, baseline, m, "Across depths", "tab:aggregate",
                       ["IQM accuracy", f"P(better than {baseline})"], cells, notes)


def _section_tables(frame: pd.DataFrame, keys: list[str], baseline: str, m: Markup, caption: str, label: str,
                    cell, notes, best_of=None) -> list[Table]:
    """One table per non-empty section of ``frame``, cells from ``cell(row, best)``, notes from ``notes(rows)``."""
    keys = [k for k in keys if k != LR or LR in frame]  # the frames over every rate (lr, transfer, ...) have none
    skeys = section_keys(keys)
    out = []
    for values, part in sections(frame, keys):
        corner, columns, rows = _grid(part, keys, baseline, m, cell, best_of)
        if rows:
            out.append(Table(_caption(m, caption, values, skeys), label + slug(values, skeys), corner, columns, rows,
                             notes(part)))
    return out


def _caption(m: Markup, caption: str, values: tuple, skeys: list[str]) -> str:
    title = section_title(values, skeys)
    return m.esc(caption) + (f" ({m.data(title)})" if title else "")


def document(fmt: str, kind: Any, title: str, frame: pd.DataFrame, keys: list[str], baseline: str,
             intro: str) -> str:
    """One ``tables/<kind>.{md,tex}``: a header and the kind's tables, as Markdown or a LaTeX fragment."""
    m = MD if fmt == "md" else TEX
    tables = [t for build in kind.tables for t in build(frame, keys, baseline, m)]
    keys_text = ", ".join(m.code(k) for k in keys)
    if kind.name == "propagation":
        intro = (f"{m.esc(intro)} Grouped by {keys_text}. Every number at full precision: tables/{kind.name}.csv; "
                 f"the quantities: docs/propagation.md.")
    else:
        intro = (f"{m.esc(intro)} Grouped by {keys_text}; baseline {m.code(baseline)}. Accuracy in percent. Every "
                 f"number at full precision: tables/{kind.name}.csv; in words: findings.md.")
    if fmt == "md":
        return "\n".join([f"# Analysis: {m.data(title)}", "", intro, "", *[render_md(t) for t in tables]])
    return "\n".join([f"% Analysis: {m.data(title)}. Written by suite analyze; needs \\usepackage{{booktabs,graphicx}}.",
                      f"% {intro}", "", *[render_tex(t) for t in tables]])
