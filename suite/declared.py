"""The comparison an ablation declares (``primary:``): its fields, their checks and the constants both the sweep and
the analysis use. Parsed with the ablation file (:mod:`suite.sweep.spec`); tested by :mod:`suite.analysis.primary`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from suite.config import DEPTH, LR
from suite.registry import Registry


@dataclass(frozen=True)
class Rule:
    """What an endpoint asks of the ablation's grid, checked where the file is read without importing the analysis."""

    lr: str = "fixed"  # the learning-rate axis: "free" (compared across it), "fixed" (in `where`) or "any"
    depth: bool = False  # compared across model.depth: two depths or more, left out of `where`
    versus: bool = False  # the effect at `where` set against the same at a second cell, `versus`
    margin: bool = True  # an equivalence test exists, so a margin may be declared
    runs_per_rate: bool = False  # places frontiers run by run: one seed is warned against
    crossfit: bool = False  # rates chosen and scored on halves of the seeds: few seeds are warned against


# Endpoints (primary.endpoint): a class of suite.analysis.endpoints each, and its Rule (docs/extending.md).
ENDPOINTS = Registry("primary.endpoint", {
    "best_lr_score": "suite.analysis.endpoints.score:BestLrScore",
    "score": "suite.analysis.endpoints.score:Score",
    "frontier": "suite.analysis.endpoints.failure:Frontier",
    "interaction": "suite.analysis.endpoints.score:Interaction",
    "frontier_slope": "suite.analysis.endpoints.failure:FrontierSlope",
})
RULES: dict[str, Rule] = {
    "best_lr_score": Rule(lr="free", crossfit=True),
    "score": Rule(),
    "frontier": Rule(lr="free", margin=False, runs_per_rate=True),
    "interaction": Rule(versus=True),
    "frontier_slope": Rule(lr="free", depth=True, margin=False, runs_per_rate=True),
}


def register_endpoint(name: str, endpoint: Any, rule: Rule, description: str = "") -> None:
    """Add an endpoint from outside (docs/extending.md); in-process only, as :meth:`Registry.register`."""
    ENDPOINTS.register(name, endpoint, description)
    RULES[name] = rule


ALPHA = 0.05
POWER = 0.8
DEFAULT_EFFECT = 0.05  # the difference planned for when no margin is declared: 5 points
DEFAULT_RATIO = 2.0  # the frontier ratio planned for
DEFAULT_SLOPE = 0.5  # the difference of frontier slopes on log depth planned for: a 4x ratio over 16x depth
MAX_PRIMARY = 3  # co-primary comparisons at most: each one costs the others power


@dataclass(frozen=True)
class Primary:
    """A declared primary comparison (the ``primary:`` block of an ablation file)."""

    scheme: str
    baseline: str
    where: dict[str, Any] = field(default_factory=dict)
    endpoint: str = "best_lr_score"
    margin: float | None = None  # a fraction of accuracy (the file says points: 5 -> 0.05)
    versus: dict[str, Any] = field(default_factory=dict)  # interaction: the cell the gain at `where` is set against

    def describe(self) -> str:
        where = ", ".join(f"{k} = {_fmt(v)}" for k, v in self.where.items())
        if RULES[self.endpoint].versus:
            versus = ", ".join(f"{k} = {_fmt(v)}" for k, v in self.versus.items())
            return f"{self.scheme} - {self.baseline} at {where}, minus the same at {versus}"
        across = " across depth" if RULES[self.endpoint].depth else ""
        return f"{self.scheme} vs {self.baseline}{across}" + (f" at {where}" if where else "")


