"""``suite report DIR``: one self-contained HTML page of what ``suite analyze`` wrote, recomputing
nothing. What a results folder holds is untrusted: autoescape, Markdown without raw HTML, every href through
:func:`markup.href_ok`, and a Content-Security-Policy that forbids script."""

from __future__ import annotations

import base64
import math
import os
import re
import stat
from pathlib import Path
from typing import Any, Callable
from warnings import catch_warnings

import jinja2
import yaml
from markupsafe import Markup

from suite import __version__, files, store
from suite.analysis import markup, products
from suite.config import flatten
from suite.results import AnalysisError, AnalysisWarning, readable_ablation, runs_from_csv, unfinished

REPORT = "report.html"
CONFIG_PREFIXES = ("model.", "train.", "data.")
MAX_CURVE_POINTS = 200  # a sparkline needs no more


def write_report(root: str | Path, warn: Callable[[str], None] = lambda line: None) -> Path:
    """Write ``root/report.html`` atomically, not through a link; AnalysisError if unanalysed."""
    root = Path(root)
    page = build(root, warn)
    # Paths hold undecodable bytes as surrogates (C locale, non-UTF-8 names): back to bytes, then UTF-8 with U+FFFD.
    page = page.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")
    return markup.write_text(page, root / REPORT)


def build(root: Path, warn: Callable[[str], None] = lambda line: None) -> str:
    """The report of ``root`` as one HTML document."""
    if not root.is_dir():
        raise AnalysisError(f"{root}: no such folder; pass a results folder, e.g. results/default")
    runs = _runs(root)
    written = _manifest(root)
    figures = _figures(root, written["figures"], warn, _answering(root))
    tables = _tables(root, written["tables"])
    found = [(products.FINDINGS[name], _md(_demote("\n".join(_untitled(lines))))) for name, lines in written["findings"]
             if name != "answer" and name in products.FINDINGS and lines]
    toc = [("design", "Design"), ("answer", "Answer")]
    toc += [("figures", "Figures")] * bool(figures) + [("tables", "Tables")] * bool(tables)
    toc += [(f"findings-{part.name}", part.title) for part, _ in found] + [("runs", "Runs")]
    return PAGE.render(title=written["title"], provenance=_provenance(root, runs), toc=toc,
                       design=_design(readable_ablation(root), runs, written),
                       answer=_md("\n".join(written["answer"])),
                       incomplete=unfinished(root, runs),
                       figures=figures, tables=tables, findings=found,
                       runs=_run_list(root, runs), css=Markup(CSS))


def _untitled(lines: list[str]) -> list[str]:
    """A findings part without its own ``##`` heading (the page gives each part its heading)."""
    return lines[1:] if lines and lines[0].startswith("## ") else lines


def _runs(root: Path) -> list[dict[str, Any]]:
    """The runs of ``root``'s ``runs.csv``; a damaged row is left out silently (``suite analyze`` reports it)."""
    if not (root / "runs.csv").is_file():  # not analysed: no figures, no table files to link
        raise AnalysisError(f"{root / 'runs.csv'}: missing; run `suite analyze {root}` first, then `suite report`")
    with catch_warnings(action="ignore", category=AnalysisWarning):
        return runs_from_csv(root / "runs.csv")


