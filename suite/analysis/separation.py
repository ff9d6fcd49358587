"""Which diagnostic separates the not-ok runs from the ok ones: per scheme and peak diagnostic, the AUC (1 = every
failure told from every success, 0.5 = nothing). Exploratory, no test."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from suite.store import DIAGNOSTIC_PEAKS

LOW_IS_BAD = {"attn_entropy_low"}  # attention entropy collapses in a failing run; every other peak grows
COLUMNS = ["variant", "diagnostic", "n_ok", "n_not_ok", "auc", "median_ok", "median_not_ok"]


def auc(bad: list[float], good: list[float], low_is_bad: bool = False) -> float:
    """P(a bad run's value is further on the bad side than a good run's), ties half; nan without both."""
    from scipy.stats import mannwhitneyu

    if not bad or not good:
        return math.nan
    sign = -1.0 if low_is_bad else 1.0
    u = mannwhitneyu(sign * np.asarray(bad, float), sign * np.asarray(good, float)).statistic  # ties count half
    return float(u / (len(bad) * len(good)))


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
                rows.append({"variant": variant, "diagnostic": key, "n_ok": len(good), "n_not_ok": len(bad),
                             "auc": auc(bad, good, key in LOW_IS_BAD), "median_ok": float(np.median(good)),
                             "median_not_ok": float(np.median(bad))})
    return pd.DataFrame(rows, columns=COLUMNS) if rows else None


def separation_lines(frame: pd.DataFrame | None) -> list[str]:
    """``## What separates the runs that were not ok``: per scheme, its diagnostics by AUC, best first."""
    if frame is None or frame.empty:
        return []
    lines = ["## What separates the runs that were not ok", "",
             "Per scheme, how well each diagnostic alone tells its not-ok runs from its ok runs: the AUC (1 = every "
             "not-ok run lies beyond every ok run, 0.5 = no better than chance), with the medians of ok and not-ok "
             "runs. The cause the runs support is the diagnostic that separates them. Exploratory; table: "
             "tables/diagnostics.csv.", ""]
    for variant, part in frame.groupby("variant", sort=False):
        ranked = part.sort_values("auc", ascending=False)
        said = "; ".join(f"{d} {a:.2f} (median {mo:.3g} ok, {mn:.3g} not ok)" for d, a, mo, mn in
                         zip(ranked["diagnostic"], ranked["auc"], ranked["median_ok"], ranked["median_not_ok"]))
        first = part.iloc[0]
        lines.append(f"- **{' '.join(str(variant).split())}** ({int(first['n_not_ok'])} not ok of "
                     f"{int(first['n_ok'] + first['n_not_ok'])}): {said}.")
    return lines + [""]


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
