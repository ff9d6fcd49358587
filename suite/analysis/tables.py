"""Render the analysis as tables: CSV (full precision), GitHub Markdown and LaTeX (booktabs).

Layout, as in the CaiT paper: rows = scheme (``variant``, baseline first), columns = depth,
one table per value of the other group keys (e.g. ``train.lr``). Cell formats are spelled out in a
legend under each table and in ``docs/statistics.md``. Output is deterministic: sorted rows and
columns, fixed float formats, no dates or absolute paths, so a rerun writes identical bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from suite.analysis import stats
from suite.analysis.grouping import DEPTH, LR, section_keys, sections, sort_value, variant_order

ALPHA = 0.05  # marks: Holm-adjusted p below this


# ----------------------------------------------------------------------------- files


def write_csv(frame: pd.DataFrame, path: Path) -> Path:
    """Write ``frame`` as CSV at full precision (shortest round-trip floats), ``\\n`` line ends."""
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False, lineterminator="\n")
    return path


def write_text(text: str, path: Path) -> Path:
    """Write ``text`` as UTF-8 with ``\\n`` line ends (identical bytes on every platform)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="\n")
    return path


# ----------------------------------------------------------------------------- markup


@dataclass(frozen=True)
class Markup:
    """The few bits of syntax that differ between Markdown and LaTeX cells."""

    name: str
    dash: str
    dagger: str
    ddagger: str
    times: str
    geq: str
    sep: str

    def esc(self, text: str) -> str:
        if self.name == "md":
            return text.replace("\\", "\\\\").replace("|", "\\|")
        out = []
        for ch in text:
            out.append({"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                        "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                        "^": r"\textasciicircum{}", "<": r"$<$", ">": r"$>$"}.get(ch, ch))
        return "".join(out)

    def bold(self, text: str) -> str:
        return f"**{text}**" if self.name == "md" else rf"\textbf{{{text}}}"

    def code(self, text: str) -> str:
        return f"`{text}`" if self.name == "md" else rf"\texttt{{{self.esc(text)}}}"

    def lines(self, parts: list[str]) -> str:
        """One cell on several lines."""
        if self.name == "md":
            return "<br>".join(parts)
        return r"\begin{tabular}[t]{@{}c@{}}" + r" \\ ".join(parts) + r"\end{tabular}"


MD = Markup("md", dash="—", dagger="†", ddagger="‡", times="×", geq="≥", sep=" · ")
TEX = Markup("tex", dash="---", dagger=r"$^{\dagger}$", ddagger=r"$^{\ddagger}$", times=r"$\times$",
             geq=r"$\geq$", sep=r" $\cdot$ ")


@dataclass
class Table:
    """One rendered table; every string is already in the target markup."""

    caption: str
    label: str
    corner: str
    columns: list[str]
    rows: list[tuple[str, list[str]]]
    notes: list[str] = field(default_factory=list)


def fmt_value(v: object) -> str:
    """A key value as text: floats in %g (0.001, 1e-05), others as str."""
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _fmt_ms(x: float) -> str:
    return f"{x:.0f}" if x >= 99.95 else f"{x:#.3g}"  # 3 significant digits: 9.48, 12.0, 123


def _nan(x: object) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


# ----------------------------------------------------------------------------- grids


def _grid(part: pd.DataFrame, keys: list[str], baseline: str, m: Markup, cell, best_of=None,
          missing: str = "not run", skip_baseline: bool = False):
    """Pivot one section: rows = variants, columns = depths; ``cell(row, best)`` makes a cell."""
    has_depth = DEPTH in keys
    depths = sorted(set(part[DEPTH]), key=sort_value) if has_depth else [None]
    columns = [f"depth {fmt_value(d)}" if has_depth else "all runs" for d in depths]
    variants = variant_order(list(part["variant"]), baseline)
    if skip_baseline:
        variants = [v for v in variants if v != baseline]
    rows = []
    for v in variants:
        cells = []
        for d in depths:
            sel = part[(part["variant"] == v) & ((part[DEPTH] == d) if has_depth else True)]
            col = part[(part[DEPTH] == d)] if has_depth else part
            best = best_of(col) if best_of else None
            cells.append(cell(sel.iloc[0], best) if len(sel) else m.esc(missing))
        label = m.esc(str(v)) + (" (baseline)" if v == baseline else "")
        rows.append((label, cells))
    return m.esc("scheme"), [m.esc(c) for c in columns], rows


