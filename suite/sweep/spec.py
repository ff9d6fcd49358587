"""Ablation files: ``base`` x ``grid`` x ``variants`` x ``seeds`` - ``exclude`` -> validated runs (docs/ablations.md).
Every problem is collected before anything runs, one line each; config keys go through the run config's own checks."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
import os
import re
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from suite import store
from suite.config import (LR, RANGES, SEED_MAX, ConfigError, RunConfig, apply_dict, flat_items, flatten, load_yaml, nest,
                          parse_overrides, read_yaml, to_dict, validate)
from suite.registry import did_you_mean
from suite.sweep import tuned as tuned_mod

FIELDS = ("name", "description", "extends", "base", "grid", "variants", "seeds", "exclude", "primary", "refine",
          "rates_from", "rates", "superseded_by")
RESERVED = ("variant", "seed")  # set by `variants:` / `seeds:`, never by a config key
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")  # a folder name on every OS; fullmatch, not `$` (allows "a\n")
MAX_EXTENDS = 32  # files in one extends chain
MAX_RUNS = 100_000  # unless --max-runs: a typo in a grid can ask for millions of runs (minutes, gigabytes)
MAX_ROUNDS = 4  # `refine.max_rounds` by default (docs/ablations.md, "Grids that reach failure")


@dataclass(frozen=True)
class Refine:
    """The file's ``refine:``, the limits of ``--refine``: no rate above ``max_lr``, ``max_rounds`` rounds at most."""

    max_lr: float = 1.0
    max_rounds: int = MAX_ROUNDS


REFINE_KEYS = tuple(f.name for f in dataclasses.fields(Refine))


