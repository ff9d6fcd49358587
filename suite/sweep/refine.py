"""``suite run FILE --refine``: grow each arm's learning-rate grid until its optimum is interior and its stability
frontier bracketed: a study of stability must reach failure (docs/ablations.md, "Grids that reach failure")."""

from __future__ import annotations

import dataclasses
import math
import warnings
from pathlib import Path
from typing import Any, Callable

from suite import store
from suite.config import LR, ConfigError, validate
from suite.grouping import group_keys, ordered_groups
from suite.results import best_rate, run_records, selection_split
from suite.sweep.folder import RunnerError
from suite.sweep.spec import MAX_ROUNDS, Ablation, Run, SpecError, load_ablation
from suite.sweep.sweep import Report, SweepOptions, run_sweep

__all__ = ["MAX_ROUNDS", "past_edge", "edge_cells", "frontier_arms", "plan_round", "recorded", "replay",
           "run_refine"]


def past_edge(rates: list[float], side: str) -> float:
    """The next rate past the ``lowest`` / ``highest`` tested one, at the grid's spacing there (6 significant digits,
    so that a 4x grid meets 3.125e-5 exactly)."""
    rates = sorted(rates)
    if len(rates) < 2:
        raise ValueError("an edge needs at least 2 rates")
    edge, next_in = (rates[0], rates[1]) if side == "lowest" else (rates[-1], rates[-2])
    return float(f"{edge * edge / next_in:.6g}")


def _plain(value: Any) -> Any:
    """A pandas/NumPy scalar as the Python value a summary holds."""
    return value.item() if hasattr(value, "item") and not isinstance(value, (list, tuple)) else value