def _best(values: list[str], higher: bool) -> str | None:
    """The best displayed value of a column (ties by displayed text); None if nothing stands out."""
    if len(set(values)) < 2:
        return None
    return max(values, key=float) if higher else min(values, key=float)


def _section_title(label: tuple, skeys: list[str]) -> str:
    return ", ".join(f"{k} = {fmt_value(v)}" for k, v in zip(skeys, label))


def slug(label: tuple, skeys: list[str]) -> str:
    """``slug((0.001,), ["train.lr"])`` -> ``-train.lr-0.001``: a file- and label-safe suffix."""
    return safe("".join(f"-{k}-{fmt_value(v)}" for k, v in zip(skeys, label)))


def safe(text: str) -> str:
    """Keep letters, digits and ``.-+``; anything else becomes ``-`` (file names, LaTeX labels)."""
    return "".join(c if c.isalnum() or c in ".-+" else "-" for c in text)


# ----------------------------------------------------------------------------- tables


def accuracy_tables(summary: pd.DataFrame, keys: list[str], baseline: str, m: Markup) -> list[Table]:
    """Rows = scheme, columns = depth, cells = accuracy (%) [95% CI] and diverged/failed k/n."""

    def best_of(col: pd.DataFrame) -> str | None:
        return _best([f"{100 * a:.1f}" for a in col["acc_mean"] if not _nan(a)], higher=True)

    def cell(r: pd.Series, best: str | None) -> str:
        if r["n_ok"] == 0 or _nan(r["acc_mean"]):
            acc = m.dash
        else:
            acc = f"{100 * r['acc_mean']:.1f}"
            acc = m.bold(acc) if acc == best else acc
            if _nan(r["acc_ci_low"]):
                acc += " " + m.esc("[no CI: 1 run]")
            else:
                acc += f" [{100 * r['acc_ci_low']:.1f}, {100 * r['acc_ci_high']:.1f}]"
            acc += m.dagger if r["acc_p_holm"] < ALPHA else ""
        counts = f"div {r['n_diverged']}/{r['n']}" + (m.ddagger if r["diverged_p_holm"] < ALPHA else "")
        counts += f"{m.sep}fail {r['n_failed']}/{r['n']}"
        counts += f"{m.sep}err {r['n_error']}" if r["n_error"] else ""
        return m.lines([acc, counts])

    def notes(part: pd.DataFrame) -> list[str]:
        b = m.code(baseline)
        return [
            f"Cell: mean test accuracy ({m.esc('%')}) of the runs that ended {m.code('ok')} "
            f"[95{m.esc('%')} percentile bootstrap interval, {stats.BOOTSTRAP_RESAMPLES:,} resamples, seed "
            f"{stats.BOOTSTRAP_SEED}]; div k/n and fail k/n: diverged and failed runs among the n runs that "
            f"did not error; err k: runs that raised an error, left out of every rate.",
            f"{m.dagger} accuracy differs from {b} in the same column (Welch t-test); {m.ddagger} divergence "
            f"rate differs (Fisher exact test, two-sided); both at Holm-adjusted p {m.esc('<')} {ALPHA}, "
            f"adjusted over this table's accuracy tests and, separately, its rate tests. "
            f"Bold: best accuracy per column. {m.dash}: no run ended {m.code('ok')}; "
            f"{m.esc('[no CI: 1 run]')}: a single run has no interval.",
        ] + _missing_baseline_note(part, keys, baseline, m)

    return _section_tables(summary, keys, baseline, m, "Accuracy and stability", "tab:acc", cell, notes, best_of)


def _missing_baseline_note(part: pd.DataFrame, keys: list[str], baseline: str, m: Markup) -> list[str]:
    lost = part[~part["has_baseline"] & ~part["is_baseline"]]
    if lost.empty:
        return []
    where = sorted({fmt_value(d) for d in lost[DEPTH]}, key=float) if DEPTH in keys else []
    at = f" at depth {', '.join(where)}" if where else ""
    return [f"No {m.code(baseline)} runs{at}: no tests there."]