class SpecError(ConfigError):
    """Every problem found in an ablation file (or an ``--only`` filter), one line each."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(dict.fromkeys(problems))  # keep order, drop repeats
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True)
class Run:
    """One expanded run: its resolved config and where it came from in the ablation."""

    cfg: RunConfig
    run_id: str
    ablation: str
    variant: str
    seed: int
    point: dict[str, Any]  # the grid values of this run (dotted key -> value), in grid order
    label: str  # human-readable, e.g. "preln depth=24 seed=1"
    kind: str = "train"  # what is done with the config: "train", or "propagation" (suite propagate)

    @property
    def extra(self) -> dict[str, Any]:
        """Top-level keys the sweep adds to ``summary.json`` (the seed is there already)."""
        extra = {"ablation": self.ablation, "variant": self.variant}
        return extra if self.kind == "train" else {**extra, "kind": self.kind}


@dataclass
class Ablation:
    """A loaded ablation: the resolved file (``extends`` applied) and its runs."""

    name: str
    path: Path
    resolved: dict[str, Any]  # what is written to <out>/ablation.yaml
    runs: list[Run]
    grid: dict[str, list[Any]] = field(default_factory=dict)
    variants: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    excluded: int = 0
    primary: Any = None  # the declared primary comparison (suite.declared.Primary), if any
    refine: Refine = field(default_factory=Refine)  # the limits of --refine

    def describe(self) -> str:
        """E.g. ``40 runs (5 variants x 4 grid points x 2 seeds - 0 excluded)``."""
        points = math.prod(len(values) for values in self.grid.values())
        return (f"{len(self.runs)} runs ({len(self.variants)} variants x {points} grid points x "
                f"{len(self.seeds)} seeds - {self.excluded} excluded)")


def load_ablation(path: str | Path | dict[str, Any], max_runs: int | None = None,
                  overrides: list[str] | None = None) -> Ablation:
    """Read, merge (``extends``), check and expand an ablation file (or its content as a dict), ``overrides``
    (``key=value``) set in every run as if in ``base:``; :class:`SpecError` names every problem, one line each."""
    problems: list[str] = []
    max_runs = MAX_RUNS if max_runs is None else max_runs
    if isinstance(path, dict):
        raw = dict(path)
        _check_fields(raw, "<ablation>", problems, max_runs)
        path = Path("<ablation>")
    else:
        path = Path(path)
        raw = _resolve(path, problems, chain=(), max_runs=max_runs)
    if overrides and not problems:
        raw = _override(raw, overrides, problems)
    if problems:
        raise SpecError(problems)
    ablation = _expand(raw, str(path), problems, max_runs, tuple(overrides or ()))
    if problems:
        raise SpecError(problems)
    return ablation


def _override(raw: dict[str, Any], overrides: list[str], problems: list[str]) -> dict[str, Any]:
    """``raw`` with ``overrides`` merged into its ``base``; one problem per key the grid or a variant sets."""
    try:
        nested = parse_overrides(overrides, "command line")
        apply_dict(RunConfig(), nested, "command line")  # unknown keys and wrong types named as the user's
        given = flatten(nested)
    except ConfigError as err:
        problems.append(str(err))
        return raw
    for key in sorted(given):  # a value out of range is the command line's, not the file's
        check, what = RANGES.get(key, (lambda v: True, ""))
        if not check(given[key]):
            problems.append(f"command line: {key}={str(given[key])[:40]}: expected {what}; fix the value")
    # Checked already (only a file without problems gets here): grid a mapping, base and each variant a flat one.
    owned = set(raw.get("grid") or {}).union(*(raw.get("variants") or {}).values())
    for key in sorted(set(given) & owned):
        problems.append(f"command line: {key}: the ablation's grid or a variant sets it; change the file, or use "
                        f"--only {key}=VALUE to run a part of its grid")
    # Every override is applied to every run and recorded, or refused: these the sweep sets run by run.
    if "seed" in given:
        problems.append("command line: seed: each run's seed comes from the ablation's `seeds:`; change `seeds:` in "
                        "the file, or use --only seed=N to run one of its seeds")
    if LR in given and ("rates" in raw or "rates_from" in raw):
        problems.append("command line: train.lr: each run's rate comes from the file's rates/rates_from; change "
                        "those, or remove them to sweep the rate set here")
    return {**raw, "base": {**raw.get("base", {}), **given}}  # dotted, as the file's base is once checked


def _resolve(path: Path, problems: list[str], chain: tuple[Path, ...],
             max_runs: int = MAX_RUNS) -> dict[str, Any] | None:
    """The file merged over the files it extends, each checked on its own first."""
    try:
        data = read_yaml(path, duplicates=problems)  # each duplicate key a problem, all of them listed
    except ConfigError as err:
        problems.append(str(err))
        return None
    if not isinstance(data, dict):
        problems.append(f"{path}: top level: expected a mapping of ablation fields, got {type(data).__name__}; "
                        f"see docs/ablations.md")
        return None
    _check_fields(data, str(path), problems, max_runs)
    ref = data.pop("extends", None)
    if ref is None:
        return data
    if not isinstance(ref, str):
        problems.append(f"{path}: extends: expected a file name, got {ref!r}; e.g. `extends: base.yaml`")
        return data
    parent = path.parent / ref
    try:
        here, target, found = chain + (path.resolve(),), parent.resolve(), parent.is_file()
    except (OSError, ValueError, RuntimeError) as err:  # a NUL, a name too long, a loop of links
        problems.append(f"{path}: extends: {ref[:80]!r} cannot be a file ({store.error_reason(err)}); name the "
                        f"file this one builds on, relative to its folder")
        return data
    if len(here) >= MAX_EXTENDS:  # before Python's recursion limit would say "nested too deeply" of a short file
        problems.append(f"{path}: extends: a chain of more than {MAX_EXTENDS} files; merge some of them")
        return data
    if target in here:
        cycle = " -> ".join(p.name for p in here + (target,))
        problems.append(f"{path}: extends: '{ref}' makes a cycle ({cycle}); remove one of these extends")
        return data
    if not found:
        what = "is not a regular file" if parent.exists() else "not found"  # a folder or a FIFO is there
        problems.append(f"{path}: extends: file '{ref}' {what} (looked for {parent}); "
                        f"the path is relative to the folder of {path.name}")
        return data
    inherited = _resolve(parent, problems, here, max_runs)
    if inherited is None:
        return data
    merged = {**inherited, **data}  # base deep-merges, grid, variants and refine replace per key, the rest replaces
    for key in ("base", "grid", "variants", "refine"):
        if isinstance(inherited.get(key), dict) and isinstance(data.get(key), dict):
            merged[key] = {**inherited[key], **data[key]}
    return merged


def _usable(name: Any) -> bool:
    """A name for a results folder or a variant: :data:`NAME_RE`, and short enough for a path and the analysis."""
    return isinstance(name, str) and len(name) <= store.NAME_CHARS and NAME_RE.fullmatch(name) is not None


def _check_fields(data: dict[str, Any], src: str, problems: list[str], max_runs: int = MAX_RUNS) -> None:
    """Types and config keys of one file; normalises base / variants / grid to dotted keys."""
    if "variants" not in data and {"model", "data", "train"} & set(data):  # a run config: say so once
        problems.append(f"{src}: a run config (model, data, train at the top), not an ablation; train it with "
                        f"`suite train FILE`")
        return
    problems += [f"{src}: {key}: unknown field{did_you_mean(str(key), FIELDS)}; valid fields: {', '.join(FIELDS)}"
                 for key in data if key not in FIELDS]
    if "name" in data and not isinstance(data["name"], str):
        problems.append(f"{src}: name: {str(data['name'])[:80]!r}: YAML reads it as no text (a number, a list ...); "
                        f"quote it, e.g. name: '{str(data['name'])[:80]}'")
    elif "name" in data and not _usable(data["name"]):
        problems.append(f"{src}: name: {str(data['name'])[:80]!r} is not a usable folder name; "
                        f"use letters, digits, '.', '_', '+' or '-', at most {store.NAME_CHARS} of them")
    if "description" in data and not isinstance(data["description"], str):
        problems.append(f"{src}: description: expected a string; quote it")
    if "superseded_by" in data and not (isinstance(data["superseded_by"], str) and data["superseded_by"].strip()):
        problems.append(f"{src}: superseded_by: expected one line naming the study that replaces this one, e.g. "
                        f"`superseded_by: results/frontier (ablations/frontier.yaml)`")
    if "base" in data:
        data["base"] = _overrides(data["base"], src, "base", problems)
    if "variants" in data:
        variants = data["variants"]
        if not isinstance(variants, dict) or not variants:
            problems.append(f"{src}: variants: expected a mapping of name -> overrides, e.g. "
                            f"`variants: {{preln: {{model.residual: preln}}}}`")
            data["variants"] = {}
        else:
            for name in list(variants):
                if not _usable(name):
                    problems.append(f"{src}: variants.{str(name)[:80]!r}: not a usable variant name; "
                                    f"use letters, digits, '.', '_', '+' or '-', at most {store.NAME_CHARS} of them")
                variants[name] = _overrides(variants[name] or {}, src, f"variants.{name}", problems)
    grid = data.get("grid", {})
    if not isinstance(grid, dict):
        problems.append(f"{src}: grid: expected a mapping of dotted key -> list, e.g. `grid: {{model.depth: [6, 12]}}`")
        grid = {}
    for key, values in grid.items():
        if not isinstance(key, str):
            problems.append(f"{src}: grid: {key!r} is not a dotted key; name a config key, e.g. `model.depth`")
        elif key in RESERVED:
            problems.append(f"{src}: grid.{key}: not a grid axis; use `{key}s:` instead")
        elif not isinstance(values, list):
            problems.append(f"{src}: grid.{key}: expected a list of values, got {values!r}; write `[{values}]`")
        elif not values:
            problems.append(f"{src}: grid.{key}: empty axis gives no runs; list at least one value or remove the key")
        elif len(values) > max_runs:  # refused before each value is checked (a run config each: minutes)
            problems.append(f"{src}: grid.{key}: {len(values):,} values, more runs than the limit of {max_runs:,} "
                            f"on one axis alone; a typo? list the values the study needs (or raise --max-runs)")
        else:
            coerced = [_check_value(key, v, f"{src}: grid", problems) for v in values]
            counted = Counter(repr(c) for c in coerced if c is not None)
            for v in [v for v, n in counted.items() if n > 1]:
                problems.append(f"{src}: grid.{key}: value {v} appears twice; remove one")
    seeds = data.get("seeds", 1)
    if not (store.is_int(seeds) and seeds >= 1) and not (
            isinstance(seeds, list) and seeds and all(store.is_int(s) and 0 <= s <= SEED_MAX for s in seeds)
            and len(set(seeds)) == len(seeds)):
        problems.append(f"{src}: seeds: expected a count >= 1 (seeds 0..N-1) or a list of distinct "
                        f"integers from 0 to 2**63 - 1, got {seeds!r}; e.g. `seeds: 3` or `seeds: [0, 7, 42]`")
    if "refine" in data:
        data["refine"] = _check_refine(data["refine"], src, problems)
    if "rates_from" in data and not (isinstance(data["rates_from"], str) and data["rates_from"].strip()):
        problems.append(f"{src}: rates_from: expected a folder (relative to this file's folder), e.g. "
                        f"`rates_from: ../results/tune`; got {data['rates_from']!r}")
    exclude = data.get("exclude", [])
    if not isinstance(exclude, list):
        problems.append(f"{src}: exclude: expected a list of conditions, e.g. "
                        f"`exclude: [{{variant: postln, model.depth: 48}}]`")
        exclude = []
    for i, cond in enumerate(exclude):
        if not isinstance(cond, dict) or not cond:
            problems.append(f"{src}: exclude[{i}]: expected a non-empty mapping of key -> value; "
                            f"e.g. `{{variant: postln, model.depth: 48}}`")
            continue
        for key, value in cond.items():
            for v in [] if key in RESERVED else _alternatives(str(key), value)[0]:
                _check_value(str(key), v, f"{src}: exclude[{i}]", problems)


def _check_refine(value: Any, src: str, problems: list[str]) -> dict[str, Any]:
    """The ``refine:`` mapping checked, ``max_lr`` a float (YAML 1.1 reads ``1e-1`` as a string)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.append(f"{src}: refine: expected a mapping of {' / '.join(REFINE_KEYS)}, got {value!r}; "
                        f"e.g. `refine: {{max_lr: 0.5, max_rounds: {MAX_ROUNDS}}}`")
        return {}
    out = dict(value)
    problems += [f"{src}: refine.{key}: unknown key{did_you_mean(str(key), REFINE_KEYS)}; valid keys: "
                 f"{', '.join(REFINE_KEYS)}" for key in value if key not in REFINE_KEYS]
    if "max_lr" in value:
        lr = value["max_lr"]
        try:  # a number, or a string YAML 1.1 left unread ("1e-1"); not Python's "1_0", not a bool
            lr = float(lr) if not isinstance(lr, bool) and (not isinstance(lr, str) or "_" not in lr) else None
        except (TypeError, ValueError, OverflowError):
            lr = None
        if lr is None or not (math.isfinite(lr) and lr > 0):
            problems.append(f"{src}: refine.max_lr: expected a number > 0 (the highest learning rate --refine may "
                            f"add), got {repr(value['max_lr'])[:40]}; e.g. `max_lr: 0.5`")
        else:
            out["max_lr"] = lr
    if "max_rounds" in value and not (store.is_int(n := value["max_rounds"]) and n >= 1):
        problems.append(f"{src}: refine.max_rounds: expected an integer >= 1 (rounds of added rates), got {n!r}; "
                        f"e.g. `max_rounds: {MAX_ROUNDS}`")
    return out


