"""What an analysis produces, in one registry: each table kind, figure and findings section with its title, caption
and docs anchor; ``suite analyze`` writes and ``suite report`` renders them in this order. Nothing else lists them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from suite.analysis import gamma
from suite.analysis import tables as paper
from suite.analysis.lr import lr_table
from suite.analysis.sensitivity import sensitivity_frame
from suite.analysis.separation import separation_frame
from suite.analysis.stability import stability_table
from suite.analysis.summary import summarize
from suite.analysis.survival import learn_table
from suite.analysis.transfer import transfer_table
from suite.analysis.trends import aggregates, depth_trends
from suite.grouping import DEPTH, LR, section_keys, sections
from suite.analysis.markup import section_title, safe, slug

DOCS = "docs/statistics.md"
MANIFEST = "analysis.json"  # what `suite report` renders, written by `suite analyze` (analyze.manifest)


@dataclass(frozen=True)
class TableKind:
    """One file stem under ``tables/``: the frame it is drawn from and the tables drawn from it."""

    name: str
    title: str
    caption: str
    anchor: str  # a heading anchor of docs/statistics.md (or of the page named before '#')
    build: Callable[["Inputs", dict], pd.DataFrame | None] | None  # from the inputs and the frames built before it
    tables: tuple[Callable[..., list[paper.Table]], ...]

    def frame(self, analysis: "Analysis") -> pd.DataFrame | None:
        """This kind's frame in an analysis (built once, by :func:`build_frames`)."""
        return analysis.frames.get(self.name)


@dataclass(frozen=True)
class FigureKind:
    """One figure (a file stem prefix under ``figures/``, one file per section of the analysis)."""

    name: str
    title: str
    caption: str
    anchor: str


@dataclass(frozen=True)
class FindingsSection:
    """One part of ``findings.md`` (the answer first, then the exploratory estimates)."""

    name: str
    title: str
    anchor: str


@dataclass
class Analysis:
    """An analysed results folder: its runs, groups, every :data:`TABLES` frame by name, and the declared answer."""

    root: Path
    title: str
    runs: list[dict[str, Any]]
    keys: list[str]
    baseline: str
    frames: dict[str, pd.DataFrame | None] = field(default_factory=dict)
    answer: Any = None
    propagation: bool = False
    depth_models: dict = field(default_factory=dict)  # section -> the frontier-across-depth model (stability.py)

    @property
    def summary(self) -> pd.DataFrame:
        return self.frames["propagation" if self.propagation else "summary"]

    @property
    def intro(self) -> str:
        what = "signal-propagation runs" if self.propagation else "runs"
        return f"{len(self.runs)} {what} in {len(self.summary)} groups."

    @property
    def depths(self) -> list[float]:
        return sorted({float(r[DEPTH]) for r in self.runs if r.get(DEPTH) is not None})


@dataclass(frozen=True)
class Inputs:
    """What every table's frame is built from; ``fitted``: the frontier models, fitted once for table and figures."""

    root: Path
    runs: list[dict[str, Any]]
    keys: list[str]
    base: str
    fitted: dict
    declared: Any
    answers: list | None = None  # the declared comparisons answered (coprimary.evaluate_all), in declared order


def build_frames(inputs: Inputs) -> dict[str, pd.DataFrame | None]:
    """Every :data:`TABLES` kind's frame, built once in registry order (a kind may read earlier frames)."""
    frames: dict[str, pd.DataFrame | None] = {}
    for kind in TABLES.values():
        if kind.build is not None:
            frames[kind.name] = kind.build(inputs, frames)
    return frames


def _standard(fn: Callable[..., pd.DataFrame | None]) -> Callable[[Inputs, dict], pd.DataFrame | None]:
    """A builder of the usual signature ``fn(runs, keys, base)``."""
    return lambda i, _: fn(i.runs, i.keys, i.base)


