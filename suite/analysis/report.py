"""``suite report DIR [--compare OTHER]``: one self-contained HTML page of an analysed results folder.

The page reads what ``suite analyze`` wrote (``findings.md``, ``tables/*.md``, ``figures/*.png``,
``runs.csv``) and the run folders, and embeds everything (figures as data URIs, no script, no
network at view time): the plain-language answer first, then the figures, tables, findings and
every run with its status, a loss curve and links to its ``config.yaml`` and ``metrics.jsonl``.
A results folder travels between people, so everything read from it is untrusted text: the page is a
Jinja2 template with autoescape, Markdown is rendered without raw HTML (:func:`markup.md_html`), every
href passes :func:`markup.href_ok` (a path inside the folder or a PNG data URI; anything else stays
text), and a Content-Security-Policy forbids script, so an escape missed still runs nothing.
With ``--compare``, two folders side by side: which keys of ``ablation.yaml`` changed and which
cells of ``tables/summary.csv`` moved (Welch's t-test per cell, unadjusted: a screen).
"""

from __future__ import annotations

import base64
import math
from pathlib import Path
from typing import Any, Callable

import jinja2
import pandas as pd
import yaml
from markupsafe import Markup

from suite import files, store
from suite.analysis import markup
from suite.analysis.load import AnalysisError
from suite.config import flatten, read_yaml

REPORT = "report.html"
COMPARE = "compare.html"  # --compare writes here: report.html stays the folder's own page
TABLE_ORDER = ("summary", "lr", "trends", "aggregate", "learn", "transfer", "propagation")
FIGURE_ORDER = ("accuracy_vs_lr", "accuracy_vs_depth", "best_lr_vs_depth", "frontier_vs_depth", "not_ok_vs_depth")
CONFIG_PREFIXES = ("model.", "train.", "data.")
MAX_CURVE_POINTS = 200  # a sparkline needs no more


def write_report(root: str | Path, compare: str | Path | None = None,
                 warn: Callable[[str], None] = lambda line: None) -> Path:
    """Write ``root/report.html`` (with ``compare``: ``root/compare.html``, the same page with the
    comparison; atomically, never through a link) and return its path. ``warn`` gets each line the
    comparison warns with (also on the page).

    Raises:
        AnalysisError: ``root`` (or ``compare``) is not an analysed results folder.
    """
    root = Path(root)
    page = build(root, compare, warn)
    return markup.write_text(page, root / (REPORT if compare is None else COMPARE))


def build(root: Path, compare: str | Path | None = None, warn: Callable[[str], None] = lambda line: None) -> str:
    """The report of ``root`` as one HTML document."""
    runs = _runs_csv(root)
    findings = _read(root / "findings.md")
    title = str(runs["ablation"].dropna().iloc[0]) if runs["ablation"].notna().any() else root.resolve().name
    answer, rest = _split_answer(findings)
    figures = []
    for path in sorted((root / "figures").glob("*.png"), key=_figure_rank):
        src = "data:image/png;base64," + base64.b64encode(_read_bytes(path)).decode("ascii")
        if markup.href_ok(src):
            figures.append({"name": path.stem, "src": src, "pdf": markup.link(f"figures/{path.stem}.pdf")})
    tables = [{"name": path.stem, "html": _md(_demote(_read(path), drop_title=True)),
               "links": [(kind, markup.link(f"tables/{path.stem}.{kind}")) for kind in ("md", "csv", "tex")]}
              for path in sorted((root / "tables").glob("*.md"), key=_table_rank)]
    return PAGE.render(title=title, provenance=_provenance(root, runs), answer=_md(answer),
                       incomplete=_completeness(root, runs), compare=None if compare is None else _compare(root, Path(compare), warn),
                       figures=figures, tables=tables, findings=_md(_demote(rest)), runs=_run_list(root, runs), css=Markup(CSS))


# ----------------------------------------------------------------------------- reading


def _read(path: Path) -> str:
    try:
        return files.read_text(path)
    except FileNotFoundError:
        raise AnalysisError(f"{path}: missing; run `suite analyze {path.parent}` first, then `suite report`") from None


def _read_bytes(path: Path) -> bytes:
    with files.open_regular(path) as f:
        return f.read()