def _manifest(root: Path) -> dict[str, Any]:
    """``analysis.json``, every field type-checked (untrusted); AnalysisError when it is not what analyze writes."""
    path = root / products.MANIFEST
    again = f"run `suite analyze {root}` first, then `suite report`"
    try:
        raw = store.loads(files.read_text(path, links=False))
    except FileNotFoundError:
        raise AnalysisError(f"{path}: missing; {again}") from None
    except (OSError, ValueError, files.UnsafeFile) as err:
        raise AnalysisError(f"{path}: cannot be read ({err}); {again}") from None

    def strings(v: Any) -> bool:
        return isinstance(v, list) and all(isinstance(x, str) for x in v)

    ok = (isinstance(raw, dict) and isinstance(raw.get("title"), str) and isinstance(raw.get("baseline"), str)
          and isinstance(raw.get("depths"), list) and all(_depth(d) for d in raw["depths"])
          and strings(raw.get("answer")) and isinstance(raw.get("findings"), list)
          and all(isinstance(f, dict) and isinstance(f.get("name"), str) and strings(f.get("lines"))
                  for f in raw["findings"])
          and isinstance(raw.get("tables"), list)
          and all(isinstance(t, dict) and isinstance(t.get("name"), str) and strings(t.get("tables"))
                  and strings(t.get("notes")) for t in raw["tables"])
          and isinstance(raw.get("figures"), dict)
          and all(isinstance(f, dict) and isinstance(f.get("kind"), str) and isinstance(f.get("part"), str)
                  for f in raw["figures"].values()))
    if not ok:
        raise AnalysisError(f"{path}: not what `suite analyze` writes; {again}")
    return {**raw, "findings": [(f["name"], f["lines"]) for f in raw["findings"]]}


def _depth(value: Any) -> bool:
    """A depth as analysis.json holds it: a number within model.depth's range (a 401-digit one overflowed)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= store.MAX_DEPTH


def _design(ablation: dict[str, Any], runs: list[dict[str, Any]], written: dict[str, Any]) -> dict[str, Any]:
    """The top of the page: the ablation's description, and what each variant sets (its overrides)."""
    variants = ablation.get("variants") if isinstance(ablation.get("variants"), dict) else {}
    ran = {str(r["variant"]) for r in runs}
    rows = []
    for name in [v for v in variants if str(v) in ran] + sorted(ran - {str(v) for v in variants}):
        sets = variants.get(name)
        flat = flatten(sets) if isinstance(sets, dict) else {}
        text = ", ".join(f"{k} = {_short(v)}" for k, v in flat.items()) or ("(nothing: the base)" if name in variants
                                                                            else "(not in ablation.yaml)")
        rows.append((str(name), str(name) == written["baseline"], text))
    grid = ablation.get("grid") if isinstance(ablation.get("grid"), dict) else {}
    return {"description": _short(ablation.get("description", ""), 2000) if ablation.get("description") else "",
            "variants": rows, "grid": [(str(k), _short(v)) for k, v in grid.items()],
            "seeds": _short(ablation["seeds"]) if "seeds" in ablation else "",
            "depths": ", ".join(markup.fmt_value(float(d)) for d in written["depths"]) or "not recorded"}


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MAX_FIGURE_BYTES = 8 << 20  # the suite's figures are tens of kB


# The figure kinds that show each declared endpoint's answer: the report opens them first.
ANSWERING = {"score": ("accuracy_vs_depth",), "interaction": ("accuracy_vs_depth",),
             "best_lr_score": ("accuracy_vs_lr", "val_vs_lr_by_depth"),
             "frontier": ("accuracy_vs_lr", "phase_diagram"), "frontier_slope": ("frontier_vs_depth", "phase_diagram")}


def _answering(root: Path) -> tuple[str, ...]:
    """The figure kinds that show the answers to the folder's declared comparisons (:data:`ANSWERING`)."""
    from suite.analysis import primary

    try:
        declared = primary.read(root)
    except (AnalysisError, OSError, ValueError):
        return ()
    found = [] if declared is None else declared if isinstance(declared, list) else [declared]
    return tuple(dict.fromkeys(k for p in found for k in ANSWERING.get(p.endpoint, ())))