# The docs anchors that several products share.
TESTS, TIME = "intervals-and-tests", "time-to-learn"
BEST_LR = "learning-rates-each-scheme-at-its-best-and-how-wide-a-range-trains"
TRANSFER = "learning-rate-transfer-across-depth"
FRONTIER = "stability-frontier-across-depth"
BROKE = "docs/training.md#why-a-run-broke"
PROBES = "docs/schemes.md#per-block-probes"
PROPAGATION = "docs/propagation.md#the-quantities"

TABLES: dict[str, TableKind] = {t.name: t for t in (
    TableKind("summary", "Score, stability and step time per cell",
              "each scheme against the baseline at every learning rate and depth: the score, the runs not ok, "
              "the median step time", TESTS, _standard(summarize), (paper.accuracy_tables, paper.step_time_tables)),
    TableKind("lr", "Each scheme at its own best learning rate",
              "the score at each scheme's best rate, how much an untuned rate loses, and the rate where runs "
              "stop learning", BEST_LR, _standard(lr_table),
              (paper.best_lr_tables, paper.sensitivity_tables, paper.frontier_tables)),
    TableKind("transfer", "Learning-rate transfer across depth",
              "each scheme's best rate at each depth and how it moves per doubling of depth", TRANSFER,
              _standard(transfer_table), (paper.transfer_tables, paper.slope_tables)),
    TableKind("stability", "Stability frontier across depth",
              "where each scheme's runs stop being ok at every depth, from one model with a frontier line per scheme, "
              "and why they broke", FRONTIER,
              lambda i, _: stability_table(i.runs, i.keys, i.base, i.fitted), (paper.stability_tables,)),
    TableKind("trends", "Depth trends", "how each score difference changes with depth", TESTS,
              _standard(depth_trends), (paper.trend_tables,)),
    TableKind("aggregate", "Across depths", "each scheme's difference pooled over depths", TESTS,
              _standard(aggregates), (paper.aggregate_tables,)),
    TableKind("learn", "Time to learn", "the step at which half of the runs have learned (Kaplan-Meier)", TIME,
              _standard(learn_table), (paper.learn_tables,)),
    TableKind("gamma", "LayerScale γ per block over training",
              "the mean |γ| of each block at log-spaced steps, averaged over each group's seeds (CSV only)", PROBES,
              lambda i, _: gamma.gamma_frame(i.root, i.runs, i.keys), ()),
    TableKind("gamma_settled", "Where LayerScale's γ settles",
              "the mean |γ| over blocks at the last step, by scheme, rate and depth", PROBES,
              lambda i, f: gamma.settled_frame(f["gamma"], i.keys), (paper.settled_gamma_tables,)),
    TableKind("diagnostics", "What separates the runs that were not ok",
              "per scheme, the AUC of each peak diagnostic for not-ok against ok runs, read the way they lie "
              "(CSV only)", BROKE,
              lambda i, _: separation_frame(i.runs), ()),
    TableKind("sensitivity", "How the verdict depends on the definition of not ok",
              "each declared frontier-slope comparison refitted under other definitions of not ok (CSV only)",
              FRONTIER, lambda i, _: sensitivity_frame(i.runs, i.declared, i.answers), ()),
    TableKind("propagation", "Signal propagation at initialisation", "forward and backward signal by depth",
              PROPAGATION, None, (paper.propagation_tables,)),
)}