def _runs_csv(root: Path) -> pd.DataFrame:
    if not root.is_dir():
        raise AnalysisError(f"{root}: no such folder; pass a results folder, e.g. results/default")
    text = _read(root / "runs.csv")
    from io import StringIO

    try:
        frame = pd.read_csv(StringIO(text))
    except (ValueError, pd.errors.ParserError) as err:
        raise AnalysisError(f"{root / 'runs.csv'}: cannot be read ({err}); run `suite analyze {root}` again") from None
    missing = {"run_id", "variant", "status", "run_dir"} - set(frame.columns)
    if missing or frame.empty:
        raise AnalysisError(f"{root / 'runs.csv'}: no runs or no {', '.join(sorted(missing))} column; "
                            f"run `suite analyze {root}` again")
    if "ablation" not in frame.columns:
        frame["ablation"] = None
    return frame


def _split_answer(findings: str) -> tuple[str, str]:
    """(the answer block, the rest of findings.md without its title). The block is one paragraph for a
    comparison tested alone (``**Primary comparison**``), or a paragraph (``**Primary comparisons**``)
    and a numbered list for co-primary ones."""
    lines = findings.strip().splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    paragraphs = "\n".join(lines).strip().split("\n\n")
    if paragraphs and paragraphs[0].startswith("**Primary comparison**"):
        return paragraphs[0], "\n\n".join(paragraphs[1:])
    if paragraphs and paragraphs[0].startswith("**Primary comparisons**"):
        n = 2 if len(paragraphs) > 1 and paragraphs[1].startswith("1. ") else 1
        return "\n\n".join(paragraphs[:n]), "\n\n".join(paragraphs[n:])
    return ("No primary comparison is declared in `ablation.yaml` (its `primary:` key), so this ablation decides "
            "nothing by itself: the comparisons below are exploratory estimates. Declare one to get a tested "
            "answer here (docs/statistics.md)."), "\n\n".join(paragraphs)


def _figure_rank(path: Path) -> tuple[int, str]:
    """The figures that answer the question first (accuracy at each scheme's rates, best rate by depth)."""
    return (FIGURE_ORDER.index(path.stem) if path.stem in FIGURE_ORDER else len(FIGURE_ORDER), path.stem)


def _table_rank(path: Path) -> tuple[int, str]:
    return (TABLE_ORDER.index(path.stem) if path.stem in TABLE_ORDER else len(TABLE_ORDER), path.stem)


# ----------------------------------------------------------------------------- sections


def _provenance(root: Path, runs: pd.DataFrame) -> dict[str, Any]:
    from suite import __version__

    counts = runs["status"].value_counts()
    statuses = ", ".join(f"{int(counts.get(s, 0))} {s}" for s in store.STATUSES)
    commits = sorted({str(c)[:12] + (" (dirty)" if "dirty" in str(c) else "")
                      for c in runs.get("git_commit", pd.Series(dtype=str)).dropna()})
    commit = ", ".join(commits[:3]) + (f" and {len(commits) - 3} more" if len(commits) > 3 else "") or "unknown"
    return {"n": len(runs), "statuses": statuses, "root": str(root), "commit": commit, "version": __version__}


def _completeness(root: Path, runs: pd.DataFrame) -> tuple[int, int] | None:
    """(runs with a summary, runs planned) when the sweep is incomplete, else None."""
    try:
        ids = store.read_json(root / "run_ids.json")
    except (OSError, ValueError):
        return None
    return (len(runs), len(ids)) if isinstance(ids, list) and len(runs) < len(ids) else None


def _run_list(root: Path, runs: pd.DataFrame) -> dict[str, Any]:
    """The runs table: its head and one dict per run. A run folder is read (and linked) only when its
    ``run_dir`` is a path inside ``root`` (:func:`markup.link`): ``runs.csv`` is data like the rest."""
    config_keys = [c for c in runs.columns if c.startswith(CONFIG_PREFIXES) and runs[c].nunique(dropna=False) > 1]
    head = ["run", "variant", *config_keys, "seed", "status", "test acc", "steps", "loss", "error"]
    rows = []
    order = runs.sort_values(["variant", *config_keys, "seed"], kind="stable")
    for _, r in order.iterrows():
        rel = str(r["run_dir"]).rstrip("/") if not markup.missing(r["run_dir"]) else ""
        inside = rel != "" and markup.link(rel) is not None
        folder = root / rel
        acc = r.get("test_acc")
        rows.append({
            "id": str(r["run_id"]),
            "href": markup.link(f"{rel}/config.yaml") if inside and (folder / "config.yaml").is_file() else None,
            "curve": _sparkline(folder) if inside else "",
            "curve_href": markup.link(f"{rel}/metrics.jsonl") if inside else None,
            "cells": [str(r["variant"]), *(markup.fmt_value(r[k]) for k in config_keys), str(r.get("seed"))],
            "status": str(r["status"]),
            "tail": ["" if markup.missing(acc) else f"{100 * float(acc):.1f}%",
                     "" if markup.missing(r.get("steps_done")) else str(int(r["steps_done"]))],
            "error": "" if markup.missing(r.get("error")) else str(r["error"]),
        })
    return {"head": head, "rows": rows}


