"""Rates tuned elsewhere: an ablation's ``rates_from:`` (a tuning study's results folder) or ``rates:`` (written out),
so a study confirms on fresh seeds with a plain paired t, no cross-fitting (docs/ablations.md, "Tune, then confirm")."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

from suite.config import LR
from suite.declared import key_value, same_value

FIELDS = ("variant", LR, "tuning_seeds", "val_score", "at_edge")  # plus one key per grid axis


def from_folder(folder: Path, variants: list[str], grid: dict[str, list[Any]], src: str,
                problems: list[str]) -> list[dict[str, Any]] | None:
    """One ``rates:`` entry per cell from the tuning study in ``folder``: its best rate, seeds, score and edge."""
    import itertools

    from suite.results import AnalysisError, AnalysisWarning, best_rate, run_records, selection_split

    try:
        is_dir, exists = folder.is_dir(), folder.exists()
    except (OSError, ValueError) as err:  # a name too long, a NUL
        problems.append(f"{src}: rates_from: {str(folder)[:80]!r} cannot be a folder ({err}); name the tuning "
                        f"study's folder (e.g. ../results/tune)")
        return None
    if not is_dir:
        if folder.is_symlink() and not exists:
            problems.append(f"{src}: rates_from: {folder} is a symbolic link that leads nowhere (or back to itself); "
                            f"name the tuning study's folder (e.g. ../results/tune)")
            return None
        if exists:
            problems.append(f"{src}: rates_from: {folder} is a file, not a results folder; name the tuning study's "
                            f"folder (e.g. ../results/tune)")
            return None
        study = Path(src).parent / f"{folder.name}.yaml"
        how = f"`suite run {study}`" if study.is_file() else "the tuning study that writes it"
        problems.append(f"{src}: rates_from: {folder} does not exist yet; run {how} first")
        return None
    if not (folder / "runs.csv").is_file() and not (folder / "runs").is_dir():  # never a walk of a whole disk
        problems.append(f"{src}: rates_from: {folder} holds neither runs.csv nor runs/, so it is no sweep's results "
                        f"folder; name the tuning study's folder (e.g. ../results/tune)")
        return None
    try:
        with warnings.catch_warnings(record=True) as caught:  # read as `suite analyze` reads it, drops said
            warnings.simplefilter("always", AnalysisWarning)
            runs = [r for r in run_records(folder, from_csv=True) if r["status"] != "error"]
    except (AnalysisError, OSError) as err:
        problems.append(f"{src}: rates_from: {str(err).splitlines()[0]}")
        return None
    if dropped := [str(w.message) for w in caught if ": skipped: " in str(w.message)]:
        problems.append(f"{src}: rates_from: {len(dropped)} run(s) of the tuning study cannot be read, and a best "
                        f"rate may be among them: {dropped[0][:300]}; fix or rerun them there first")
        return None
    _warn_unfinished(folder, runs, src)
    entries = []
    for values in itertools.product(*grid.values()):
        point = dict(zip(grid, values))
        for variant in variants:
            cell = [r for r in runs if r.get("variant") == variant and isinstance(r.get(LR), (int, float))
                    and all(same_value(r.get(k), v) for k, v in point.items())]
            where = ", ".join(f"{k}={v}" for k, v in point.items())
            at = f"variant {variant}{' at ' + where if where else ''}"
            if problem := _not_one_setting(cell):  # pooled, the best rate would be no setting's
                problems.append(f"{src}: rates_from: {folder}: its runs of {at} differ in {problem}; make it a "
                                f"grid axis here (each cell then takes its own rate), or tune at one value")
                continue
            if selection_split(cell) != "val":
                problems.append(f"{src}: rates_from: {folder}: an ok run of {at} has no validation score (val_acc), "
                                f"so its rate could be chosen only on test; tune with data.val_fraction > 0")
                continue
            best = best_rate(cell, "val") if cell else None
            if best is None:
                problems.append(f"{src}: rates_from: {folder} has no finished run of {at}; tune it there first, or "
                                f"drop the cell")
                continue
            entries.append({"variant": variant, **point, LR: best.rate,
                            "tuning_seeds": sorted({int(r["seed"]) for r in cell}),
                            "val_score": round(best.mean, 6), "at_edge": best.edge})
    return entries


def _not_one_setting(cell: list[dict[str, Any]]) -> str | None:
    """The first key other than the rate that would split ``cell``'s runs into cells in `suite analyze`
    (:func:`suite.grouping.is_config_key`, or packed against solo), with its values; None if none."""
    from suite.grouping import PACKED, is_config_key

    def value(run: dict[str, Any], key: str) -> Any:
        return bool(run.get(PACKED)) if key == PACKED else run[key]

    for key in sorted({k for r in cell for k in r if is_config_key(k)} - {LR}) + [PACKED]:
        values = {key_value(value(r, key)): value(r, key) for r in cell if key in r or key == PACKED}  # a run
        if len(values) > 1:  # older than a key has no value to differ in
            return f"{key} ({', '.join(sorted(map(str, values.values()))[:4])})"
    return None


def _warn_unfinished(folder: Path, runs: list[dict[str, Any]], src: str) -> None:
    """Warn when the tuning sweep's ``run_ids.json`` lists runs without a summary: its rates may yet move."""
    from suite import store
    from suite.results import unfinished

    if counts := unfinished(folder, runs):
        warnings.warn(f"{src}: rates_from: {folder}: {counts[1] - counts[0]} of its {counts[1]} runs have not finished "
                      f"(or ended error); the rates come from the others and may move when it finishes",
                      store.SuiteWarning, stacklevel=2)


