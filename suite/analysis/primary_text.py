"""The declared comparisons' answers in plain words: the opening of ``findings.md``.

One comparison tested alone: one paragraph, ``**Primary comparison** (... tested alone ...)``. A family
of co-primary comparisons (:mod:`suite.analysis.coprimary`): one paragraph saying they are tested as
one family with Holm (``**Primary comparisons** ...``), then a numbered list, one answer per comparison, each with its p and its Holm-adjusted p,
and its interval at the level of the Holm step that decided it. Pure functions of
:class:`~suite.analysis.primary.Answer`.
"""

from __future__ import annotations

import math

from suite.analysis import crossfit
from suite.analysis.markup import fmt_rate, fmt_value
from suite.analysis.primary import Answer
from suite.declared import ALPHA, POWER

WHAT = {
    "best_lr_score": "each at its own best learning rate (chosen on validation, cross-fitted over halves of the "
                     "seeds), scored on test",
    "score": "scored on test",
    "interaction": "scored on test: the scheme's gain over the baseline in one cell against the same gain in the "
                   "other, seed by seed (a paired t on each seed's difference of differences)",
    "not_ok_rate": "the share of runs that diverged or failed",
    "frontier": "the learning rate where half of the runs end not ok (LR50), as the ratio scheme / baseline "
                "(one Firth logistic model of not ok on log10(rate) with a common slope)",
    "frontier_slope": "how the learning rate where half of the runs end not ok (LR50) moves with depth: the "
                      "difference of the two schemes' slopes of log LR50 on log depth (one Firth logistic model of "
                      "not ok on log rate and log depth, every scheme's runs, a frontier line per scheme)",
}


def opening(answers: list[Answer]) -> str:
    """The first block of ``findings.md``: a paragraph for one answer, a header and a list for several."""
    if len(answers) == 1 and answers[0].family == 1:
        a = answers[0]
        return (f"**Primary comparison** (declared in ablation.yaml, tested alone at alpha = {ALPHA}): "
                f"{a.primary.describe()}, {WHAT[a.primary.endpoint]}. {verdict(a)}")
    m = answers[0].family
    head = (f"**Primary comparisons** (declared in ablation.yaml): {len(answers)} comparisons tested as one "
            f"family of {m} hypotheses (a difference test each, and an equivalence test for each with a margin), "
            f"Holm's step-down correction at alpha = {ALPHA}; each p is shown with its Holm-adjusted p, each "
            f"interval at the level of the Holm step that decided it. The intervals are not simultaneous: each "
            f"holds at its own level, and together they cover the true values less often than the least of them.")
    items = [f"{i}. {a.primary.describe()}, {WHAT[a.primary.endpoint]}: {verdict(a)}"
             for i, a in enumerate(answers, 1)]
    return head + "\n\n" + "\n".join(items)  # a blank line: every Markdown renders the list as one


def _pts(x: float) -> str:
    return f"{100 * x:+.1f}"


def _p(p: float) -> str:
    return "no test" if math.isnan(p) else "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def _ps(p: float, adjusted: float, family: int) -> str:
    """``p = 0.004`` alone; ``p = 0.004, Holm-adjusted p = 0.012`` in a family."""
    if family == 1 or math.isnan(p):
        return _p(p)
    return f"{_p(p)}, Holm-adjusted {_p(adjusted)}"


def _level(a: Answer) -> str:
    return f"{100 * a.level:.3g}%"


def _x(r: float) -> str:
    """A ratio of learning rates: 2.7x; an open end: 0 or unbounded."""
    return "unbounded" if math.isinf(r) else "0" if r == 0 else f"{r:.2g}"


def verdict(a: Answer) -> str:
    """The answer of one comparison: its verdict in bold, then the numbers behind it."""
    if a.note and math.isnan(a.estimate) and math.isnan(a.low):
        return f"**Not tested**: {a.note}."
    if a.primary.endpoint == "not_ok_rate":
        return _rate_text(a)
    if a.primary.endpoint == "frontier":
        return _frontier_text(a)
    if a.primary.endpoint == "frontier_slope":
        return _slope_text(a)
    return _score_text(a)


def _rate_text(a: Answer) -> str:
    pr = a.primary
    ka, na, kb, nb = a.counts
    body = f"Not ok {ka}/{na} vs {kb}/{nb} ({_pts(a.estimate)} points; {a.test}, {_ps(a.p, a.p_adj, a.family)})."
    if a.decision == "difference":
        return f"**{pr.scheme} ends not ok {'more' if a.estimate > 0 else 'less'} often than {pr.baseline}.** {body}"
    reach = (f" With {na} vs {nb} runs this test cannot reach p < {ALPHA} at all (its smallest p is "
             f"{a.min_p:.3f}): add seeds." if a.min_p >= ALPHA else "")
    return f"**Undecided.** {body}{reach}"


