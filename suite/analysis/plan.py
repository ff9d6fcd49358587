"""``suite plan DIR``: the seeds each comparison needs, planned with the observed SD and its 80% upper limit, not
observed power (docs/statistics.md, "Planning seeds")."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from suite.analysis import coprimary, primary, stats
from suite.analysis.endpoints import Answer, endpoint
from suite.analysis.endpoints.score import crossfit_plan, paired_plan
from suite.analysis.markup import md
from suite.declared import ALPHA, ENDPOINTS
from suite.grouping import DEPTH, LR, choose_baseline, group_keys
from suite.results import run_records
from suite.analysis.lr import lr_table
from suite.analysis.markup import fmt_value
from suite.analysis.summary import summarize

COLUMNS = ["comparison", "endpoint", "role", "alpha", "pairs", "sd", "planning_sd", "effect", "seeds_needed_point",
           "seeds_needed", "min_p", "note"]


def _where(row: pd.Series, keys: list[str]) -> str:
    return ", ".join(f"{'depth' if k == DEPTH else k} {fmt_value(row[k])}" for k in keys if k != "variant")


def _row(comparison: str, endpoint_: str, role: str, alpha: float, pairs: int, sd: float, effect: float,
         power: float, plan=paired_plan) -> dict[str, Any]:
    """A score comparison's row (:mod:`suite.analysis.endpoints.score`): ``plan`` the paired t's, or the cross-fitted
    test's (:func:`~suite.analysis.endpoints.score.crossfit_plan`) for a best-rate score."""
    return {"comparison": comparison, "endpoint": endpoint_, "role": role, "alpha": alpha,
            **plan(pairs, sd, effect, power, alpha)}


def _primary_row(answer: Answer, effect: float, power: float) -> dict[str, Any]:
    """A declared comparison's row: tested alone at 0.05, or planned at 0.05 / m in a Holm family of m."""
    declared, m = answer.primary, answer.family
    role = "primary" if m == 1 else f"co-primary (Holm, {m} tests)"
    return {"comparison": declared.describe(), "endpoint": declared.endpoint, "role": role, "alpha": ALPHA / m,
            **endpoint(declared.endpoint).plan_row(answer, effect, power, ALPHA / m)}


def plan_table(root: str | Path, effect: float = 0.05, power: float = 0.8, baseline: str | None = None) -> pd.DataFrame:
    """One row per comparison: the seeds needed to detect ``effect`` (0.05 = 5 points; or a declared margin)."""
    runs = run_records(Path(root), from_csv=True)  # a folder shared as runs.csv alone plans too
    base = choose_baseline(runs, baseline)
    keys = group_keys(runs)
    declared = primary.read(root)
    answers = coprimary.evaluate_all(runs, declared) if declared is not None else []
    rows = [_primary_row(answer, effect, power) for answer in answers]
    lr = lr_table(runs, keys, base)
    if lr is not None:
        rest = [k for k in keys if k != LR]
        for _, r in lr[~lr["is_baseline"] & lr["has_baseline"]].iterrows():
            m = max(int(r["test_p_m"]), 1)
            rows.append(_row(f"{r['variant']} vs {base}, {_where(r, rest)}", "best_lr_score", "exploratory",
                             0.05 / m, int(r["test_pairs"]), r["test_diff_sd"], effect, power, crossfit_plan))
    summary = summarize(runs, keys, base)
    for _, r in summary[~summary["is_baseline"] & summary["has_baseline"]].iterrows():
        m = max(int(r["acc_p_m"]), 1)
        where = f"{r['variant']} vs {base}, {_where(r, keys)}"
        rows.append(_row(where, "score", "exploratory", 0.05 / m, int(r["acc_pairs"]), r["acc_diff_sd"], effect, power))
        b = summary[(summary["variant"] == base) & (summary[[k for k in keys if k != "variant"]]
                                                      == r[[k for k in keys if k != "variant"]]).all(axis=1)].iloc[0]
        m_rate = max(int(r["not_ok_p_m"]), 1)
        rate_a, rate_b = r["not_ok_rate"], b["not_ok_rate"]
        need = stats.fisher_seeds_needed(rate_a, rate_b, power, 0.05 / m_rate) if rate_a != rate_b else math.nan
        rows.append({"comparison": where, "endpoint": "not_ok_rate", "role": "exploratory", "alpha": 0.05 / m_rate,
                     "pairs": int(min(r["n"], b["n"])), "sd": math.nan, "planning_sd": math.nan, "effect": math.nan,
                     "seeds_needed_point": math.nan, "seeds_needed": need,
                     "min_p": stats.fisher_min_p(int(r["n"]), int(b["n"])),
                     "note": (f"observed not ok {r['n_not_ok']}/{r['n']} vs {b['n_not_ok']}/{b['n']}"
                              + ("; equal rates: nothing to detect" if rate_a == rate_b else ""))})
    return pd.DataFrame(rows, columns=COLUMNS)


def render(frame: pd.DataFrame, power: float) -> str:
    """The plan as a Markdown table with a one-paragraph key."""
    def num(x: float, spec: str) -> str:
        return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else (
            "> 10,000" if math.isinf(x) else format(x, spec))

    def effect(r: pd.Series) -> str:  # what each row's seeds would detect; the not-ok rows (no endpoint): the rates
        if r["endpoint"] not in ENDPOINTS:
            return "the rates seen"
        return endpoint(r["endpoint"]).effect_words() or num(100 * r["effect"], ".3g") + " points"

    lines = ["| comparison | endpoint | role | effect | alpha | pairs now | sd | 80% upper sd | seeds (point sd) | "
             "seeds (upper sd) | min p now | note |",
             "|:--|:--|:--|:--|--:|--:|--:|--:|--:|--:|--:|:--|"]
    for _, r in frame.iterrows():
        lines.append(f"| {md(r['comparison'])} | {r['endpoint']} | {r['role']} | {effect(r)} | {r['alpha']:.4f} | {r['pairs']} | "
                     f"{num(100 * r['sd'], '.1f')} | {num(100 * r['planning_sd'], '.1f')} | "
                     f"{num(r['seeds_needed_point'], '.0f')} | {num(r['seeds_needed'], '.0f')} | "
                     f"{num(r['min_p'], '.3f')} | {md(r['note'])} |")
    lines += ["", f"Seeds needed: per scheme, for a two-sided paired t-test at the row's alpha to detect the row's effect "
              f"(`--effect`, or a declared margin) "
              f"with {int(100 * power)}% power (noncentral t), planned with the observed SD of seed-matched "
              f"differences (points) and, to hold with 80% confidence, with its 80% upper confidence limit: the "
              f"point SD is too small about half the time, the upper limit from few pairs is far above it (3.9x "
              f"at 2 pairs, 1.7x at 4), and the truth usually lies between; for not_ok_rate rows, Fisher's exact "
              f"test telling the observed rates apart (exact enumeration). min p now: the smallest p Fisher's test "
              f"can reach with the runs there; above alpha, no rate difference can show however large."]
    return "\n".join(lines)