def step_time_tables(summary: pd.DataFrame, keys: list[str], baseline: str, m: Markup) -> list[Table]:
    """Rows = scheme, columns = depth, cells = median step time (ms) and its ratio to the baseline."""
    if summary["step_time_ms"].isna().all():
        return []

    def best_of(col: pd.DataFrame) -> str | None:
        return _best([_fmt_ms(x) for x in col["step_time_ms"] if not _nan(x)], higher=False)

    def cell(r: pd.Series, best: str | None) -> str:
        if _nan(r["step_time_ms"]):
            return m.dash
        ms = _fmt_ms(r["step_time_ms"])
        ms = (m.bold(ms) if ms == best else ms) + " ms"
        if r["is_baseline"]:
            return m.lines([ms, "baseline"])
        if _nan(r["overhead"]):
            return m.lines([ms, "no baseline"])
        lo, hi = r["overhead_ci_low"], r["overhead_ci_high"]
        ci = m.esc("[no CI]") if _nan(lo) else f"[{lo:.2f}, {hi:.2f}]"
        return m.lines([ms, f"{m.times}{r['overhead']:.2f} {ci}"])

    def notes(part: pd.DataFrame) -> list[str]:
        return [
            f"Cell: median over runs of each run's median training-step time (ms), then "
            f"{m.times} its ratio to {m.code(baseline)} in the same column [95{m.esc('%')} percentile bootstrap "
            f"interval, runs of both groups resampled, {stats.BOOTSTRAP_RESAMPLES:,} resamples]. Runs that "
            f"errored are left out. Bold: fastest per column. {m.esc('[no CI]')}: a group with a single timed run.",
        ]

    return _section_tables(summary, keys, baseline, m, "Step time", "tab:time", cell, notes, best_of)


def frontier_tables(frontier: pd.DataFrame, keys: list[str], baseline: str, m: Markup) -> list[Table]:
    """Rows = scheme, columns = depth, cells = largest stable learning rate."""
    fkeys = [k for k in keys if k != LR]

    def best_of(col: pd.DataFrame) -> str | None:
        return _best([fmt_value(x) for x in col["lr_stable_max"] if not _nan(x)], higher=True)

    def cell(r: pd.Series, best: str | None) -> str:
        if _nan(r["lr_stable_max"]):
            return m.dash
        lr = fmt_value(r["lr_stable_max"])
        lr = m.bold(lr) if lr == best else lr
        return (m.geq if r["censored"] else "") + lr

    def notes(part: pd.DataFrame) -> list[str]:
        lrs = f"{fmt_value(float(part['lr_tested_min'].min()))} to {fmt_value(float(part['lr_tested_max'].max()))}"
        return [
            f"Cell: the largest learning rate ({m.code(LR)}) at which at least half of the seeds that did not "
            f"error ended {m.code('ok')}; rates tested: {lrs}. {m.geq}: stable at the largest rate tested, "
            f"so the frontier may lie higher. {m.dash}: unstable at every rate tested. Bold: largest per column.",
        ]

    return _section_tables(frontier, fkeys, baseline, m, "Stability frontier", "tab:frontier", cell, notes, best_of)


def power_tables(power: pd.DataFrame, keys: list[str], baseline: str, m: Markup) -> list[Table]:
    """Rows = scheme, columns = depth, cells = seeds per group for 80% power (Fisher)."""
    def cell(r: pd.Series, best: str | None) -> str:
        counts = f"{r['n_diverged']}/{r['n']} vs {r['baseline_n_diverged']}/{r['baseline_n']}"
        need = r["seeds_needed"]
        if _nan(need):
            text = m.dash
        elif math.isinf(need):
            text = "no difference" if r["diverged_rate"] == r["baseline_diverged_rate"] else m.esc("> 2000 seeds")
        else:
            text = f"{int(need)} seeds (now {r['power_now']:.2f})"
        return m.lines([counts, text])

    def notes(part: pd.DataFrame) -> list[str]:
        return [
            f"Cell: diverged k/n of the scheme vs {m.code(baseline)} in the same column, then the seeds per group "
            f"a two-sided Fisher exact test at {m.esc('alpha')} = 0.05 needs to detect that difference with "
            f"80{m.esc('%')} power, taking the observed rates as true (exact enumeration, no simulation); "
            f"now: the power with the current seeds. Not adjusted for multiple comparisons.",
        ]

    return _section_tables(power, keys, baseline, m, "Seeds needed", "tab:power", cell, notes,
                           missing="no baseline", skip_baseline=True)