def _overrides(value: Any, src: str, where: str, problems: list[str]) -> dict[str, Any]:
    """A nested or dotted mapping of config overrides -> flat dotted dict, each key checked."""
    if not isinstance(value, dict):
        problems.append(f"{src}: {where}: expected a mapping of config keys, got {value!r}; "
                        f"e.g. `{{model.depth: 12}}`")
        return {}
    flat: dict[str, Any] = {}
    for key, v in flat_items(value):
        if key in flat:
            problems.append(f"{src}: {where}.{key}: given twice (dotted and nested spellings of one key); keep one")
        flat[key] = v
    for key, v in flat.items():
        if key in RESERVED:
            problems.append(f"{src}: {where}.{key}: set by the ablation itself; use `{key}s:` instead")
        else:
            _check_value(key, v, f"{src}: {where}", problems)
    return {k: v for k, v in flat.items() if k not in RESERVED}


def _check_value(key: str, value: Any, source: str, problems: list[str]) -> Any:
    """Apply one dotted key to a fresh config; returns the coerced value (or None on error)."""
    cfg = RunConfig()
    try:
        apply_dict(cfg, nest({key: value}), source)
    except ConfigError as err:
        problems.append(str(err))
        return None
    flat = flatten(to_dict(cfg))
    if key not in flat:  # `model: {depth: 1}`: a section, where one dotted key goes
        leaf = f"{key}.{next(iter(value))}" if isinstance(value, dict) and value else f"{key}.<key>"
        problems.append(f"{source}.{key}: a section of keys, not one key; name the key, e.g. `{leaf}`")
        return None
    return flat[key]