def _figures(root: Path, drawn: dict[str, dict[str, str]], warn: Callable[[str], None],
             answering: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The figures ``suite analyze`` drew, grouped by kind, the ``answering`` kinds first and open; a file that is not
    a regular PNG the analysis drew of a registered kind (or ``figures/`` a link) is left out with a warning."""
    folder = root / "figures"
    if folder.is_symlink():
        raise AnalysisError(f"{folder}: is a symbolic link; a report embeds only files inside the folder "
                            f"(replace it by a real folder: `suite analyze {root}` draws the figures again)")
    groups: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.png")) if folder.is_dir() else []:
        entry = drawn.get(path.name, {})
        kind, part = products.FIGURES.get(entry.get("kind", "")), entry.get("part", "")
        data = None if path.is_symlink() or kind is None else _read_png(path)
        if data is None:
            warn(markup.one_line(f"{path}: left out of the page (not a figure `suite analyze` draws, a link, or not a "
                                 f"PNG file)"))
            continue
        src = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
        group = groups.setdefault(kind.name, {
            "id": "fig-" + kind.name.replace("_", "-"), "title": kind.title, "caption": kind.caption,
            "doc": products.doc_link(kind.anchor), "members": [], "order": list(products.FIGURES).index(kind.name)})
        pdf = path.with_suffix(".pdf")
        group["members"].append({"part": part, "src": src,
                                 "pdf": markup.link(f"figures/{pdf.name}") if pdf.is_file() and not pdf.is_symlink()
                                 else None})
    absent = sorted(name for name in drawn if name.endswith(".png") and not (folder / name).is_file())
    if absent:  # a folder committed with a few of its figures: say so rather than show fewer in silence
        warn(markup.one_line(f"{folder}: {len(absent)} of the {len(drawn)} figures the analysis drew are not here "
                             f"(e.g. {absent[0]}); `suite analyze {root}` draws them again, then `suite report {root}`"))
    for group in groups.values():  # sections in number order: 3.125e-05 before 0.128
        group["members"].sort(key=lambda m: _natural(m["part"]))
    ordered = sorted(groups.items(), key=lambda item: (item[0] not in answering, item[1]["order"]))
    some = any(name in answering for name in groups)
    for i, (name, group) in enumerate(ordered):
        group["open"] = name in answering if some else i < 2
    return [group for _, group in ordered]


def _natural(text: str) -> list[tuple[int, float, str]]:
    """A sort key that reads the numbers in ``text`` as numbers."""
    parts = re.split(r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)", text)
    return [(0, float(p), "") if i % 2 else (1, 0.0, p) for i, p in enumerate(parts) if p]


def _read_png(path: Path) -> bytes | None:
    """The bytes of a regular PNG file opened without following a link, or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FIGURE_BYTES:
            return None
        data = f.read(MAX_FIGURE_BYTES + 1)
    return data if data.startswith(PNG_MAGIC) and len(data) <= MAX_FIGURE_BYTES else None


def _tables(root: Path, written: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per table kind ``suite analyze`` wrote, in registry order: its tables as HTML, the legends once."""
    by_name = {t["name"]: t for t in written}
    out = []
    for kind in products.TABLES.values():
        entry = by_name.get(kind.name)
        if entry is None or not entry["tables"]:
            continue
        links = [(ext, markup.link(f"tables/{kind.name}.{ext}")) for ext in ("csv", "md", "tex")
                 if (root / "tables" / f"{kind.name}.{ext}").is_file()]
        out.append({"id": "tab-" + kind.name, "title": kind.title, "caption": kind.caption,
                    "doc": products.doc_link(kind.anchor), "tables": [_md(_demote(t)) for t in entry["tables"]],
                    "legend": _md("\n\n".join(entry["notes"])), "links": links})
    return out


def _provenance(root: Path, runs: list[dict[str, Any]]) -> dict[str, Any]:
    counts = {s: sum(r["status"] == s for r in runs) for s in store.STATUSES}
    statuses = ", ".join(f"{counts[s]} {s}" for s in store.STATUSES)
    commits = sorted({str(c)[:12] + (" (dirty)" if "dirty" in str(c) else "")
                      for c in (r.get("git_commit") for r in runs) if c is not None})
    commit = ", ".join(commits[:3]) + (f" and {len(commits) - 3} more" if len(commits) > 3 else "") or "unknown"
    return {"n": len(runs), "statuses": statuses, "root": str(root), "commit": commit, "version": __version__}


def _run_list(root: Path, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The runs table; a run folder is read and linked only when its ``run_dir`` is inside ``root`` (untrusted)."""
    config_keys = sorted(k for k in {k for r in runs for k in r} if k.startswith(CONFIG_PREFIXES)
                         and len({markup.fmt_value(r.get(k)) for r in runs}) > 1)
    head = ["run", "variant", *config_keys, "seed", "status", "test acc", "steps", "loss", "error"]
    rows = []
    order = sorted(runs, key=lambda r: (str(r["variant"]), *(_sortable(r.get(k)) for k in config_keys),
                                        _sortable(r.get("seed"))))
    for r in order:
        rel = str(r.get("run_dir") or "").rstrip("/")
        inside = rel != "" and markup.link(f"{rel}/metrics.jsonl", anchor=False) is not None  # a path inside the folder
        folder = root / rel
        href = {name: markup.link(f"{rel}/{name}", anchor=False) if inside and (folder / name).is_file() else None
                for name in ("config.yaml", "metrics.jsonl")}
        acc, steps = r.get("test_acc"), r.get("steps_done")
        rows.append({"id": str(r.get("run_id")), "href": href["config.yaml"],
                     "curve": _sparkline(folder) if inside else "", "curve_href": href["metrics.jsonl"],
                     "cells": [str(r["variant"]), *(markup.fmt_value(r.get(k)) for k in config_keys),
                               str(r.get("seed"))], "status": str(r["status"]),
                     "tail": ["" if markup.missing(acc) else f"{100 * float(acc):.1f}%",
                              "" if markup.missing(steps) else str(int(steps))],
                     "error": "" if markup.missing(r.get("error")) else str(r["error"])})
    return {"head": head, "rows": rows}


def _sortable(value: Any) -> tuple[int, float, str]:
    """A sort key that orders numbers by value, then text, then missing values, without comparing types."""
    if isinstance(value, (int, float)) and math.isfinite(float(value)):
        return (0, float(value), "")
    return (2, 0.0, "") if value is None else (1, 0.0, str(value))


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
    span = (hi / 2 - lo / 2) or 0.5  # half the range: finite however far apart (1e308 and -1e308)
    ys = [height - (v / 2 - lo / 2) / span * height for _, v in pts]
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys))


