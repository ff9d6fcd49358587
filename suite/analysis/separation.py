"""Which diagnostic separates the not-ok runs from the ok ones: per scheme and peak diagnostic, the AUC read in the
direction the not-ok runs lie (1 = every failure told from every success, 0.5 = nothing). Exploratory, no test, and an
association: a diagnostic can move because a run fails, and the learning rate moves most of them."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from suite.analysis.markup import md
from suite.store import DIAGNOSTIC_PEAKS

COLUMNS = ["variant", "diagnostic", "n_ok", "n_not_ok", "auc", "not_ok_side", "median_ok", "median_not_ok"]


def auc(bad: list[float], good: list[float]) -> float:
    """P(a bad run's value exceeds a good run's), ties half; nan without both."""
    from scipy.stats import mannwhitneyu

    if not bad or not good:
        return math.nan
    u = mannwhitneyu(np.asarray(bad, float), np.asarray(good, float)).statistic  # ties count half
    return float(u / (len(bad) * len(good)))


def oriented(a: float) -> tuple[float, str]:
    """An AUC read in the direction the bad runs lie: (max(a, 1 - a), ``higher`` / ``lower`` / ``neither``).

    Which way a diagnostic moves in a failing run is not fixed beforehand: entropy and the output logits fall in
    the committed studies' failures while the stream grows, and a fixed direction ranks such a perfect separator
    last."""
    if math.isnan(a):
        return a, ""
    return max(a, 1.0 - a), "higher" if a > 0.5 else "lower" if a < 0.5 else "neither"


def separation_frame(runs: list[dict[str, Any]]) -> pd.DataFrame | None:
    """One row per scheme (then ``all``) and diagnostic; None when no scheme has both ok and not-ok runs to separate."""
    judged = [r for r in runs if r.get("status") in ("ok", "failed", "diverged")]
    schemes = sorted({str(r.get("variant")) for r in judged})
    rows = []
    for variant in [*schemes, "all"] if len(schemes) > 1 else schemes:
        mine = judged if variant == "all" else [r for r in judged if str(r.get("variant")) == variant]
        for key in DIAGNOSTIC_PEAKS:
            good = [float(r[key]) for r in mine if r["status"] == "ok" and _finite(r.get(key))]
            bad = [float(r[key]) for r in mine if r["status"] != "ok" and _finite(r.get(key))]
            if good and bad:
                area, side = oriented(auc(bad, good))
                rows.append({"variant": variant, "diagnostic": key, "n_ok": len(good), "n_not_ok": len(bad),
                             "auc": area, "not_ok_side": side, "median_ok": float(np.median(good)),
                             "median_not_ok": float(np.median(bad))})
    return pd.DataFrame(rows, columns=COLUMNS) if rows else None


def separation_lines(frame: pd.DataFrame | None) -> list[str]:
    """``## What separates the runs that were not ok``: per scheme, its diagnostics by AUC, best first."""
    if frame is None or frame.empty:
        return []
    lines = ["## What separates the runs that were not ok", "",
             "Per scheme, how well each diagnostic alone tells its not-ok runs from its ok runs: the AUC, read in "
             "the direction the not-ok runs lie, higher or lower (1 = every not-ok run lies beyond every ok run, 0.5 "
             "= no better than chance), with the medians of ok and not-ok runs. An association, not a cause: a "
             "diagnostic can move because a run is failing (output logits that shrink, attention that collapses), "
             "and the learning rate moves most of them; a cause is tested by an intervention, an arm of a study. "
             "Exploratory; table: tables/diagnostics.csv.", ""]
    for variant, part in frame.groupby("variant", sort=False):
        ranked = part.sort_values("auc", ascending=False, kind="stable")
        counts = [f"{int(bad)} not ok of {int(good + bad)}" for good, bad in zip(ranked["n_ok"], ranked["n_not_ok"])]
        shared = len(set(counts)) == 1  # every diagnostic measured on the same runs: counted once, after the scheme
        columns = zip(ranked["diagnostic"], ranked["auc"], ranked["not_ok_side"], ranked["median_ok"],
                      ranked["median_not_ok"], counts)
        said = "; ".join(f"{md(d)} {a:.2f}, {side} when not ok (median {mo:.3g} ok, {mn:.3g} not ok"
                         + ("" if shared else f"; {count}") + ")" for d, a, side, mo, mn, count in columns)
        lines.append(f"- **{md(variant)}**" + (f" ({counts[0]})" if shared else "") + f": {said}.")
    return lines + [""]


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