def _own(lr50: float, edge: str) -> str:
    return f"{edge} the rates tested" if edge else "not estimable" if math.isnan(lr50) else fmt_rate(lr50)


def _frontier_text(a: Answer) -> str:
    pr = a.primary
    ka, na, kb, nb = a.counts
    ratio = "not estimable (the likelihood rises to a ratio of 10^6)" if math.isnan(a.estimate) else _x(a.estimate)
    body = (f"LR50 ratio {ratio} ({_level(a)} profile-likelihood CI [{_x(a.low)}, {_x(a.high)}]; {a.test}, "
            f"{_ps(a.p, a.p_adj, a.family)}); each side's own LR50: {pr.scheme} {_own(a.lr50[0], a.lr50_edge[0])}, "
            f"{pr.baseline} {_own(a.lr50[1], a.lr50_edge[1])}; not ok {ka}/{na} vs {kb}/{nb} runs.")
    side = {"high": "above", "low": "below", "both": "at both ends"}.get(a.censored)
    open_ = (f" The interval is open {side}: the runs do not reach far enough past a frontier to bound it; "
             f"extend the grid until both schemes end not ok at their highest rates." if side else "")
    open_ += f" Note: {a.note}." if a.note else ""
    if a.decision == "difference":
        if a.estimate > 1 or (math.isnan(a.estimate) and a.low > 1):
            how = f"at least {_x(a.low)}x" if a.censored in ("high", "both") else f"{_x(a.estimate)}x"
            head = f"**{pr.scheme} tolerates {how} {pr.baseline}'s learning rate.**"
        else:
            how = f"at most {_x(a.high)}x" if a.censored in ("low", "both") else f"only {_x(a.estimate)}x"
            head = f"**{pr.scheme} tolerates {how} {pr.baseline}'s learning rate.**"
        return f"{head} {body}{open_}"
    need = _scaled_need(a, f"a ratio of {a.effect:g}", "rate and scheme")
    if not need and side:
        need = " No number of seeds can be planned from an interval open at one end."
    return f"**Undecided**: the interval includes 1.{need} {body}{open_}"


def _slope(x: float) -> str:
    return "unbounded" if math.isinf(x) else f"{x:+.2f}"


def _own_slope(name: str, s) -> str:
    if s.note or not math.isfinite(s.slope):
        return f"{name} {s.note or 'not estimable'}"
    return f"{name} {_slope(s.slope)} [{_slope(s.low)}, {_slope(s.high)}]"


def _slope_text(a: Answer) -> str:
    pr = a.primary
    ka, na, kb, nb = a.counts
    own = "; ".join(_own_slope(n, s) for n, s in zip((pr.scheme, pr.baseline), a.slopes))
    checks = ""
    if a.checks and math.isfinite(a.checks[0]):
        checks = (f" Checks of the model (Wald): parallel curves over rate p = {a.checks[0]:.2f}"
                  + (f", a straight frontier in log depth p = {a.checks[1]:.2f}" if math.isfinite(a.checks[1]) else "")
                  + " (a small p says the model misfits).")
    body = (f"Slope of log LR50 on log depth (0: the stable range does not move with depth; -1: it halves when the "
            f"depth doubles): {own}; difference {_slope(a.estimate)} ({_level(a)} profile-likelihood CI "
            f"[{_slope(a.low)}, {_slope(a.high)}]; {a.test}, {_ps(a.p, a.p_adj, a.family)}); not ok {ka}/{na} vs "
            f"{kb}/{nb} runs.{checks}")
    note = f" Note: {a.note}." if a.note else ""
    if a.decision == "difference":
        how = "more slowly" if a.estimate > 0 else "faster"
        return f"**{pr.scheme}'s frontier falls {how} with depth than {pr.baseline}'s.** {body}{note}"
    need = _scaled_need(a, f"a difference of {a.effect:g} in slope", "rate, depth and scheme")
    need += (" The chance that a rerun decides it, by seeds, simulated on this study's own grid: "
             "`python scripts/stability_power.py FOLDER > FOLDER/power.md`.")
    return f"**Undecided**: the interval includes 0.{need} {body}{note}"


