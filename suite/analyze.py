"""`suite analyze DIR`: turn a folder of finished runs into comparison tables and figures.

Flow: every ``summary.json`` under DIR (see results/README.md) -> one row per run (``runs.csv``)
-> groups -> one row per group with rates, intervals and tests against the baseline
(``tables/summary.csv``) -> paper-style tables (``report.py``) and figures (``figures.py``).

Grouping (documented in README, "Analysis"):
- A group is ``variant`` plus every config key (``model.*``, ``data.*``, ``train.*``, ``device``)
  that varies *within* some variant. A key that varies only across variants (``model.residual``)
  is implied by the variant and left out; the seed is never a key; provenance and results never
  are. ``--by KEY ...`` replaces the automatic keys (``variant`` is always kept).
- ``model.depth`` is added to the keys whenever that does not split a group, so tables can show
  depth as columns.
- Keys other than ``variant`` and ``model.depth`` (e.g. ``train.lr``) split the tables into
  sections, one per combination of their values. Each section is one Holm family per p-value
  column (accuracy tests; divergence-rate tests).
- Each group is tested against the baseline variant's group at the same values of all other
  keys; where that group does not exist the tests are ``nan`` and the tables say so.
- Runs of status ``error`` are left out of every rate (``n`` counts the other runs) and counted
  in ``n_error``; accuracy statistics use the ``ok`` runs only.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from suite import report, stats
from suite.report import DEPTH, LR, hashable, sections, sort_value, variant_order

STATUSES = ("ok", "diverged", "failed", "error")
CONFIG_PREFIXES = ("model.", "data.", "train.")
DEFAULT_BASELINE = "preln"
FORMATS = ("md", "tex", "csv")
NOT_GROUPABLE = ("seed", "run_id", "status")


class AnalysisError(ValueError):
    """A user error (bad folder, mixed ablations, missing baseline): one line, with the fix."""


class AnalysisWarning(UserWarning):
    """Something the user should know that does not stop the analysis (e.g. runs that errored)."""


# ----------------------------------------------------------------------------- loading


def load_runs(run_dir: str | Path) -> list[dict[str, Any]]:
    """Read every ``summary.json`` under ``run_dir`` (recursively).

    Args:
        run_dir: a folder of runs, e.g. ``results/<ablation>``.

    Returns:
        One dict per run: the summary's fields plus ``run_dir`` (the run folder relative to
        ``run_dir``, POSIX style). ``variant`` falls back to ``model.residual`` for runs made
        outside a sweep.

    Raises:
        AnalysisError: missing folder, no runs, unreadable summary, unknown status, duplicate
            run ids, or runs of more than one ablation.
    """
    root = Path(run_dir)
    if not root.is_dir():
        raise AnalysisError(f"{root}: no such folder; pass a folder of runs, e.g. results/<ablation>")
    runs = []
    for path in sorted(root.rglob("summary.json")):
        try:
            summary = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise AnalysisError(f"{path}: cannot read it ({err}); delete the file to rerun that run") from None
        if not isinstance(summary, dict):
            raise AnalysisError(f"{path}: expected a JSON object; delete the file to rerun that run")
        if summary.get("status") not in STATUSES:
            raise AnalysisError(f"{path}: status {summary.get('status')!r} is not one of {', '.join(STATUSES)}")
        if summary.get("variant") is None:
            summary["variant"] = summary.get("model.residual")
        if summary["variant"] is None:
            raise AnalysisError(f"{path}: neither 'variant' nor 'model.residual' is set; cannot name the scheme")
        summary["run_dir"] = path.parent.relative_to(root).as_posix()
        runs.append(summary)
    if not runs:
        raise AnalysisError(f"{root}: no summary.json found; point at a folder of finished runs (results/<ablation>)")
    _check_one_ablation(runs, root)
    seen: dict[str, str] = {}
    for r in runs:
        rid = r.get("run_id")
        if rid is not None and rid in seen:
            raise AnalysisError(
                f"run_id {rid} appears twice ({seen[rid]} and {r['run_dir']}); "
                f"remove one copy so that it is not counted twice"
            )
        seen[rid] = r["run_dir"]
    if any(r.get("schema", 1) != 1 for r in runs):
        warnings.warn("some summaries are not schema 1; fields may be missing", AnalysisWarning)
    return runs


def _check_one_ablation(runs: list[dict[str, Any]], root: Path) -> None:
    folders: dict[str, list[str]] = {}
    for r in runs:
        name = "(no ablation)" if r.get("ablation") is None else str(r["ablation"])
        folders.setdefault(name, []).append(r["run_dir"])
    if len(folders) > 1:
        listed = ", ".join(f"{k}: {len(v)} runs" for k, v in sorted(folders.items()))
        where = sorted({(root / _ablation_folder(v)).as_posix() for v in folders.values()})
        raise AnalysisError(
            f"{root} mixes runs of {len(folders)} ablations ({listed}); they are not pooled: "
            f"analyze one ablation at a time, e.g. suite analyze {where[0]}"
        )


def _ablation_folder(run_dirs: list[str]) -> str:
    """The folder that holds these runs: the part before ``runs/`` in the layout, if present."""
    parts = Path(os.path.commonpath(run_dirs)).parts
    if "runs" in parts:
        parts = parts[: len(parts) - 1 - parts[::-1].index("runs")]
    return Path(*parts).as_posix() if parts else "."


def read_metrics(run_path: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Training curves of one run from its ``metrics.jsonl``.

    Args:
        run_path: the run folder.

    Returns:
        ``(train, blocks)``: ``train`` has columns step, loss (one row per ``train`` record);
        ``blocks`` has columns step, block, scale_mean (one row per block per record, only
        where ``scale_mean`` is not null). Both are empty if the file is missing. Lines that do
        not parse (a run killed mid-write) are skipped.
    """
    path = Path(run_path) / "metrics.jsonl"
    train, blocks = [], []
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if not isinstance(rec, dict) or rec.get("kind") != "train":
                continue
            loss = rec.get("loss")
            train.append((rec.get("step"), math.nan if loss is None else loss))
            for b in rec.get("blocks") or []:
                if b.get("scale_mean") is not None:
                    blocks.append((rec.get("step"), b.get("block"), b["scale_mean"]))
    return (
        pd.DataFrame(train, columns=["step", "loss"], dtype=float),
        pd.DataFrame(blocks, columns=["step", "block", "scale_mean"], dtype=float),
    )