def check_rates(rates: Any, variants: list[str], grid: dict[str, list[Any]], src: str,
                problems: list[str]) -> dict[tuple, dict[str, Any]]:
    """``rates:`` as a map from (variant, grid values...) to its entry; one line per problem."""
    if not isinstance(rates, list) or not all(isinstance(e, dict) for e in rates):
        problems.append(f"{src}: rates: expected a list of {{variant, <grid axes>, train.lr}} entries; or use "
                        f"`rates_from: FOLDER` to take them from a tuning study")
        return {}
    out: dict[tuple, dict[str, Any]] = {}
    for i, entry in enumerate(rates):
        if unknown := [k for k in entry if k not in FIELDS and k not in grid]:
            problems.append(f"{src}: rates[{i}]: unknown field {unknown[0]!r}; an entry has variant, "
                            f"{', '.join(grid) + ', ' if grid else ''}{LR} (and tuning_seeds, val_score, at_edge)")
            continue
        lr = entry.get(LR)
        if entry.get("variant") not in variants:
            problems.append(f"{src}: rates[{i}].variant: {entry.get('variant')!r} is not a variant of this ablation")
        elif not (isinstance(lr, (int, float)) and not isinstance(lr, bool) and math.isfinite(lr) and lr > 0):
            problems.append(f"{src}: rates[{i}].{LR}: expected a number > 0, got {lr!r}")
        elif any(k not in entry for k in grid):
            problems.append(f"{src}: rates[{i}]: give a value of every grid axis ({', '.join(grid)})")
        elif any(isinstance(entry[k], dict) for k in grid):
            problems.append(f"{src}: rates[{i}]: a grid axis's value is a mapping; give the value the axis lists")
        elif not (isinstance(seeds := entry.get("tuning_seeds") or [], list)
                  and all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)):
            problems.append(f"{src}: rates[{i}].tuning_seeds: expected a list of integer seeds")
        else:
            key = cell_key(entry["variant"], entry, grid)
            if key in out:
                problems.append(f"{src}: rates[{i}]: a second rate for the same cell; keep one")
            out[key] = entry
    return out


def cell_key(variant: str, values: dict[str, Any], grid: dict[str, list[Any]]) -> tuple:
    """(variant, each grid axis's :func:`suite.declared.key_value`): equal for 48 and 48.0."""
    return (variant, *(key_value(values[k]) for k in grid))

