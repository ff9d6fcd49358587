"""The endpoints on runs that end not ok: ``frontier`` (the LR50 ratio: :mod:`~suite.analysis.doseresponse`) and
``frontier_slope`` (slopes on log depth: :mod:`~suite.analysis.depthslope`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from scipy import stats as sps

from suite.analysis.endpoints.base import Answer, Endpoint, at_step, level, ps
from suite.analysis.markup import fmt_rate, md
from suite.declared import ALPHA, DEFAULT_RATIO, DEFAULT_SLOPE, POWER, same_value
from suite.grouping import DEPTH, LR


@dataclass
class FailureAnswer(Answer):
    counts: tuple[int, int, int, int] = (0, 0, 0, 0)  # not ok k/n scheme, baseline
    seeds: int = 0  # seeds per rate and scheme (the frontiers)
    censored: str = ""  # frontier: the ratio interval's open ends, "low", "high" or "both"
    lr50: tuple[float, float] = (math.nan, math.nan)  # frontier: each side's own (scheme, baseline)
    lr50_edge: tuple[str, str] = ("", "")  # "above" / "below" the rates tested, or ""
    slopes: tuple = ()  # frontier_slope: each side's own slope (depthslope.Slope: scheme, baseline)
    checks: tuple[float, float] = (math.nan, math.nan)  # frontier_slope's Wald p: parallel curves, straight frontier

    def seeds_run(self) -> int:
        return int(self.seeds)


def _not_ok(side: list[dict[str, Any]]) -> int:
    return sum(r["status"] != "ok" for r in side)


def _tally(answer: FailureAnswer, a: list[dict[str, Any]], b: list[dict[str, Any]]) -> None:
    """Runs not ok of runs on each side, and the seeds per rate the fewer side has."""
    answer.counts = (_not_ok(a), len(a), _not_ok(b), len(b))
    answer.seeds = min((len({r.get("seed") for r in side}) for side in (a, b)), default=0)


def _scaled(width: float, level_: float, seeds: int, effect: float, power: float, alpha: float) -> float:
    """Seeds to detect ``effect`` with ``power``, reading an interval ``width`` wide at ``seeds`` as normal with its se
    scaled as 1 / sqrt(seeds) (approximate); nan without seeds."""
    if seeds < 1:
        return math.nan
    se = width / (2 * sps.norm.isf((1 - level_) / 2))
    need = seeds * (se * (sps.norm.isf(alpha / 2) + sps.norm.ppf(power)) / effect) ** 2
    return float(max(math.ceil(need), 2))


def _x(r: float) -> str:
    """A ratio of learning rates: 2.7x; an open end: 0 or unbounded."""
    return "unbounded" if math.isinf(r) else "0" if r == 0 else f"{r:.2g}"


def _slope(x: float) -> str:
    return "unbounded" if math.isinf(x) else f"{x:+.2f}"


class _Scaled(Endpoint):
    """A frontier endpoint: its seeds scaled from the interval's width."""

    answer = FailureAnswer
    per = ""  # what a seed count is per, in words
    target = ""  # the effect planned for, in words

    def scale(self, a: FailureAnswer, effect: float, power: float, alpha: float) -> float:
        raise NotImplementedError

    def plan(self, a: FailureAnswer, alpha: float) -> None:
        a.seeds_needed = self.scale(a, self.effect, POWER, alpha)

    def need(self, a: FailureAnswer) -> str:
        """The seeds that would detect the planned effect ("" when none is planned)."""
        if not math.isfinite(a.seeds_needed):
            return ""
        return (f" To detect {self.target.format(a.effect)} with {int(100 * POWER)}% power{at_step(a)}, about "
                f"{int(a.seeds_needed)} seeds per {self.per} are needed (now {a.seeds}; approximate, from the "
                f"interval's width).{a.powered_words()}")

    def decide(self, a: FailureAnswer, p: float) -> None:
        a.test = "penalised likelihood-ratio test"
        a.decision = "difference" if p < ALPHA else "undecided"
        if a.decision == "undecided":
            self.plan(a, ALPHA)

    def plan_row(self, a: FailureAnswer, effect: float, power: float, alpha: float) -> dict[str, Any]:
        need = self.scale(a, self.effect, power, alpha)
        return {"pairs": a.seeds, "sd": math.nan, "planning_sd": math.nan, "effect": math.nan,
                "seeds_needed_point": math.nan, "seeds_needed": need, "min_p": math.nan,
                "note": self.plan_note(math.isfinite(need))}