def _expand(raw: dict[str, Any], src: str, problems: list[str], max_runs: int, overrides: tuple[str, ...] = ()
            ) -> Ablation:
    name, base, grid = raw.get("name"), raw.get("base") or {}, raw.get("grid") or {}
    if name is None:
        problems.append(f"{src}: name: missing; add e.g. `name: my-ablation` (results go to results/<name>/)")
    variants: dict[str, dict[str, Any]] = raw.get("variants") or {}
    if not variants:
        problems.append(f"{src}: variants: missing; add at least one, "
                        f"e.g. `variants: {{preln: {{model.residual: preln}}}}`")
    seeds = raw.get("seeds", 1)  # a count or a list; a count is expanded only once the runs are counted
    conflicts = [(vname, key) for vname, over in variants.items() for key in over if key in grid]
    for vname, key in conflicts:
        problems.append(f"{src}: variants.{vname}: sets '{key}', which is also a grid axis, so every "
                        f"grid value would give the same run; remove it from the variant or the grid")
    before = len(problems)
    exclude = [_normalise_condition(c, src, f"exclude[{i}].", variants, problems)
               for i, c in enumerate(raw.get("exclude") or [])]
    exclude_ok = len(problems) == before  # else "matches no run" would only repeat the problem
    if conflicts or not variants:  # expanding would only repeat these problems as duplicate runs
        return Ablation(str(name), Path(src), raw, [])
    total = len(variants) * math.prod(len(v) for v in grid.values()) * (seeds if isinstance(seeds, int) else len(seeds))
    if total > max_runs:
        problems.append(f"{src}: grid x variants x seeds: {total:,} runs, more than the limit of {max_runs:,}; "
                        f"shrink the grid, or pass --max-runs {total} if you mean it")
        return Ablation(str(name), Path(src), raw, [])
    seeds = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    rates = _tuned_rates(raw, src, variants, grid, seeds, problems)

    # Each cell (variant x grid point) is built and validated once; its seeds only copy it.
    cells = []
    reference: RunConfig | None = RunConfig()  # what every variant shares: a scheme option set here is allowed
    try:
        apply_dict(reference, nest(base), src)
    except ConfigError:
        reference = None  # reported with the base's own problems
    invalid: dict[str, list[str]] = {}  # a validation problem, its variant's name made '{}' -> the variants it hits
    for vname, over in variants.items():
        for values in itertools.product(*grid.values()):
            point = dict(zip(grid, values))
            tuned = {}
            if rates is not None:
                entry = rates.get(tuned_mod.cell_key(vname, point, grid))
                if entry is None:  # rates_from said why already, cell by cell
                    where = " ".join(f"{k}={v}" for k, v in point.items())
                    problems += [f"{src}: rates: no rate for variant {vname}{' at ' + where if where else ''}; add "
                                 f"one (or tune it: rates_from)"] if raw.get("rates") is not None else []
                    continue
                tuned = {tuned_mod.LR: float(entry[tuned_mod.LR])}
            cfg = RunConfig()
            apply_dict(cfg, nest({**base, **point, **over, **tuned}), src)
            try:
                validate(cfg, source=f"{src}: variants.{vname}", reference=reference)
            except ConfigError as err:
                said = str(err).replace(f"{src}: variants.{vname}", f"{src}: variants.{{}}", 1)
                if vname not in invalid.setdefault(said, []):
                    invalid[said].append(vname)
                continue
            cells.append((vname, point, cfg))
    for said, names in invalid.items():  # one line for a problem every variant shares (a base or command-line value)
        which = ("every variant" if len(names) == len(variants) > 1 else
                 f"variants.{names[0]}" if len(names) == 1 else "variants " + ", ".join(names))
        problems.append(said.replace("variants.{}", which, 1) + (
            f" (with the command line's {' '.join(overrides)})" if overrides and len(names) > 1 else ""))
    last = [k.rsplit(".", 1)[-1] for k in grid]  # model.depth -> depth in labels, unless two keys share it
    short = {k: (s if last.count(s) == 1 else k) for k, s in zip(grid, last)}
    runs, seen, used, excluded = [], {}, set(), 0
    for seed in seeds:  # seed-major: an interrupted sweep has every cell at seed 0 before seed 1
        for vname, point, template in cells:
            cfg = copy.deepcopy(template)
            cfg.seed = seed
            cell = " ".join([vname] + [f"{short[k]}={v}" for k, v in point.items()]
                            + ([f"lr={cfg.train.lr:g}"] if rates is not None else []))
            run = Run(cfg, store.run_id(cfg), name, vname, seed, point, f"{cell} seed={seed}")
            hits = {i for i, cond in enumerate(exclude) if matches(run, cond)}
            used |= hits
            excluded += bool(hits)
            if hits:
                continue
            if run.run_id in seen:
                problems.append(f"{src}: variants/grid: '{seen[run.run_id]}' and '{cell}' resolve to the same "
                                f"run config (run id {run.run_id}); make them differ or remove one")
                continue
            seen[run.run_id] = cell
            runs.append(run)
    problems += [f"{src}: exclude[{i}]: matches no run; check its values against grid, variants and seeds"
                 for i in range(len(exclude)) if exclude_ok and i not in used]
    if cells and not runs and excluded:
        problems.append(f"{src}: exclude: removes all {excluded} runs, which leaves nothing to run; "
                        f"narrow its conditions")
    primary = None
    if raw.get("primary") is not None:  # the analysis's module (scipy, pandas): imported only when declared
        from suite.declared import parse

        primary = parse(raw["primary"], src, list(variants), dict(grid), problems)
        _warn_undecidable(primary, len(seeds), src)
    resolved = {k: (nest(base) if k == "base" else raw[k]) for k in FIELDS if k in raw}
    if rates is not None:  # the rates themselves, so that the results folder's copy needs no tuning folder
        resolved["rates"] = list(rates.values())
    refine = Refine(**{k: v for k, v in (raw.get("refine") or {}).items() if k in REFINE_KEYS})
    return Ablation(name, Path(src), resolved, runs, dict(grid), list(variants), seeds, excluded, primary, refine)