# ----------------------------------------------------------------------------- grouping


def _is_config_key(key: str) -> bool:
    return key.startswith(CONFIG_PREFIXES) or key == "device"


def group_keys(runs: list[dict[str, Any]], by: list[str] | None = None) -> list[str]:
    """The keys that define a group: ``variant`` first, then sorted other keys.

    Args:
        runs: as returned by :func:`load_runs`.
        by: explicit keys (``--by``); None for the automatic rule (module docstring).

    Returns:
        Key names, e.g. ``["variant", "model.depth", "train.lr"]``.

    Raises:
        AnalysisError: an unknown key (with a did-you-mean) or a key that cannot group runs.
    """
    columns = sorted({k for r in runs for k in r})
    if by is not None:
        keys = []
        for key in by:
            if key not in columns:
                close = difflib.get_close_matches(key, columns, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise AnalysisError(f"--by {key}: no run has this key{hint}; see the columns of runs.csv")
            if key in NOT_GROUPABLE:
                raise AnalysisError(f"--by {key}: runs cannot be grouped by {key}; pick config keys, e.g. model.depth")
            if key != "variant" and key not in keys:
                keys.append(key)
    else:
        keys = [k for k in columns if _is_config_key(k) and _varies_within_a_variant(runs, k)]
    keys = ["variant"] + sorted(keys)
    if DEPTH not in keys and any(DEPTH in r for r in runs) and not _splits(runs, keys, DEPTH):
        keys.insert(1, DEPTH)
    return keys


def _varies_within_a_variant(runs: list[dict[str, Any]], key: str) -> bool:
    values: dict[Any, set] = {}
    for r in runs:
        values.setdefault(r["variant"], set()).add(hashable(r.get(key)))
    return any(len(v) > 1 for v in values.values())


def _splits(runs: list[dict[str, Any]], keys: list[str], key: str) -> bool:
    values: dict[tuple, set] = {}
    for r in runs:
        values.setdefault(group_of(r, keys), set()).add(hashable(r.get(key)))
    return any(len(v) > 1 for v in values.values())


def group_of(run: dict[str, Any], keys: list[str]) -> tuple:
    """The group (a tuple of key values, hashable) that a run belongs to."""
    return tuple(hashable(run.get(k)) for k in keys)


def choose_baseline(runs: list[dict[str, Any]], baseline: str | None) -> str:
    """The baseline variant: ``baseline`` if given, else ``preln`` if present.

    Raises:
        AnalysisError: the named variant is absent, or no ``preln`` and no ``--baseline``.
    """
    variants = sorted({str(r["variant"]) for r in runs})
    if baseline is None:
        if DEFAULT_BASELINE in variants:
            return DEFAULT_BASELINE
        raise AnalysisError(
            f"no variant named '{DEFAULT_BASELINE}' to compare against; pass --baseline VARIANT "
            f"(one of: {', '.join(variants)})"
        )
    if baseline not in variants:
        close = difflib.get_close_matches(baseline, variants, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise AnalysisError(f"--baseline {baseline}: no such variant{hint}; variants: {', '.join(variants)}")
    return baseline


# ----------------------------------------------------------------------------- summary


def _finite(values: list[Any]) -> np.ndarray:
    x = np.array([v for v in values if v is not None], dtype=float)
    return x[np.isfinite(x)]


def _group_stats(runs: list[dict[str, Any]]) -> dict[str, Any]:
    live = [r for r in runs if r["status"] != "error"]
    n = len(live)
    count = {s: sum(r["status"] == s for r in runs) for s in STATUSES}
    acc = _finite([r.get("test_acc") for r in live if r["status"] == "ok"])
    div_lo, div_hi = stats.wilson_interval(count["diverged"], n)
    fail_lo, fail_hi = stats.wilson_interval(count["failed"], n)
    acc_lo, acc_hi = stats.bootstrap_ci(acc)
    steps = _finite([r.get("step_time_ms") for r in live])
    div_steps = _finite([r.get("diverged_step") for r in live if r["status"] == "diverged"])
    rate = (lambda k: k / n) if n else (lambda k: math.nan)
    return {
        "n": n, "n_ok": count["ok"], "n_error": count["error"],
        "n_diverged": count["diverged"], "diverged_rate": rate(count["diverged"]),
        "diverged_ci_low": div_lo, "diverged_ci_high": div_hi,
        "diverged_step_median": float(np.median(div_steps)) if div_steps.size else math.nan,
        "n_failed": count["failed"], "failed_rate": rate(count["failed"]),
        "failed_ci_low": fail_lo, "failed_ci_high": fail_hi,
        "acc_mean": float(acc.mean()) if acc.size else math.nan,
        "acc_std": float(acc.std(ddof=1)) if acc.size > 1 else math.nan,
        "acc_ci_low": acc_lo, "acc_ci_high": acc_hi,
        "acc_median": float(np.median(acc)) if acc.size else math.nan,
        "step_time_ms": float(np.median(steps)) if steps.size else math.nan,
        "_acc": acc, "_steps": steps,
    }


def summarize(runs: list[dict[str, Any]], keys: list[str], baseline: str) -> pd.DataFrame:
    """One row per group: counts, rates with Wilson intervals, accuracy, tests, overhead.

    Args:
        runs: as returned by :func:`load_runs`.
        keys: group keys, ``variant`` first (:func:`group_keys`).
        baseline: the baseline variant (:func:`choose_baseline`).

    Returns:
        DataFrame sorted by variant (baseline first) then the other keys; columns: the keys,
        ``is_baseline``, ``has_baseline``, n, n_ok, n_error, n_diverged, diverged_rate,
        diverged_ci_low/high, diverged_step_median, n_failed, failed_rate, failed_ci_low/high,
        acc_mean, acc_std, acc_ci_low/high, acc_median, acc_p, acc_p_holm, diverged_p,
        diverged_p_holm, step_time_ms, overhead, overhead_ci_low/high. Accuracies are fractions.
    """
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault(group_of(r, keys), []).append(r)
    order = {v: i for i, v in enumerate(variant_order([g[0] for g in groups], baseline))}
    ordered = sorted(groups, key=lambda g: (order[g[0]], [sort_value(v) for v in g[1:]]))
    rows = {g: _group_stats(groups[g]) for g in ordered}
    out = []
    for g in ordered:
        row, base = rows[g], rows.get((baseline,) + g[1:])
        is_base = g[0] == baseline
        tests = {"acc_p": math.nan, "diverged_p": math.nan, "overhead": math.nan,
                 "overhead_ci_low": math.nan, "overhead_ci_high": math.nan}
        if is_base:
            tests["overhead"] = 1.0
        elif base is not None:
            tests["acc_p"] = stats.welch_t_p(row["_acc"], base["_acc"])
            tests["diverged_p"] = stats.fisher_exact_p(row["n_diverged"], row["n"], base["n_diverged"], base["n"])
            ratio, lo, hi = stats.ratio_of_medians(row["_steps"], base["_steps"])
            tests.update(overhead=ratio, overhead_ci_low=lo, overhead_ci_high=hi)
        out.append({**dict(zip(keys, g)), "is_baseline": is_base, "has_baseline": base is not None,
                    **{k: v for k, v in row.items() if not k.startswith("_")}, **tests})
    frame = pd.DataFrame(out)
    frame["acc_p_holm"] = _holm_by_section(frame, keys, "acc_p")
    frame["diverged_p_holm"] = _holm_by_section(frame, keys, "diverged_p")
    first = keys + ["is_baseline", "has_baseline", "n", "n_ok", "n_error", "n_diverged", "diverged_rate",
                    "diverged_ci_low", "diverged_ci_high", "diverged_step_median", "n_failed", "failed_rate",
                    "failed_ci_low", "failed_ci_high", "acc_mean", "acc_std", "acc_ci_low", "acc_ci_high",
                    "acc_median", "acc_p", "acc_p_holm", "diverged_p", "diverged_p_holm", "step_time_ms",
                    "overhead", "overhead_ci_low", "overhead_ci_high"]
    return frame[first]


def _holm_by_section(frame: pd.DataFrame, keys: list[str], column: str) -> pd.Series:
    adjusted = pd.Series(math.nan, index=frame.index)
    for _, part in sections(frame, keys):
        adjusted[part.index] = stats.holm(part[column].to_numpy(dtype=float))
    return adjusted


# ----------------------------------------------------------------------------- extra tables


def power_table(summary: pd.DataFrame, keys: list[str], target: float = 0.8, alpha: float = 0.05) -> pd.DataFrame:
    """Seeds per group needed to detect each observed divergence-rate difference (Fisher).

    The observed rates of a variant and its baseline are taken as the true rates; ``power_now``
    is the exact power at the current counts, ``seeds_needed`` the seeds per group (equal sizes)
    for ``target`` power at ``alpha`` (:func:`suite.stats.fisher_seeds_needed`; inf where the
    rates are equal or more than 2000 seeds would be needed). Not adjusted for multiplicity.

    Args:
        summary: from :func:`summarize`.
        keys: its group keys.
        target: power wanted.
        alpha: significance level.

    Returns:
        One row per non-baseline group that has a baseline: the keys, n, n_diverged,
        diverged_rate, baseline_n, baseline_n_diverged, baseline_diverged_rate, diverged_p,
        power_now, seeds_needed.
    """
    index = {tuple(hashable(v) for v in row[keys]): row for _, row in summary.iterrows()}
    base_name = summary.loc[summary["is_baseline"], "variant"]
    rows = []
    for _, row in summary.iterrows():
        if row["is_baseline"] or not row["has_baseline"] or base_name.empty:
            continue
        base = index[(base_name.iloc[0],) + tuple(hashable(v) for v in row[keys[1:]])]
        p1, p2 = row["diverged_rate"], base["diverged_rate"]
        ok = row["n"] > 0 and base["n"] > 0
        rows.append({
            **{k: row[k] for k in keys},
            "n": row["n"], "n_diverged": row["n_diverged"], "diverged_rate": p1,
            "baseline_n": base["n"], "baseline_n_diverged": base["n_diverged"], "baseline_diverged_rate": p2,
            "diverged_p": row["diverged_p"],
            "power_now": stats.fisher_power(p1, p2, int(row["n"]), int(base["n"]), alpha) if ok else math.nan,
            "seeds_needed": stats.fisher_seeds_needed(p1, p2, target, alpha) if ok else math.nan,
        })
    columns = keys + ["n", "n_diverged", "diverged_rate", "baseline_n", "baseline_n_diverged",
                      "baseline_diverged_rate", "diverged_p", "power_now", "seeds_needed"]
    return pd.DataFrame(rows, columns=columns)


def stability_frontier(summary: pd.DataFrame, keys: list[str]) -> pd.DataFrame | None:
    """Per scheme (and other keys): the largest ``train.lr`` at which >= half the seeds end ``ok``.

    Args:
        summary: from :func:`summarize`.
        keys: its group keys; nothing is computed unless ``train.lr`` is one of them.

    Returns:
        None without a learning-rate key; else one row per group of the other keys with
        lr_stable_max (nan if no rate was stable), lr_tested_min, lr_tested_max, n_lr and
        censored (True when the largest rate tested was stable, so the frontier may lie higher).
    """
    if LR not in keys:
        return None
    rest = [k for k in keys if k != LR]
    rows = []
    labels = [tuple(hashable(v) for v in r) for r in summary[rest].itertuples(index=False)]
    for label in dict.fromkeys(labels):  # first-seen order = summary order
        part = summary[[lab == label for lab in labels]]
        part = part[part["n"] > 0]
        if part.empty:
            continue
        lrs = part[LR].astype(float)
        stable = lrs[part["n_ok"] >= 0.5 * part["n"]]
        best = float(stable.max()) if not stable.empty else math.nan
        rows.append({**dict(zip(rest, label)), "lr_stable_max": best, "lr_tested_min": float(lrs.min()),
                     "lr_tested_max": float(lrs.max()), "n_lr": int(lrs.nunique()),
                     "censored": bool(best == float(lrs.max()))})
    return pd.DataFrame(rows, columns=rest + ["lr_stable_max", "lr_tested_min", "lr_tested_max", "n_lr", "censored"])


def runs_frame(runs: list[dict[str, Any]], keys: list[str], baseline: str) -> pd.DataFrame:
    """``runs.csv``: one row per run, every summary field; sorted by group, then seed, then run id."""
    order = {v: i for i, v in enumerate(variant_order([r["variant"] for r in runs], baseline))}

    def sort_key(r: dict[str, Any]) -> tuple:
        g = group_of(r, keys)
        return (order[g[0]], [sort_value(v) for v in g[1:]], sort_value(r.get("seed")), str(r.get("run_id")))

    ordered = sorted(runs, key=sort_key)
    lead = ["run_id", "ablation", "variant", "seed", "status", "run_dir"]
    rest = sorted({k for r in runs for k in r} - set(lead))
    return pd.DataFrame(ordered, columns=lead + rest)


# ----------------------------------------------------------------------------- driver


def analyze(
    run_dir: str | Path,
    baseline: str | None = None,
    by: list[str] | None = None,
    formats: tuple[str, ...] | list[str] = FORMATS,
    power: bool = False,
    figures: bool = True,
) -> pd.DataFrame:
    """Analyse a folder of runs and write ``runs.csv``, ``tables/`` and ``figures/`` into it.

    Args:
        run_dir: folder of runs (one ablation), e.g. ``results/default``.
        baseline: variant to compare against; default ``preln`` (required if absent).
        by: group keys replacing the automatic ones (``variant`` is always kept).
        formats: any of ``md``, ``tex``, ``csv`` for the tables.
        power: also write ``tables/power.*`` (seeds needed for 80% power, Fisher, alpha 0.05).
        figures: write the figures (PNG and PDF).

    Returns:
        The per-group summary (the content of ``tables/summary.csv``); ``attrs["written"]`` lists
        the files written, ``attrs["keys"]`` the group keys, ``attrs["baseline"]`` the baseline.

    Raises:
        AnalysisError: on any user error (bad folder, mixed ablations, missing baseline, ...).
    """
    formats = tuple(formats)
    for f in formats:
        if f not in FORMATS:
            raise AnalysisError(f"unknown table format '{f}'; use a comma list of {', '.join(FORMATS)}")
    root = Path(run_dir)
    runs = load_runs(root)
    base = choose_baseline(runs, baseline)
    keys = group_keys(runs, by)
    n_error = sum(r["status"] == "error" for r in runs)
    if n_error:
        warnings.warn(f"{n_error} run(s) ended in error and are left out of all rates (see runs.csv: status, error)",
                      AnalysisWarning)
    summary = summarize(runs, keys, base)
    missing = summary[~summary["has_baseline"] & ~summary["is_baseline"]]
    if not missing.empty:
        warnings.warn(f"{len(missing)} group(s) have no '{base}' group at the same keys: no tests there",
                      AnalysisWarning)
    power_df = power_table(summary, keys) if power else None
    frontier = stability_frontier(summary, keys)
    title = str(runs[0].get("ablation") or root.resolve().name)
    written = [report.write_csv(runs_frame(runs, keys, base), root / "runs.csv")]
    tables = root / "tables"
    tables.mkdir(exist_ok=True)
    extra = {"power": power_df, "frontier": frontier}
    for fmt in formats:
        if fmt == "csv":
            written.append(report.write_csv(summary, tables / "summary.csv"))
            written += [report.write_csv(df, tables / f"{name}.csv") for name, df in extra.items() if df is not None]
        else:
            doc = report.document(fmt, title, summary, keys, base, len(runs), power=power_df, frontier=frontier)
            written.append(report.write_text(doc, tables / f"summary.{fmt}"))
    if figures:
        from suite import figures as fig  # matplotlib is slow to import: only when drawing

        written += fig.draw_all(root, runs, summary, keys, base, title)
    summary.attrs.update(written=[str(p) for p in written], keys=keys, baseline=base)
    return summary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``suite analyze`` arguments to ``parser``."""
    parser.add_argument("dir", help="folder of runs (one ablation), e.g. results/default")
    parser.add_argument("--baseline", metavar="VARIANT", default=None,
                        help=f"variant to test against (default: {DEFAULT_BASELINE}, required if absent)")
    parser.add_argument("--by", metavar="KEY", nargs="+", default=None,
                        help="group by these keys (plus variant) instead of every key that varies, e.g. model.depth")
    parser.add_argument("--formats", default=",".join(FORMATS),
                        help="comma list of table formats: md, tex, csv (default: all)")
    parser.add_argument("--power", action="store_true",
                        help="also tabulate the seeds per group needed for 80%% power (Fisher, alpha 0.05)")
    parser.add_argument("--no-figures", dest="figures", action="store_false", help="skip the figures")


def run(args: argparse.Namespace) -> int:
    """Run ``suite analyze`` from parsed arguments; returns the exit code (2 on a user error)."""
    formats = tuple(f.strip() for f in str(args.formats).split(",") if f.strip())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AnalysisWarning)
        try:
            summary = analyze(args.dir, baseline=args.baseline, by=args.by, formats=formats,
                              power=args.power, figures=getattr(args, "figures", True))
        except AnalysisError as err:
            print(f"suite analyze: error: {err}", file=sys.stderr)
            return 2
        except OSError as err:  # e.g. a read-only results folder
            print(f"suite analyze: error: cannot write the outputs ({err}); check the folder's permissions",
                  file=sys.stderr)
            return 2
    for w in caught:
        if issubclass(w.category, AnalysisWarning):
            print(f"suite analyze: warning: {w.message}", file=sys.stderr)
        else:  # not ours (numpy, matplotlib): show it as Python would have
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    print(f"{len(summary)} groups by {', '.join(summary.attrs['keys'])}; baseline {summary.attrs['baseline']}")
    for path in summary.attrs["written"]:
        print(f"wrote {path}")
    return 0
