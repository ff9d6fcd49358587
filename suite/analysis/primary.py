"""The primary comparison an ablation declares, its test and its answer in words.

An ablation file may declare one question (``primary:``, docs/ablations.md): a scheme, a baseline,
where (fixed values of grid keys, e.g. the deepest depth), an endpoint and optionally an
equivalence margin; or a list of up to 3 such questions, tested as one family
(:mod:`suite.analysis.coprimary`, Holm). :func:`evaluate` tests one comparison at ``alpha`` = 0.05
and decides one of three answers:

- ``difference``: the test has p < alpha (the paired t-test, Welch's where seeds do not match; the
  cross-fitted t for ``best_lr_score``); the 95% interval printed beside it excludes 0, by construction.
- ``equivalent``: not a difference, and the two one-sided tests (TOST) put the difference within
  ``+/- margin`` (its 90% interval lies inside the margin).
- ``undecided``: neither; the answer names the seeds that would decide it (:func:`plan_answer`).

Endpoints: ``best_lr_score`` (each scheme at its own best learning rate, chosen on validation, scored
on test, cross-fitted: each half of the seeds is scored at the rates the other half chose, and the
difference is tested with the standard error of half the seeds, :mod:`suite.analysis.crossfit`;
choosing and testing on the same seeds favoured a scheme with a flat curve), ``score`` (one learning
rate), ``not_ok_rate`` (Fisher's exact test on the share of runs that diverged or failed, all learning
rates pooled; no equivalence test), ``frontier`` (the ratio of the two schemes' LR50s, the rates where
half of the runs end not ok, from one Firth logistic model with a common slope:
:func:`suite.analysis.doseresponse.relative_potency`; the learning rate left free; no equivalence
test), ``frontier_slope`` (how much faster or slower the scheme's LR50 moves with depth than the
baseline's: the difference of their slopes of log LR50 on log depth, from one Firth logistic model of
every scheme's runs over rate and depth, :mod:`suite.analysis.depthslope`, with a profile-likelihood
interval; `model.depth` and the learning rate left free; no equivalence test). With ``suite run --until-decided`` the folder holds ``sequential.json``, the group-sequential
design and the looks taken so far (:mod:`suite.analysis.sequential`); each look is tested at the
boundary of the information it reached (seed pairs / the most the study allows), never at a fixed
p < 0.05, and its p-value and interval account for every look.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as sps

from suite import store
from suite.analysis import crossfit, sequential, stats
from suite.analysis.doseresponse import frontier, relative_potency
from suite.grouping import DEPTH, LR
from suite.results import AnalysisError
from suite.declared import (ALPHA, DEFAULT_EFFECT, DEFAULT_RATIO, DEFAULT_SLOPE, MAX_SEEDS, POWER, SEQUENTIAL, Primary,
                            parse, same_value, taken_looks)
from suite.results import ABLATION_FILE, recorded_ablation, score, selection_split


def read(folder: str | Path) -> Primary | list[Primary] | None:
    """The primary comparison(s) declared in ``folder/ablation.yaml`` (written by ``suite run``), as
    :func:`parse` returns them."""
    path = Path(folder) / ABLATION_FILE
    try:
        data = recorded_ablation(folder)
    except ValueError as err:
        raise AnalysisError(f"{path}: cannot read it ({err}); restore it or run `suite run` again") from None
    if data.get("primary") is None:
        return None
    problems: list[str] = []
    grid = data.get("grid") if isinstance(data.get("grid"), dict) else {}
    parsed = parse(data["primary"], str(path), list(data.get("variants") or {}), grid, problems)
    if problems:
        raise AnalysisError(problems[0])
    return parsed


def read_design(folder: str | Path) -> sequential.Looks | None:
    """The planned seed counts of each look and the looks taken (``sequential.json``), or None for a
    fixed design."""
    path = Path(folder) / SEQUENTIAL
    if not path.is_file():
        return None
    try:
        data = store.read_json(path)
        rounds, looks = data["rounds"], data.get("looks") or []
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise AnalysisError(f"{path}: not a sequential design ({err}); delete it to analyse as a fixed design") from None
    if not (isinstance(rounds, list) and rounds and all(isinstance(n, int) and 2 <= n <= MAX_SEEDS for n in rounds)
            and rounds == sorted(set(rounds))):
        raise AnalysisError(f"{path}: rounds: expected increasing seed counts from 2 to {MAX_SEEDS:,}; delete it to "
                            f"analyse as a fixed design")
    return sequential.Looks(tuple(rounds), taken_looks(looks, path))


@dataclass
class Answer:
    """The primary comparison's result; ``decision`` is ``difference``, ``equivalent`` or ``undecided``."""

    primary: Primary
    decision: str = "undecided"
    estimate: float = math.nan  # scheme - baseline (a fraction, or a rate difference)
    low: float = math.nan  # its interval (95%, or the repeated interval of a sequential design)
    high: float = math.nan
    p: float = math.nan
    test: str = ""
    n_pairs: int = 0
    sd: float = math.nan  # of the seed-matched differences
    tost_p: float = math.nan
    scheme_mean: float = math.nan
    base_mean: float = math.nan
    scheme_lr: float = math.nan  # best_lr_score: each side's best rate on all seeds (described, not tested)
    base_lr: float = math.nan
    scheme_lrs: tuple[float, float] = (math.nan, math.nan)  # the rate each half of the seeds was scored at
    base_lrs: tuple[float, float] = (math.nan, math.nan)  # (cross-fitting: chosen on the other half)
    selection: str = ""  # best_lr_score: how the rates were chosen and what that costs (crossfit.SENTENCE)
    scheme_edge: str = ""
    base_edge: str = ""
    counts: tuple[int, int, int, int] = (0, 0, 0, 0)  # not ok k/n scheme, baseline
    min_p: float = math.nan  # Fisher: the smallest p the design can reach
    seeds_needed: float = math.nan
    planning_sd: float = math.nan
    effect: float = DEFAULT_EFFECT
    look: int = -1  # sequential: 0-based look, -1 for a fixed design
    rounds: list[int] = field(default_factory=list)
    note: str = ""
    # a family of co-primary comparisons (suite.analysis.coprimary): Holm over `family` hypotheses
    family: int = 1  # hypotheses tested in the family (1: this comparison alone)
    p_adj: float = math.nan  # Holm-adjusted p of the difference test
    tost_p_adj: float = math.nan  # Holm-adjusted p of the equivalence test
    level: float = 1 - ALPHA  # of the printed interval (the level of the Holm step that decided it)
    # endpoint frontier: estimate, low, high are the ratio LR50(scheme) / LR50(baseline)
    censored: str = ""  # the interval's open ends: "low", "high" or "both"
    lr50: tuple[float, float] = (math.nan, math.nan)  # each side's own frontier (scheme, baseline)
    lr50_edge: tuple[str, str] = ("", "")  # "above" / "below" the rates tested, or ""
    seeds: int = 0  # seeds per rate and scheme (frontier)
    # endpoint frontier_slope: estimate, low, high are slope(scheme) - slope(baseline), on log depth
    slopes: tuple = ()  # each side's own slope (depthslope.Slope: scheme, baseline)
    checks: tuple[float, float] = (math.nan, math.nan)  # Wald p: parallel rate curves, straight frontier


