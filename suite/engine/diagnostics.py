"""Why a run broke: the peaks of its instability diagnostics, from the train records of ``metrics.jsonl``.

At each log step the probes record, per block, the largest |pre-softmax attention logit| and the lowest
attention entropy (:func:`suite.engine.probes.attention_stats`) and the residual stream's RMS after the
block (``out_rms``), and from it the stream's largest growth over its size at init (:func:`stream_growth`,
per block, the largest kept); the train record adds the output logits' RMS and the update-to-weight ratio of the
step's optimizer update. :func:`peaks` keeps, for the summary, each one's extreme over the run and the step
it was reached, so a table can say *why* a run is not ok, not only that it is (docs/training.md,
"Why a run broke").

``crossed``: which diagnostics passed their bound (:data:`BOUNDS`): the residual stream's RMS past
:data:`STREAM_RMS_BOUND` (the diagnostic that separates the runs that break, tables/diagnostics.csv of the
committed studies) and the largest attention logit past :data:`ATTN_LOGIT_BOUND` (Wortsman et al. 2023 trace
small-model instabilities to attention-logit growth; on this suite's runs healthy LayerScale runs pass it too).
Until 2026-12-06 a failed run whose logit passed the bound was recorded as ``failed_reason: unstable``; its runs
keep that word, which the analysis reads as "did not learn, logits past 30". Pure functions of the records.
"""

from __future__ import annotations

import math
from typing import Any

ATTN_LOGIT_BOUND = 30.0
# The residual stream's RMS above which a run's stream is said to have grown: between the stability study's
# ok and not-ok runs (results/stability/tables/diagnostics.csv); fixed on 2026-12-06 before the frontier
# study's analysis.
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
    """Each diagnostic's extreme over the train records and the step it was first reached
    (``<field>`` and ``<field>_step``; None where no record has a finite value)."""
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
    """The residual stream's largest growth from init: over the logged steps and the blocks, the largest
    ratio of a block's output RMS to the same block's at the first train record (step 0, before any update),
    and the step it was first reached; ``(None, None)`` without two such records. The stream's size at init
    differs by scheme and depth (a LayerScale block adds almost nothing at init); this ratio is what the
    training did to it."""
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
    """The diagnostics of :data:`BOUNDS` whose value in ``found`` (a summary, or :func:`peaks`) passed their
    bound, in that order: the one rule the summary, the analysis's words and its sensitivity use."""
    return [key for key, bound in BOUNDS.items() if _number(found.get(key)) and found[key] > bound]


def crossed(found: dict[str, Any]) -> str:
    """:func:`past_bounds`, comma-separated ("" for none): what a summary records beside its status, so its
    words say what was observed and the fields what crossed (a CSV cell, hence a string)."""
    return ",".join(past_bounds(found))


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)