def _scaled_need(a: Answer, effect: str, per: str) -> str:
    """The seeds that would detect ``effect``, planned from the interval's width ("" when none is planned)."""
    if not math.isfinite(a.seeds_needed):
        return ""
    at = f" at alpha = {ALPHA / a.family:.3g} (Holm's first step)" if a.family > 1 else ""
    return (f" To detect {effect} with {int(100 * POWER)}% power{at}, about {int(a.seeds_needed)} seeds per {per} "
            f"are needed (now {a.seeds}; approximate, from the interval's width).")


def _score_text(a: Answer) -> str:
    pr = a.primary
    design = ""
    if a.look >= 0:
        design = (f" Group-sequential design (O'Brien-Fleming-type alpha spending, Lan-DeMets) with looks planned "
                  f"at {', '.join(map(str, a.rounds))} seeds, each look tested at the seed pairs it reached (of "
                  f"{a.rounds[-1]}); this is look {a.look + 1}: the p-value (stage-wise ordering) and the repeated "
                  f"confidence interval account for every look.")
    level = "95% repeated CI" if a.look >= 0 else f"{_level(a)} CI"
    rates = ""
    if pr.endpoint == "best_lr_score":
        edge = [f"{name}'s best rate ({fmt_value(lr)}) is the {e} tested, so a better one may lie outside the grid"
                for name, lr, e in ((pr.scheme, a.scheme_lr, a.scheme_edge), (pr.baseline, a.base_lr, a.base_edge))
                if e]
        halves = ""
        if all(math.isfinite(x) for x in (*a.scheme_lrs, *a.base_lrs)):
            halves = (f"; each half of the seeds was scored at the rate the other half chose: "
                      f"{' / '.join(fmt_value(x) for x in a.scheme_lrs)} vs {' / '.join(fmt_value(x) for x in a.base_lrs)}")
        rates = (f" Best rates on all seeds: {fmt_value(a.scheme_lr)} vs {fmt_value(a.base_lr)}{halves}"
                 + (f"; {'; '.join(edge)}" if edge else "") + "." + (f" {a.selection}" if a.selection else ""))
    interval = f"{level} [{_pts(a.low)}, {_pts(a.high)}]" if math.isfinite(a.low) else "no interval"
    means = (f"gain {_pts(a.scheme_mean)} vs {_pts(a.base_mean)} points" if pr.endpoint == "interaction" else
             f"{100 * a.scheme_mean:.1f}% vs {100 * a.base_mean:.1f}%")
    body = (f"{means}, a difference of {_pts(a.estimate)} points "
            f"({interval}; {a.test}" + (f" on {a.n_pairs} seed pairs" if a.n_pairs else "")
            + f", {_ps(a.p, a.p_adj, a.family)}).")
    note = f" Note: {a.note}." if a.note else ""
    tost = _ps(a.tost_p, a.tost_p_adj, a.family)
    if a.decision == "difference" and pr.endpoint == "interaction":
        where = ", ".join(f"{k} = {fmt_value(v)}" for k, v in pr.where.items())
        head = (f"**{pr.scheme}'s gain over {pr.baseline} is {'larger' if a.estimate > 0 else 'smaller'} at {where}"
                f".**")
    elif a.decision == "difference":
        head = f"**{pr.scheme} scores {'higher' if a.estimate > 0 else 'lower'} than {pr.baseline}.**"
    elif a.decision == "equivalent":
        head = f"**No difference larger than {100 * pr.margin:g} points** (the declared margin; TOST {tost})."
    else:
        margin = (f"; nor does it lie within the declared margin of +/-{100 * pr.margin:g} points (TOST {tost})"
                  if pr.margin is not None and math.isfinite(a.tost_p) else "")
        head = f"**Undecided**: the interval includes 0{margin}.{_need(a)}"
    return f"{head} {body}{rates}{design}{note}"


