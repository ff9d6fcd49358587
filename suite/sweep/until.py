"""``suite run FILE --until-decided``: add seeds in rounds until the primary comparison is decided.

Each round after the first adds as many seeds again to the compared cells, up to ``--max-seeds``; each look is a
group-sequential test at the information it reached (docs/statistics.md, "Sequential seeding"). Before each look the
compared cells' errored runs run once more (:data:`RETRIES`): an error says nothing about a scheme. The design and
looks go to ``<out>/sequential.json``, so ``suite analyze`` accounts for them and a rerun resumes.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

from suite import store
from suite.declared import ALPHA, RULES, SEQUENTIAL, as_list, same_value, taken_looks
from suite.results import AnalysisError, run_records
from suite.sweep.folder import RunnerError
from suite.sweep.spec import SpecError, load_ablation
from suite.sweep.sweep import Report, SweepOptions, run_sweep

RETRIES = 1  # reruns of the compared cells' errored runs before each look (an error that repeats is the run's)


def rounds_for(initial: int, max_seeds: int) -> list[int]:
    """Seed counts at each look, up to the cap (always the last look): 3 and 10 -> [3, 6, 9, 10]."""
    rounds = list(range(initial, max_seeds + 1, initial))
    return rounds if rounds[-1] == max_seeds else rounds + [max_seeds]


def errored_runs(runs: list[dict[str, Any]], primary: Any, seeds: list[int]) -> int:
    """Runs of the compared cells (both sides, ``seeds`` only) whose status is ``error``."""
    return sum(r["status"] == "error" and r.get("variant") in (primary.scheme, primary.baseline)
               and r.get("seed") in seeds and all(same_value(r.get(k), v) for k, v in primary.where.items())
               for r in runs)


def _design_file(out: Path, rounds: list[int], seeds: list[int]) -> dict[str, Any]:
    """Read the folder's design, or write this one; refuse a different design for the same folder."""
    path = out / SEQUENTIAL
    design = {"design": "group-sequential, two-sided, O'Brien-Fleming-type alpha spending (Lan-DeMets) at the "
                        "information each look reached (seed pairs / the cap's)",
              "alpha": ALPHA, "rounds": rounds, "seeds": seeds, "looks": []}
    if path.is_file():
        try:
            old = store.read_json(path)
        except (OSError, ValueError) as err:
            raise RunnerError(f"{path}: unreadable ({err}); delete it to start the design again") from None
        try:
            taken_looks(old.setdefault("looks", []) if isinstance(old, dict) else None, path)
        except AnalysisError as err:
            raise RunnerError(str(err).replace("to analyse as a fixed design", "to start the design again")) from None
        if old.get("rounds") != rounds or old.get("seeds") != seeds:
            raise RunnerError(f"{path}: planned looks at {old.get('rounds')} seeds, not {rounds}; the looks of a "
                              f"sequential design are fixed before the first one: pass the same --max-seeds, or "
                              f"--out DIR for a new study")
        return old
    out.mkdir(parents=True, exist_ok=True)
    store.write_json(path, design)
    return design


def run_until_decided(path: str | Path, out: str | Path | None, options: SweepOptions, max_seeds: int,
                      look: Callable[[list[dict[str, Any]], Any, list[int], tuple[tuple[int, int], ...]], Any],
                      report: Report | None = None, notify: Callable[[str], None] = lambda line: None):
    """Run the ablation in rounds of seeds until its primary comparison is decided or ``max_seeds``; the last round's
    :class:`Sweep` and the last look's answer (None when interrupted). ``look`` is the analysis's, passed in.

    Raises:
        ConfigError: not exactly one primary comparison with a score endpoint, ``--only``, a cap below the ablation's
            seeds, or a folder whose design differs.
    """
    ablation = load_ablation(path, max_runs=options.max_runs, overrides=options.overrides)
    declared = as_list(ablation.primary)
    if not declared:
        raise SpecError([f"{path}: primary: --until-decided needs the question it decides; declare one, e.g. "
                         f"`primary: {{scheme: layerscale, baseline: preln, where: {{model.depth: 48}}}}`"])
    if len(declared) > 1:
        raise SpecError([f"{path}: primary: --until-decided decides one comparison and this file declares "
                         f"{len(declared)}; keep one, or run the family without --until-decided"])
    primary = declared[0]
    if not RULES[primary.endpoint].sequential:
        raise SpecError([f"{path}: primary.endpoint: --until-decided works with a score endpoint (best_lr_score or "
                         f"score), not {primary.endpoint}"])
    if options.only:
        raise RunnerError("--only and --until-decided: the rounds choose the runs themselves; drop --only")
    if options.dry_run:
        raise RunnerError("--dry-run and --until-decided: how many rounds run depends on their results; "
                          "drop --dry-run (or dry-run without --until-decided to see the first round)")
    first = list(ablation.seeds)
    if len(first) < 2:
        raise SpecError([f"{path}: seeds: --until-decided needs at least 2 seeds per round (a paired t-test "
                         f"needs 2 pairs); set `seeds: 3`"])
    if max_seeds < len(first):
        raise RunnerError(f"--max-seeds {max_seeds}: fewer than the ablation's {len(first)} seeds; pass at least "
                          f"{len(first)}")
    seeds = first + list(range(max(first) + 1, max(first) + 1 + max_seeds - len(first)))  # new seeds above the file's
    rounds = rounds_for(len(first), max_seeds)
    out = Path(out) if out else Path("results") / ablation.name
    design = _design_file(out, rounds, seeds)
    cells = [f"variant={v}" + "".join(f",{k}={val}" for k, val in primary.where.items())
             for v in (primary.scheme, primary.baseline)]
    sweep, answer = None, None
    for round_, n in enumerate(rounds):
        raw = {**ablation.resolved, "seeds": seeds[:n]}
        opts = dataclasses.replace(options, only=[] if round_ == 0 else cells)
        sweep = run_sweep(raw, out, opts, report=report, notify=notify)
        for _ in range(RETRIES):
            if sweep.stopped:
                break
            errored = errored_runs(run_records(out), primary, seeds[:n])
            if not errored:
                break
            notify(f"look {round_ + 1}: {errored} run{'s' if errored > 1 else ''} of the compared cells errored; "
                   f"running {'them' if errored > 1 else 'it'} once more before the look")
            sweep = run_sweep(raw, out, dataclasses.replace(options, only=cells, retry_errors=True), report=report,
                              notify=notify)
        if sweep.stopped:
            return sweep, None
        before = taken_looks([x for x in design["looks"] if x["look"] <= round_], out / SEQUENTIAL)
        answer = look(run_records(out), primary, rounds, before)
        record = {"look": round_ + 1, "seeds": n, "pairs": answer.n_pairs, "estimate": answer.estimate,
                  "p": answer.p, "decision": answer.decision}
        design["looks"] = [x for x in design["looks"] if x["look"] != round_ + 1] + [record]
        store.write_json(out / SEQUENTIAL, design)
        notify(f"look {round_ + 1} of {len(rounds)} at {n} seeds: {answer.decision} "
               f"({100 * answer.estimate:+.1f} points, p = {answer.p:.3f})")
        if answer.decision != "undecided":
            break
    return sweep, answer
