"""How a declared frontier-slope verdict depends on what counts as "not ok": the declared ``frontier_slope``
comparisons refitted and decided under Holm for each of :data:`DEFINITIONS` (exploratory)."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import pandas as pd

from suite.analysis.assurance import holm_decided
from suite.analysis.endpoints import endpoint
from suite.analysis.endpoints.failure import FrontierSlope
from suite.analysis.markup import md
from suite.engine.diagnostics import ATTN_LOGIT_BOUND, STREAM_RMS_BOUND, past_bounds
from suite.declared import same_value
from suite.grouping import DEPTH, LR

COLUMNS = ["definition", "meaning", "comparison", "n_not_ok", "n", "estimate", "low", "high", "p", "decided", "note"]


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def _held_out(run: dict[str, Any]) -> float:
    """The final accuracy the run's status was judged on (validation, or test without a validation split)."""
    return _number(run.get("test_acc") if run.get("judged_on") == "test" else run.get("val_acc"))


def _floor(floor: float) -> Callable[[dict[str, Any]], bool]:
    return lambda r: r["status"] == "diverged" or not _held_out(r) >= floor


# name -> (what it counts as not ok, the rule); the first is the declared one
DEFINITIONS: dict[str, tuple[str, Callable[[dict[str, Any]], bool]]] = {
    "as declared": ("the status: diverged, or failed the held-out test or the floor (20% on MNIST-5k)",
                    lambda r: r["status"] != "ok"),
    "floor 15%": ("diverged, or final held-out accuracy under 15%", _floor(0.15)),
    "floor 25%": ("diverged, or final held-out accuracy under 25%", _floor(0.25)),
    "stream": (f"not ok as declared, or the residual stream's RMS peaked above {STREAM_RMS_BOUND:g}",
               lambda r: r["status"] != "ok" or "stream_rms_peak" in past_bounds(r)),
    "logit": (f"not ok as declared, or the largest attention logit passed {ATTN_LOGIT_BOUND:g}",
              lambda r: r["status"] != "ok" or "attn_logit_peak" in past_bounds(r)),
}


def sensitivity_frame(runs: list[dict[str, Any]], declared: Any, answers: list | None = None,
                      alpha: float = 0.05) -> pd.DataFrame | None:
    """One row per definition x declared ``frontier_slope`` comparison (:data:`COLUMNS`); None when there is none.
    ``answers``: the declared analysis's (computed here when not given)."""
    from suite.analysis import depthslope

    declared = [p for p in (declared if isinstance(declared, list) else [declared] if declared else [])]
    slopes = [p for p in declared if isinstance(endpoint(p.endpoint), FrontierSlope)]
    if not slopes:
        return None
    fixed = _rest_of_family(runs, declared, slopes, answers)
    rows = []
    for name, (meaning, not_ok) in DEFINITIONS.items():
        found = []
        for p in slopes:
            mine = [r for r in runs if r["status"] != "error" and r.get(LR) is not None and r.get(DEPTH) is not None
                    and all(same_value(r.get(k), v) for k, v in p.where.items())]
            bad = [int(not_ok(r)) for r in mine]
            fit = depthslope.difference([float(r[LR]) for r in mine], [float(r[DEPTH]) for r in mine],
                                        [str(r["variant"]) for r in mine], bad, p.scheme, p.baseline, alpha)
            found.append((p, sum(bad), len(mine), fit))
        refit = [f.p for *_, f in found]
        decided = holm_decided(np.array([[x if math.isfinite(x) else 1.0 for x in refit + fixed]]), alpha)[0]
        for (p, n_bad, n, fit), yes in zip(found, decided):
            rows.append({"definition": name, "meaning": meaning, "comparison": p.describe(), "n_not_ok": n_bad,
                         "n": n, "estimate": fit.estimate, "low": fit.low, "high": fit.high, "p": fit.p,
                         "decided": bool(yes), "note": fit.note})
    return pd.DataFrame(rows, columns=COLUMNS)


def _rest_of_family(runs: list[dict[str, Any]], declared: list, slopes: list, answers: list | None) -> list[float]:
    """The p-values of the declared family's other tests (every other comparison's difference test and each margin's
    TOST), held at their declared values: the slopes refitted are decided under Holm in the family the verdict is."""
    from suite.analysis.coprimary import evaluate_all

    out = []
    for p, answer in zip(declared, answers if answers is not None else evaluate_all(runs, declared)):
        if p not in slopes:
            out.append(answer.p)
        if p.margin is not None:
            out.append(answer.tost_p)
    return out


def sensitivity_lines(frame: pd.DataFrame | None) -> list[str]:
    """``## How the verdict depends on the definition of not ok``: each definition's verdicts."""
    if frame is None or frame.empty:
        return []
    lines = ["## How the verdict depends on the definition of not ok", "",
             "Each declared frontier-slope comparison refitted with another definition of a run that is not ok: "
             "the difference of slopes with its 95% profile-likelihood interval and p, decided under Holm in the "
             "declared family (its other tests held at their declared p; the answer above gives the interval at the "
             "level of its Holm step). Only the first definition is the declared one; the "
             "others show whether the verdict is about the runs or about where the line was drawn. Exploratory; "
             "table: tables/sensitivity.csv.", ""]
    for name, part in frame.groupby("definition", sort=False):
        counts = [f"{int(k)} of {int(n)} not ok" for k, n in zip(part["n_not_ok"], part["n"])]
        shared = len(set(counts)) == 1  # the comparisons' cells hold the same runs: counted once, in the heading
        said = "; ".join(
            (md(c) if shared else f"{md(c)} ({count})") + (
                f": {e:+.2f} [{lo:+.2f}, {hi:+.2f}], p = {p:.3g}, {'decided' if d else 'undecided'}"
                if math.isfinite(e) else f": not fitted ({md(n or 'no estimate')})")
            for c, count, e, lo, hi, p, d, n in zip(part["comparison"], counts, part["estimate"], part["low"],
                                                    part["high"], part["p"], part["decided"], part["note"]))
        meaning = md(part.iloc[0]["meaning"]) + (f"; {counts[0]}" if shared else "")
        lines.append(f"- **{md(name)}** ({meaning}): {said}.")
    return lines + [""]
