"""Stability across depth: per scheme x depth its frontier from one model of every run, the LR50 its runs show, and
what its not-ok runs showed (docs/statistics.md, "Stability frontier across depth")."""

from __future__ import annotations

import math
from collections import Counter
from statistics import median
from typing import Any

import pandas as pd

from suite.analysis import depthslope
from suite.engine.diagnostics import past_bounds
from suite.grouping import DEPTH, LR, ordered_groups

STREAM_GREW = "did not learn, stream grew"
OUTCOMES = ("ok", "did not learn", STREAM_GREW, "diverged")  # the phase diagram's colours, in this order
COLUMNS = ["n", "n_not_ok", "n_stream_grew", "n_not_learned", "n_diverged", "lr50_measured", "lr50_measured_censored",
           "lr50", "lr50_low", "lr50_high", "lr50_outside",
           "slope", "slope_low", "slope_high", "ok_through_lr", "first_not_ok_lr", "first_cause", "first_attn_logit", "first_stream_rms",
           "parallel_p", "linear_p", "note"]


def outcome(run: dict[str, Any]) -> str:
    """One of :data:`OUTCOMES` for a finished run."""
    if run["status"] == "ok":
        return "ok"
    if run["status"] == "diverged":
        return "diverged"
    return STREAM_GREW if "stream_rms_peak" in past_bounds(run) else "did not learn"


def measured_lr50(rates: list[float], not_ok: list[int]) -> tuple[float, str]:
    """(LR50, "") at one depth without a model, interpolated on log rate; (nan, "below"/"above") outside the rates."""
    share: dict[float, list[int]] = {}
    for lr, bad in zip(rates, not_ok):
        share.setdefault(float(lr), []).append(int(bad))
    points = [(lr, sum(v) / len(v)) for lr, v in sorted(share.items())]
    if not points:
        return math.nan, ""
    if points[0][1] >= 0.5:
        return math.nan, "below"
    for (lo, s_lo), (hi, s_hi) in zip(points, points[1:]):
        if s_hi >= 0.5:
            t = (0.5 - s_lo) / (s_hi - s_lo)
            return 10 ** (math.log10(lo) + t * (math.log10(hi) - math.log10(lo))), ""
    return math.nan, "above"


def has_line(model: depthslope.DepthFrontier | None, variant: str) -> bool:
    """Whether ``model`` places a frontier line for ``variant`` (it has a slope)."""
    return model is not None and not math.isnan(model.slopes.get(variant, depthslope.Slope()).slope)


def models(runs: list[dict[str, Any]], keys: list[str], baseline: str) -> dict[tuple, depthslope.DepthFrontier]:
    """Per section (the keys other than variant, depth and rate), the fitted model of its runs."""
    rest = [k for k in keys if k not in ("variant", LR, DEPTH)]
    done = [r for r in runs if r["status"] != "error" and r.get(LR) is not None and r.get(DEPTH) is not None]
    out = {}
    for label, members in ordered_groups(done, ["variant", *rest], baseline).items():
        out.setdefault(label[1:], []).extend(members)
    return {label: depthslope.fit([float(r[LR]) for r in m], [float(r[DEPTH]) for r in m],
                                  [str(r["variant"]) for r in m], [int(r["status"] != "ok") for r in m])
            for label, m in out.items()}


def stability_table(runs: list[dict[str, Any]], keys: list[str], baseline: str,
                    fitted: dict[tuple, depthslope.DepthFrontier] | None = None) -> pd.DataFrame | None:
    """One row per scheme x depth (x the other keys); None unless depth and rate vary (two depths or more)."""
    if DEPTH not in keys or LR not in keys:
        return None
    rest = [k for k in keys if k not in ("variant", LR, DEPTH)]
    done = [r for r in runs if r["status"] != "error" and r.get(LR) is not None and r.get(DEPTH) is not None]
    if len({float(r[DEPTH]) for r in done}) < 2:
        return None
    fitted = models(done, keys, baseline) if fitted is None else fitted
    rows = []
    for label, members in ordered_groups(done, ["variant", *rest, DEPTH], baseline).items():
        variant, depth = label[0], float(label[-1])
        model = fitted[tuple(label[1:-1])]
        bad = [r for r in members if r["status"] != "ok"]
        counts = Counter(outcome(r) for r in members)
        row = dict(zip(["variant", *rest, DEPTH], label), n=len(members), n_not_ok=len(bad),
                   n_stream_grew=counts[STREAM_GREW], n_not_learned=counts["did not learn"], n_diverged=counts["diverged"],
                   parallel_p=model.parallel_p, linear_p=model.linear_p, note=model.note)
        slope = model.slopes.get(variant, depthslope.Slope(note="no line: run at one depth or one rate"))
        row.update(slope=slope.slope, slope_low=slope.low, slope_high=slope.high, note=model.note or slope.note)
        lr50 = model.lr50(variant, [depth]) if not math.isnan(slope.slope) else ([math.nan],) * 3
        row.update(lr50=float(lr50[0][0]), lr50_low=float(lr50[1][0]), lr50_high=float(lr50[2][0]))
        rates = [float(r[LR]) for r in members]  # the model's LR50 past them is the line's extrapolation
        row.update(lr50_outside="below" if row["lr50"] < min(rates) else "above" if row["lr50"] > max(rates) else "")
        measured, censored = measured_lr50([float(r[LR]) for r in members], [int(r["status"] != "ok") for r in members])
        row.update(lr50_measured=measured, lr50_measured_censored=censored)
        first = min((float(r[LR]) for r in bad), default=math.nan)
        below = [float(r[LR]) for r in members if math.isnan(first) or float(r[LR]) < first]
        row.update(ok_through_lr=max(below, default=math.nan))
        there = [r for r in bad if float(r[LR]) == first]
        peaks = [float(r["attn_logit_peak"]) for r in there if isinstance(r.get("attn_logit_peak"), (int, float))]
        streams = [float(r["stream_rms_peak"]) for r in there if isinstance(r.get("stream_rms_peak"), (int, float))]
        row.update(first_not_ok_lr=first,
                   first_cause=Counter(outcome(r) for r in there).most_common(1)[0][0] if there else "",
                   first_attn_logit=median(peaks) if peaks else math.nan,
                   first_stream_rms=median(streams) if streams else math.nan)
        rows.append(row)
    return pd.DataFrame(rows, columns=["variant", *rest, DEPTH, *COLUMNS])
