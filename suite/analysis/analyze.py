"""``analyze(DIR)``: a folder of finished runs -> ``runs.csv``, tables, ``findings.md`` and figures; :func:`study`
computes everything ``products.py`` registers (``suite report`` renders it too). The rules: ``docs/statistics.md``."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import warnings
from pathlib import Path

import pandas as pd

from suite import files, store
from suite.analysis import coprimary, markup, primary, products
from suite.analysis import findings as findings_text
from suite.analysis import tables as paper
from suite.analysis.propagation import KIND, is_propagation, summary_frame
from suite.analysis.stability import models
from suite.analysis.summary import runs_frame
from suite.grouping import DEPTH, LR, choose_baseline, group_keys
from suite.results import RUNS_CSV_BYTES, AnalysisError, AnalysisWarning, run_records, runs_from_csv, unfinished

FORMATS = ("md", "tex", "csv")


def analyze(run_dir: str | Path, baseline: str | None = None, by: list[str] | None = None,
            formats: tuple[str, ...] | list[str] = FORMATS, figures: bool = True, force: bool = False) -> pd.DataFrame:
    """Analyse a folder of runs and write ``runs.csv``, ``tables/``, ``findings.md`` and ``figures/`` into it.

    ``by`` replaces the automatic group keys (``variant`` is kept); ``force`` allows overwriting committed outputs
    from an incomplete sweep. Returns ``tables/summary.csv``'s frame with ``attrs`` ``written``, ``keys``,
    ``baseline`` and ``primary`` (the answer, a list of them, or None). Raises AnalysisError on any user error.
    """
    formats = tuple(formats)
    if unknown := [f for f in formats if f not in FORMATS]:
        raise AnalysisError(f"unknown table format '{unknown[0]}'; use a comma list of {', '.join(FORMATS)}")
    root = Path(run_dir)
    result = study(root, baseline, by, force)
    _check_no_row_lost(root, result.runs, force)
    owned = _owned(root)  # what an earlier analysis wrote: the only files this one may delete
    written = [markup.write_csv(_capped(runs_frame(result.runs, result.keys, result.baseline)), root / "runs.csv")]
    table_dir = store.no_link(root / "tables")
    table_dir.mkdir(exist_ok=True)
    for kind in products.TABLES.values():
        frame = kind.frame(result)
        if frame is None or frame.empty:  # an earlier analysis's files of it are stale
            _remove_unless_committed(root, [table_dir / f"{kind.name}.{fmt}" for fmt in FORMATS], owned,
                                     f"this analysis builds no {kind.name} table from the runs here")
            continue
        for fmt in formats:
            if fmt == "csv":
                written.append(markup.write_csv(frame, table_dir / f"{kind.name}.csv"))
            elif kind.tables:  # else a table too long to typeset (gamma): CSV only
                doc = paper.document(fmt, kind, result.title, frame, result.keys, result.baseline, result.intro)
                written.append(markup.write_text(doc, table_dir / f"{kind.name}.{fmt}"))
    if not result.propagation:
        tables = [p for p in written if p.parent == table_dir]
        written.append(markup.write_text(findings_text.findings(result, tables), root / "findings.md"))
    if not figures or all(r["status"] == "error" for r in result.runs):
        if figures:
            warnings.warn("no figures: every run ended in error (runs.csv has each one's error)", AnalysisWarning)
        kept = _remove_stale_figures(root, store.no_link(root / "figures"), [], owned)
    else:
        from suite.analysis import figures as fig  # matplotlib is slow to import: only when drawing

        store.no_link(root / "figures")  # refused before drawing, even when no figure applies
        drawn = fig.draw(result)
        kept = _remove_stale_figures(root, root / "figures", drawn, owned)
        written += drawn
    shown = [p for p in written if p.parent.name == "figures"] + kept
    ours = [p for p in written if p.parent in (table_dir, root / "figures")] + kept
    store.write_json(root / products.MANIFEST, manifest(result, shown, ours))
    written.append(root / products.MANIFEST)
    result.summary.attrs.update(written=[str(p) for p in written], keys=result.keys, baseline=result.baseline,
                                **({} if result.propagation else {"primary": result.answer}))
    return result.summary


CELL_CHARS = 100_000  # under the 131,072 a csv reader takes in one field: runs.csv is read back by every analysis


def _capped(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each text cell cut to :data:`CELL_CHARS` (a run's whole error stays in its summary.json), so
    the runs.csv written can be read again."""
    def cap(v: object) -> object:
        return (f"{v[:CELL_CHARS]}... [cut at {CELL_CHARS:,} of {len(v):,} characters]"
                if isinstance(v, str) and len(v) > CELL_CHARS else v)

    return frame.apply(lambda col: col.map(cap) if col.dtype == object or pd.api.types.is_string_dtype(col) else col)