CROSSFIT_MIN_SEEDS = 8  # 4 per half: below it the cross-fitted t has under 6 degrees of freedom


def _warn_undecidable(primary: Any, n_seeds: int, src: str) -> None:
    """One warning per declared comparison its design can hardly decide (too few seeds for its test)."""
    from scipy import stats as sps

    from suite.declared import ALPHA, RULES, as_list

    declared = as_list(primary)
    m = 1 if len(declared) == 1 else len(declared) + sum(p.margin is not None for p in declared)  # Holm's family
    for i, p in enumerate(declared):
        name = "primary" if len(declared) == 1 and not isinstance(primary, list) else f"primary[{i}]"
        if RULES[p.endpoint].runs_per_rate and n_seeds < 2:
            warnings.warn(f"{src}: {name}: a {p.endpoint} comparison on one seed places each frontier with single "
                          f"runs, whose outcomes a rerun moves, and its test assumes runs independent given rate and "
                          f"depth, which one seed cannot check; run 2 or more seeds (ablations/frontier.yaml runs 6 "
                          f"at every rate)", store.SuiteWarning, stacklevel=2)
            continue
        if not RULES[p.endpoint].crossfit or n_seeds >= CROSSFIT_MIN_SEEDS:
            continue
        df = n_seeds - 2
        crit = f"critical t {sps.t.isf(ALPHA / m / 2, df):.1f} at alpha {ALPHA / m:.3g}" if df >= 1 else "no test"
        warnings.warn(f"{src}: {name}: a cross-fitted best-rate comparison on {n_seeds} seeds has {max(df, 0)} "
                      f"degrees of freedom ({crit}), so it can hardly be decided; run {CROSSFIT_MIN_SEEDS} or more "
                      f"seeds, or tune the rates on other seeds and confirm them here (rates_from: "
                      f"docs/ablations.md)", store.SuiteWarning, stacklevel=2)