def parse(raw: Any, src: str, variants: list[str], grid: dict[str, list[Any]],
          problems: list[str]) -> Primary | list[Primary] | None:
    """A ``primary:`` block checked against the variants and grid (a line per problem in ``problems``): a
    :class:`Primary`, a list of them (co-primary comparisons), or None when absent or wrong."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        return _parse_one(raw, src, "primary", variants, grid, problems)
    start = len(problems)
    if not raw or len(raw) > MAX_PRIMARY:
        problems.append(f"{src}: primary: a list of 1 to {MAX_PRIMARY} comparisons, got {len(raw)}; keep the "
                        f"questions that matter (each one costs the others power: they share alpha, Holm)")
        return None
    parsed = [_parse_one(item, src, f"primary[{i}]", variants, grid, problems) for i, item in enumerate(raw)]
    seen: dict[tuple, int] = {}
    for i, one in enumerate(parsed):
        if one is None:
            continue
        key = (frozenset((one.scheme, one.baseline)), _cell(one.where), one.endpoint, _cell(one.versus))
        if key in seen:
            problems.append(f"{src}: primary[{i}]: the same comparison as primary[{seen[key]}] "
                            f"({one.describe()}, {one.endpoint}); remove one")
        seen.setdefault(key, i)
    return None if len(problems) > start else parsed


def _parse_one(raw: Any, src: str, name: str, variants: list[str], grid: dict[str, list[Any]],
               problems: list[str]) -> Primary | None:
    """One comparison (``name``: ``primary`` or ``primary[i]`` in the messages)."""
    from suite.registry import did_you_mean

    fields = ("scheme", "baseline", "where", "endpoint", "margin", "versus")
    example = "e.g. `primary: {scheme: layerscale, baseline: preln, where: {model.depth: 48}}`"
    if not isinstance(raw, dict):
        problems.append(f"{src}: {name}: expected a mapping (or a list of up to {MAX_PRIMARY}); {example}")
        return None
    start = len(problems)
    for key in raw:
        if key not in fields:
            problems.append(f"{src}: {name}.{key}: unknown field; valid fields: {', '.join(fields)}")
    for key in ("scheme", "baseline"):
        if raw.get(key) not in variants:
            problems.append(f"{src}: {name}.{key}: {raw.get(key)!r} is not a variant of this ablation"
                            f"{did_you_mean(str(raw.get(key)), variants)}; use one of {', '.join(variants)}")
    if raw.get("scheme") == raw.get("baseline") and raw.get("scheme") is not None:
        problems.append(f"{src}: {name}: scheme and baseline are both {raw['scheme']!r}; compare two variants")
    where = raw.get("where") or {}
    if not isinstance(where, dict):
        problems.append(f"{src}: {name}.where: expected a mapping of grid key -> value; {example}")
        where = {}
    for key, value in where.items():
        if key not in grid:
            problems.append(f"{src}: {name}.where.{key}: not a grid axis of this ablation; use one of "
                            f"{', '.join(grid) or '(no grid)'}")
        elif not any(same_value(value, v) for v in grid[key]):
            problems.append(f"{src}: {name}.where.{key}: {value!r} is not in the grid "
                            f"({', '.join(map(str, grid[key]))}); use one of those values")
    endpoint = raw.get("endpoint", "best_lr_score" if LR in grid and LR not in where else "score")
    known = isinstance(endpoint, str) and endpoint in ENDPOINTS  # a list or a mapping is no name (nor hashable)
    rule = RULES[endpoint] if known else Rule(lr="any")
    if not known:
        problems.append(f"{src}: {name}.endpoint: {endpoint!r} is not one of {', '.join(ENDPOINTS)}")
    elif rule.lr == "free" and (LR not in grid or LR in where):
        problems.append(f"{src}: {name}.endpoint: {endpoint} needs a `{LR}` grid axis left free"
                        + ("; use `endpoint: score`" if rule.crossfit else
                           f"; add `{LR}` to the grid (rates from below the optimum until half of the runs fail)"
                           f" and leave it out of `where`"))
    if rule.depth and (DEPTH in where or len(grid.get(DEPTH) or []) < 2):
        problems.append(f"{src}: {name}.endpoint: {endpoint} needs a `{DEPTH}` grid axis of two depths or more, "
                        f"left out of `where`; or use `endpoint: frontier` at one depth")
    for key in grid:
        if key not in where and key != LR and not (rule.depth and key == DEPTH):
            problems.append(f"{src}: {name}.where: also fix {key} (one of {', '.join(map(str, grid[key]))}); "
                            f"the primary comparison is one cell")
    if rule.lr == "fixed" and LR in grid and LR not in where:
        problems.append(f"{src}: {name}.where: fix {LR} for `endpoint: score`, or use `endpoint: best_lr_score`")
    versus = raw.get("versus") or {}
    if rule.versus:
        if not isinstance(versus, dict) or not versus or set(versus) - set(where):
            problems.append(f"{src}: {name}.versus: `endpoint: {endpoint}` needs `versus`, new values of some "
                            f"`where` keys, e.g. `where: {{model.depth: 48}}, versus: {{model.depth: 12}}`")
            versus = {}
        for key, value in versus.items():
            if key in grid and not any(same_value(value, v) for v in grid[key]):
                problems.append(f"{src}: {name}.versus.{key}: {value!r} is not in the grid "
                                f"({', '.join(map(str, grid[key]))}); use one of those values")
        if versus and all(same_value(versus[k], where.get(k)) for k in versus):
            problems.append(f"{src}: {name}.versus: the same cell as `where`; give another value")
        versus = {**where, **versus} if isinstance(versus, dict) else {}
    elif raw.get("versus") is not None:
        problems.append(f"{src}: {name}.versus: only for `endpoint: interaction`; remove it")
    margin = raw.get("margin")
    if margin is not None and not (isinstance(margin, (int, float)) and not isinstance(margin, bool)
                                   and 0 < margin < 100):
        problems.append(f"{src}: {name}.margin: expected points of accuracy in (0, 100), e.g. `margin: 5`; "
                        f"got {margin!r}")
    elif margin is not None and not rule.margin:
        problems.append(f"{src}: {name}.margin: no equivalence test for {endpoint}; remove margin")
    if len(problems) > start:
        return None
    return Primary(raw["scheme"], raw["baseline"], dict(where), endpoint, None if margin is None else margin / 100,
                   dict(versus))


def as_list(declared: Primary | list[Primary] | None) -> list[Primary]:
    """The declared comparisons as a list: [] for none, [one] for a single mapping."""
    return [] if declared is None else list(declared) if isinstance(declared, list) else [declared]


def key_value(v: Any) -> Any:
    """A grid value as a dict key: 48 and 48.0 alike (as :func:`same_value` has them), a list (train.betas) a tuple."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return tuple(v) if isinstance(v, list) else v


def _cell(where: dict[str, Any]) -> tuple:
    """``where`` as a key (:func:`key_value` of each value)."""
    return tuple(sorted((k, key_value(v)) for k, v in where.items()))


def same_value(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9)
    return a == b


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)