def manifest(analysis: products.Analysis, figures: list[Path], written: list[Path] = ()) -> dict:
    """What ``suite report`` renders besides ``runs.csv`` and the figure files (:data:`products.MANIFEST`), and
    ``written``: the tables and figures this analysis owns (wrote, or kept as committed), which the next may delete."""
    from suite.analysis.markup import MD, Table, render_md

    tables = []
    for kind in products.TABLES.values():
        frame = kind.frame(analysis)
        built = [] if frame is None or frame.empty else [
            t for make in kind.tables for t in make(frame, analysis.keys, analysis.baseline, MD)]
        if built:
            tables.append({"name": kind.name,
                           "tables": [render_md(Table(t.caption, t.label, t.corner, t.columns, t.rows)) for t in built],
                           "notes": list(dict.fromkeys(n for t in built for n in t.notes))})
    shown = {}
    for path in figures:
        kind, part = products.figure_kind(path.stem, analysis)
        if path.suffix == ".png" and kind is not None:
            shown[path.name] = {"kind": kind.name, "part": part}
    return {"title": analysis.title, "baseline": analysis.baseline, "keys": analysis.keys, "depths": analysis.depths,
            "answer": findings_text.answer_block(analysis),
            "findings": [{"name": part.name, "lines": lines} for part, lines in findings_text.parts(analysis)],
            "tables": tables, "figures": dict(sorted(shown.items())),
            "written": sorted({p.relative_to(analysis.root).as_posix() for p in written})}


def _owned(root: Path) -> set[str]:
    """The tables and figures an earlier analysis of ``root`` wrote (its manifest's ``written``), as relative paths:
    a file of a figure's or table's name that no analysis wrote (a user's copy, notes) is never deleted. Untrusted:
    only a plain name directly under tables/ or figures/ counts; an unreadable or older manifest owns nothing."""
    try:
        raw = store.loads(files.read_text(root / products.MANIFEST, links=False))
    except (OSError, ValueError, files.UnsafeFile):
        return set()
    listed = raw.get("written") if isinstance(raw, dict) else None
    if not isinstance(listed, list):
        return set()
    return {p for p in listed if isinstance(p, str) and p.count("/") == 1 and "\\" not in p
            and p.split("/")[0] in ("tables", "figures") and p.split("/")[1] not in ("", ".", "..")}


def _remove_stale_figures(root: Path, folder: Path, drawn: list[Path], owned: set[str]) -> list[Path]:
    """Delete figures an earlier analysis drew and this one did not, except committed ones; return those kept."""
    keep = {p.name for p in drawn}
    stale = [path for path in (sorted(folder.glob("*")) if folder.is_dir() and not folder.is_symlink() else [])
             if path.suffix in (".png", ".pdf") and path.name not in keep and path.is_file()
             and products.figure_kind(path.stem, None)[0] is not None]
    return _remove_unless_committed(root, stale, owned, "this analysis cannot draw it from the runs here (a figure "
                                                        "of each run's metrics.jsonl needs the run folders)")


def _remove_unless_committed(root: Path, paths: list[Path], owned: set[str], why: str) -> list[Path]:
    """Delete those of ``paths`` an earlier analysis wrote (``owned``) except those git tracks (kept, with one
    warning giving ``why``); return the committed paths kept. A path no analysis wrote is left alone."""
    present = [p for p in paths if p.is_file() and not p.is_symlink()]
    tracked = _committed(root, [str(p.relative_to(root)) for p in present]) if present else []
    if tracked is None:  # git cannot say which are committed: delete none of them
        tracked, why = [str(p.relative_to(root)) for p in present], f"{why}, and git cannot say whether it is committed"
    kept = [p for p in present if str(p.relative_to(root)) in set(tracked)]
    for path in [p for p in present if p not in kept and p.relative_to(root).as_posix() in owned]:
        path.unlink()
    if kept:
        warnings.warn(f"kept {len(kept)} committed file(s) that this analysis does not rebuild "
                      f"({', '.join(str(p) for p in kept[:3])}{', ...' if len(kept) > 3 else ''}): {why}; "
                      f"`git rm` them if they are stale", AnalysisWarning)
    return kept