def edge_cells(out: Path | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cells of ``out`` (a folder, or its runs) whose best learning rate is at an edge (and above chance):
    ``{"variant", "keys": {key: value}, "lr": edge rate, "side": "lowest" | "highest", "new": rate to add}``."""
    runs = run_records(out) if isinstance(out, (str, Path)) else out
    keys = group_keys(runs)
    if LR not in keys:
        return []
    rest = [k for k in keys if k not in ("variant", LR)]
    split = selection_split(runs)
    variants = sorted({r["variant"] for r in runs})
    baseline = "preln" if "preln" in variants else variants[0]  # the tables' order: the baseline's arms first
    cells = []
    for group, arm in ordered_groups([r for r in runs if r.get(LR) is not None], ["variant"] + rest, baseline).items():
        found = best_rate(arm, split)
        if found is None or not found.edge or not found.above_chance:
            continue
        rates = sorted({float(r[LR]) for r in arm if r["status"] != "error"})
        if len(rates) < 2:  # its other rates only errored: nothing to step past (--retry-errors runs them)
            continue
        cells.append({"variant": group[0], "keys": {k: _plain(arm[0].get(k)) for k in rest}, "lr": found.rate,
                      "side": found.edge, "new": past_edge(rates, found.edge)})
    return cells


def frontier_arms(runs: list[dict[str, Any]], keys: list[str] | None = None) -> list[dict[str, Any]]:
    """Where each arm stands at its highest rate not all errored: dicts of ``variant``, ``keys``, ``lr``, ``n`` (runs
    not errored), ``not_ok``, ``errored``, ``bracketed`` (at least half not ok) and ``new`` (None below two rates)."""
    if keys is None:  # the keys besides variant and the rate that split the runs into arms (as the tables group them)
        keys = [k for k in group_keys(runs) if k not in ("variant", LR)]
    arms: dict[tuple, list[dict[str, Any]]] = {}
    for r in runs:
        if r.get(LR) is not None:
            arms.setdefault((r["variant"],) + tuple(_hashable(r.get(k)) for k in keys), []).append(r)
    out = []
    for arm in sorted(arms, key=lambda a: [str(v) for v in a]):
        members = arms[arm]
        rates = sorted({float(r[LR]) for r in members if r["status"] != "error"})
        highest = rates[-1] if rates else max(float(r[LR]) for r in members)  # every run errored: nothing judged
        top = [r for r in members if math.isclose(float(r[LR]), highest, rel_tol=1e-9)]
        live = [r for r in top if r["status"] != "error"]
        not_ok = sum(r["status"] != "ok" for r in live)
        out.append({"variant": arm[0], "keys": {k: members[0].get(k) for k in keys}, "lr": highest,
                    "n": len(live), "not_ok": not_ok, "errored": len(top) - len(live),
                    "bracketed": bool(live) and 2 * not_ok >= len(live),
                    "new": past_edge(rates, "highest") if len(rates) >= 2 else None})
    return out


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _arm_id(variant: str, keys: dict[str, Any]) -> tuple:
    return (variant,) + tuple((k, _hashable(_plain(v))) for k, v in keys.items())


def _arm_label(variant: str, keys: dict[str, Any]) -> str:
    return variant + "".join(f" {k}={_plain(v)}" for k, v in keys.items())


def plan_round(runs: list[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    """What one round asks for, per arm, from the results so far (limits not checked yet): arm id -> ``{"variant",
    "keys", "label", "add": [{"from": rate whose runs are copied, "new": rate, "why": [reasons]}]}``."""
    plans: dict[tuple, dict[str, Any]] = {}

    def add(variant: str, keys: dict[str, Any], source: float, new: float, why: str) -> None:
        keys = {k: _plain(v) for k, v in keys.items()}
        entry = plans.setdefault(_arm_id(variant, keys), {"variant": variant, "keys": keys,
                                                          "label": _arm_label(variant, keys), "add": []})
        same = [a for a in entry["add"] if math.isclose(a["new"], new, rel_tol=1e-9)]
        if same:
            same[0]["why"].append(why)
        else:
            entry["add"].append({"from": source, "new": new, "why": [why]})

    for cell in edge_cells(runs):
        add(cell["variant"], cell["keys"], cell["lr"], cell["new"],
            f"best rate {cell['lr']:g} is at the {'top' if cell['side'] == 'highest' else 'bottom'} edge")
    for arm in frontier_arms(runs):
        if not arm["bracketed"] and arm["new"] is not None:
            errored = f" ({arm['errored']} errored)" if arm["errored"] else ""
            add(arm["variant"], arm["keys"], arm["lr"], arm["new"],
                f"{arm['not_ok']} of {arm['n']} seeds not ok at its highest rate {arm['lr']:g}{errored}")
    return plans


def _matches(run: Run, variant: str, keys: dict[str, Any], lr: float) -> bool:
    if run.variant != variant or not math.isclose(run.cfg.train.lr, lr, rel_tol=1e-9):
        return False
    summary = {LR: run.cfg.train.lr, **dict(run.point)}
    return all(k not in summary or _hashable(summary[k]) == _hashable(v) for k, v in keys.items())


def _extra_runs(runs: list[Run], variant: str, keys: dict[str, Any], source: float, new: float) -> list[Run]:
    """The arm's runs at rate ``source``, copied to rate ``new`` (one per seed)."""
    out = []
    for run in runs:
        if not _matches(run, variant, keys, source):
            continue
        cfg = dataclasses.replace(run.cfg, train=dataclasses.replace(run.cfg.train, lr=new))
        point = {**run.point, LR: new}
        label = run.label.replace(f"lr={run.point.get(LR)}", f"lr={new}")
        out.append(dataclasses.replace(run, cfg=cfg, run_id=store.run_id(cfg), point=point, label=label))
    return out


def admit(ablation: Ablation, entry: dict[str, Any], add: dict[str, Any]) -> tuple[list[Run], str | None]:
    """The runs of one planned rate, or none and why that side of the arm stops."""
    new, source = add["new"], add["from"]
    stop = f"not adding {new:g} {'above' if new > source else 'below'} {source:g}:"
    if new > ablation.refine.max_lr:
        return [], (f"{stop} above refine.max_lr {ablation.refine.max_lr:g} (raise it in the ablation file's "
                    f"`refine:` to go further)")
    runs = _extra_runs(ablation.runs, entry["variant"], entry["keys"], source, new)
    if not runs:
        return [], f"{stop} the ablation file has no runs at {source:g} to copy (was it edited?)"
    for run in runs:
        try:
            validate(run.cfg, source=run.label)
        except ConfigError as err:
            return [], f"{stop} not a valid run ({err})"
    have = {r.run_id for r in ablation.runs}
    if any(r.run_id in have for r in runs):
        return [], f"{stop} its runs are in the results already and errored (--retry-errors reruns them)"
    return runs, None


REFINED = "refine.json"  # the rates each round of --refine added, in order: what a rerun or `suite status` replays


def recorded(out: Path) -> list[list[dict[str, Any]]]:
    """The rounds ``out/refine.json`` records: per round, the ``{"variant", "keys", "from", "new"}`` it added."""
    path = Path(out) / REFINED
    if not path.exists() and not path.is_symlink():
        return []
    fix = "remove it to refine from the results alone (its rounds' finished runs stay in runs/)"
    try:
        rounds = store.read_json(path, links=False)
    except (OSError, ValueError) as err:
        raise RunnerError(f"{path}: not readable ({store.error_reason(err)}); {fix}") from None
    adds = {"variant", "keys", "from", "new"}
    if not (isinstance(rounds, list) and all(isinstance(r, list) for r in rounds) and all(
            isinstance(a, dict) and set(a) == adds and isinstance(a["variant"], str) and isinstance(a["keys"], dict)
            and all(isinstance(a[k], (int, float)) and not isinstance(a[k], bool) for k in ("from", "new"))
            for r in rounds for a in r)):
        raise RunnerError(f"{path}: not a list of rounds of {{variant, keys, from, new}}; {fix}")
    return rounds


def _write(path: Path, rounds: list[list[dict[str, Any]]]) -> None:
    try:
        store.write_json(path, rounds)
    except OSError as err:
        if store.no_space(err):
            raise store.DiskFull(path) from None
        raise RunnerError(f"{path}: cannot write it ({store.error_reason(err)}); make {path.parent} writable and run "
                          f"the same command again") from None


def replay(ablation: Ablation, out: Path) -> Ablation:
    """``ablation`` with the runs of every round ``out/refine.json`` records, in order (a later round copies an earlier
    one's runs); a run the file already has is not added twice."""
    runs = list(ablation.runs)
    for round_ in recorded(out):
        for add in round_:
            have = {r.run_id for r in runs}
            runs += [r for r in _extra_runs(runs, add["variant"], add["keys"], add["from"], add["new"])
                     if r.run_id not in have]
    return dataclasses.replace(ablation, runs=runs)


def run_refine(path: str | Path, out: str | Path | None, options: SweepOptions, report: Report | None = None,
               notify: Callable[[str], None] = lambda line: None):
    """Run the ablation and the rounds an earlier call recorded, then grow its learning-rate grid until
    ``refine.max_rounds`` rounds in all; every round's sweep as one, and a dict per arm left open (``kind`` "edge" or
    "frontier") with ``stopped``: why."""
    ablation = load_ablation(path, max_runs=options.max_runs, overrides=options.overrides)
    if LR not in ablation.grid:
        raise SpecError([f"{path}: grid: --refine extends the {LR} axis, and this ablation has none; add "
                         f"`grid: {{{LR}: [...]}}`"])
    if options.dry_run or options.only:
        raise RunnerError("--refine with --dry-run or --only: which rates it adds depends on the results; drop them")
    out = Path(out) if out else Path("results") / ablation.name
    history = recorded(out)
    ablation = replay(ablation, out)
    if history:  # an earlier --refine's rounds: finished first (one stopped midway has runs left), then counted
        notify(f"refine: {len(history)} round(s) recorded in {out / REFINED}; their runs are part of this sweep")
    sweep = run_sweep(ablation, out, options, report=report, notify=notify)
    limit = ablation.refine.max_rounds
    stops: dict[tuple, str] = {}  # (arm id, side) -> why that side stopped, printed once
    rounds = len(history)
    while rounds < limit and not sweep.stopped:
        extra: list[Run] = []
        added_now: list[dict[str, Any]] = []
        for arm_id, entry in plan_round(run_records(out)).items():
            added, why_added = [], []
            for add in entry["add"]:
                runs, why = admit(ablation, entry, add)
                side = (arm_id, add["new"] > add["from"])
                if why is not None:
                    if stops.get(side) != why:
                        notify(f"refine: {entry['label']}: {why}")
                    stops[side] = why
                    continue
                stops.pop(side, None)
                extra += runs
                added_now.append({"variant": entry["variant"], "keys": entry["keys"], "from": add["from"],
                                  "new": add["new"]})
                added.append(add["new"])
                why_added += add["why"]
            if added:
                notify(f"refine round {rounds + 1}: {entry['label']}: {'; '.join(why_added)}; adding "
                       f"{' and '.join(f'{x:g}' for x in added)}")
        if not extra:
            break
        rounds += 1
        history.append(added_now)
        _write(out / REFINED, history)  # before its runs start: a rerun finishes this round
        ablation = dataclasses.replace(ablation, runs=ablation.runs + extra)
        with warnings.catch_warnings():  # said by the first sweep already
            warnings.filterwarnings("ignore", message=r"\d+ finished runs were made by other versions")
            sweep = sweep.then(run_sweep(ablation, out, options, report=report, notify=notify))
    if sweep.stopped:
        return sweep, []
    return sweep, _report_open(run_records(out), stops, rounds, limit, notify)


def _report_open(runs: list[dict[str, Any]], stops: dict[tuple, str], rounds: int, limit: int,
                 notify: Callable[[str], None]) -> list[dict[str, Any]]:
    """One line per arm still at an edge or unbracketed, saying why it stopped; the list of them."""
    left = []
    at_limit = f"the round limit ({limit} rounds, refine.max_rounds) was reached"
    for cell in edge_cells(runs):
        arm_id = _arm_id(cell["variant"], cell["keys"])
        why = stops.get((arm_id, cell["side"] == "highest"), at_limit)
        notify(f"refine: {_arm_label(cell['variant'], cell['keys'])}: best rate {cell['lr']:g} is still at an edge "
               f"(the tables mark it); {why}")
        left.append({**cell, "kind": "edge", "stopped": why})
    for arm in frontier_arms(runs):
        if arm["bracketed"]:
            continue
        why = stops.get((_arm_id(arm["variant"], arm["keys"]), True), at_limit)
        if arm["new"] is None:
            why = ("every run errored, so nothing was judged (--retry-errors reruns them)" if not arm["n"] else
                   "a single rate judged gives no spacing to step by; list two rates in the grid")
        notify(f"refine: {_arm_label(arm['variant'], arm['keys'])}: frontier not bracketed: {arm['not_ok']} of "
               f"{arm['n']} seeds not ok at its highest rate {arm['lr']:g}; {why}")
        left.append({**arm, "kind": "frontier", "stopped": why})
    if not left:
        notify(f"refine: every best learning rate is interior and every arm's frontier bracketed (after {rounds} "
               f"round(s))")
    return left