class Frontier(_Scaled):
    name = "frontier"
    what = ("the learning rate where half of the runs end not ok (LR50), as the ratio scheme / baseline (one Firth "
            "logistic model of not ok on log10(rate) with a common slope)")
    effect = DEFAULT_RATIO
    per = "rate and scheme"
    target = "a ratio of {:g}"

    def test(self, answer: FailureAnswer, runs: list[dict[str, Any]], a: list[dict[str, Any]],
             b: list[dict[str, Any]], alpha: float) -> None:
        from suite.analysis.doseresponse import frontier, relative_potency

        sides = [([float(r[LR]) for r in side], [int(r["status"] != "ok") for r in side]) for side in (a, b)]
        fit = relative_potency(*sides[0], *sides[1], alpha)
        own = [frontier(*side) for side in sides]
        answer.estimate, answer.low, answer.high, answer.p = fit.ratio, fit.low, fit.high, fit.p
        answer.level, answer.censored, answer.note = 1 - alpha, fit.censored, fit.note
        answer.lr50, answer.lr50_edge = (own[0].lr50, own[1].lr50), (own[0].censored, own[1].censored)
        _tally(answer, a, b)
        self.decide(answer, fit.p)

    def scale(self, a: FailureAnswer, effect: float, power: float, alpha: float) -> float:
        """Seeds per rate and scheme, the interval read on log10(ratio); nan when an end is open."""
        if not 0 < a.low <= a.high < math.inf:
            return math.nan
        return _scaled(math.log10(a.high / a.low), a.level, a.seeds, math.log10(effect), power, alpha)

    def verdict(self, a: FailureAnswer) -> str:
        pr = a.primary
        ka, na, kb, nb = a.counts
        ratio = "not estimable (the likelihood rises to a ratio of 10^6)" if math.isnan(a.estimate) else _x(a.estimate)
        body = (f"LR50 ratio {ratio} ({level(a)} profile-likelihood CI [{_x(a.low)}, {_x(a.high)}]; {a.test}, "
                f"{ps(a.p, a.p_adj, a.family)}); each side's own LR50: {md(pr.scheme)} "
                f"{_own(a.lr50[0], a.lr50_edge[0])}, "
                f"{md(pr.baseline)} {_own(a.lr50[1], a.lr50_edge[1])}; not ok {ka}/{na} vs {kb}/{nb} runs.")
        side = {"high": "above", "low": "below", "both": "at both ends"}.get(a.censored)
        open_ = (f" The interval is open {side}: the runs do not reach far enough past a frontier to bound it; "
                 f"extend the grid until both schemes end not ok at their highest rates." if side else "")
        open_ += f" Note: {md(a.note)}." if a.note else ""
        if a.decision == "difference":
            if _higher(a):
                how = f"at least {_x(a.low)}x" if a.censored in ("high", "both") else f"{_x(a.estimate)}x"
            else:
                how = f"at most {_x(a.high)}x" if a.censored in ("low", "both") else f"only {_x(a.estimate)}x"
            return f"**{md(pr.scheme)} tolerates {how} {md(pr.baseline)}'s learning rate.** {body}{open_}"
        need = self.need(a) or (" No number of seeds can be planned from an interval open at one end." if side else "")
        return f"**Undecided**: the interval includes 1.{need} {body}{open_}"

    def decided(self, a: FailureAnswer) -> str:
        return f"decided: {a.primary.scheme} tolerates {'higher' if _higher(a) else 'lower'} rates"

    def cells(self, a: FailureAnswer) -> tuple[str, str]:
        return ("ratio " + (_x(a.estimate) if math.isfinite(a.estimate) else "not estimable"),
                f"{level(a)} [{_x(a.low)}, {_x(a.high)}]")

    def plan_note(self, finite: bool) -> str:
        return (f"seeds per rate to detect an LR50 ratio of {self.effect:g}, scaled from the ratio's interval"
                if finite else "the ratio's interval is open or missing: extend the grid")

    def effect_words(self) -> str | None:
        return f"LR50 ratio {self.effect:g}"


def _own(lr50: float, edge: str) -> str:
    return f"{edge} the rates tested" if edge else "not estimable" if math.isnan(lr50) else fmt_rate(lr50)


