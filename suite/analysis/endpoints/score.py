"""The endpoints on test scores: ``score`` (one rate), ``best_lr_score`` (each at its best rate, cross-fitted) and
``interaction`` (one cell's gain against another's); a paired t (else Welch's), TOST where a margin is declared."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from suite.analysis import crossfit, stats
from suite.analysis.endpoints.base import Answer, Endpoint, at_step, level, ps, pts, runs_in
from suite.analysis.markup import fmt_value, md
from suite.declared import ALPHA, POWER, Primary
from suite.results import score, selection_split


@dataclass
class ScoreAnswer(Answer):
    n_pairs: int = 0
    sd: float = math.nan  # of the seed-matched differences
    planning_sd: float = math.nan
    scheme_mean: float = math.nan
    base_mean: float = math.nan
    scheme_lr: float = math.nan  # best_lr_score: each side's best rate on all seeds (described, not tested)
    base_lr: float = math.nan
    scheme_lrs: tuple[float, float] = (math.nan, math.nan)  # the rate each half of the seeds was scored at
    base_lrs: tuple[float, float] = (math.nan, math.nan)  # (cross-fitting: chosen on the other half)
    selection: str = ""  # best_lr_score: how the rates were chosen and what that costs (crossfit.SENTENCE)
    scheme_edge: str = ""
    base_edge: str = ""
    at_chance: bool = False  # a run of the compared cells ended not ok (scored at chance)
    few: bool = False  # undecided for it: fewer seed pairs than the endpoint's MIN_PAIRS_AT_CHANCE

    def seeds_run(self) -> int:
        return int(self.n_pairs)


def paired_plan(pairs: int, sd: float, effect: float, power: float, alpha: float) -> dict[str, Any]:
    """A score comparison's plan: seeds from the point SD and from its 80% upper limit (``seeds_needed``)."""
    planning = stats.sd_upper(sd, pairs - 1) if pairs >= 2 else math.nan
    point = stats.paired_seeds_needed(effect, sd, power, alpha)
    need = stats.paired_seeds_needed(effect, planning, power, alpha)
    if pairs < 2 or math.isnan(sd):
        note = "fewer than 2 seed pairs: no SD"
    elif sd == 0:
        note = ("every seed pair differs by the same amount (SD 0: the same model twice, or both at chance in "
                "every run?): nothing to plan from")
    else:
        note = "" if math.isfinite(need) else "> 10,000"
    return {"pairs": pairs, "sd": sd, "planning_sd": planning, "effect": effect, "seeds_needed_point": point,
            "seeds_needed": need, "min_p": math.nan, "note": note}


def crossfit_plan(pairs: int, sd: float, effect: float, power: float, alpha: float) -> dict[str, Any]:
    """A cross-fitted comparison's plan (the best-rate score): each half chooses for the other, so its SD has
    n - 2 degrees of freedom and its test the power of n / 2 pairs: twice the seeds of :func:`paired_plan`."""
    row = paired_plan(pairs, sd, effect, power, alpha)
    row["planning_sd"] = stats.sd_upper(sd, pairs - 2) if pairs >= 3 else math.nan
    row["seeds_needed_point"] = 2 * stats.paired_seeds_needed(row["effect"], sd, power, alpha)
    row["seeds_needed"] = 2 * stats.paired_seeds_needed(row["effect"], row["planning_sd"], power, alpha)
    row["note"] = (row["note"] + "; " if row["note"] else "") + "cross-fitted: twice the seeds of a paired t"
    return row


