"""``analyze(DIR)``: turn a folder of finished runs into comparison tables and figures.

Flow: every ``summary.json`` under DIR (see results/README.md) -> one row per run (``runs.csv``)
-> groups (``grouping.py``) -> one row per group with rates, intervals and tests against the
baseline (``summary.py``, statistics in ``stats.py``; ``tables/summary.csv``) -> paper-style
tables (``tables.py``), each scheme at its best learning rate (``lr.py``), depth trends and
aggregates (``trends.py``), time to learn (``survival.py``), learning-rate transfer across depth
(``transfer.py``), the declared primary comparison(s)
(``primary.py``, ``coprimary.py``), ``findings.md``
(``findings.py``) and figures (``figures.py``). The rules are in ``docs/statistics.md``.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd

from suite import store
from suite.analysis import markup as tables
from suite.analysis import coprimary, primary
from suite.analysis import tables as paper
from suite.analysis.grouping import choose_baseline, group_keys
from suite.analysis.load import AnalysisError, AnalysisWarning, load_runs
from suite.analysis.findings import findings
from suite.analysis.lr import lr_table
from suite.analysis.propagation import KIND, is_propagation, summary_frame
from suite.analysis.summary import runs_frame, summarize
from suite.analysis.survival import learn_table
from suite.analysis.trends import aggregates, depth_trends
from suite.analysis.transfer import transfer_table

FORMATS = ("md", "tex", "csv")


def analyze(
    run_dir: str | Path,
    baseline: str | None = None,
    by: list[str] | None = None,
    formats: tuple[str, ...] | list[str] = FORMATS,
    figures: bool = True,
    force: bool = False,
) -> pd.DataFrame:
    """Analyse a folder of runs and write ``runs.csv``, ``tables/``, ``findings.md`` and ``figures/`` into it.

    Args:
        run_dir: folder of runs (one ablation), e.g. ``results/default``.
        baseline: variant to compare against; default ``preln`` (required if absent).
        by: group keys replacing the automatic ones (``variant`` is always kept).
        formats: any of ``md``, ``tex``, ``csv`` for the tables.
        figures: write the figures (PNG and PDF).
        force: analyse an incomplete sweep even where that overwrites outputs committed to git.

    Returns:
        The per-group summary (the content of ``tables/summary.csv``); ``attrs["written"]`` lists
        the files written, ``attrs["keys"]`` the group keys, ``attrs["baseline"]`` the baseline,
        ``attrs["primary"]`` the primary comparison's :class:`~suite.analysis.primary.Answer` (None when none
        is declared; a list of answers when ``primary:`` is a list of co-primary comparisons).

    Raises:
        AnalysisError: on any user error (bad folder, mixed ablations, missing baseline, ...), or an
            incomplete sweep in a folder whose outputs are committed to git (without ``force``).
    """
    formats = tuple(formats)
    for f in formats:
        if f not in FORMATS:
            raise AnalysisError(f"unknown table format '{f}'; use a comma list of {', '.join(FORMATS)}")
    root = Path(run_dir)
    runs = load_runs(root)
    _check_complete(root, runs, force)
    base = choose_baseline(runs, baseline)
    keys = group_keys(runs, by)
    n_error = sum(r["status"] == "error" for r in runs)
    if n_error:
        warnings.warn(f"{n_error} run(s) ended in error and are left out of all rates (see runs.csv: status, error)",
                      AnalysisWarning)
    if is_propagation(runs):
        return _analyze_propagation(root, runs, keys, base, formats, figures)
    if any(r.get("kind") == KIND for r in runs):
        raise AnalysisError(f"{root}: mixes `suite propagate` runs with training runs; analyse them in separate folders")
    summary = summarize(runs, keys, base)
    missing = summary[~summary["has_baseline"] & ~summary["is_baseline"]]
    if not missing.empty:
        warnings.warn(f"{len(missing)} group(s) have no '{base}' group at the same keys: no tests there",
                      AnalysisWarning)
    frames = {
        "summary": summary,
        "trends": depth_trends(runs, keys, base),
        "aggregate": aggregates(runs, keys, base),
        "lr": lr_table(runs, keys, base),
        "learn": learn_table(runs, keys, base),
        "transfer": transfer_table(runs, keys, base),
    }
    answer = _primary(root, runs)
    title = str(runs[0].get("ablation") or root.resolve().name)
    intro = f"{len(runs)} runs in {len(summary)} groups."
    written = [tables.write_csv(runs_frame(runs, keys, base), root / "runs.csv")]
    table_dir = store.no_link(root / "tables")
    table_dir.mkdir(exist_ok=True)
    for kind, frame in frames.items():
        if frame is None or frame.empty:
            continue
        for fmt in formats:
            if fmt == "csv":
                written.append(tables.write_csv(frame, table_dir / f"{kind}.csv"))
            else:
                doc = paper.document(fmt, kind, title, frame, keys, base, intro)
                written.append(tables.write_text(doc, table_dir / f"{kind}.{fmt}"))
    text = findings(title, summary, keys, base, frames["trends"], frames["aggregate"], frames["lr"], answer,
                    frames["learn"], frames["transfer"])
    written.append(tables.write_text(text, root / "findings.md"))
    if figures and n_error == len(runs):
        warnings.warn("no figures: every run ended in error (runs.csv has each one's error)", AnalysisWarning)
    elif figures:
        from suite.analysis import figures as fig  # matplotlib is slow to import: only when drawing

        written += fig.draw_all(root, runs, summary, keys, base, title, frames["lr"], frames["transfer"])
    summary.attrs.update(written=[str(p) for p in written], keys=keys, baseline=base, primary=answer)
    return summary


def _primary(root: Path, runs: list[dict]) -> primary.Answer | list[primary.Answer] | None:
    """The declared comparison's answer; a list of answers for a list of co-primary comparisons."""
    declared = primary.read(root)
    if declared is None:
        return None
    rounds = primary.read_design(root)
    if rounds and len(primary.as_list(declared)) > 1:
        raise AnalysisError(f"{root / primary.SEQUENTIAL}: a group-sequential design decides one primary comparison "
                            f"and ablation.yaml declares {len(declared)}; delete {primary.SEQUENTIAL} to analyse "
                            f"them as a fixed design")
    answers = coprimary.evaluate_all(runs, declared, rounds)
    return answers if isinstance(declared, list) else answers[0]