def _runs(runs: list[dict[str, Any]], primary: Primary, variant: str, errors: bool = False,
          where: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [r for r in runs if r.get("variant") == variant and (errors or r["status"] != "error")
            and all(same_value(r.get(k), v) for k, v in (primary.where if where is None else where).items())]


def _gains(runs: list[dict[str, Any]], primary: Primary, where: dict[str, Any]) -> list[tuple[Any, float]]:
    """(seed, scheme's score - baseline's score) for each seed scored on both sides in the cell ``where``."""
    base = {r.get("seed"): score(r) for r in _runs(runs, primary, primary.baseline, where=where)}
    return [(r.get("seed"), x - base[r.get("seed")]) for r in _runs(runs, primary, primary.scheme, where=where)
            if (x := score(r)) is not None and base.get(r.get("seed")) is not None]


def evaluate(runs: list[dict[str, Any]], primary: Primary,
             rounds: sequential.Looks | list[int] | None = None, alpha: float = ALPHA) -> Answer:
    """Test the primary comparison on ``runs`` (see the module docstring), alone at ``ALPHA``.

    Args:
        runs: as returned by :func:`suite.results.run_records`.
        primary: the declared comparison.
        rounds: a group-sequential design (``sequential.json`` as :func:`read_design` reads it: the
            planned rounds and the looks taken), its planned seed counts alone (no look taken yet), or
            None for a fixed design.
        alpha: the printed interval's level is ``1 - alpha`` (a family prints each at its Holm step's).
    """
    from suite.analysis.lr import lr_cell
    from suite.analysis.summary import compare_accuracy

    looks = rounds if isinstance(rounds, sequential.Looks) else sequential.Looks(tuple(rounds)) if rounds else None
    answer = Answer(primary, rounds=list(looks.rounds) if looks else [])
    a, b = _runs(runs, primary, primary.scheme), _runs(runs, primary, primary.baseline)
    if not a or not b:
        answer.note = f"no runs of {primary.scheme if not a else primary.baseline} there"
        return answer
    if primary.endpoint == "not_ok_rate":
        ka, kb = (sum(r["status"] != "ok" for r in side) for side in (a, b))
        answer.counts = (ka, len(a), kb, len(b))
        answer.estimate = ka / len(a) - kb / len(b)
        answer.p = stats.fisher_exact_p(ka, len(a), kb, len(b))
        answer.min_p = stats.fisher_min_p(len(a), len(b))
        answer.test = "Fisher's exact test"
        answer.decision = "difference" if answer.p < ALPHA else "undecided"
        return answer
    if primary.endpoint == "frontier":
        _frontier(answer, a, b, alpha)
        return answer
    if primary.endpoint == "frontier_slope":
        _frontier_slope(answer, [r for r in runs if r["status"] != "error" and all(
            same_value(r.get(k), v) for k, v in primary.where.items())], alpha)
        return answer
    everyone = _runs(runs, primary, primary.scheme, True) + _runs(runs, primary, primary.baseline, True)
    if primary.endpoint == "best_lr_score":
        split = selection_split(a + b)
        ca, cb = (lr_cell(_runs(runs, primary, v, True), split) for v in (primary.scheme, primary.baseline))
        answer.scheme_lr, answer.base_lr = ca["best_lr"], cb["best_lr"]
        answer.scheme_edge, answer.base_edge = ca["best_lr_at_edge"], cb["best_lr_at_edge"]
        answer.selection = crossfit.SENTENCE
        if split == "test":
            answer.note = ("no validation split: each half of the seeds chose its rates on the other half's test "
                           "scores")
        fit = crossfit.compare(ca, cb)
        if fit is None or fit.diff.n_pairs == 0:
            answer.note = "no runs to score on one side" if fit is None else "no seed scored on both sides"
            return answer
        diff, sd, information = fit.diff, fit.sd, fit.diff.n_pairs
        answer.scheme_lrs, answer.base_lrs = fit.scheme_lrs, fit.base_lrs
        answer.scheme_mean, answer.base_mean = fit.scheme_mean, fit.base_mean
        if primary.margin is not None:
            answer.tost_p = crossfit.tost_p(diff, primary.margin)
    else:
        if primary.endpoint == "interaction":  # the gain at `where` against the gain at `versus`, seed by seed
            pa, pb = _gains(runs, primary, primary.where), _gains(runs, primary, primary.versus)
        else:
            pa = [(r.get("seed"), score(r)) for r in a]
            pb = [(r.get("seed"), score(r)) for r in b]
        pa, pb = [(s, x) for s, x in pa if x is not None], [(s, x) for s, x in pb if x is not None]
        if not pa or not pb:
            answer.note = "no runs to score on one side"
            return answer
        diff, sd = compare_accuracy(pa, pb)
        information = diff.n_pairs or min(len(pa), len(pb))  # Welch's (seeds do not match): the smaller side
        answer.scheme_mean = float(np.mean([x for _, x in pa]))
        answer.base_mean = float(np.mean([x for _, x in pb]))
        if primary.margin is not None and diff.test == "paired t":
            by_b = dict(pb)
            answer.tost_p = stats.tost_p([x - by_b[s] for s, x in pa if s in by_b], primary.margin)
    answer.level = 1 - alpha
    answer.estimate, answer.p = diff.estimate, diff.p
    shown = diff.at(alpha) if alpha != ALPHA else diff  # a family's interval at its Holm step's level
    answer.low, answer.high = shown.low, shown.high
    answer.test, answer.n_pairs, answer.sd = diff.test, diff.n_pairs, sd
    answer.effect = primary.margin or DEFAULT_EFFECT
    if looks:
        seeds = len({r.get("seed") for r in everyone})
        _sequential(answer, diff, looks, information, seeds)
    elif diff.p < ALPHA:
        answer.decision = "difference"
    elif answer.tost_p < ALPHA:
        answer.decision = "equivalent"
    if answer.decision == "undecided":
        plan_answer(answer)
    return answer


def look(runs: list[dict[str, Any]], primary: Primary, rounds: list[int],
         taken: tuple[tuple[int, int], ...]) -> Answer:
    """One look of ``suite run --until-decided`` (:mod:`suite.sweep.until`): the comparison tested at its
    boundary, given the planned ``rounds`` of seeds and the (seeds, pairs) of the looks ``taken`` before it."""
    return evaluate(runs, primary, sequential.Looks(tuple(rounds), tuple(taken)))


def plan_answer(answer: Answer, alpha: float = ALPHA) -> None:
    """Set ``seeds_needed`` and ``planning_sd`` of an undecided score comparison tested at ``alpha``:
    :func:`plan`'s paired seeds, twice as many for a cross-fitted test (it has the precision of half its
    seeds)."""
    halves = answer.test == crossfit.TEST  # its SD has n - 2 degrees of freedom, its se that of n/2 pairs
    seeds, answer.planning_sd = plan(answer.sd, answer.n_pairs - halves, answer.effect, alpha=alpha)
    answer.seeds_needed = 2 * seeds if halves else seeds


def _frontier(answer: Answer, a: list[dict[str, Any]], b: list[dict[str, Any]], alpha: float) -> None:
    """The LR50 ratio scheme / baseline, its profile-likelihood interval at ``1 - alpha`` and its test."""
    sides = [([float(r[LR]) for r in side], [int(r["status"] != "ok") for r in side]) for side in (a, b)]
    fit = relative_potency(*sides[0], *sides[1], alpha)
    own = [frontier(*side) for side in sides]
    answer.counts = (sum(sides[0][1]), len(a), sum(sides[1][1]), len(b))
    answer.estimate, answer.low, answer.high, answer.p = fit.ratio, fit.low, fit.high, fit.p
    answer.level, answer.censored, answer.note = 1 - alpha, fit.censored, fit.note
    answer.lr50 = (own[0].lr50, own[1].lr50)
    answer.lr50_edge = (own[0].censored, own[1].censored)
    answer.test = "penalised likelihood-ratio test"
    answer.seeds = min(len({r.get("seed") for r in side}) for side in (a, b))
    answer.effect = DEFAULT_RATIO
    answer.decision = "difference" if fit.p < ALPHA else "undecided"
    if answer.decision == "undecided":
        answer.seeds_needed = plan_frontier(answer.low, answer.high, answer.level, answer.seeds)


def _frontier_slope(answer: Answer, runs: list[dict[str, Any]], alpha: float) -> None:
    """The difference of the two schemes' frontier slopes on log depth, in one model of every scheme's runs
    (:mod:`suite.analysis.depthslope`), its profile-likelihood interval at ``1 - alpha`` and its test."""
    from suite.analysis import depthslope

    pr = answer.primary
    args = ([float(r[LR]) for r in runs], [float(r[DEPTH]) for r in runs], [str(r["variant"]) for r in runs],
            [int(r["status"] != "ok") for r in runs])
    model = depthslope.fit(*args, alpha=alpha)
    fit = depthslope.difference(*args, pr.scheme, pr.baseline, alpha)
    answer.estimate, answer.low, answer.high, answer.p = fit.estimate, fit.low, fit.high, fit.p
    answer.level, answer.note = 1 - alpha, fit.note
    answer.slopes = tuple(model.slopes.get(v, depthslope.Slope()) for v in (pr.scheme, pr.baseline))
    answer.checks = (model.parallel_p, model.linear_p)
    a, b = ([r for r in runs if r["variant"] == v] for v in (pr.scheme, pr.baseline))
    answer.counts = (sum(r["status"] != "ok" for r in a), len(a), sum(r["status"] != "ok" for r in b), len(b))
    answer.test = "penalised likelihood-ratio test"
    answer.seeds = min((len({r.get("seed") for r in side}) for side in (a, b)), default=0)
    answer.effect = DEFAULT_SLOPE
    answer.decision = "difference" if fit.p < ALPHA else "undecided"
    if answer.decision == "undecided":
        answer.seeds_needed = plan_slope(answer.low, answer.high, answer.level, answer.seeds)


def plan_slope(low: float, high: float, level: float, seeds: int, effect: float = DEFAULT_SLOPE,
               power: float = POWER, alpha: float = ALPHA) -> float:
    """Seeds per cell for the slope difference to be detected at ``effect`` with ``power``: the interval read
    as a normal one whose width shrinks as 1 / sqrt(seeds) (approximate); nan when an end is open."""
    if not (math.isfinite(low) and math.isfinite(high)) or seeds < 1 or high <= low:
        return math.nan
    se = (high - low) / (2 * sps.norm.isf((1 - level) / 2))
    need = seeds * (se * (sps.norm.isf(alpha / 2) + sps.norm.ppf(power)) / effect) ** 2
    return float(max(math.ceil(need), 2))


def plan_frontier(low: float, high: float, level: float, seeds: int, ratio: float = DEFAULT_RATIO,
                  power: float = POWER, alpha: float = ALPHA) -> float:
    """Seeds per rate and scheme for the frontier test to detect an LR50 ratio of ``ratio`` with ``power``.

    Approximate: the interval [low, high] (at ``level``, from ``seeds`` seeds) read as a normal one on
    log10(ratio), its width shrinking as 1 / sqrt(seeds). nan when an end is open (no width to scale:
    the grid must first reach each scheme's failures)."""
    if not (0 < low <= high < math.inf) or seeds < 1:
        return math.nan
    z = sps.norm.isf((1 - level) / 2)
    se = math.log10(high / low) / (2 * z)
    need = seeds * (se * (sps.norm.isf(alpha / 2) + sps.norm.ppf(power)) / math.log10(ratio)) ** 2
    return float(max(math.ceil(need), 2))


def plan(sd: float, n_pairs: int, effect: float, power: float = POWER, alpha: float = ALPHA) -> tuple[float, float]:
    """Seed pairs a paired t-test needs to detect ``effect`` with ``power``, planned with the 80% upper
    confidence limit of the observed SD (:func:`suite.analysis.stats.sd_upper`); (seeds, that SD)."""
    planning = stats.sd_upper(sd, n_pairs - 1)
    return stats.paired_seeds_needed(effect, planning, power, alpha), planning


def _sequential(answer: Answer, diff: stats.Difference, looks: sequential.Looks, information: int,
                seeds: int) -> None:
    """Decide at this look of a group-sequential design: the boundary of the information reached (seed
    pairs over the most the study allows, :func:`suite.analysis.sequential.at_information`); p-value
    and interval account for the looks. An analysis that is no look (fewer pairs than an earlier look)
    decides nothing: never a fixed-level test."""
    answer.p = answer.low = answer.high = math.nan  # nothing from the fixed-sample test survives
    placed = looks.place(information, seeds)
    if isinstance(placed, str):
        answer.note = f"not a look of the sequential design ({placed}), so no test"
        return
    answer.look = placed.look
    if not (math.isfinite(diff.se) and diff.se > 0 and math.isfinite(diff.df)):
        answer.note = "every seed-matched difference is the same, so there is no spread to test against"
        return
    plan_ = sequential.at_information(placed.information, looks.rounds[-1], placed.final, ALPHA)
    k = len(placed.information) - 1
    z = sequential.t_to_z(diff.estimate / diff.se, diff.df)
    answer.p = sequential.stagewise_p(plan_, k, z)
    answer.low, answer.high = sequential.repeated_interval(diff.estimate, diff.se, diff.df, plan_.bounds[k])
    if abs(z) >= plan_.bounds[k]:
        answer.decision = "difference"
    elif placed.final and answer.tost_p < ALPHA:
        answer.decision = "equivalent"