class Score(Endpoint):
    name = "score"
    what = "scored on test"
    answer = ScoreAnswer
    # Below this many seed pairs a t test on differences that hold runs at chance (a heavy-tailed mixture) exceeds
    # its level (docs/statistics.md, "Too few seeds with runs at chance").
    MIN_PAIRS_AT_CHANCE = 3

    def at_chance(self, runs: list[dict[str, Any]], primary: Primary, a: list[dict[str, Any]],
                  b: list[dict[str, Any]]) -> bool:
        """Whether a run of the compared cells (every rate of the cell where none is paired) ended not ok."""
        cells = self.paired_cells(primary)
        chosen = [r for v, w in cells for r in runs_in(runs, v, w)] if cells else a + b
        return any(r["status"] in ("failed", "diverged") for r in chosen)

    def pairs(self, runs: list[dict[str, Any]], primary: Primary, a: list[dict[str, Any]],
              b: list[dict[str, Any]]) -> tuple[list[tuple[Any, float]], list[tuple[Any, float]]]:
        """(seed, score) on each side, the baseline's second."""
        return [(r.get("seed"), score(r)) for r in a], [(r.get("seed"), score(r)) for r in b]

    def test(self, answer: ScoreAnswer, runs: list[dict[str, Any]], a: list[dict[str, Any]],
             b: list[dict[str, Any]], alpha: float) -> None:
        from suite.analysis.summary import compare_accuracy

        pr = answer.primary
        pa, pb = ([(s, x) for s, x in side if x is not None] for side in self.pairs(runs, pr, a, b))
        if not pa or not pb:
            answer.note = "no runs to score on one side"
            return
        diff, sd = compare_accuracy(pa, pb)
        answer.at_chance = self.at_chance(runs, pr, a, b)
        answer.scheme_mean, answer.base_mean = (float(np.mean([x for _, x in side])) for side in (pa, pb))
        if pr.margin is not None and diff.test == "paired t":
            by_b = dict(pb)
            answer.tost_p = stats.tost_p([x - by_b[s] for s, x in pa if s in by_b], pr.margin)
        self.decide(answer, diff, sd, alpha)

    def decide(self, answer: ScoreAnswer, diff: stats.Difference, sd: float, alpha: float) -> None:
        """The difference's numbers, then the verdict of the fixed-sample test."""
        pr = answer.primary
        answer.level = 1 - alpha
        answer.estimate, answer.p = diff.estimate, diff.p
        shown = diff.at(alpha) if alpha != ALPHA else diff  # a family's interval at its Holm step's level
        answer.low, answer.high = shown.low, shown.high
        answer.test, answer.n_pairs, answer.sd = diff.test, diff.n_pairs, sd
        answer.effect = pr.margin or self.effect
        answer.few = answer.at_chance and diff.n_pairs < self.MIN_PAIRS_AT_CHANCE
        answer.decision = ("undecided" if answer.few else "difference" if diff.p < ALPHA
                           else "equivalent" if answer.tost_p < ALPHA else "undecided")
        if answer.decision == "undecided":
            self.plan(answer, ALPHA)

    def plan(self, answer: ScoreAnswer, alpha: float) -> None:
        """Paired-t seeds planned from the SD's 80% upper limit, twice as many for a cross-fitted test."""
        halves = answer.test == crossfit.TEST  # its SD has n - 2 degrees of freedom, its se that of n/2 pairs
        answer.planning_sd = stats.sd_upper(answer.sd, answer.n_pairs - halves - 1)
        seeds = stats.paired_seeds_needed(answer.effect, answer.planning_sd, POWER, alpha)
        answer.seeds_needed = 2 * seeds if halves else seeds
        if answer.at_chance and answer.seeds_needed < self.MIN_PAIRS_AT_CHANCE:  # the fewest that may decide
            answer.seeds_needed = self.MIN_PAIRS_AT_CHANCE

    def means(self, a: ScoreAnswer) -> str:
        return f"{100 * a.scheme_mean:.1f}% vs {100 * a.base_mean:.1f}%"

    def rates(self, a: ScoreAnswer) -> str:
        return ""

    def head(self, a: ScoreAnswer) -> str:
        how = "higher" if a.estimate > 0 else "lower"
        return f"**{md(a.primary.scheme)} scores {how} than {md(a.primary.baseline)}.**"

    def verdict(self, a: ScoreAnswer) -> str:
        pr = a.primary
        interval = f"{level(a)} CI [{pts(a.low)}, {pts(a.high)}]" if math.isfinite(a.low) else "no interval"
        body = (f"{self.means(a)}, a difference of {pts(a.estimate)} points "
                f"({interval}; {a.test}" + (f" on {a.n_pairs} seed pairs" if a.n_pairs else "")
                + f", {ps(a.p, a.p_adj, a.family)}).")
        note = f" Note: {md(a.note)}." if a.note else ""
        tost = ps(a.tost_p, a.tost_p_adj, a.family)
        if a.decision == "difference":
            head = self.head(a)
        elif a.decision == "equivalent":
            head = f"**No difference larger than {100 * pr.margin:g} points** (the declared margin; TOST {tost})."
        else:
            margin = (f"; nor does it lie within the declared margin of +/-{100 * pr.margin:g} points (TOST {tost})"
                      if pr.margin is not None and math.isfinite(a.tost_p) else "")
            head = (f"**Undecided**: {a.n_pairs} seed pairs, fewer than the {self.MIN_PAIRS_AT_CHANCE} a verdict needs "
                    f"when runs are scored at chance (a t test on so few such differences exceeds its level)."
                    f"{self.need(a)}" if a.few else f"**Undecided**: the interval includes 0{margin}.{self.need(a)}")
        return f"{head} {body}{self.rates(a)}{note}"

    def runs_needed(self, n: int) -> str:
        return f"{2 * n} runs"

    def need(self, a: ScoreAnswer) -> str:
        """The seeds that would decide an undecided score comparison."""
        if math.isfinite(a.seeds_needed):
            n = int(a.seeds_needed)
            sd = (f"the SD of the seed-matched differences, {100 * a.sd:.1f} points " + (
                f"pooled within the two halves of {a.n_pairs} seed pairs ({a.n_pairs - 2} degrees of freedom)"
                if a.test == crossfit.TEST else f"over {a.n_pairs} seed pairs ({a.n_pairs - 1} degrees of freedom)"))
            return (f" To detect a difference of {100 * a.effect:g} points with {int(100 * POWER)}% power"
                    f"{at_step(a)}, about {n} seeds per scheme are needed ({self.runs_needed(n)}), planned from {sd} "
                    f"at its 80% upper limit {100 * a.planning_sd:.1f}: `suite plan`.{a.powered_words()}")
        if math.isinf(a.seeds_needed):
            return f" More than 10,000 seeds would be needed to detect {100 * a.effect:g} points."
        if a.test == crossfit.TEST and a.n_pairs < 3:
            return (f" Cross-fitting needs at least 3 seed pairs (two halves, and a spread within one); with "
                    f"{a.n_pairs} there is no test: run more seeds (`suite plan DIR` says how many).")
        return (" The seed-matched differences have no spread (e.g. every run at chance), so nothing can be planned."
                if a.n_pairs >= 2 else " Too few seed pairs to estimate the spread: run at least 2 seeds of both.")

    def decided(self, a: ScoreAnswer) -> str:
        return f"decided: {a.primary.scheme} scores {'higher' if a.estimate > 0 else 'lower'}"

    def cells(self, a: ScoreAnswer) -> tuple[str, str]:
        return (f"{pts(a.estimate)} points" if math.isfinite(a.estimate) else "-",
                f"{level(a)} [{pts(a.low)}, {pts(a.high)}]" if math.isfinite(a.low) else "-")

    def plan_row(self, a: ScoreAnswer, effect: float, power: float, alpha: float) -> dict[str, Any]:
        plan = crossfit_plan if a.test == crossfit.TEST else paired_plan
        return plan(a.n_pairs, a.sd, a.primary.margin or effect, power, alpha)

    def paired_cells(self, primary: Primary) -> list[tuple[str, dict[str, Any]]]:
        return [(v, dict(primary.where)) for v in (primary.scheme, primary.baseline)]