SPARK_READ_ALL = 4 << 20  # a metrics.jsonl up to this size is read whole; a larger one is sampled


def _sparkline(folder: Path) -> str:
    """The points of ``folder``'s loss sparkline ("" if none); a large ``metrics.jsonl`` is sampled, not read whole."""
    try:
        with files.open_regular(folder / store.METRICS, max_bytes=None, links=False) as f:
            size = os.fstat(f.fileno()).st_size
            if size <= SPARK_READ_ALL:
                lines = f.read().split(b"\n")
            else:  # a line at each of evenly spaced offsets over the whole file, SPARK_READ_ALL bytes in all
                lines = [f.readline(1 << 20)]
                # each offset reads about two lines (the rest of one, then one): as many as the budget holds
                points = max(2, min(2 * MAX_CURVE_POINTS, SPARK_READ_ALL // (2 * max(len(lines[0]), 1))))
                budget = SPARK_READ_ALL - len(lines[0])
                for offset in range(size // points, size, size // points + 1):
                    if offset < f.tell():  # still inside the line read last
                        continue
                    f.seek(offset)
                    budget -= len(f.readline(max(0, min(budget, 1 << 20))))  # the rest of the line the offset fell in
                    line = f.readline(max(0, min(budget, 1 << 20)))
                    budget -= len(line)
                    lines.append(line)
                    if budget <= 0:
                        break
    except (OSError, files.UnsafeFile):
        return ""
    losses = []
    for line in lines:
        if b'"train"' not in line:
            continue
        try:
            r = store.loads(line.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            continue
        if (isinstance(r, dict) and r.get("kind") == "train" and isinstance(r.get("loss"), (int, float))
                and isinstance(r.get("step"), int)):
            losses.append((int(r["step"]), float(r["loss"])))
    return sparkline_points(sorted(losses))


def _short(value: Any, limit: int = 200) -> str:
    try:
        text = (markup.fmt_value(value) if not isinstance(value, (list, dict))
                else yaml.safe_dump(value, default_flow_style=True).strip())
    except RecursionError:  # an ablation.yaml nested hundreds deep loads, then cannot be written back
        return "(nested too deeply to show)"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _demote(text: str) -> str:
    """Markdown headings one level down (the page has its own h1 and h2)."""
    return "\n".join("##" + line if line.startswith("#") else line for line in text.splitlines())


def _md(text: str) -> Markup:
    """Markdown as HTML that the template inserts as is: :func:`markup.md_html` keeps no raw HTML."""
    return Markup(markup.md_html(text))


CSS = """
body{font:15px/1.45 system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.6em} h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em} h3{margin-top:1.4em}
table{border-collapse:collapse;margin:.6em 0;font-size:13px} td,th{border:1px solid #ddd;padding:2px 6px;text-align:left}
th{background:#f4f4f4} .meta,.caption{color:#555} .warn{background:#fff3cd;padding:.4em .6em}
nav{background:#f7f7f7;padding:.3em 1em;border-radius:6px} nav ol{margin:.3em 0;columns:2}
#answer{background:#eef5ff;padding:.2em 1em 1em;border-radius:6px}
.tables{display:flex;flex-wrap:wrap;gap:0 1.5em;align-items:flex-start} .tbl h4{margin:.8em 0 .2em;font-size:14px}
.legend{font-size:13px;color:#444;border-left:3px solid #ddd;padding-left:.8em}
figure{margin:.6em 0} figcaption{color:#555;font-size:13px} details{margin:.8em 0}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:.5em}
.zoom input{display:none} .zoom img{max-width:100%;box-sizing:border-box;border:1px solid #eee;cursor:zoom-in}
.zoom input:checked+img{max-width:none;cursor:zoom-out}
.st-ok{color:#1a7f37} .st-diverged,.st-error{color:#b42318;font-weight:600} .st-failed{color:#b54708}
.spark{vertical-align:middle}
"""


# Autoescape: every {{ }} is escaped unless it is Markup. The CSP is the first element of <head>: no script, no
# fetch; images only as data URIs, styles only inline.
# finalize: every text a {{ }} prints is on one line, without control or format characters (a bidi override in a
# run's error would reorder its cell), whichever field of the folder it comes from.
_ENV = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                          finalize=lambda v: markup.one_line(v) if isinstance(v, str) and not isinstance(v, Markup) else v)
PAGE = _ENV.from_string("""<!DOCTYPE html>
<html lang="en"><head><meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'">
<meta charset="utf-8"><title>{{ title }}: report</title><meta name="viewport" content="width=device-width, initial-scale=1"><style>{{ css }}</style></head>
<body>
{% macro a(href, text) %}{% if href %}<a href="{{ href }}">{{ text }}</a>{% else %}{{ text }}{% endif %}{% endmacro %}
<h1>{{ title }}: report</h1>
<p class="meta">{{ provenance.n }} runs ({{ provenance.statuses }}) in <code>{{ provenance.root }}</code>; code {{ provenance.commit }}; suite {{ provenance.version }}. Written by <code>suite report</code> from what <code>suite analyze</code> wrote: <code>analysis.json</code>, <code>runs.csv</code> and <code>figures/</code>, with the design from <code>ablation.yaml</code>, the planned runs from <code>run_ids.json</code> and each run's curve from its <code>metrics.jsonl</code>.</p>
<nav><strong>Contents</strong><ol>
{% for id, name in toc %}<li><a href="#{{ id }}">{{ name }}</a></li>
{% endfor %}</ol></nav>
<section id="design"><h2>Design</h2>
{% if design.description %}<p>{{ design.description }}</p>{% endif %}
<p>Depths: {{ design.depths }}{% if design.seeds %}; seeds per cell: {{ design.seeds }}{% endif %}{% for key, values in design.grid %}; <code>{{ key }}</code>: {{ values }}{% endfor %}.</p>
<table><thead><tr><th>variant</th><th>sets (over the ablation's base)</th></tr></thead><tbody>
{% for name, is_base, sets in design.variants %}<tr><td>{{ name }}{% if is_base %} (baseline){% endif %}</td><td>{{ sets }}</td></tr>
{% endfor %}</tbody></table>
</section>
<section id="answer"><h2>Answer</h2>
{{ answer }}
{% if incomplete %}
<p class="warn">Incomplete sweep: {{ incomplete[0] }} of {{ incomplete[1] }} runs have a summary. The answer above is provisional; run the same <code>suite run</code> again to finish.</p>
{% endif %}
</section>
{% if figures %}
<section id="figures"><h2>Figures</h2><p class="caption">Click a figure to see it at full size; click again to make it fit. The figures that show the declared answer come first and open (without a declared answer, the first two kinds); the others start folded.</p>
{% for g in figures %}
<details id="{{ g.id }}"{% if g.open %} open{% endif %}><summary><strong>{{ g.title }}</strong> ({{ g.members|length }} figure{{ "s" if g.members|length != 1 }})</summary>
<p class="caption">{{ g.caption }}{% if g.doc %} (method: <code>{{ g.doc }}</code>){% endif %}</p><div class="{{ 'grid' if g.members|length > 1 else 'one' }}">
{% for f in g.members %}
<figure><label class="zoom"><input type="checkbox"><img alt="{{ g.title }} {{ f.part }}" src="{{ f.src }}"></label>
<figcaption>{{ f.part or g.title }}{% if f.pdf %} ({{ a(f.pdf, "PDF") }}){% endif %}</figcaption></figure>
{% endfor %}
</div></details>
{% endfor %}
</section>
{% endif %}
{% if tables %}
<section id="tables"><h2>Tables</h2>
{% for t in tables %}
<section id="{{ t.id }}"><h3>{{ t.title }}</h3><p class="caption">{{ t.caption }} (method: <code>{{ t.doc }}</code>; files:
{%- for kind, href in t.links %} {{ a(href, kind) }}{{ "," if not loop.last }}{% endfor %})</p>
<div class="tables">{% for html in t.tables %}<div class="tbl">{{ html }}</div>{% endfor %}</div>
<div class="legend"><p><strong>How to read these tables</strong></p>{{ t.legend }}</div></section>
{% endfor %}
</section>
{% endif %}
{% for part, html in findings %}
<section id="findings-{{ part.name }}"><h2>{{ part.title }}</h2>
{% if part.name == "exploratory" %}<details><summary>Every scheme against the baseline, cell by cell: estimates with simultaneous intervals, not verdicts (click to show)</summary>{{ html }}</details>{% else %}{{ html }}{% endif %}
</section>
{% endfor %}
<section id="runs"><h2>Runs</h2><details><summary>{{ provenance.n }} runs ({{ provenance.statuses }}): click to list them</summary><p>Each run id links to its resolved <code>config.yaml</code>, each curve (training loss by step) to its <code>metrics.jsonl</code>, where the run folders are present.</p><table><thead><tr>
{%- for h in runs.head %}<th>{{ h }}</th>{% endfor %}</tr></thead><tbody>
{% for r in runs.rows %}
<tr><td>{{ a(r.href, r.id) }}</td>{% for c in r.cells %}<td>{{ c }}</td>{% endfor %}<td><span class="st-{{ r.status }}">{{ r.status }}</span></td>
{%- for c in r.tail %}<td>{{ c }}</td>{% endfor %}<td>
{%- if r.curve %}{% set svg %}<svg class="spark" width="120" height="24" viewBox="0 0 120 24" role="img" aria-label="loss"><polyline fill="none" stroke="#1f77b4" stroke-width="1.2" points="{{ r.curve }}"/></svg>{% endset %}{{ a(r.curve_href, svg) }}{% endif -%}
</td><td>{{ r.error }}</td></tr>
{% endfor %}
</tbody></table></details></section>
</body></html>
""")
