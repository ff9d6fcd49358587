"""The primary comparison an ablation declares, tested alone, and its answer in words.

An ablation file may declare one question (``primary:``, docs/ablations.md): a scheme, a baseline,
where (fixed values of grid keys, e.g. the deepest depth), an endpoint and optionally an
equivalence margin. :func:`evaluate` tests that comparison alone at ``alpha`` = 0.05, with no
family to share the level with, and decides one of three answers:

- ``difference``: the paired t-test (Welch's where seeds do not match) has p < alpha; the 95%
  interval printed beside it excludes 0, by construction.
- ``equivalent``: not a difference, and the two one-sided tests (TOST) put the difference within
  ``+/- margin`` (its 90% interval lies inside the margin).
- ``undecided``: neither; the answer names the seeds that would decide it (:func:`plan`).

Endpoints: ``best_lr_score`` (each scheme at its own best learning rate, chosen on validation,
scored on test: :mod:`suite.analysis.lr`), ``score`` (one learning rate), ``not_ok_rate`` (Fisher's
exact test on the share of runs that diverged or failed, all learning rates pooled; no equivalence
test). With ``suite run --until-decided`` the folder holds ``sequential.json``, the group-sequential
design of the looks so far (:mod:`suite.analysis.sequential`); the p-value and interval then
account for every look.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from suite import store
from suite.analysis import sequential, stats
from suite.analysis.grouping import LR
from suite.analysis.load import AnalysisError
from suite.analysis.markup import fmt_value
from suite.analysis.score import score, selection_split

ENDPOINTS = ("best_lr_score", "score", "not_ok_rate")
ALPHA = 0.05
POWER = 0.8
DEFAULT_EFFECT = 0.05  # the difference planned for when no margin is declared: 5 points
SEQUENTIAL = "sequential.json"  # written by `suite run --until-decided` into the results folder


@dataclass(frozen=True)
class Primary:
    """A declared primary comparison (the ``primary:`` block of an ablation file)."""

    scheme: str
    baseline: str
    where: dict[str, Any] = field(default_factory=dict)
    endpoint: str = "best_lr_score"
    margin: float | None = None  # a fraction of accuracy (the file says points: 5 -> 0.05)

    def describe(self) -> str:
        where = ", ".join(f"{k} = {fmt_value(v)}" for k, v in self.where.items())
        return f"{self.scheme} vs {self.baseline}" + (f" at {where}" if where else "")


def parse(raw: Any, src: str, variants: list[str], grid: dict[str, list[Any]], problems: list[str]) -> Primary | None:
    """Check a ``primary:`` block against the ablation's variants and grid; one line per problem."""
    from suite.registry import did_you_mean

    if raw is None:
        return None
    fields = ("scheme", "baseline", "where", "endpoint", "margin")
    example = "e.g. `primary: {scheme: layerscale, baseline: preln, where: {model.depth: 48}}`"
    if not isinstance(raw, dict):
        problems.append(f"{src}: primary: expected a mapping; {example}")
        return None
    start = len(problems)
    for key in raw:
        if key not in fields:
            problems.append(f"{src}: primary.{key}: unknown field; valid fields: {', '.join(fields)}")
    for key in ("scheme", "baseline"):
        if raw.get(key) not in variants:
            problems.append(f"{src}: primary.{key}: {raw.get(key)!r} is not a variant of this ablation"
                            f"{did_you_mean(str(raw.get(key)), variants)}; use one of {', '.join(variants)}")
    if raw.get("scheme") == raw.get("baseline") and raw.get("scheme") is not None:
        problems.append(f"{src}: primary: scheme and baseline are both {raw['scheme']!r}; compare two variants")
    where = raw.get("where") or {}
    if not isinstance(where, dict):
        problems.append(f"{src}: primary.where: expected a mapping of grid key -> value; {example}")
        where = {}
    for key, value in where.items():
        if key not in grid:
            problems.append(f"{src}: primary.where.{key}: not a grid axis of this ablation; use one of "
                            f"{', '.join(grid) or '(no grid)'}")
        elif not any(_same(value, v) for v in grid[key]):
            problems.append(f"{src}: primary.where.{key}: {value!r} is not in the grid "
                            f"({', '.join(map(str, grid[key]))}); use one of those values")
    endpoint = raw.get("endpoint", "best_lr_score" if LR in grid and LR not in where else "score")
    if endpoint not in ENDPOINTS:
        problems.append(f"{src}: primary.endpoint: {endpoint!r} is not one of {', '.join(ENDPOINTS)}")
    elif endpoint == "best_lr_score" and (LR not in grid or LR in where):
        problems.append(f"{src}: primary.endpoint: best_lr_score needs a `{LR}` grid axis left free; use "
                        f"`endpoint: score`")
    for key in grid:
        if key not in where and key != LR:
            problems.append(f"{src}: primary.where: also fix {key} (one of {', '.join(map(str, grid[key]))}); "
                            f"the primary comparison is one cell")
    if endpoint == "score" and LR in grid and LR not in where:
        problems.append(f"{src}: primary.where: fix {LR} for `endpoint: score`, or use `endpoint: best_lr_score`")
    margin = raw.get("margin")
    if margin is not None and not (isinstance(margin, (int, float)) and not isinstance(margin, bool)
                                   and 0 < margin < 100):
        problems.append(f"{src}: primary.margin: expected points of accuracy in (0, 100), e.g. `margin: 5`; "
                        f"got {margin!r}")
    elif margin is not None and endpoint == "not_ok_rate":
        problems.append(f"{src}: primary.margin: no equivalence test for not_ok_rate; remove margin")
    if len(problems) > start:
        return None
    return Primary(raw["scheme"], raw["baseline"], dict(where), endpoint, None if margin is None else margin / 100)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9)
    return a == b