class BestLrScore(Score):
    name = "best_lr_score"
    what = ("each at its own best learning rate (chosen on validation, cross-fitted over halves of the seeds), "
            "scored on test")
    MIN_PAIRS_AT_CHANCE = 5  # its SD has n - 2 degrees of freedom: above its level at 3-4 seeds with failures

    def test(self, answer: ScoreAnswer, runs: list[dict[str, Any]], a: list[dict[str, Any]],
             b: list[dict[str, Any]], alpha: float) -> None:
        from suite.analysis.lr import lr_cell

        pr = answer.primary
        split = selection_split(a + b)
        ca, cb = (lr_cell(runs_in(runs, v, pr.where, True), split) for v in (pr.scheme, pr.baseline))
        answer.scheme_lr, answer.base_lr = ca["best_lr"], cb["best_lr"]
        answer.scheme_edge, answer.base_edge = ca["best_lr_at_edge"], cb["best_lr_at_edge"]
        answer.selection = crossfit.SENTENCE
        if split == "test":
            answer.note = "no validation split: each half of the seeds chose its rates on the other half's test scores"
        fit = crossfit.compare(ca, cb)
        if fit is None or fit.diff.n_pairs == 0:
            answer.note = "no runs to score on one side" if fit is None else "no seed scored on both sides"
            return
        answer.scheme_lrs, answer.base_lrs = fit.scheme_lrs, fit.base_lrs
        answer.scheme_mean, answer.base_mean = fit.scheme_mean, fit.base_mean
        if pr.margin is not None:
            answer.tost_p = crossfit.tost_p(fit.diff, pr.margin)
        answer.at_chance = self.at_chance(runs, pr, a, b)
        self.decide(answer, fit.diff, fit.sd, alpha)

    def rates(self, a: ScoreAnswer) -> str:
        pr = a.primary
        edge = [f"{md(name)}'s best rate ({fmt_value(lr)}) is the {e} tested, so a better one may lie outside the grid"
                for name, lr, e in ((pr.scheme, a.scheme_lr, a.scheme_edge), (pr.baseline, a.base_lr, a.base_edge))
                if e]
        halves = ""
        if all(math.isfinite(x) for x in (*a.scheme_lrs, *a.base_lrs)):
            halves = (f"; each half of the seeds was scored at the rate the other half chose: "
                      f"{' / '.join(fmt_value(x) for x in a.scheme_lrs)} vs "
                      f"{' / '.join(fmt_value(x) for x in a.base_lrs)}")
        return (f" Best rates on all seeds: {fmt_value(a.scheme_lr)} vs {fmt_value(a.base_lr)}{halves}"
                + (f"; {'; '.join(edge)}" if edge else "") + "." + (f" {a.selection}" if a.selection else ""))

    def runs_needed(self, n: int) -> str:
        return "runs: that many at every rate of each scheme's grid"

    def paired_cells(self, primary: Primary) -> list[tuple[str, dict[str, Any]]]:
        return []  # each seed is scored at a rate another half chose: no one cell holds the pairs


