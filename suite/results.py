"""A folder of finished runs read back (summaries or ``runs.csv``, training curves; columns: results/README.md), and the
one rule by which each run scores (docs/statistics.md, "One score"). The analysis and the sweep both read runs here."""

from __future__ import annotations

import ast
import contextlib
import csv
import io
import math
import os
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from suite import store
from suite.config import DEPTH, LR, ConfigError, RunConfig, flatten, read_yaml, to_dict


class AnalysisError(ValueError):
    """A user error (bad folder, mixed ablations, missing baseline): one line, with the fix."""


class AnalysisWarning(store.SuiteWarning):
    """Something the user should know that does not stop the analysis (e.g. runs that errored)."""


ABLATION_FILE = "ablation.yaml"  # the ablation a results folder's runs came from, written by `suite run`
RUN_IDS = "run_ids.json"  # the id of every run of ablation.yaml, in order, as the last sweep resolved it


def recorded_ablation(root: str | Path) -> dict[str, Any]:
    """A folder's ``ablation.yaml`` as a mapping ({} if none), links refused (it may enter a shared page)."""
    path = Path(root) / ABLATION_FILE
    if not path.exists() and not path.is_symlink():
        return {}
    raw = read_yaml(path, links=False)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: not a mapping of ablation keys; restore it or run `suite run` again")
    return raw


def planned_ids(root: str | Path) -> list[str] | None:
    """The ids ``run_ids.json`` lists (every run the last sweep planned), or None when there is none to read (runs of
    `suite train`, a copy); a link is not followed (the folder may have come from anyone)."""
    try:
        ids = store.read_json(Path(root) / RUN_IDS, links=False)
    except (OSError, ValueError):
        return None
    return [str(i) for i in ids] if isinstance(ids, list) else None


def unfinished(root: str | Path, runs: list[dict[str, Any]]) -> tuple[int, int] | None:
    """(planned runs among ``runs``, runs planned) when ``run_ids.json`` plans runs that ``runs`` lack, else None."""
    ids = planned_ids(root)
    if ids is None:
        return None
    planned = set(ids)
    have = len({str(r.get("run_id")) for r in runs} & planned)
    return (have, len(planned)) if have < len(planned) else None


def readable_ablation(root: str | Path) -> dict[str, Any]:
    """:func:`recorded_ablation`, or {} when it cannot be read (a page or findings.md still renders)."""
    try:
        return recorded_ablation(root)
    except ValueError:
        return {}