def read(folder: str | Path) -> Primary | None:
    """The primary comparison declared in ``folder/ablation.yaml`` (written by ``suite run``), if any."""
    path = Path(folder) / "ablation.yaml"
    if not path.is_file():
        return None
    try:
        data = yaml.safe_load(store.read_text(path)) or {}
    except (OSError, ValueError, yaml.YAMLError) as err:
        raise AnalysisError(f"{path}: cannot read it ({err}); restore it or run `suite run` again") from None
    if not isinstance(data, dict) or data.get("primary") is None:
        return None
    problems: list[str] = []
    grid = data.get("grid") if isinstance(data.get("grid"), dict) else {}
    parsed = parse(data["primary"], str(path), list(data.get("variants") or {}), grid, problems)
    if problems:
        raise AnalysisError(problems[0])
    return parsed


def read_design(folder: str | Path) -> list[int] | None:
    """The planned seed counts of each look (``sequential.json``), or None for a fixed design."""
    path = Path(folder) / SEQUENTIAL
    if not path.is_file():
        return None
    try:
        rounds = store.read_json(path)["rounds"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise AnalysisError(f"{path}: not a sequential design ({err}); delete it to analyse as a fixed design") from None
    if not (isinstance(rounds, list) and rounds and all(isinstance(n, int) and n >= 2 for n in rounds)
            and rounds == sorted(set(rounds))):
        raise AnalysisError(f"{path}: rounds: expected increasing seed counts >= 2; delete it to analyse as a "
                            f"fixed design")
    return rounds


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
    scheme_lr: float = math.nan
    base_lr: float = math.nan
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


def _runs(runs: list[dict[str, Any]], primary: Primary, variant: str) -> list[dict[str, Any]]:
    return [r for r in runs if r.get("variant") == variant and r["status"] != "error"
            and all(_same(r.get(k), v) for k, v in primary.where.items())]


def evaluate(runs: list[dict[str, Any]], primary: Primary, rounds: list[int] | None = None) -> Answer:
    """Test the primary comparison on ``runs`` (see the module docstring).

    Args:
        runs: as returned by :func:`suite.analysis.load.load_runs`.
        primary: the declared comparison.
        rounds: seed counts of a group-sequential design's looks (``sequential.json``), or None.
    """
    from suite.analysis.lr import _cell
    from suite.analysis.summary import compare_accuracy

    answer = Answer(primary, rounds=list(rounds or []))
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
    if primary.endpoint == "best_lr_score":
        split = selection_split(a + b)
        ca, cb = _cell(a, split), _cell(b, split)
        pa, pb = ca["_test"], cb["_test"]
        answer.scheme_lr, answer.base_lr = ca["best_lr"], cb["best_lr"]
        answer.scheme_edge, answer.base_edge = ca["best_lr_at_edge"], cb["best_lr_at_edge"]
        if split == "test":
            answer.note = "no validation split: the best rates were chosen on test, an optimistic choice"
    else:
        pa = [(r.get("seed"), score(r)) for r in a]
        pb = [(r.get("seed"), score(r)) for r in b]
        pa, pb = [(s, x) for s, x in pa if x is not None], [(s, x) for s, x in pb if x is not None]
    if not pa or not pb:
        answer.note = "no runs to score on one side"
        return answer
    diff, sd = compare_accuracy(pa, pb)
    answer.scheme_mean = float(np.mean([x for _, x in pa]))
    answer.base_mean = float(np.mean([x for _, x in pb]))
    answer.estimate, answer.low, answer.high, answer.p = diff.estimate, diff.low, diff.high, diff.p
    answer.test, answer.n_pairs, answer.sd = diff.test, diff.n_pairs, sd
    if primary.margin is not None and diff.test == "paired t":
        by_b = dict(pb)
        answer.tost_p = stats.tost_p([x - by_b[s] for s, x in pa if s in by_b], primary.margin)
    answer.effect = primary.margin or DEFAULT_EFFECT
    if rounds:
        _sequential(answer, diff, rounds)
    elif diff.p < ALPHA:
        answer.decision = "difference"
    elif answer.tost_p < ALPHA:
        answer.decision = "equivalent"
    if answer.decision == "undecided":
        answer.seeds_needed, answer.planning_sd = plan(sd, answer.n_pairs, answer.effect)
    return answer


def plan(sd: float, n_pairs: int, effect: float, power: float = POWER, alpha: float = ALPHA) -> tuple[float, float]:
    """Seed pairs a paired t-test needs to detect ``effect`` with ``power``, planned with the 80% upper
    confidence limit of the observed SD (:func:`suite.analysis.stats.sd_upper`); (seeds, that SD)."""
    planning = stats.sd_upper(sd, n_pairs - 1)
    return stats.paired_seeds_needed(effect, planning, power, alpha), planning


def _sequential(answer: Answer, diff: stats.Difference, rounds: list[int]) -> None:
    """Decide at this look of a group-sequential design; p-value and interval account for the looks."""
    n = answer.n_pairs
    if n not in rounds:
        answer.note = (f"{n} seed pairs is not one of the planned looks ({', '.join(map(str, rounds))}): "
                       f"analysed as a fixed design")
        answer.decision = "difference" if diff.p < ALPHA else "undecided"
        return
    look = rounds.index(n)
    answer.look = look
    if not math.isfinite(diff.se):
        answer.note = "every seed-matched difference is the same, so there is no spread to test against"
        return
    plan_ = sequential.design([k / rounds[-1] for k in rounds], ALPHA)
    z = sequential.t_to_z(diff.estimate / diff.se, diff.df)
    answer.p = sequential.stagewise_p(plan_, look, z)
    answer.low, answer.high = sequential.repeated_interval(diff.estimate, diff.se, diff.df, plan_.bounds[look])
    if abs(z) >= plan_.bounds[look]:
        answer.decision = "difference"
    elif look == len(rounds) - 1 and answer.tost_p < ALPHA:
        answer.decision = "equivalent"


def _pts(x: float) -> str:
    return f"{100 * x:+.1f}"


def _p(p: float) -> str:
    return "no test" if math.isnan(p) else "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def paragraph(answer: Answer) -> str:
    """The answer in plain words, the first paragraph of ``findings.md``."""
    pr = answer.primary
    what = {"best_lr_score": "each at its own best learning rate (chosen on validation), scored on test",
            "score": "scored on test", "not_ok_rate": "the share of runs that diverged or failed"}[pr.endpoint]
    head = (f"**Primary comparison** (declared in ablation.yaml, tested alone at alpha = {ALPHA}): "
            f"{pr.describe()}, {what}.")
    if answer.note and math.isnan(answer.estimate):
        return f"{head} **Not tested**: {answer.note}."
    if pr.endpoint == "not_ok_rate":
        ka, na, kb, nb = answer.counts
        body = (f"Not ok {ka}/{na} vs {kb}/{nb} ({_pts(answer.estimate)} points; {answer.test}, {_p(answer.p)}).")
        if answer.decision == "difference":
            word = "more" if answer.estimate > 0 else "less"
            return f"{head} **{pr.scheme} ends not ok {word} often than {pr.baseline}.** {body}"
        reach = (f" With {na} vs {nb} runs this test cannot reach p < {ALPHA} at all (its smallest p is "
                 f"{answer.min_p:.3f}): add seeds." if answer.min_p >= ALPHA else "")
        return f"{head} **Undecided.** {body}{reach}"
    design = ""
    if answer.look >= 0:
        design = (f" Group-sequential design (O'Brien-Fleming-type alpha spending, Lan-DeMets) with looks at "
                  f"{', '.join(map(str, answer.rounds))} seeds; this is look {answer.look + 1}: the p-value "
                  f"(stage-wise ordering) and the repeated confidence interval account for every look.")
    level = "95% repeated CI" if answer.look >= 0 else "95% CI"
    rates = ""
    if pr.endpoint == "best_lr_score":
        edge = [f"{name}'s best rate ({fmt_value(lr)}) is the {e} tested, so a better one may lie outside the grid"
                for name, lr, e in ((pr.scheme, answer.scheme_lr, answer.scheme_edge),
                                    (pr.baseline, answer.base_lr, answer.base_edge)) if e]
        rates = (f" Rates: {fmt_value(answer.scheme_lr)} vs {fmt_value(answer.base_lr)}"
                 + (f"; {'; '.join(edge)}" if edge else "") + ".")
    interval = (f"{level} [{_pts(answer.low)}, {_pts(answer.high)}]" if math.isfinite(answer.low) else "no interval")
    body = (f"{100 * answer.scheme_mean:.1f}% vs {100 * answer.base_mean:.1f}%, a difference of "
            f"{_pts(answer.estimate)} points ({interval}; {answer.test}"
            + (f" on {answer.n_pairs} seed pairs" if answer.n_pairs else "") + f", {_p(answer.p)}).")
    note = f" Note: {answer.note}." if answer.note else ""
    if answer.decision == "difference":
        word = "higher" if answer.estimate > 0 else "lower"
        verdict = f"**{pr.scheme} scores {word} than {pr.baseline}.**"
    elif answer.decision == "equivalent":
        verdict = (f"**No difference larger than {100 * pr.margin:g} points** (the declared margin; TOST "
                   f"{_p(answer.tost_p)}).")
    else:
        margin = (f"; nor does it lie within the declared margin of +/-{100 * pr.margin:g} points (TOST "
                  f"{_p(answer.tost_p)})" if pr.margin is not None and math.isfinite(answer.tost_p) else "")
        if math.isfinite(answer.seeds_needed):
            need = (f" To detect a difference of {100 * answer.effect:g} points with {int(100 * POWER)}% power, "
                    f"about {int(answer.seeds_needed)} seeds per scheme are needed (SD of the seed-matched "
                    f"differences {100 * answer.sd:.1f} points, planned at its 80% upper limit "
                    f"{100 * answer.planning_sd:.1f}): `suite plan`, or `suite run FILE --until-decided`.")
        elif math.isinf(answer.seeds_needed):
            need = f" More than 10,000 seeds would be needed to detect {100 * answer.effect:g} points."
        elif answer.n_pairs >= 2:
            need = " The seed-matched differences have no spread (e.g. every run at chance), so nothing can be planned."
        else:
            need = " Too few seed pairs to estimate the spread: run at least 2 seeds of both."
        verdict = f"**Undecided**: the interval includes 0{margin}.{need}"
    return f"{head} {verdict} {body}{rates}{design}{note}"