def study(root: Path, baseline: str | None = None, by: list[str] | None = None, force: bool = False,
          check_complete: bool = True) -> products.Analysis:
    """Everything the products are drawn from, written nowhere; runs from ``summary.json`` files, else ``runs.csv``."""
    runs = run_records(root, from_csv=True)
    if check_complete:
        _check_complete(root, runs, force)
    base = choose_baseline(runs, baseline)
    keys = group_keys(runs, by)
    if n_error := sum(r["status"] == "error" for r in runs):
        warnings.warn(f"{n_error} run(s) ended in error and are left out of all rates (see runs.csv: status, error)",
                      AnalysisWarning)
    title = markup.one_line(str(runs[0].get("ablation") or root.resolve().name))  # a folder's name is anyone's
    if is_propagation(runs):
        return products.Analysis(root, title, runs, keys, base, {"propagation": summary_frame(runs, keys, base)},
                                 propagation=True)
    if any(r.get("kind") == KIND for r in runs):
        raise AnalysisError(f"{root}: mixes `suite propagate` runs with training runs; analyse them in separate "
                            f"folders")
    fitted = models(runs, keys, base) if DEPTH in keys and LR in keys else {}  # fitted once: table and figures
    declared = primary.read(root)
    answers = None if declared is None else coprimary.evaluate_all(runs, declared)  # a list for a list declared
    frames = products.build_frames(products.Inputs(root, runs, keys, base, fitted, declared, answers))
    summary = frames["summary"]
    missing = summary[~summary["has_baseline"] & ~summary["is_baseline"]]
    if not missing.empty:
        warnings.warn(f"{len(missing)} group(s) have no '{base}' group at the same keys: no tests there",
                      AnalysisWarning)
    answer = answers[0] if answers and not isinstance(declared, list) else answers
    return products.Analysis(root, title, runs, keys, base, frames, answer, depth_models=fitted)


OUTPUTS = ("findings.md", "runs.csv", "tables", products.MANIFEST)  # what an analysis overwrites


def _check_no_row_lost(root: Path, runs: list[dict], force: bool) -> None:
    """Refuse (unless ``force``) to write a ``runs.csv`` lacking a run the existing one lists: no silent shrinking."""
    try:
        text = files.read_text(root / "runs.csv", RUNS_CSV_BYTES, links=False)  # a link is replaced, not read
        rows = list(csv.DictReader(io.StringIO(text)))
    except (OSError, ValueError, csv.Error):  # UnsafeFile (the link) is an OSError
        return
    before = {store.unneutral(row.get("run_id") or "") for row in rows}
    lost = sorted(str(i) for i in before - {str(r.get("run_id")) for r in runs} if i)
    lost += [f"line {n} (no run_id)" for n, row in enumerate(rows, start=2) if not row.get("run_id")]
    if lost and not force:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            runs_from_csv(root / "runs.csv")
        why = next((str(w.message).split(": skipped: ", 1)[-1] for w in caught if ": skipped: " in str(w.message)),
                   "its row cannot be read")
        raise AnalysisError(f"{root / 'runs.csv'}: {len(lost)} of its runs ({', '.join(lost[:3])}"
                            f"{', ...' if len(lost) > 3 else ''}) would be dropped ({why}); fix those rows, or pass "
                            f"--force to rewrite it without them")


def _check_complete(root: Path, runs: list[dict], force: bool) -> None:
    """Warn when the sweep is unfinished; refuse (unless ``force``) when that would overwrite committed outputs."""
    counts = unfinished(root, runs)  # None: finished, or no sweep's folder (runs of `suite train`, a copy)
    if counts is None:
        return
    what = f"{counts[0]} of {counts[1]} runs have a summary"
    tracked = [] if force else _committed(root, list(OUTPUTS))
    if tracked is None:
        raise AnalysisError(f"{root}: the sweep is incomplete ({what}) and git cannot say whether analysing it would "
                            f"overwrite committed files (git ls-files failed: a folder owned by someone else?); "
                            f"finish it (the same `suite run` again) or pass --force")
    committed = sorted({name for name in OUTPUTS if any(t == name or t.startswith(name + "/") for t in tracked)})
    if committed and not force:
        raise AnalysisError(f"{root}: the sweep is incomplete ({what}) and analysing it would overwrite "
                            f"{', '.join(committed)}, committed to git; finish it (the same `suite run` again) "
                            f"or pass --force")
    warnings.warn(f"the sweep is incomplete ({what}): the tables and findings are provisional", AnalysisWarning)


def _committed(root: Path, names: list[str]) -> list[str] | None:
    """The files under ``names`` (relative to ``root``) that git tracks; [] outside a repository or without git;
    None when git is there but cannot say (a repository owned by someone else: "dubious ownership")."""
    try:
        done = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--", *names], capture_output=True,
                              text=True, timeout=20, check=False, env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError):
        return []
    if done.returncode == 0:
        return [t for t in done.stdout.split("\0") if t]
    return [] if "not a git repository" in done.stderr else None