class FrontierSlope(_Scaled):
    name = "frontier_slope"
    what = ("how the learning rate where half of the runs end not ok (LR50) moves with depth: the difference of "
            "the two schemes' slopes of log LR50 on log depth (one Firth logistic model of not ok on log rate and "
            "log depth, every scheme's runs, a frontier line per scheme)")
    effect = DEFAULT_SLOPE
    per = "rate, depth and scheme"
    target = "a difference of {:g} in slope"

    def test(self, answer: FailureAnswer, runs: list[dict[str, Any]], a: list[dict[str, Any]],
             b: list[dict[str, Any]], alpha: float) -> None:
        """Every scheme's runs in one model (a frontier line per scheme); the two schemes' slopes compared."""
        from suite.analysis import depthslope

        pr = answer.primary
        runs = [r for r in runs if r["status"] != "error" and all(same_value(r.get(k), v)
                                                                  for k, v in pr.where.items())]
        args = ([float(r[LR]) for r in runs], [float(r[DEPTH]) for r in runs], [str(r["variant"]) for r in runs],
                [int(r["status"] != "ok") for r in runs])
        model = depthslope.fit(*args, alpha=alpha)
        fit = depthslope.difference(*args, pr.scheme, pr.baseline, alpha)
        answer.estimate, answer.low, answer.high, answer.p = fit.estimate, fit.low, fit.high, fit.p
        answer.level, answer.note = 1 - alpha, fit.note
        answer.slopes = tuple(model.slopes.get(v, depthslope.Slope()) for v in (pr.scheme, pr.baseline))
        answer.checks = (model.parallel_p, model.linear_p)
        a, b = ([r for r in runs if r["variant"] == v] for v in (pr.scheme, pr.baseline))
        _tally(answer, a, b)
        self.decide(answer, fit.p)

    def scale(self, a: FailureAnswer, effect: float, power: float, alpha: float) -> float:
        if not (math.isfinite(a.low) and math.isfinite(a.high)) or a.high <= a.low:
            return math.nan
        return _scaled(a.high - a.low, a.level, a.seeds, effect, power, alpha)

    def verdict(self, a: FailureAnswer) -> str:
        pr = a.primary
        ka, na, kb, nb = a.counts
        own = "; ".join(_own_slope(n, s) for n, s in zip((pr.scheme, pr.baseline), a.slopes))
        checks = ""
        if a.checks and math.isfinite(a.checks[0]):
            checks = (f" Checks of the model (Wald): parallel curves over rate p = {a.checks[0]:.2f}"
                      + (f", a straight frontier in log depth p = {a.checks[1]:.2f}" if math.isfinite(a.checks[1])
                         else "") + " (a small p says the model misfits).")
        body = (f"Slope of log LR50 on log depth (0: the stable range does not move with depth; -1: it halves when "
                f"the depth doubles): {own}; difference {_slope(a.estimate)} ({level(a)} profile-likelihood CI "
                f"[{_slope(a.low)}, {_slope(a.high)}]; {a.test}, {ps(a.p, a.p_adj, a.family)}); not ok {ka}/{na} vs "
                f"{kb}/{nb} runs.{checks}")
        note = f" Note: {md(a.note)}." if a.note else ""
        if a.decision == "difference":
            return f"**{md(self.decided(a).removeprefix('decided: '))} than {md(pr.baseline)}'s.** {body}{note}"
        need = self.need(a) + (" The chance that a rerun decides it, by seeds, simulated on this study's own grid: "
                               "`python scripts/stability_power.py FOLDER > FOLDER/power.md`.")
        return f"**Undecided**: the interval includes 0.{need} {body}{note}"

    def decided(self, a: FailureAnswer) -> str:
        how = "more slowly" if a.estimate > 0 else "faster"
        return f"decided: {a.primary.scheme}'s frontier falls {how} with depth"

    def cells(self, a: FailureAnswer) -> tuple[str, str]:
        if not math.isfinite(a.estimate):
            return "-", "-"
        return f"slope {_slope(a.estimate)}", f"{level(a)} [{_slope(a.low)}, {_slope(a.high)}]"

    def plan_note(self, finite: bool) -> str:
        return (f"seeds per rate, depth and scheme to detect a slope difference of {self.effect:g}, scaled from its "
                f"interval" if finite else "the slope difference's interval is open or missing")

    def effect_words(self) -> str | None:
        return f"{self.effect:g} in slope"


def _own_slope(name: str, s: Any) -> str:
    if s.note or not math.isfinite(s.slope):
        return md(f"{name} {s.note or 'not estimable'}")
    return f"{md(name)} {_slope(s.slope)} [{_slope(s.low)}, {_slope(s.high)}]"


def _higher(a: FailureAnswer) -> bool:
    """Whether a decided ratio says the scheme tolerates higher rates: its estimate, or its interval where the
    likelihood rose to the bound and left no estimate."""
    return a.estimate > 1 or (math.isnan(a.estimate) and a.low > 1)