def run_records(run_dir: str | Path, from_csv: bool = False) -> list[dict[str, Any]]:
    """Every trusted ``summary.json`` under ``run_dir`` with its ``run_dir`` (relative, POSIX); ``from_csv``: also the
    ``runs.csv`` rows without a folder here. AnalysisError: no folder or usable run, a run twice, several ablations."""
    root = Path(run_dir)
    if not root.is_dir():
        raise AnalysisError(f"{root}: no such folder; pass a folder of runs, e.g. results/<ablation>")
    runs = []
    for path in sorted(root.rglob(store.SUMMARY)):
        name = path.parent.relative_to(root).as_posix()
        summary, problem = _read_summary(path)
        if not problem and (not name.isprintable() or any("\udc80" <= c <= "\udcff" for c in name)):
            problem = "its folder's name is not printable UTF-8 text (a run folder is named by its run id)"
            path = Path(ascii(str(path))[1:-1])  # the warning names it without the bytes that broke it
        if problem:
            warnings.warn(f"{path}: skipped: {problem}; delete its run folder and `suite run` runs it again",
                          AnalysisWarning)
            continue
        if summary.get("variant") is None:
            summary["variant"] = summary.get("model.residual")
        summary["run_dir"] = name
        runs.append(summary)
    skipped: list[str] = []
    if from_csv and (root / RUNS_CSV).is_symlink():  # it could bring in any file: never read through it
        if not runs:
            raise AnalysisError(f"{root / RUNS_CSV}: is a symbolic link; a results folder's runs.csv is read only "
                                f"when it is a regular file inside the folder (replace the link by the file)")
        warnings.warn(f"{root / RUNS_CSV}: is a symbolic link, not read; the run folders here rebuild it",
                      AnalysisWarning)
    elif from_csv and (root / RUNS_CSV).is_file():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", AnalysisWarning)
            runs = _merge_csv(root, runs)
        for w in caught:  # said as they were; the first reason also goes into the error below
            skipped += [str(w.message)] if ": skipped: " in str(w.message) else []
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if not runs:
        found = "summary.json or runs.csv row" if (root / RUNS_CSV).is_file() else "summary.json"
        why = f" ({len(skipped)} rows skipped, e.g. {skipped[0]})" if skipped else ""
        raise AnalysisError(f"{root}: no usable {found} found{why}; point at a folder of finished runs "
                            f"(results/<ablation>)")
    for key, value in store.ADDED_KEYS.items():  # runs made before a key was added, beside runs that record it,
        if any(r.get(key) is not None for r in runs):  # read as the value they behaved as: no group splits on it
            for r in runs:
                if r.get(key) is None:
                    r[key] = value
    _check_one_ablation(runs, root)
    if any(r.get("packed") for r in runs):  # a solo run records nothing: packed is then False, so that
        for r in runs:                      # solo and packed runs of one cell are told apart (grouping)
            r["packed"] = bool(r.get("packed"))
    seen: dict[str, str] = {}
    for r in runs:
        rid = r.get("run_id")
        if rid is not None and rid in seen:
            raise AnalysisError(f"run_id {rid!r} appears twice ({seen[rid]!r} and {r['run_dir']!r}); "
                                f"remove one copy so that it is not counted twice")
        seen[rid] = r["run_dir"]
    if any(r.get("schema", 1) != 1 for r in runs):
        warnings.warn("some summaries are not schema 1; fields may be missing", AnalysisWarning)
    return runs