OUTPUTS = ("findings.md", "runs.csv", "tables")  # what an analysis overwrites


def _check_complete(root: Path, runs: list[dict], force: bool) -> None:
    """Warn when the sweep that wrote ``root`` is not finished; refuse (unless ``force``) when that
    would overwrite outputs committed to git, such as a reference result."""
    try:
        ids = store.read_json(root / "run_ids.json")
    except (OSError, ValueError):
        return  # not a sweep's folder (runs of `suite train`, a copy): nothing to compare with
    if not isinstance(ids, list):
        return
    have = len({r.get("run_id") for r in runs} & {str(i) for i in ids})
    if have >= len(ids):
        return
    what = f"{have} of {len(ids)} runs have a summary"
    committed = _committed(root)
    if committed and not force:
        raise AnalysisError(f"{root}: the sweep is incomplete ({what}) and analysing it would overwrite "
                            f"{', '.join(committed)}, committed to git; finish it (the same `suite run` again) "
                            f"or pass --force")
    warnings.warn(f"the sweep is incomplete ({what}): the tables and findings are provisional", AnalysisWarning)


def _committed(root: Path) -> list[str]:
    """Which of the analysis outputs in ``root`` git tracks ([] outside a repository or without git)."""
    import subprocess

    try:
        done = subprocess.run(["git", "-C", str(root), "ls-files", "--", *OUTPUTS], capture_output=True, text=True,
                              timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    tracked = done.stdout.split() if done.returncode == 0 else []
    return sorted({name for name in OUTPUTS if any(t == name or t.startswith(name + "/") for t in tracked)})


def _analyze_propagation(root: Path, runs: list[dict], keys: list[str], base: str, formats: tuple[str, ...],
                         figures: bool) -> pd.DataFrame:
    """``runs.csv``, ``tables/propagation.*`` and the propagation figures of a ``suite propagate`` folder."""
    frame = summary_frame(runs, keys, base)
    title = str(runs[0].get("ablation") or root.resolve().name)
    written = [tables.write_csv(runs_frame(runs, keys, base), root / "runs.csv")]
    table_dir = store.no_link(root / "tables")
    table_dir.mkdir(exist_ok=True)
    for fmt in formats:
        if fmt == "csv":
            written.append(tables.write_csv(frame, table_dir / "propagation.csv"))
        else:
            doc = paper.document(fmt, "propagation", title, frame, keys, base,
                                 f"{len(runs)} signal-propagation runs in {len(frame)} groups.")
            written.append(tables.write_text(doc, table_dir / f"propagation.{fmt}"))
    if figures:
        from suite.analysis import figures as fig

        written += fig.draw_propagation(root, runs, frame, keys, base, title)
    frame.attrs.update(written=[str(p) for p in written], keys=keys, baseline=base)
    return frame