def _tuned_rates(raw: dict[str, Any], src: str, variants: dict[str, Any], grid: dict[str, list[Any]],
                 seeds: list[int], problems: list[str]) -> dict[tuple, dict[str, Any]] | None:
    """Each cell's rate from ``rates:`` / ``rates_from:`` (None if neither); seeds that tuned them are refused."""
    if "rates" not in raw and "rates_from" not in raw:
        return None
    if tuned_mod.LR in grid:
        problems.append(f"{src}: grid.{tuned_mod.LR}: the rates come from rates/rates_from; remove the axis, or "
                        f"remove rates/rates_from to sweep the rate here")
        return None
    problems += [f"{src}: variants.{vname}.{tuned_mod.LR}: the rates come from rates/rates_from; remove it from "
                 f"the variant" for vname, over in variants.items() if tuned_mod.LR in over]
    entries = raw.get("rates")
    if entries is None and raw.get("rates_from") is None:
        problems.append(f"{src}: rates: empty; list the rates, or name the tuning study with `rates_from: FOLDER`")
        return None
    if entries is None:
        folder = Path(os.path.normpath(Path(src).parent / str(raw["rates_from"]) if src != "<ablation>"
                                       else str(raw["rates_from"])))
        entries = tuned_mod.from_folder(folder, list(variants), grid, src, problems)
        if entries is None:
            return None
    table = tuned_mod.check_rates(entries, list(variants), grid, src, problems)
    reused = sorted(set(seeds) & {s for e in table.values() for s in e.get("tuning_seeds") or []})
    if reused:
        problems.append(f"{src}: seeds: {', '.join(map(str, reused[:5]))} also tuned the rates "
                        f"({raw.get('rates_from') or 'rates'}); a confirmation needs fresh seeds: draw them from "
                        f"this study's own range (docs/ablations.md, Seeds)")
    return table


