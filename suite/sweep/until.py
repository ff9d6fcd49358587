"""``suite run FILE --until-decided``: add seeds in rounds until the primary comparison is decided.

The first round is the ablation as written (every cell, its ``seeds``). Each later round adds as many
seeds again, only to the primary comparison's cells (its scheme and baseline where it says; every
learning rate for ``best_lr_score``), up to ``--max-seeds``. After each round the primary comparison
is analysed as a look of a group-sequential design, O'Brien-Fleming-type alpha spending
(docs/statistics.md) at the information the look reached: the seed pairs it has over the
most the study allows, so a look that lost pairs to errored runs is tested at its own boundary, never
at a fixed p < 0.05. Before each look, the compared cells' errored runs are run once more
(:data:`RETRIES`): an error says nothing about a scheme, and a pair lost to a transient failure is
information the look need not lack. The sweep stops at the first look that crosses its boundary, or
at the cap. The design is written to ``<out>/sequential.json`` before the first look and each look
(seeds, pairs, p, decision) after it, so ``suite analyze`` reports the final p-value and interval with
the looks accounted for, and a rerun of the same command resumes where it stopped. It decides exactly
one comparison with a score endpoint: a list of co-primary comparisons, or a ``frontier`` or
``not_ok_rate`` endpoint, is refused in one line.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

from suite import store
from suite.sweep.folder import RunnerError
from suite.sweep.spec import SpecError, load_ablation
from suite.sweep.sweep import Report, SweepOptions, run_sweep


RETRIES = 1  # reruns of the compared cells' errored runs before each look (an error that repeats is the run's)


def rounds_for(initial: int, max_seeds: int) -> list[int]:
    """Seed counts at each look: the ablation's seeds, then that many more each round, up to the cap
    (which is always the last look). E.g. 3 and 10 -> [3, 6, 9, 10]."""
    rounds = list(range(initial, max_seeds + 1, initial))
    return rounds if rounds[-1] == max_seeds else rounds + [max_seeds]


def errored_runs(runs: list[dict[str, Any]], primary: Any, seeds: list[int]) -> int:
    """Runs of the compared cells (both sides, ``seeds`` only) whose status is ``error``."""
    from suite.declared import same_value

    return sum(r["status"] == "error" and r.get("variant") in (primary.scheme, primary.baseline)
               and r.get("seed") in seeds and all(same_value(r.get(k), v) for k, v in primary.where.items()) for r in runs)


def _design_file(out: Path, rounds: list[int], seeds: list[int]) -> dict[str, Any]:
    """Read the folder's design, or write this one; refuse a different design for the same folder."""
    from suite.results import AnalysisError
    from suite.declared import ALPHA, SEQUENTIAL, taken_looks

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
    """Run the ablation in rounds of seeds until its primary comparison is decided or ``max_seeds``.

    ``look(runs, primary, rounds, taken)`` tests the comparison at one look (the analysis's
    :func:`suite.analysis.primary.look`, passed in by the command line: the sweep runs, the analysis judges).

    Returns:
        (the last round's :class:`Sweep`, the last look's :class:`~suite.analysis.primary.Answer`, or
        None when a round was interrupted).

    Raises:
        ConfigError: no primary comparison or several (a co-primary list), a frontier or not-ok endpoint,
            ``--only``, a cap below the ablation's seeds, or a folder whose design differs.
    """
    from suite.results import run_records
    from suite.declared import RULES, SEQUENTIAL, as_list, taken_looks

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
    extra = [s for s in range(max(first) + 1, max(first) + 1 + max_seeds) if s not in first]
    seeds = first + extra[:max_seeds - len(first)]
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