def _merge_csv(root: Path, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs of the folders, plus every ``runs.csv`` row whose run has no folder here, so no row is ever dropped."""
    have = {str(r.get("run_id")) for r in runs}
    try:
        rows = runs_from_csv(root / RUNS_CSV)
    except AnalysisError as err:
        if not runs:
            raise
        raise AnalysisError(f"{str(err).split(';')[0]}; it may list runs that have no folder here: fix it, or move "
                            f"it away to rebuild it from the run folders alone") from None
    kept = [r for r in rows if str(r.get("run_id")) not in have]
    if kept and runs:
        warnings.warn(f"{root / RUNS_CSV}: {len(kept)} run(s) without a run folder here are kept from it (delete "
                      f"{RUNS_CSV} to rebuild it from the run folders alone)", AnalysisWarning)
    return sorted(runs + kept, key=lambda r: str(r.get("run_dir"))) if kept else runs


# Result fields that must be numbers (or null) for the statistics to mean anything.
NUMERIC = ("val_acc", "best_val_acc", "test_acc", "best_test_acc", "final_train_loss", "step_time_ms", "throughput",
           "peak_mem_mb", "diverged_step", "steps_done", "wall_s", "num_params")


def _read_summary(path: Path) -> tuple[dict[str, Any], str | None]:
    """A summary and ``None``, or ``{}`` and why it cannot be used."""
    try:
        summary = store.read_json(path, links=False)  # what a results folder renders comes from inside it
    except (OSError, ValueError) as err:  # a folder, a link, unreadable, bad UTF-8, bad JSON
        return {}, f"cannot read it ({store.error_reason(err)})"
    if not isinstance(summary, dict):
        return {}, f"expected a JSON object, got a {type(summary).__name__}"
    return ({}, problem) if (problem := _summary_problem(summary)) else (summary, None)


RUNS_CSV = "runs.csv"
# runs.csv is read up to 4 KiB a row (a row is ~1.5 KiB) at suite.sweep.spec.MAX_RUNS runs.
RUNS_CSV_BYTES = 4096 * 100_000
DERIVED = ("score", "val_score")  # columns runs.csv adds to the summaries' fields (recomputed when read back)
TEXT_FIELDS = frozenset({  # summary fields that hold text even when it looks like a number (a run id "1234")
    "run_id", "ablation", "variant", "run_dir", "status", "git_commit", "hostname", "device", "device_name",
    "error", "failed_reason", "diverged_reason", "diverged_detail", "started_at", "suite_version",
    "torch_version", "python_version", "judged_on", "optimizer_impl", "kind", "crossed"})
# Config keys that hold a number or a name (``model.layerscale.init``: 1e-05 or "cait"): read as a number when one.
NUMBER_OR_NAME = frozenset({"model.layerscale.init"})
INT_FIELDS = frozenset({  # integer summary fields; a column with empty cells is written as floats ("40.0")
    "seed", "steps_to_learn", "diverged_step", "steps_done", "num_params", "train_size", "val_size", "test_size",
    "scaler_skipped_steps", "timing_cores", "schema", "spikes_recovered", "pack_size"})


def runs_from_csv(path: Path) -> list[dict[str, Any]]:
    """The runs of a ``runs.csv`` written by ``suite analyze``, each cell read back to its summary's type; a row that
    could not be a run's is skipped with a warning. AnalysisError when it is no such file."""
    try:
        rows = list(csv.DictReader(io.StringIO(store.read_text(path, RUNS_CSV_BYTES, links=False), newline="")))
    except (OSError, ValueError, csv.Error) as err:
        raise AnalysisError(f"{path}: cannot be read ({str(err).splitlines()[0]}); run `suite analyze` on the "
                            f"folder with its run folders to write it again") from None
    need = {"run_id", "variant", "status"}
    if rows and not need <= set(rows[0]):
        raise AnalysisError(f"{path}: no {', '.join(sorted(need - set(rows[0])))} column; it was not written by "
                            f"`suite analyze`")
    defaults = flatten(to_dict(RunConfig()))
    text = set(TEXT_FIELDS) | {k for k, v in defaults.items() if isinstance(v, str)} - NUMBER_OR_NAME
    ints = set(INT_FIELDS) | {k for k, v in defaults.items() if isinstance(v, int) and not isinstance(v, bool)}
    runs = []
    for line, row in enumerate(rows, start=2):
        summary = {k: _cell(v, k in text, k in ints) for k, v in row.items() if k is not None and k not in DERIVED}
        if summary.get("variant") is None:  # as a run folder's summary is read
            summary["variant"] = summary.get("model.residual")
        if summary.get("status") == "ok" and summary.get("steps_to_learn") is None:
            summary.pop("steps_to_learn", None)  # an ok run has learned: an empty cell is a run older than the field
        if problem := (None if None not in row else "more cells than columns") or _summary_problem(summary):
            warnings.warn(f"{path}, line {line}: skipped: {problem}", AnalysisWarning)
            continue
        if summary.get("run_dir") is not None and run_folder(path.parent, summary) is None:
            warnings.warn(f"{path}, line {line}: run_dir {str(summary['run_dir'])[:80]!r} is not a folder inside "
                          f"{path.parent}; the row is kept, nothing is read from that folder", AnalysisWarning)
            summary["run_dir"] = None
        runs.append(summary)
    # the run folders' order, so every sum agrees to the bit with the run folders' analysis
    return sorted(runs, key=lambda r: str(r.get("run_dir")))


def run_folder(root: Path, run: dict[str, Any]) -> Path | None:
    """The run's folder when its ``run_dir`` names one inside ``root``, else None: a ``runs.csv`` is data from
    anywhere, and must not make the analysis read another folder."""
    rel = run.get("run_dir")
    if (not isinstance(rel, str) or rel in ("", ".") or "\0" in rel
            or Path(rel).is_absolute() or ".." in Path(rel).parts):
        return None
    folder = root / rel
    try:
        folder.resolve().relative_to(root.resolve())
    except (ValueError, OSError, RuntimeError):
        return None
    return folder


def _cell(value: str | None, text: bool, integer: bool) -> Any:
    """One CSV cell as the value its summary held (see :func:`runs_from_csv`)."""
    if value is None or value == "":
        return None
    value = store.unneutral(value)  # the formula guard analyze's write_csv put before it
    if text:
        return value
    if value in ("True", "False"):
        return value == "True"
    if value[:1] in "[{(":
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return value
    if len(value.lstrip("+-")) <= store.MAX_INT_DIGITS:  # a longer one reads as inf below: not a finite number
        with contextlib.suppress(ValueError):
            return int(value)
    try:
        number = float(value)
    except ValueError:
        return value
    if math.isnan(number):
        return None
    return int(number) if integer and number.is_integer() else number


def _summary_problem(summary: dict[str, Any]) -> str | None:
    """Why a summary cannot be a run's (see :func:`_read_summary`), or None."""
    if summary.get("status") not in store.STATUSES:
        return f"status {summary.get('status')!r} is not one of {', '.join(store.STATUSES)}"
    if summary.get("variant") is None and summary.get("model.residual") is None:
        return "neither 'variant' nor 'model.residual' is set, so the scheme is unknown"
    for key in ("variant", "ablation", "run_id", "model.residual"):  # they name groups, headings and files
        value = summary.get(key)
        if value is not None and not isinstance(value, str):
            return f"'{key}' is {str(value)[:40]!r}, not text"
        if value is not None and (len(value) > store.NAME_CHARS or not value.isprintable()):
            return (f"'{key}' is not one printable line of at most {store.NAME_CHARS} characters (no line breaks, "
                    f"control or bidi characters): {value[:40]!r}")
    for key, value in summary.items():  # a value names a group: a number, text, or a list of them (train.betas)
        if isinstance(value, (dict, set)) or isinstance(value, (list, tuple)) and any(
                isinstance(x, (dict, set, list, tuple)) for x in value):
            return f"'{key}' is {str(value)[:40]!r}, not a value or a list of values"
    for key in ("seed", DEPTH):
        if not store.is_int(summary.get(key)):
            return f"'{key}' is {summary.get(key)!r}, not an integer"
    if summary["status"] in ("diverged", "failed") and chance(summary) is None:  # it would drop out of every score
        return (f"a {summary['status']} run without 'model.num_classes' cannot be scored at chance "
                f"(docs/statistics.md, One score)")
    for key in NUMERIC:
        value = summary.get(key)
        if value is not None and not store.is_number(value):
            return f"'{key}' is {value!r}, not a number"
        if isinstance(value, float) and not math.isfinite(value):
            return f"'{key}' is {value!r}, not a finite number"
    return store.summary_problem(summary)




def _finite_number(value: Any) -> bool:
    return store.is_number(value) and math.isfinite(value) and abs(value) < 1e15


def _check_one_ablation(runs: list[dict[str, Any]], root: Path) -> None:
    folders: dict[str, list[str]] = {}
    for r in runs:
        name = "(no ablation)" if r.get("ablation") is None else str(r["ablation"])
        folders.setdefault(name, []).append(str(r.get("run_dir") or "."))
    if len(folders) > 1:
        listed = ", ".join(f"{k}: {len(v)} runs" for k, v in sorted(folders.items()))
        where = sorted({(root / _ablation_folder(v)).as_posix() for v in folders.values()} - {root.as_posix()})
        where = [w for w in where if w.isprintable()]  # a run_dir cell is anyone's text
        fix = (f"analyze one ablation at a time, e.g. suite analyze {where[0]}" if where else
               "give each ablation its own results folder (suite run FILE --out DIR) and analyze each")
        raise AnalysisError(f"{root} mixes runs of {len(folders)} ablations ({listed}); they are not pooled: {fix}")


def _ablation_folder(run_dirs: list[str]) -> str:
    """The folder that holds these runs: the part before ``runs/`` in the layout, if present."""
    parts = Path(os.path.commonpath(run_dirs)).parts
    if "runs" in parts:
        parts = parts[: len(parts) - 1 - parts[::-1].index("runs")]
    return Path(*parts).as_posix() if parts else "."


def read_curves(run_path: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Training curves of one run folder: ``(train, blocks)``, frames of (step, loss) and (step, block, scale_mean),
    empty if the file is missing; AnalysisError for a damaged line before the last."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            records = store.read_metrics(Path(run_path))
        except store.CorruptFile as err:
            raise AnalysisError(str(err)) from None
    for w in caught:
        warnings.warn(str(w.message), AnalysisWarning)
    train, blocks, bad = [], [], 0
    for rec in records:
        if rec.get("kind") != "train":
            continue
        step, loss, recs = rec.get("step"), rec.get("loss"), rec.get("blocks")
        if not (_finite_number(step) and (loss is None or _finite_number(loss) or store.is_number(loss))
                and (recs is None or isinstance(recs, list) and all(isinstance(b, dict) for b in recs))):
            bad += 1  # valid JSON of the wrong shape: a hand-edited or damaged log, never the suite's own
            continue
        train.append((step, math.nan if loss is None else float(loss)))
        for b in recs or []:
            if _finite_number(b.get("scale_mean")) and _finite_number(b.get("block")):
                blocks.append((step, b["block"], b["scale_mean"]))
    if bad:
        warnings.warn(f"{Path(run_path) / store.METRICS}: {bad} train record(s) skipped: a step, loss or blocks "
                      f"of the wrong type", AnalysisWarning)
    return (pd.DataFrame(train, columns=["step", "loss"], dtype=float),
            pd.DataFrame(blocks, columns=["step", "block", "scale_mean"], dtype=float))


def chance(run: dict[str, Any]) -> float | None:
    """``1 / model.num_classes``, or None when the summary does not say."""
    classes = run.get("model.num_classes")
    return 1.0 / classes if store.is_int(classes) and classes > 0 else None


def selection_split(runs: list[dict[str, Any]]) -> str:
    """The split a setting is chosen on: ``val`` when every ``ok`` run measured one, else ``test``."""
    return "val" if all(r.get("val_acc") is not None for r in runs if r["status"] == "ok") else "test"


def score(run: dict[str, Any], split: str = "test") -> float | None:
    """A run's ``test`` (or ``val``) score under the rule above; None for ``error`` or a missing value."""
    if run["status"] == "error":
        return None
    if run["status"] in ("diverged", "failed"):
        return chance(run)
    value = run.get(f"{split}_acc")
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


class BestRate(NamedTuple):
    """An arm's best learning rate (:func:`best_rate`)."""

    rate: float
    mean: float  # the mean score there
    edge: str  # "lowest" / "highest" when it is an edge of the rates the arm ran, else ""
    chance: float  # the arm's chance score (0 when its runs do not say)

    @property
    def above_chance(self) -> bool:
        return self.mean > self.chance + 1e-9


def best_rate(runs: list[dict[str, Any]], split: str, key: str = LR) -> BestRate | None:
    """An arm's best learning rate: highest mean ``split`` score (ties: the smaller); None when no run scores. The one
    rule for the tables and ``--refine``."""
    by_rate: dict[float, list[float]] = {}
    for r in runs:
        x = score(r, split)
        by_rate.setdefault(float(r[key]), []).extend([] if x is None else [x])
    means = {lr: float(np.mean(xs)) for lr, xs in by_rate.items() if xs}
    if not means:
        return None
    top = max(means.values())
    best = min(lr for lr, m in means.items() if m == top)
    rates = sorted(means)  # the rates tried: a rate whose every run ended error was not
    edge = "" if len(rates) < 2 else "lowest" if best == rates[0] else "highest" if best == rates[-1] else ""
    return BestRate(best, top, edge, next((c for c in map(chance, runs) if c is not None), 0.0))