def _normalise_condition(cond: dict[str, Any], src: str, where: str, variants: dict[str, Any],
                         problems: list[str]) -> dict[str, list[Any]]:
    """``{variant: x, model.depth: [24, 48]}`` -> key -> allowed values; ``where`` prefixes the key in messages."""
    out: dict[str, list[Any]] = {}
    for key, value in cond.items():
        values, listed = _alternatives(key, value)
        if any(isinstance(v, dict) or isinstance(v, list) and not listed for v in values):
            problems.append(f"{src}: {where}{key}: expected a value or a list of values, got {value!r:.60}; "
                            f"e.g. {{{key}: [a, b]}}")
            out[key] = []  # matches no run: no second, misleading problem about what it would remove
            continue
        if key in RESERVED:
            problems += [f"{src}: {where}variant: '{v}' is not a variant{did_you_mean(str(v), variants)}; variants: "
                         f"{', '.join(variants)}" for v in values if key == "variant" and v not in variants]
            out[key] = values
        else:
            out[key] = [_check_value(key, v, f"{src}: {where.rstrip('.') or 'filter'}", problems) for v in values]
    return out


def matches(run: Run, cond: dict[str, list[Any]]) -> bool:
    """Whether every key of ``cond`` has one of its listed values in ``run`` (resolved values)."""
    actual = {**(flatten(to_dict(run.cfg)) if set(cond) - set(RESERVED) else {}), "variant": run.variant,
              "seed": run.seed}
    return all(actual[key] in allowed for key, allowed in cond.items())


