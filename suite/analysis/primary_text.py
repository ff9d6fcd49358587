"""The declared comparisons' answers in plain words (the opening of ``findings.md``), each in its endpoint's words."""

from __future__ import annotations

import math

from suite.analysis.endpoints import Answer, endpoint
from suite.analysis.endpoints.base import p_text
from suite.analysis.markup import md
from suite.declared import ALPHA


def paragraph(answer: Answer | list[Answer]) -> str:
    """The first block of ``findings.md``: a paragraph for one answer, a header and a numbered list for a family."""
    answers = answer if isinstance(answer, list) else [answer]
    if len(answers) == 1 and answers[0].family == 1:
        a = answers[0]
        return (f"**Primary comparison** (declared in ablation.yaml, tested alone at alpha = {ALPHA}): "
                f"{md(a.primary.describe())}, {endpoint(a.primary.endpoint).what}. {verdict(a)}")
    head = (f"**Primary comparisons** (declared in ablation.yaml): {len(answers)} comparisons tested as one "
            f"family of {answers[0].family} hypotheses (a difference test each, and an equivalence test for each "
            f"with a margin), Holm's step-down correction at alpha = {ALPHA}; each p is shown with its Holm-adjusted "
            f"p, each interval at the level of the Holm step that decided it. The intervals are not simultaneous: "
            f"each holds at its own level, and together they cover the true values less often than the least of them.")
    items = [f"{i}. {md(a.primary.describe())}, {endpoint(a.primary.endpoint).what}: {verdict(a)}"
             for i, a in enumerate(answers, 1)]
    return head + "\n\n" + "\n".join(items)  # a blank line: every Markdown renders the list as one


def verdict(a: Answer) -> str:
    """The answer of one comparison: its verdict in bold, then the numbers behind it."""
    if a.note and math.isnan(a.estimate) and math.isnan(a.low):
        return f"**Not tested**: {md(a.note)}."
    return endpoint(a.primary.endpoint).verdict(a)


def verdict_table(answers: list[Answer]) -> list[str]:
    """Markdown lines, one row per declared question: estimate, interval, p (Holm-adjusted in a family), verdict."""
    rows = ["| question | estimate | interval | p" + (" (Holm)" if answers[0].family > 1 else "") + " | verdict |",
            "|:--|:-:|:-:|:-:|:--|"]
    for a in answers:
        est, ci = endpoint(a.primary.endpoint).cells(a)
        p = p_text(a.p_adj if a.family > 1 else a.p).replace("p = ", "").replace("p ", "")
        rows.append(f"| {md(a.primary.describe())} ({a.primary.endpoint}) | {est} | {ci} | {p} | {md(_plain(a))} |")
    return rows


def _plain(a: Answer) -> str:
    """The verdict of one comparison in a few plain words."""
    pr = a.primary
    if a.decision == "difference":
        return endpoint(pr.endpoint).decided(a)
    if a.decision == "equivalent":
        return f"decided: no difference beyond +/-{100 * pr.margin:g} points"
    if a.powered():
        return (f"undecided at the seeds planned for (about {int(a.seeds_needed)}; it has {a.seeds_run()}): "
                "the difference is likely smaller")
    if math.isfinite(a.seeds_needed):
        return f"undecided: about {int(a.seeds_needed)} seeds needed"
    return "undecided" if not a.note else f"not tested: {a.note}"