def sparkline_points(losses: list[tuple[int, float]], width: int = 120, height: int = 24) -> str:
    """SVG polyline points of (step, loss) pairs scaled into a ``width`` x ``height`` box (y grows down)."""
    pts = [(s, v) for s, v in losses if math.isfinite(v)]
    if len(pts) < 2:
        return ""
    if len(pts) > MAX_CURVE_POINTS:
        stride = math.ceil(len(pts) / MAX_CURVE_POINTS)
        pts = pts[::stride] + ([pts[-1]] if (len(pts) - 1) % stride else [])
    s0, s1 = pts[0][0], pts[-1][0]
    lo, hi = min(v for _, v in pts), max(v for _, v in pts)
    xs = [(s - s0) / ((s1 - s0) or 1) * width for s, _ in pts]
    ys = [height - (v - lo) / ((hi - lo) or 1) * height for _, v in pts]
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys))


def _sparkline(folder: Path) -> str:
    """The points of ``folder``'s training-loss sparkline ("" when it has none)."""
    try:
        records = store.read_metrics(folder)
    except (store.CorruptFile, OSError):
        return ""
    losses = [(int(r["step"]), float(r["loss"])) for r in records
              if r.get("kind") == "train" and isinstance(r.get("loss"), (int, float)) and isinstance(r.get("step"), int)]
    return sparkline_points(losses)