def _need(a: Answer) -> str:
    """The seeds that would decide an undecided score comparison."""
    if math.isfinite(a.seeds_needed):
        at = f" at alpha = {ALPHA / a.family:.3g} (Holm's first step)" if a.family > 1 else ""
        n = int(a.seeds_needed)
        runs = {"score": f"{2 * n} runs", "interaction": f"{4 * n} runs: both schemes in both cells"}.get(
            a.primary.endpoint, "runs: that many at every rate of each scheme's grid")
        crossfit_ = a.test == crossfit.TEST
        sd = (f"the SD of the seed-matched differences, {100 * a.sd:.1f} points "
              + (f"pooled within the two halves of {a.n_pairs} seed pairs ({a.n_pairs - 2} degrees of freedom)"
                 if crossfit_ else f"over {a.n_pairs} seed pairs ({a.n_pairs - 1} degrees of freedom)"))
        return (f" To detect a difference of {100 * a.effect:g} points with {int(100 * POWER)}% power{at}, "
                f"about {n} seeds per scheme are needed ({runs}), planned from {sd} at its 80% upper limit "
                f"{100 * a.planning_sd:.1f}: `suite plan`, or `suite run FILE --until-decided`.")
    if math.isinf(a.seeds_needed):
        return f" More than 10,000 seeds would be needed to detect {100 * a.effect:g} points."
    if a.test == crossfit.TEST and a.n_pairs < 3:
        return (f" Cross-fitting needs at least 3 seed pairs (two halves, and a spread within one); with "
                f"{a.n_pairs} there is no test: run more seeds (`suite run FILE --until-decided`).")
    if a.n_pairs >= 2:
        return " The seed-matched differences have no spread (e.g. every run at chance), so nothing can be planned."
    return " Too few seed pairs to estimate the spread: run at least 2 seeds of both."


def verdict_table(answers: list[Answer]) -> list[str]:
    """The answer a reader understands first: one row per declared question, its estimate, interval, p
    (Holm-adjusted in a family) and verdict in plain words. Markdown lines; cells are one line each."""
    rows = ["| question | estimate | interval | p" + (" (Holm)" if answers[0].family > 1 else "") + " | verdict |",
            "|:--|:-:|:-:|:-:|:--|"]
    for a in answers:
        question = f"{a.primary.describe()} ({a.primary.endpoint})"
        p = a.p_adj if a.family > 1 else a.p
        if a.primary.endpoint == "frontier":
            est = "ratio " + (_x(a.estimate) if math.isfinite(a.estimate) else "not estimable")
            ci = f"{_level(a)} [{_x(a.low)}, {_x(a.high)}]"
        elif a.primary.endpoint == "frontier_slope":
            est = f"slope {_slope(a.estimate)}" if math.isfinite(a.estimate) else "-"
            ci = f"{_level(a)} [{_slope(a.low)}, {_slope(a.high)}]" if math.isfinite(a.estimate) else "-"
        elif a.primary.endpoint == "not_ok_rate":
            est, ci = f"{_pts(a.estimate)} points", "-"
        else:
            est = f"{_pts(a.estimate)} points" if math.isfinite(a.estimate) else "-"
            ci = f"{_level(a)} [{_pts(a.low)}, {_pts(a.high)}]" if math.isfinite(a.low) else "-"
        rows.append(f"| {_cell(question)} | {est} | {ci} | {_p(p).replace('p = ', '').replace('p ', '')} | "
                    f"{_cell(_plain(a))} |")
    return rows


def _plain(a: Answer) -> str:
    """The verdict of one comparison in a few plain words."""
    pr = a.primary
    if a.decision == "difference":
        if pr.endpoint == "interaction":
            where = ", ".join(f"{k} {fmt_value(v)}" for k, v in pr.where.items())
            return f"decided: {pr.scheme}'s gain is {'larger' if a.estimate > 0 else 'smaller'} at {where}"
        if pr.endpoint == "frontier":
            return f"decided: {pr.scheme} tolerates {'higher' if a.estimate > 1 else 'lower'} rates"
        if pr.endpoint == "frontier_slope":
            return f"decided: {pr.scheme}'s frontier falls {'more slowly' if a.estimate > 0 else 'faster'} with depth"
        if pr.endpoint == "not_ok_rate":
            return f"decided: {pr.scheme} ends not ok {'more' if a.estimate > 0 else 'less'} often"
        return f"decided: {pr.scheme} scores {'higher' if a.estimate > 0 else 'lower'}"
    if a.decision == "equivalent":
        return f"decided: no difference beyond +/-{100 * pr.margin:g} points"
    if math.isfinite(a.seeds_needed):
        return f"undecided: about {int(a.seeds_needed)} seeds needed"
    return "undecided" if not a.note else f"not tested: {a.note}"


def _cell(text: str) -> str:
    """Text from the data as one Markdown table cell: one line, no column break."""
    return " ".join(str(text).split()).replace("|", "\\|")


def paragraph(answer: Answer | list[Answer]) -> str:
    """The answer(s) in plain words, the opening of ``findings.md``: one paragraph for one comparison
    tested alone, a list for a family of co-primary comparisons."""
    return opening(answer if isinstance(answer, list) else [answer])