def _list_keys() -> frozenset[str]:
    """The config keys whose value is itself a list (train.betas, train.log_to)."""
    return frozenset(k for k, v in flatten(to_dict(RunConfig())).items() if isinstance(v, (list, tuple)))


def _alternatives(key: str, value: Any) -> tuple[list[Any], bool]:
    """A condition's allowed values (a list of them, or one), and whether ``key``'s values are lists: for such a
    key a flat list is one value (``train.betas: [0.9, 0.99]``), a list of lists its alternatives."""
    listed = key in _list_keys()
    one = listed and isinstance(value, list) and not any(isinstance(v, list) for v in value)
    return ([value] if one or not isinstance(value, list) else value), listed


def _split_items(expr: str) -> list[str]:
    """``expr`` split at the commas outside brackets: ``train.betas=[0.9, 0.99],seed=0`` is two items."""
    items, depth, start = [], 0, 0
    for i, c in enumerate(expr):
        depth += (c in "[{") - (c in "]}" and depth > 0)
        if c == "," and depth == 0:
            items.append(expr[start:i])
            start = i + 1
    return items + [expr[start:]]


def parse_only(exprs: list[str], ablation: Ablation) -> list[dict[str, list[Any]]]:
    """Parse ``--only`` filters, ``key=value[,key=value...]``: commas AND, repeated flags OR; values read as YAML.
    Raises :class:`SpecError` (an unknown key, a malformed item or an unknown variant)."""
    keys = set(flatten(to_dict(RunConfig()))) | set(RESERVED)
    problems: list[str] = []
    filters: list[dict[str, list[Any]]] = []
    for expr in exprs:
        cond: dict[str, Any] = {}
        items = [s.strip() for s in _split_items(expr) if s.strip()]
        if not items:
            problems.append(f"--only: {expr!r} has no key=value; e.g. --only variant=preln,model.depth=12")
        for item in items:
            key, sep, raw = item.partition("=")
            key = key.strip()
            if not sep:
                problems.append(f"--only: '{item}': expected key=value; e.g. --only variant=preln,model.depth=12")
            elif key not in keys:
                problems.append(f"--only: {key}: unknown key{did_you_mean(key, keys)}; "
                                f"use variant, seed or a dotted config key")
            else:
                try:
                    cond[key] = load_yaml(raw)
                except (yaml.YAMLError, ValueError):  # ValueError: an integer of more than 4,300 digits
                    problems.append(f"--only: {key}: cannot read the value '{raw[:40]}"
                                    f"{'...' if len(raw) > 40 else ''}'; quote it or give a value in the key's range")
        filters.append(_normalise_condition(cond, "--only", "", dict.fromkeys(ablation.variants), problems))
    if problems:
        raise SpecError(problems)
    return filters


def select(runs: list[Run], filters: list[dict[str, list[Any]]]) -> list[Run]:
    """The runs matching any of ``filters`` (all runs when there are none)."""
    return [r for r in runs if not filters or any(matches(r, f) for f in filters)]