FIGURES: dict[str, FigureKind] = {f.name: f for f in (
    FigureKind("accuracy_vs_lr", "Score against learning rate", "each scheme over its own rates: the mean score "
               "with its 95% interval; an open marker where at least one run was not ok", BEST_LR),
    FigureKind("best_lr_vs_depth", "Best learning rate against depth", "each scheme's best rate at each depth",
               TRANSFER),
    FigureKind("frontier_vs_depth", "Stability frontier against depth",
               "the highest rate at which most seeds were ok, and the fitted rate where half are not", BEST_LR),
    FigureKind("phase_diagram", "Phase diagram: depth x learning rate",
               "one panel per scheme, each cell the share of its runs ok, that did not learn (with or without the "
               "stream grown past its bound) or diverged, with the scheme's frontier line and its 95% band", FRONTIER),
    FigureKind("val_vs_lr_by_depth", "Validation score against learning rate, by depth",
               "one panel per scheme, one curve per depth", TRANSFER),
    FigureKind("attn_logit_vs_lr", "Largest attention logit against learning rate", "each run's peak pre-softmax "
               "attention logit, one line per depth: where attention-logit growth sets in", BROKE),
    FigureKind("stream_rms_vs_lr", "Residual-stream growth against learning rate", "each run's peak residual-stream "
               "RMS, one line per depth: the growth that separates the runs that break", BROKE),
    FigureKind("gamma_vs_lr", "Where LayerScale's γ settles, against learning rate",
               "the mean |γ| over blocks at the last step, one line per depth: what sets γ's size", PROBES),
    FigureKind("accuracy_vs_depth", "Score against depth", "each scheme's score at each depth", TESTS),
    FigureKind("not_ok_vs_depth", "Runs not ok against depth", "the share of runs that diverged or failed", TESTS),
    FigureKind("time_to_learn", "Time to learn", "the share of runs that have learned by each step (Kaplan-Meier)",
               TIME),
    FigureKind("loss_vs_step", "Training loss", "every run's training loss by step", "one-score"),
    FigureKind("scales", "LayerScale γ per block", "the mean |γ| of each block by step", PROBES),
    FigureKind("stream_rms_vs_block", "Residual stream RMS per block", "the forward signal at initialisation",
               PROPAGATION),
    FigureKind("grad_norm_vs_block", "Gradient norm per block", "the backward signal at initialisation", PROPAGATION),
    FigureKind("rank_collapse_vs_block", "Rank collapse per block", "the mean cosine between images' tokens",
               PROPAGATION),
    FigureKind("rank_collapse_vs_depth", "Rank collapse against depth", "the cosine after the last block", PROPAGATION),
    FigureKind("grad_ratio_vs_depth", "Gradient ratio against depth", "first over last block", PROPAGATION),
)}

FINDINGS: dict[str, FindingsSection] = {s.name: s for s in (
    FindingsSection("answer", "Answer", "the-primary-comparison-and-everything-else"),
    FindingsSection("depth", "Stability across depth", FRONTIER),
    FindingsSection("causes", "Why runs were not ok", BROKE),
    FindingsSection("separation", "What separates the runs that were not ok", BROKE),
    FindingsSection("sensitivity", "How the verdict depends on the definition of not ok", FRONTIER),
    FindingsSection("transfer", "Learning-rate transfer across depth", TRANSFER),
    FindingsSection("exploratory", "Exploratory comparisons", TESTS),
)}


def doc_link(anchor: str) -> str:
    """``docs/statistics.md#anchor``, or the page the anchor names (``docs/x.md#y``) as is."""
    return anchor if anchor.startswith("docs/") else f"{DOCS}#{anchor}"


def figure_kind(stem: str, analysis: Analysis | None) -> tuple[FigureKind | None, str]:
    """The figure kind of a file stem and its section in words; (None, stem) for a stem no kind names."""
    kind = max((k for k in FIGURES.values() if stem == k.name or stem.startswith(k.name + "-")
                or stem.startswith(k.name + "_")), key=lambda k: len(k.name), default=None)
    if kind is None:
        return None, stem
    rest = stem[len(kind.name):]
    names = _section_names(analysis) if analysis is not None else {"": ""}
    if kind.name == "scales" and analysis is not None:
        for v in sorted({str(r["variant"]) for r in analysis.runs}, key=len, reverse=True):
            head = "_" + safe(v)
            if rest.startswith(head) and rest[len(head):] in names:
                part = names[rest[len(head):]]
                return kind, v + (f", {part}" if part else "")
    return kind, names.get(rest, rest.strip("-_"))


def _section_names(analysis: Analysis) -> dict[str, str]:
    """File suffix -> section in words, for the sections of every key set the figures split by."""
    out = {"": ""}
    for keys in (analysis.keys, [k for k in analysis.keys if k != LR]):
        skeys = section_keys(keys)
        if not skeys or not set(skeys) <= set(analysis.summary.columns):
            continue
        for label, _ in sections(analysis.summary, keys):
            out[slug(label, skeys)] = section_title(label, skeys)
    return out