def _compare(root: Path, other: Path, warn: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """What changed in the ablation file, and which cells of the summary table moved."""
    _runs_csv(other)  # the same checks: an analysed folder
    warnings = []
    mine, theirs = _ablation(root), _ablation(other)
    for folder, found in ((root, mine), (other, theirs)):
        if found is None:
            warnings.append(f"{folder}/ablation.yaml cannot be read (missing, damaged or too large): its keys are "
                            f"not compared")
    mine, theirs = mine or {}, theirs or {}
    changed = [(k, _short(theirs.get(k, "(absent)")), _short(mine.get(k, "(absent)")))
               for k in sorted(set(mine) | set(theirs)) if mine.get(k, "(absent)") != theirs.get(k, "(absent)")]
    a, b = _summary(root), _summary(other)
    only = sorted(set(_cell_keys(a)) ^ set(_cell_keys(b)))
    if only:
        warnings.append(f"the two folders' cells are not the same kind: {', '.join(only)} splits the cells of one "
                        f"folder only, so no cell is compared; compare folders of the same ablation")
    for line in warnings:
        warn(line)
    return {"root": str(root), "other": str(other), "changed": changed, "warnings": warnings,
            "cells": None if only else _moved_cells_view(a, b, str(root), str(other))}


def _cell_keys(summary: pd.DataFrame) -> list[str]:
    """The keys that name a cell of a summary table (its columns before ``is_baseline``)."""
    cols = list(summary.columns)
    return cols[: cols.index("is_baseline")] if "is_baseline" in cols else []


def _ablation(root: Path) -> dict[str, Any] | None:
    """The folder's ablation.yaml flattened (its description aside); None when it cannot be read."""
    try:
        raw = read_yaml(root / "ablation.yaml")  # the alias-bomb and size guards of every ablation file
    except (OSError, ValueError, yaml.YAMLError):
        return None
    return {k: v for k, v in flatten(raw).items() if k != "description"} if isinstance(raw, dict) else None


def _summary(root: Path) -> pd.DataFrame:
    from io import StringIO

    try:
        return pd.read_csv(StringIO(files.read_text(root / "tables" / "summary.csv")))
    except (OSError, ValueError):
        return pd.DataFrame()


def moved_cells(mine: pd.DataFrame, theirs: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """One row per cell (group) of either summary table: both mean scores, their difference, Welch's
    t-test between the two cells' runs (from their means, SDs and counts) and ``change``: ``moved``
    (p < ``alpha``, unadjusted: a screen, not a verdict), ``not significant`` (which is not "the
    same"), or ``new`` / ``gone`` for a cell on one side only."""
    need = {"is_baseline", "acc_n", "acc_mean", "acc_std", "acc_ci_low", "acc_ci_high"}
    if mine.empty or theirs.empty or not need <= set(mine.columns) or not need <= set(theirs.columns):
        return pd.DataFrame()
    keys = [c for c in mine.columns[: list(mine.columns).index("is_baseline")] if c in theirs.columns]
    cols = keys + ["acc_n", "acc_mean", "acc_std", "acc_ci_low", "acc_ci_high"]
    merged = mine[cols].merge(theirs[cols], on=keys, how="outer", suffixes=("", "_other"), indicator=True)
    merged["diff"] = merged["acc_mean"] - merged["acc_mean_other"]
    merged["p"] = [_welch(r) for _, r in merged.iterrows()]
    merged["change"] = merged["_merge"].astype(str).map({"left_only": "new", "right_only": "gone", "both": "not significant"})
    merged.loc[(merged["_merge"] == "both") & (merged["p"] < alpha), "change"] = "moved"
    return merged.drop(columns="_merge").reset_index(drop=True)


def _welch(r: pd.Series) -> float:
    """Welch's two-sided p between two cells from their summary statistics (NaN without two runs each)."""
    from scipy import stats as sps

    n1, n2 = r["acc_n"], r["acc_n_other"]
    if markup.missing(n1) or markup.missing(n2) or n1 < 2 or n2 < 2:
        return math.nan
    s1, s2 = float(r["acc_std"]), float(r["acc_std_other"])
    if s1 == 0 and s2 == 0:  # no spread on either side: any difference is all there is
        return 0.0 if r["acc_mean"] != r["acc_mean_other"] else 1.0
    return float(sps.ttest_ind_from_stats(r["acc_mean"], s1, n1, r["acc_mean_other"], s2, n2, equal_var=False).pvalue)


def _moved_cells_view(mine: pd.DataFrame, theirs: pd.DataFrame, name: str, other: str) -> dict[str, Any] | None:
    """The compare table of :func:`moved_cells` as text cells (None without two summary tables)."""
    cells = moved_cells(mine, theirs)
    if cells.empty:
        return None
    keys = list(cells.columns[: list(cells.columns).index("acc_n")])

    def score(m: Any, lo: Any, hi: Any) -> str:
        return "" if markup.missing(m) else f"{100 * m:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"

    rows = [([*(markup.fmt_value(r[k]) for k in keys),
              score(r["acc_mean_other"], r["acc_ci_low_other"], r["acc_ci_high_other"]),
              score(r["acc_mean"], r["acc_ci_low"], r["acc_ci_high"]),
              "" if markup.missing(r["diff"]) else f"{100 * r['diff']:+.1f}",
              "" if markup.missing(r["p"]) else f"{r['p']:.3f}"], str(r["change"])) for _, r in cells.iterrows()]
    return {"n_moved": int((cells["change"] == "moved").sum()), "n": len(cells), "rows": rows,
            "head": [*keys, f"score {other}", f"score {name}", "difference", "Welch p", "change"]}


# ----------------------------------------------------------------------------- html


def _short(value: Any) -> str:
    text = markup.fmt_value(value) if not isinstance(value, (list, dict)) else yaml.safe_dump(value, default_flow_style=True).strip()
    return text if len(text) <= 200 else text[:197] + "..."


def _demote(text: str, drop_title: bool = False) -> str:
    """Markdown headings one level down (the page has its own h1 and h2), the first ``#`` title dropped."""
    lines = text.splitlines()
    if drop_title and lines and lines[0].startswith("# "):
        lines = lines[1:]
    return "\n".join("##" + line if line.startswith("#") else line for line in lines)


def _md(text: str) -> Markup:
    """Markdown as HTML that the template inserts as is: :func:`markup.md_html` keeps no raw HTML."""
    return Markup(markup.md_html(text))


CSS = """
body{font:15px/1.45 system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.6em} h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:13px} td,th{border:1px solid #ddd;padding:2px 6px;text-align:left}
th{background:#f4f4f4} .meta{color:#555} .warn{background:#fff3cd;padding:.4em .6em}
#answer{background:#eef5ff;padding:.2em 1em 1em;border-radius:6px}
figure{display:inline-block;margin:.5em;vertical-align:top} figure img{max-width:540px;border:1px solid #eee}
.st-ok{color:#1a7f37} .st-diverged,.st-error{color:#b42318;font-weight:600} .st-failed{color:#b54708}
.ch-moved{color:#b42318;font-weight:600} .spark{vertical-align:middle}
"""


# Autoescape: every {{ }} is escaped unless it is Markup (the Markdown above, the constant CSS). The CSP
# is the first element of <head>: no script, no fetch; images only as data URIs, styles only inline.
_ENV = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
PAGE = _ENV.from_string("""<!DOCTYPE html>
<html lang="en"><head><meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'">
<meta charset="utf-8"><title>{{ title }}: report</title><meta name="viewport" content="width=device-width, initial-scale=1"><style>{{ css }}</style></head>
<body>
{% macro a(href, text) %}{% if href %}<a href="{{ href }}">{{ text }}</a>{% else %}{{ text }}{% endif %}{% endmacro %}
<h1>{{ title }}: report</h1>
<p class="meta">{{ provenance.n }} runs ({{ provenance.statuses }}) in <code>{{ provenance.root }}</code>; code {{ provenance.commit }}; suite {{ provenance.version }}. Written by <code>suite report</code> from <code>findings.md</code>, <code>tables/</code>, <code>figures/</code> and <code>runs.csv</code>.</p>
<section id="answer"><h2>Answer</h2>
{{ answer }}
{% if incomplete %}
<p class="warn">Incomplete sweep: {{ incomplete[0] }} of {{ incomplete[1] }} runs have a summary. The answer above is provisional; run the same <code>suite run</code> again to finish.</p>
{% endif %}
</section>
{% if compare %}
<section id="compare"><h2>Compared with <code>{{ compare.other }}</code></h2>
{% for w in compare.warnings %}<p class="warn">Warning: {{ w }}.</p>
{% endfor %}<h3>Ablation file</h3><table><thead><tr><th>key</th><th>{{ compare.other }}</th><th>{{ compare.root }}</th></tr></thead><tbody>
{%- for key, before, after in compare.changed %}<tr><td><code>{{ key }}</code></td><td>{{ before }}</td><td>{{ after }}</td></tr>{% else %}<tr><td colspan="3">no key differs</td></tr>{% endfor -%}
</tbody></table>
<h3>Cells of tables/summary.csv</h3>
{% if compare.cells %}
<p>{{ compare.cells.n_moved }} of {{ compare.cells.n }} cells moved: Welch's t-test between the two folders' runs of a cell, p < 0.05, not adjusted for the {{ compare.cells.n }} cells (a screen for what to look at, not a verdict). Score: mean test score in percent [95% interval].</p><table><thead><tr>
{%- for h in compare.cells.head %}<th>{{ h }}</th>{% endfor %}</tr></thead><tbody>
{% for values, change in compare.cells.rows %}
<tr>{% for v in values %}<td>{{ v }}</td>{% endfor %}<td><span class="ch-{{ change }}">{{ change }}</span></td></tr>
{% endfor %}
</tbody></table>
{% elif not compare.warnings %}
<p>No summary table to compare (run <code>suite analyze</code> on both folders).</p>
{% endif %}
</section>
{% endif %}
<section id="figures"><h2>Figures</h2>
{% for f in figures %}
<figure><img alt="{{ f.name }}" src="{{ f.src }}"><figcaption>{{ f.name }}{% if f.pdf %} (<a href="{{ f.pdf }}">pdf</a>){% endif %}</figcaption></figure>
{% endfor %}
</section>
<section id="tables"><h2>Tables</h2>
{% for t in tables %}
<details open><summary>{{ t.name }} (
{%- for kind, href in t.links %}{{ a(href, kind) }}{{ ", " if not loop.last }}{% endfor %})</summary>{{ t.html }}</details>
{% endfor %}
</section>
<section id="findings"><h2>Findings</h2>
{{ findings }}
</section>
<section id="runs"><h2>Runs</h2><p>Each run id links to its resolved <code>config.yaml</code>, each curve (training loss by step) to its <code>metrics.jsonl</code>.</p><table><thead><tr>
{%- for h in runs.head %}<th>{{ h }}</th>{% endfor %}</tr></thead><tbody>
{% for r in runs.rows %}
<tr><td>{{ a(r.href, r.id) }}</td>{% for c in r.cells %}<td>{{ c }}</td>{% endfor %}<td><span class="st-{{ r.status }}">{{ r.status }}</span></td>
{%- for c in r.tail %}<td>{{ c }}</td>{% endfor %}<td>
{%- if r.curve %}{% set svg %}<svg class="spark" width="120" height="24" viewBox="0 0 120 24" role="img" aria-label="loss"><polyline fill="none" stroke="#1f77b4" stroke-width="1.2" points="{{ r.curve }}"/></svg>{% endset %}{{ a(r.curve_href, svg) }}{% endif -%}
</td><td>{{ r.error }}</td></tr>
{% endfor %}
</tbody></table></section>
</body></html>
""")
