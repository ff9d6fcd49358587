"""Which runs form a group, in what order, split into which table sections (docs/statistics.md, "Groups and layout"):
``variant`` plus every config key that varies within one, execution keys excluded; ``packed`` keeps packed and solo
runs apart, and a key the others imply (a rate tuned per depth) splits no group."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from suite.config import DEPTH, LR
from suite.results import AnalysisError
from suite.registry import did_you_mean
from suite.store import EXECUTION_KEYS

CONFIG_PREFIXES = ("model.", "data.", "train.")
DEFAULT_BASELINE = "preln"
NOT_GROUPABLE = ("seed", "run_id", "status")


def hashable(v: Any) -> Any:
    """A key value usable in a dict key: lists become tuples, NaN becomes None."""
    if isinstance(v, list):
        return tuple(hashable(x) for x in v)
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def sort_value(v: Any) -> tuple[int, float, str]:
    """Total order over key values of mixed types: numbers, then strings, then None."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return (2, 0.0, "")
    if isinstance(v, (bool, int, float, np.integer, np.floating)):
        return (0, float(v), "")
    return (1, 0.0, str(v))


def variant_order(variants: list[str], baseline: str) -> list[str]:
    """Distinct variants, baseline first, then alphabetical."""
    return [baseline] * (baseline in variants) + sorted(v for v in set(variants) if v != baseline)


def section_keys(keys: list[str]) -> list[str]:
    """Keys that split tables into sections (and families): all but variant and depth."""
    return [k for k in keys if k not in ("variant", DEPTH)]


def sections(frame: pd.DataFrame, keys: list[str]) -> list[tuple[tuple, pd.DataFrame]]:
    """A per-group frame split into table sections, ``[(label, rows), ...]``, label the :func:`section_keys` values."""
    skeys = section_keys(keys)
    if not skeys:
        return [((), frame)]
    labels = [tuple(hashable(v) for v in row) for row in frame[skeys].itertuples(index=False)]
    return [(label, frame[[lab == label for lab in labels]])
            for label in sorted(set(labels), key=lambda t: [sort_value(v) for v in t])]


def is_config_key(key: str) -> bool:
    """A config key that says what a run computes, not how it was executed."""
    return key.startswith(CONFIG_PREFIXES) and key not in EXECUTION_KEYS


PACKED = "packed"  # set by a pack (suite/engine/pack.py); part of the cell when a folder mixes packed and solo runs


def group_keys(runs: list[dict[str, Any]], by: list[str] | None = None) -> list[str]:
    """``variant``, then the sorted other keys that define a group (``by`` None: the automatic rule); AnalysisError."""
    columns = sorted({k for r in runs for k in r})
    if by is not None:
        keys = []
        for key in by:
            if key not in columns:
                raise AnalysisError(f"--by {key}: no run has this key{did_you_mean(key, columns)}; "
                                    f"see the columns of runs.csv")
            if key in NOT_GROUPABLE or not (is_config_key(key) or key == PACKED):  # an outcome is no group
                raise AnalysisError(f"--by {key}: runs cannot be grouped by {key} (not a config key); pick config "
                                    f"keys, e.g. model.depth")
            if key != "variant" and key not in keys:
                keys.append(key)
    else:
        keys = [k for k in columns if is_config_key(k) and _splits(runs, ["variant"], k)]
        if _splits(runs, ["variant"], PACKED):  # a packed run is not pooled with solo runs of its cell
            keys.append(PACKED)
    keys = ["variant"] + sorted(keys)
    if by is None:  # a key the others imply (each arm's rate tuned per depth: rates_from) splits no group
        for key in sorted(keys[1:], key=lambda k: k == DEPTH):  # the depth axis is the one kept
            rest = [k for k in keys if k != key]
            if not _splits(runs, rest, key):
                keys = rest
    if DEPTH not in keys and any(DEPTH in r for r in runs) and not _splits(runs, keys, DEPTH):
        keys.insert(1, DEPTH)
    return keys


def _splits(runs: list[dict[str, Any]], keys: list[str], key: str) -> bool:
    values: dict[tuple, set] = {}
    for r in runs:
        values.setdefault(group_of(r, keys), set()).add(hashable(r.get(key)))
    return any(len(v) > 1 for v in values.values())


def group_of(run: dict[str, Any], keys: list[str]) -> tuple:
    """The group (a tuple of key values, hashable) that a run belongs to."""
    return tuple(hashable(run.get(k)) for k in keys)


def same_group(a: Any, b: Any, keys: list[str]) -> bool:
    """Whether two runs or table rows (dicts or Series) share a group by ``keys``: NaN as None, a list as a tuple."""
    return group_of(a, keys) == group_of(b, keys)


def ordered_groups(runs: list[dict[str, Any]], keys: list[str], baseline: str) -> dict[tuple, list[dict[str, Any]]]:
    """``runs`` grouped by ``keys`` in table order: the baseline variant first, then the other keys' values."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault(group_of(r, keys), []).append(r)
    order = {v: i for i, v in enumerate(variant_order([g[0] for g in groups], baseline))}
    return {g: groups[g] for g in sorted(groups, key=lambda g: (order[g[0]], [sort_value(v) for v in g[1:]]))}


def choose_baseline(runs: list[dict[str, Any]], baseline: str | None) -> str:
    """The baseline variant: ``baseline`` if given, else ``preln`` if present; AnalysisError otherwise."""
    variants = sorted({str(r["variant"]) for r in runs})
    if baseline is None:
        if DEFAULT_BASELINE in variants:
            return DEFAULT_BASELINE
        raise AnalysisError(f"no variant named '{DEFAULT_BASELINE}' to compare against; pass --baseline VARIANT "
                            f"(one of: {', '.join(variants)})")
    if baseline not in variants:
        raise AnalysisError(f"--baseline {baseline}: no such variant{did_you_mean(baseline, variants)}; "
                            f"variants: {', '.join(variants)}")
    return baseline