def _section_tables(frame: pd.DataFrame, keys: list[str], baseline: str, m: Markup, caption: str, label: str,
                    cell, notes, best_of=None, **grid_options) -> list[Table]:
    """One table per section of ``frame`` (:func:`~suite.analysis.grouping.sections`).

    Args:
        caption, label: the table's caption and LaTeX label; the section's keys are appended.
        cell: ``(row, best) -> str``, one cell (see :func:`_grid`). best_of: the best value per column.
        notes: ``(section rows) -> list of notes`` under the table.
        grid_options: passed to :func:`_grid` (``missing``, ``skip_baseline``).

    Returns:
        The tables, in section order; a section without rows gives none.
    """
    skeys = section_keys(keys)
    out = []
    for values, part in sections(frame, keys):
        title = _section_title(values, skeys)
        corner, columns, rows = _grid(part, keys, baseline, m, cell, best_of, **grid_options)
        if rows:
            out.append(Table(m.esc(caption + (f" ({title})" if title else "")), label + slug(values, skeys),
                             corner, columns, rows, notes(part)))
    return out


# ----------------------------------------------------------------------------- renderers


def render_md(table: Table) -> str:
    head = f"| {table.corner} | " + " | ".join(table.columns) + " |"
    rule = "|:--|" + "|".join(":-:" for _ in table.columns) + "|"
    body = [f"| {label} | " + " | ".join(cells) + " |" for label, cells in table.rows]
    return "\n".join([f"### {table.caption}", "", head, rule, *body, "", "\n\n".join(table.notes), ""])


def render_tex(table: Table) -> str:
    cols = "l" + "c" * len(table.columns)
    lines = [
        r"\begin{table}[htbp]",
        r"\centering",
        rf"\caption{{{table.caption}}}",
        rf"\label{{{table.label}}}",
        r"\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%",
        rf"\begin{{tabular}}{{{cols}}}",
        r"\toprule",
        f"{table.corner} & " + " & ".join(table.columns) + r" \\",
        r"\midrule",
        *[f"{label} & " + " & ".join(cells) + r" \\" for label, cells in table.rows],
        r"\bottomrule",
        r"\end{tabular}}",
        r"\par\smallskip",
        r"\parbox{\linewidth}{\footnotesize " + r" \par ".join(table.notes) + "}",
        r"\end{table}",
        "",
    ]
    return "\n".join(lines)


def document(fmt: str, title: str, summary: pd.DataFrame, keys: list[str], baseline: str, n_runs: int,
             power: pd.DataFrame | None = None, frontier: pd.DataFrame | None = None) -> str:
    """The whole ``tables/summary.{md,tex}``: a header and every table.

    Args:
        fmt: ``md`` or ``tex``.
        title: the ablation's name.
        summary: from :func:`suite.analysis.summary.summarize`.
        keys: its group keys.
        baseline: the baseline variant.
        n_runs: runs read (errors included).
        power: from :func:`suite.analysis.summary.power_table`, or None.
        frontier: from :func:`suite.analysis.summary.stability_frontier`, or None.

    Returns:
        Markdown, or a LaTeX fragment (needs ``\\usepackage{booktabs,graphicx}``).
    """
    m = MD if fmt == "md" else TEX
    tables = accuracy_tables(summary, keys, baseline, m) + step_time_tables(summary, keys, baseline, m)
    if frontier is not None and not frontier.empty:
        tables += frontier_tables(frontier, keys, baseline, m)
    if power is not None and not power.empty:
        tables += power_tables(power, keys, baseline, m)
    keys_text = ", ".join(m.code(k) for k in keys)
    intro = (f"{n_runs} runs in {len(summary)} groups, grouped by {keys_text}; baseline {m.code(baseline)}. "
             f"Accuracy in percent. Every number at full precision: tables/summary.csv.")
    if fmt == "md":
        return "\n".join([f"# Analysis: {m.esc(title)}", "", intro, "", *[render_md(t) for t in tables]])
    head = [f"% Analysis: {title}. Written by suite analyze; needs \\usepackage{{booktabs,graphicx}}.",
            f"% {intro}", ""]
    return "\n".join(head + [render_tex(t) for t in tables])


def standalone_latex(fragment: str) -> str:
    """Wrap a fragment from :func:`document` into a document that ``pdflatex`` compiles."""
    return "\n".join([
        r"\documentclass{article}",
        r"\usepackage[T1]{fontenc}",
        r"\usepackage{booktabs}",
        r"\usepackage{graphicx}",
        r"\begin{document}",
        fragment,
        r"\end{document}",
        "",
    ])
