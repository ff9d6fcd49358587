"""Why a run broke: each instability diagnostic's extreme over the train records of ``metrics.jsonl`` and its step,
and which passed their bound (:data:`BOUNDS`). Fields and bounds: docs/training.md ("Why a run broke")."""

from __future__ import annotations

import math
from typing import Any

ATTN_LOGIT_BOUND = 30.0
# The stream RMS above which a run's stream has grown: between the stability study's ok and not-ok runs
# (results/stability/tables/diagnostics.csv); fixed on 2026-12-06, before the frontier study's analysis.
STREAM_RMS_BOUND = 100.0
# summary field -> (record field, per-block or per-record, max or min)
PEAKS = {
    "attn_logit_peak": ("attn_logit_max", True, max),
    "attn_entropy_low": ("attn_entropy_min", True, min),
    "stream_rms_peak": ("out_rms", True, max),
    "logit_rms_peak": ("logit_rms", False, max),
    "update_ratio_peak": ("update_ratio", False, max),
}


def peaks(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Each diagnostic's extreme (``<field>``) and first step (``<field>_step``); None if no value is finite."""
    out: dict[str, Any] = {}
    for name, (key, per_block, pick) in PEAKS.items():
        best, at = None, None
        for rec in records:
            if rec.get("kind") != "train" or not _number(rec.get("step")):
                continue
            values = [b.get(key) for b in rec.get("blocks") or [] if isinstance(b, dict)] if per_block else [rec.get(key)]
            values = [float(v) for v in values if _number(v) and math.isfinite(v)]
            if not values:
                continue
            here = pick(values)
            if best is None or (here > best if pick is max else here < best):  # strictly: the first step it is reached
                best, at = here, int(rec["step"])
        out[name], out[f"{name}_step"] = best, at
    out["stream_growth_peak"], out["stream_growth_peak_step"] = stream_growth(records)
    return out


def stream_growth(records: list[dict[str, Any]]) -> tuple[float | None, int | None]:
    """The largest ratio of a block's output RMS to its own at step 0 (per block: init sizes differ by scheme), and
    its step; ``(None, None)`` without two such records."""
    base: list[float] | None = None
    best, at = None, None
    for rec in records:
        if rec.get("kind") != "train" or not _number(rec.get("step")):
            continue
        sizes = [b.get("out_rms") if isinstance(b, dict) else None for b in rec.get("blocks") or []]
        if base is None:
            if sizes and all(_number(v) and math.isfinite(v) and v > 0 for v in sizes):
                base = [float(v) for v in sizes]
            continue
        ratios = [float(v) / b for v, b in zip(sizes, base) if _number(v) and math.isfinite(v)]
        if ratios and (best is None or max(ratios) > best):
            best, at = max(ratios), int(rec["step"])
    return best, at


# summary field -> its bound: the diagnostics whose crossing a summary lists in ``crossed``
BOUNDS = {"stream_rms_peak": STREAM_RMS_BOUND, "attn_logit_peak": ATTN_LOGIT_BOUND}


def past_bounds(found: dict[str, Any]) -> list[str]:
    """The diagnostics of :data:`BOUNDS` past their bound in ``found`` (a summary or :func:`peaks`)."""
    return [key for key, bound in BOUNDS.items() if _number(found.get(key)) and found[key] > bound]


def crossed(found: dict[str, Any]) -> str:
    """:func:`past_bounds`, comma-separated ("" for none): a summary's CSV cell."""
    return ",".join(past_bounds(found))


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)