class Interaction(Score):
    name = "interaction"
    what = ("scored on test: the scheme's gain over the baseline in one cell against the same gain in the other, "
            "seed by seed (a paired t on each seed's difference of differences)")

    def pairs(self, runs: list[dict[str, Any]], primary: Primary, a: list[dict[str, Any]],
              b: list[dict[str, Any]]) -> tuple[list[tuple[Any, float]], list[tuple[Any, float]]]:
        return _gains(runs, primary, primary.where), _gains(runs, primary, primary.versus)

    def means(self, a: ScoreAnswer) -> str:
        return f"gain {pts(a.scheme_mean)} vs {pts(a.base_mean)} points"

    def head(self, a: ScoreAnswer) -> str:
        pr = a.primary
        where = ", ".join(md(f"{k} = {fmt_value(v)}") for k, v in pr.where.items())
        how = "larger" if a.estimate > 0 else "smaller"
        return f"**{md(pr.scheme)}'s gain over {md(pr.baseline)} is {how} at {where}.**"

    def decided(self, a: ScoreAnswer) -> str:
        where = ", ".join(f"{k} {fmt_value(v)}" for k, v in a.primary.where.items())
        return f"decided: {a.primary.scheme}'s gain is {'larger' if a.estimate > 0 else 'smaller'} at {where}"

    def runs_needed(self, n: int) -> str:
        return f"{4 * n} runs: both schemes in both cells"

    def paired_cells(self, primary: Primary) -> list[tuple[str, dict[str, Any]]]:
        return [(v, w) for w in (dict(primary.where), {**primary.where, **primary.versus})
                for v in (primary.scheme, primary.baseline)]


def _gains(runs: list[dict[str, Any]], primary: Primary, where: dict[str, Any]) -> list[tuple[Any, float]]:
    """(seed, scheme's score - baseline's score) for each seed scored on both sides in the cell ``where``."""
    base = {r.get("seed"): score(r) for r in runs_in(runs, primary.baseline, where)}
    return [(r.get("seed"), x - base[r.get("seed")]) for r in runs_in(runs, primary.scheme, where)
            if (x := score(r)) is not None and base.get(r.get("seed")) is not None]

