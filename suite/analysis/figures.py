"""The analysis's figures (matplotlib, Agg): PNG and PDF in ``DIR/figures/``, one function per
:data:`suite.analysis.products.FIGURES` kind, a suffix (``-train.lr-0.001``) per section. Byte-identical on one
matplotlib version."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

import matplotlib

matplotlib.use("Agg")  # no display: files only
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from suite import store  # noqa: E402
from suite.analysis import products, stability  # noqa: E402
from suite.grouping import DEPTH, LR, group_of, section_keys, sections, variant_order  # noqa: E402
from suite.analysis.lr import lr_curves  # noqa: E402
from suite.analysis.propagation import profiles  # noqa: E402
from suite.results import read_curves, run_folder, selection_split  # noqa: E402
from suite.analysis.markup import section_title, fmt_rate, fmt_value, safe, slug  # noqa: E402


MAX_LABEL = 200  # characters of a label from data: a 100,000-character config value drew a 1.5-million-pixel PNG


def plain(text: Any) -> str:
    """``text`` drawn as written, not as mathtext (``$`` escaped), cut to :data:`MAX_LABEL` characters; every label
    from data, exactly once."""
    text = str(text)
    return (text if len(text) <= MAX_LABEL else text[:MAX_LABEL - 3] + "...").replace("$", r"\$")


def readable_log_ticks(fig: plt.Figure) -> None:
    """Log axes whose tick labels do not run into each other; axes given fixed ticks keep them."""
    from matplotlib import ticker

    for ax in fig.axes:
        for axis, (a, b) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            lo, hi = min(a, b), max(a, b)
            if axis.get_scale() != "log" or isinstance(axis.get_major_locator(), ticker.FixedLocator) or lo <= 0:
                continue
            decades = math.log10(hi / lo)
            subs = (1.0,) if decades >= 2.5 else (1.0, 2.0, 5.0) if decades >= 0.7 else tuple(range(1, 10))
            axis.set_major_locator(ticker.LogLocator(base=10, subs=subs, numticks=9))
            axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            axis.set_minor_formatter(ticker.NullFormatter())


def _caption(fig: plt.Figure, y: float, text: str, **kw: Any) -> None:
    """A grey caption at height ``y`` under the axes."""
    fig.text(0.01, y, text, fontsize="small", color="0.3", **kw)


def _titled(fig: plt.Figure, title: str, caption: str = "", y: float = 0.0) -> plt.Figure:
    """``fig`` with its title (from data: :func:`plain`) and any grey caption under the axes, laid out."""
    fig.suptitle(plain(title))
    if caption:
        _caption(fig, y, caption)
    fig.tight_layout()
    return fig


def _finish(ax: plt.Axes, ylabel: str, title: str, which: str = "major", **legend: Any) -> None:
    """The y label, the title (from data), a grid and the legend of the schemes (``legend``: where, how small)."""
    ax.set_ylabel(ylabel)
    ax.set_title(plain(title))
    ax.grid(alpha=0.3, which=which)
    ax.legend(title="scheme", **(legend or {"fontsize": "small"}))


def _dodged(rows: pd.DataFrame, index: int, count: int, step: float = 0.03) -> np.ndarray:
    """The depths of ``rows`` shifted a little per scheme, so that their bars do not hide each other."""
    return rows[DEPTH].to_numpy(float) * 2 ** (step * (index - count / 2))


def _grid(n: int, most: int, w: float, h: float, extra: tuple[float, float] = (0, 0),
          **kw: Any) -> tuple[plt.Figure, np.ndarray]:
    """``n`` panels of ``w`` x ``h`` inches (the figure ``extra`` larger), at most ``most`` a row; the rest hidden."""
    cols = min(most, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(w * cols + extra[0], h * rows + extra[1]), squeeze=False, **kw)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes


def dodge(x: np.ndarray, index: int, count: int, decades: float = 0.035) -> np.ndarray:
    """``x`` (on a log axis) shifted a little per scheme, so that schemes at the same rate do not hide each other."""
    return np.asarray(x, float) * 10 ** ((index - (count - 1) / 2) * decades)


def save(fig: plt.Figure, folder: Path, kind: str, suffix: str = "") -> list[Path]:
    """Save ``fig`` as PNG and PDF, atomically, under its :data:`~suite.analysis.products.FIGURES` name; close it."""
    base = folder / (products.FIGURES[kind].name + suffix)
    readable_log_ticks(fig)
    store.no_link(base.parent).mkdir(parents=True, exist_ok=True)
    paths = [base.with_name(base.name + ".png"), base.with_name(base.name + ".pdf")]
    store.atomic_write(paths[0], lambda f: fig.savefig(f, format="png", dpi=150, bbox_inches="tight"))
    store.atomic_write(paths[1], lambda f: fig.savefig(f, format="pdf", bbox_inches="tight",
                                                       metadata={"CreationDate": None}))
    plt.close(fig)
    return paths


def scheme_colors(variants: list[str]) -> dict[str, Any]:
    """One tab10 colour per scheme, in table order, so a scheme looks the same in every figure."""
    cmap = plt.get_cmap("tab10")
    return {v: cmap(i % 10) for i, v in enumerate(variants)}


def _depth_axis(ax: plt.Axes, frame: pd.DataFrame) -> None:
    """The depths of ``frame`` as the x ticks."""
    depths = sorted(float(d) for d in set(frame[DEPTH]))
    if len(depths) > 1 and min(depths) > 0 and max(depths) / min(depths) >= 4:
        ax.set_xscale("log", base=2)  # depths usually double: equal spacing
    ax.set_xticks(depths, [fmt_value(d) for d in depths])
    ax.minorticks_off()
    ax.set_xlabel("depth (blocks)")


def _bars_vs_depth(ax: plt.Axes, frame: pd.DataFrame, q: str, colors: dict[str, Any], scale: float = 1.0) -> list:
    """``scale * {q}_mean`` vs depth, a line per scheme, 95% bars; returns ``[(means, lows, highs)]`` as drawn."""
    drawn = []
    for i, v in enumerate(colors):
        rows = frame[(frame["variant"] == v) & frame[f"{q}_mean"].notna()].sort_values(DEPTH)
        if rows.empty:
            continue
        y = scale * rows[f"{q}_mean"].to_numpy(float)
        ends = scale * rows[[f"{q}_ci_low", f"{q}_ci_high"]].to_numpy(float).T
        ax.errorbar(_dodged(rows, i, len(colors)), y, yerr=np.nan_to_num(np.abs(ends - y)), color=colors[v],
                    marker="o", capsize=3, label=plain(v))
        drawn.append((y, *ends))
    return drawn


def accuracy_vs_depth(part: pd.DataFrame, colors: dict[str, Any], title: str) -> plt.Figure:
    """Score (%) vs depth from one section's summary rows, one line per scheme, 95% bars (none for a single run)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    _bars_vs_depth(ax, part, "acc", colors, scale=100)
    _depth_axis(ax, part)
    _caption(fig, -0.02, "score: ok runs at their test accuracy, diverged and failed runs at chance; "
             "bars: 95% interval")
    _finish(ax, "score (%)", title)
    return fig


def not_ok_vs_depth(part: pd.DataFrame, colors: dict[str, Any], title: str) -> plt.Figure:
    """Not-ok fraction (diverged or failed) vs depth, one line per scheme, Wilson 95% bands."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for v in colors:
        rows = part[(part["variant"] == v) & (part["n"] > 0)].sort_values(DEPTH)
        if rows.empty:
            continue
        x = rows[DEPTH].to_numpy(float)
        ax.plot(x, rows["not_ok_rate"], color=colors[v], marker="o", label=plain(v))
        ax.fill_between(x, rows["not_ok_ci_low"], rows["not_ok_ci_high"], color=colors[v], alpha=0.12)
    _depth_axis(ax, part)
    ax.set_ylim(-0.03, 1.03)
    _finish(ax, "not-ok runs: diverged or failed (fraction, Wilson 95% band)", title)
    return fig


def _step_panels(depths: list[float], ylabel: str, height: float, **kw: Any) -> tuple[plt.Figure, np.ndarray]:
    """A panel per depth (4 a row, sharing y) of a quantity over training steps, titled and labelled."""
    fig, axes = _grid(len(depths), 4, 4, 3.2, (1, height), sharey=True, **kw)
    for ax, depth in zip(axes.flat, depths):
        ax.set(title=f"depth {fmt_value(depth)}", xlabel="training step")
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel)
    return fig, axes


def scale_trajectories(curves: dict[float, pd.DataFrame], variant: str, title: str) -> plt.Figure:
    """Mean |scale| of each block over training, a panel per depth; ``curves``: depth -> step x block frame."""
    depths = sorted(curves)
    fig, axes = _step_panels(depths, "mean |scale| of the block", 0.4, layout="constrained")
    cmap = plt.get_cmap("viridis")
    values = np.concatenate([c.to_numpy(float).ravel() for c in curves.values()])
    positive = values[np.isfinite(values) & (values > 0)]
    for ax, depth in zip(axes.flat, depths):
        frame = curves[depth]
        last = max(frame.columns.max(), 1)
        for block in frame.columns:
            ax.plot(frame.index, frame[block], color=cmap(block / last), lw=1)
    if positive.size and positive.size == values[np.isfinite(values)].size:
        axes[0, 0].set_yscale("log")
    elif positive.size:  # zeros at init (ReZero): log away from zero, linear near it
        axes[0, 0].set_yscale("symlog", linthresh=float(positive.min()))
    sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(0, 1))
    fig.colorbar(sm, ax=axes, label="block position (0 = first, 1 = last)", shrink=0.9)
    fig.suptitle(plain(f"{variant}: per-block scales over training" + (f" ({title})" if title else "")))
    return fig


def loss_curves(curves: dict[float, dict[str, list[tuple[pd.DataFrame, str]]]], colors: dict[str, Any],
                title: str) -> plt.Figure:
    """Training loss of every run at its logged steps (the step's own loss, not the watcher's average), a panel per
    depth, coloured by scheme; x marks a diverged run's last finite logged loss."""
    depths = sorted(curves)
    fig, axes = _step_panels(depths, "training loss (logged steps)", 0.6)
    positive = True
    for ax, depth in zip(axes.flat, depths):
        for v, runs in curves[depth].items():
            for i, (frame, status) in enumerate(runs):
                loss = frame["loss"].to_numpy(float)
                ax.plot(frame["step"], loss, color=colors[v], lw=1, alpha=0.7, label=plain(v) if i == 0 else None)
                finite = np.isfinite(loss)
                positive &= bool(np.all(loss[finite] > 0))
                if status == "diverged" and finite.any():
                    j = np.flatnonzero(finite)[-1]
                    ax.plot(frame["step"].iloc[j], loss[j], "x", color=colors[v], ms=8)
    if positive:
        axes[0, 0].set_yscale("log")  # shared: every panel
    handles = {h.get_label(): h for ax in axes.flat[:len(depths)] for h in ax.get_legend_handles_labels()[0]}
    shown = [plain(v) for v in colors if plain(v) in handles]
    fig.legend([handles[v] for v in shown], shown,
               title="scheme (x: diverged)", fontsize="small", loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _titled(fig, "training loss" + (f" ({title})" if title else ""))


def accuracy_vs_lr(curves: pd.DataFrame, colors: dict[str, Any], title: str) -> plt.Figure:
    """Test score (%) vs learning rate (log x) from :func:`suite.analysis.lr.lr_curves` rows, a panel per depth."""
    depths = sorted({float(d) for d in curves[DEPTH]}) if DEPTH in curves else [None]
    width = 5.5 if len(depths) == 1 else 4.2 if len(depths) == 2 else 3.4
    fig, axes = plt.subplots(1, len(depths), figsize=(width * len(depths) + 1.0, 4.0), sharey=True, squeeze=False)
    for ax, depth in zip(axes[0], depths):
        part = curves if depth is None else curves[curves[DEPTH].astype(float) == depth]
        for i, v in enumerate(colors):
            rows = part[(part["variant"] == v) & part["test_mean"].notna()].sort_values(LR)
            if rows.empty:
                continue
            x, y = dodge(rows[LR].to_numpy(float), i, len(colors)), 100 * rows["test_mean"].to_numpy(float)
            err = np.nan_to_num(np.abs(100 * rows[["test_ci_low", "test_ci_high"]].to_numpy(float).T - y))
            ax.errorbar(x, y, yerr=err, color=colors[v], capsize=2, lw=1.2, label=plain(v))
            bad = rows["n_not_ok"].to_numpy() > 0
            ax.scatter(x[~bad], y[~bad], color=colors[v], s=22, zorder=3)
            ax.scatter(x[bad], y[bad], facecolors="white", edgecolors=colors[v], s=30, zorder=3, linewidths=1.5)
        ax.set(xscale="log", xlabel="learning rate",
               title="all depths" if depth is None else f"depth {fmt_value(depth)}")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("test accuracy (%)")
    # beside the last panel: "best" still covered points where the curves fill the panel
    axes[0][-1].legend(title="scheme", fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    return _titled(fig, title, "mean over seeds, diverged and failed runs at chance; bars: 95% interval (the tables' "
                   "rule); open marker: at least one run not ok; schemes at one rate are drawn a little apart", -0.03)


def frontier_vs_depth(lr: pd.DataFrame, colors: dict[str, Any], title: str,
                      rates: list[float] | None = None, model: Any = None) -> plt.Figure:
    """The largest stable rate vs depth per scheme (log y), and ``model``'s frontier line and band dashed."""
    fig, ax = plt.subplots(figsize=(6, 4))
    depths = sorted(float(d) for d in set(lr[DEPTH]))
    floor = float(lr["lr_tested_min"].min()) / 2
    for i, v in enumerate(colors):
        rows = lr[lr["variant"] == v].sort_values(DEPTH)
        if rows.empty:
            continue
        x, y = _dodged(rows, i, len(colors)), rows["lr_stable_max"].to_numpy(float)
        ax.plot(x, np.where(np.isnan(y), floor, y), color=colors[v], lw=1.2, label=plain(v))
        censored = rows["censored"].to_numpy(bool)
        ok = ~np.isnan(y)
        ax.scatter(x[ok & ~censored], y[ok & ~censored], color=colors[v], s=22, zorder=3)
        ax.scatter(x[censored], y[censored], color=colors[v], marker="^", s=40, zorder=3)
        ax.scatter(x[~ok], np.full((~ok).sum(), floor), color=colors[v], marker="x", s=30, zorder=3)
        if stability.has_line(model, v):
            grid = np.geomspace(min(depths), max(depths), 50)
            mid, low, high = model.lr50(v, grid)
            ax.plot(grid, mid, color=colors[v], lw=1.2, ls="--")
            ax.fill_between(grid, low, high, color=colors[v], alpha=0.12, lw=0)
    _depth_axis(ax, lr)
    ax.set_yscale("log")
    if rates:  # the rates tested as the ticks: the frontier can only be one of them
        ticks = sorted(set(rates) | ({floor} if lr["lr_stable_max"].isna().any() else set()))
        ax.set_yticks(ticks, ["none" if t == floor else fmt_value(t) for t in ticks])
        ax.minorticks_off()
        ax.set_ylim(min(ticks) / 1.5, max(ticks) * 1.5)
    _caption(fig, -0.1, "solid: the largest rate with at most half of the seeds not ok (^: the largest tested; x: none)"
             "\ndashed: LR50, where P(not ok) = 0.5, from one Firth logistic model of every run with a frontier line"
             "\nper scheme (95% pointwise band)")
    _finish(ax, "largest stable learning rate", title, which="both")
    return fig


def best_lr_vs_depth(tr: pd.DataFrame, colors: dict[str, Any], title: str, rates: list[float]) -> plt.Figure:
    """The best rate vs depth per scheme (log-log, 95% bootstrap bars); the tested ``rates`` are the y ticks."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, v in enumerate(colors):
        rows = tr[(tr["variant"] == v) & tr["best_lr"].notna()].sort_values(DEPTH)
        if rows.empty:
            continue
        x, y = _dodged(rows, i, len(colors), 0.04), rows["best_lr"].to_numpy(float)  # equal rates overlap
        lo = np.maximum(0, np.nan_to_num(y - rows["best_lr_low"].to_numpy(float)))  # exp(log(x)) rounds
        hi = np.maximum(0, np.nan_to_num(rows["best_lr_high"].to_numpy(float) - y))
        slope = rows["slope"].iloc[0]
        label = plain(v if math.isnan(slope) else f"{v} (slope {slope:+.2f})")
        ax.errorbar(x, y, yerr=[lo, hi], color=colors[v], marker="o", ms=4, capsize=2, lw=1.2, label=label)
    _depth_axis(ax, tr)
    ax.set_yscale("log")
    ax.set_yticks(rates, [fmt_rate(r) for r in rates])
    ax.minorticks_off()
    ax.set_ylim(min(rates) / 1.5, max(rates) * 1.5)
    _caption(fig, -0.02, "bars: 95% percentile bootstrap over seeds (choosing again); slope: of log(best rate) on "
             "log(depth), 0 = the rate transfers")
    _finish(ax, "best learning rate (validation)", title, which="both", fontsize="x-small", loc="center left",
            bbox_to_anchor=(1.01, 0.5))
    return fig


def _lr_panels(runs: list[dict[str, Any]], colors: dict[str, Any], value: Callable[[dict], float | None],
               curve: Callable, ylabel: str, title: str) -> tuple[plt.Figure, np.ndarray]:
    """A panel per scheme with runs (log x, shared axes); ``curve(ax, rates, values, shade, label)`` draws each depth's
    non-None ``value``s of the scheme's runs (a list per rate, in order), a shade per depth (darker = deeper)."""
    variants = [v for v in colors if any(r["variant"] == v for r in runs)]
    depths = sorted({float(r[DEPTH]) for r in runs})
    fig, axes = _grid(len(variants), 4, 3.2, 2.8, sharex=True, sharey=True)
    for ax, v in zip(axes.flat, variants):
        for depth, shade in zip(depths, plt.get_cmap("viridis")(np.linspace(0.85, 0.1, len(depths)))):
            by_lr: dict[float, list[float]] = {}
            for r in runs:
                if r["variant"] == v and float(r[DEPTH]) == depth and (x := value(r)) is not None:
                    by_lr.setdefault(float(r[LR]), []).append(x)
            if by_lr:
                curve(ax, sorted(by_lr), [by_lr[lr] for lr in sorted(by_lr)], shade, f"depth {fmt_value(depth)}")
        ax.set_xscale("log")
        ax.set_title(plain(v), fontsize="medium")
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel)
    for ax in axes[-1]:
        ax.set_xlabel("learning rate")
    axes.flat[0].legend(fontsize="x-small")
    fig.suptitle(plain(title))
    return fig, axes.flat[:len(variants)]


def attn_logit_vs_lr(runs: list[dict[str, Any]], colors: dict[str, Any], title: str) -> plt.Figure | None:
    """Each run's largest attention logit (docs/training.md) against its rate, with the sensitivity bound."""
    from suite.engine.diagnostics import ATTN_LOGIT_BOUND

    return peak_vs_lr(runs, colors, title, "attn_logit_peak", "largest attention logit",
                      f"each run's peak |pre-softmax logit| over training (dots), median over seeds (lines);\n"
                      f"dashed: {ATTN_LOGIT_BOUND:g}, the bound the sensitivity analysis counts as not ok", ATTN_LOGIT_BOUND)


def stream_rms_vs_lr(runs: list[dict[str, Any]], colors: dict[str, Any], title: str) -> plt.Figure | None:
    """Each run's largest residual-stream RMS against its rate: the growth that separates the runs that break."""
    from suite.engine.diagnostics import STREAM_RMS_BOUND

    return peak_vs_lr(runs, colors, title, "stream_rms_peak", "largest residual-stream RMS",
                      "each run's peak RMS of the residual stream after a block over training (dots), median over "
                      f"seeds (lines);\ndashed: {STREAM_RMS_BOUND:g}, above which a run that did not learn is said to "
                      "have grown its stream", STREAM_RMS_BOUND)


def gamma_vs_lr(settled: pd.DataFrame, colors: dict[str, Any], title: str) -> plt.Figure | None:
    """Where LayerScale's γ settled (:func:`suite.analysis.gamma.settled_frame`) against the rate, a line per depth."""
    if settled is None or settled.empty or LR not in settled or DEPTH not in settled:
        return None
    rows = settled[["variant", DEPTH, LR, "gamma"]].to_dict("records")
    return peak_vs_lr(rows, colors, title, "gamma", "settled mean |γ|",
                      "the mean |γ| over blocks at the last logged step, averaged over the group's runs;\n"
                      "where the depths' lines lie on each other, the rate, not the depth, sets γ's size")


def peak_vs_lr(runs: list[dict[str, Any]], colors: dict[str, Any], title: str, key: str, ylabel: str, note: str,
               bound: float | None = None) -> plt.Figure | None:
    """Each run's ``key`` vs its rate (log-log), a panel per scheme, a median line per depth; None if none has it."""
    runs = [r for r in runs if isinstance(r.get(key), (int, float)) and math.isfinite(r[key]) and r[key] > 0
            and r.get(LR) is not None and r.get(DEPTH) is not None]
    if not runs:
        return None

    def curve(ax: plt.Axes, lrs: list[float], values: list[list[float]], shade: Any, label: str) -> None:
        ax.plot(lrs, [float(np.median(x)) for x in values], color=shade, lw=1.2, label=label)
        ax.scatter([lr for lr, x in zip(lrs, values) for _ in x], [y for x in values for y in x], color=shade, s=8)

    fig, panels = _lr_panels(runs, colors, lambda r: float(r[key]), curve, ylabel, title)
    for ax in panels:
        if bound is not None:
            ax.axhline(bound, color="0.4", ls="--", lw=0.8)
        ax.set_yscale("log")
    fig.tight_layout()
    _caption(fig, -0.01, note, va="top")  # under the axes' labels, any height
    return fig


PHASE_COLORS = {"ok": "#4daf4a", "did not learn": "#bdbdbd", "did not learn, stream grew": "#e41a1c",
                "diverged": "#252525"}


def _edges(values: list[float]) -> np.ndarray:
    """Cell edges on a log axis: halfway (geometrically) between neighbours, a half step beyond the ends."""
    v = np.log10(np.asarray(values, float))
    step = np.diff(v) if v.size > 1 else np.array([0.6])
    mids = (v[:-1] + v[1:]) / 2
    return 10 ** np.r_[v[0] - step[0] / 2, mids, v[-1] + step[-1] / 2]


def phase_diagram(runs: list[dict[str, Any]], model: Any, colors: dict[str, Any], title: str) -> plt.Figure:
    """Depth x rate, a panel per scheme, each cell split by its runs' outcomes, with the model's line and band."""
    from matplotlib.patches import Patch, Rectangle

    from suite.analysis.stability import OUTCOMES, outcome

    variants = [v for v in colors if any(r["variant"] == v for r in runs)]
    depths = sorted({float(r[DEPTH]) for r in runs})
    rates = sorted({float(r[LR]) for r in runs})
    dx, dy = _edges(depths), _edges(rates)
    fig, axes = plt.subplots(1, len(variants), figsize=(3.3 * len(variants), 3.4), sharey=True, squeeze=False)
    for ax, v in zip(axes[0], variants):
        for i, depth in enumerate(depths):
            for j, lr in enumerate(rates):
                cell = [outcome(r) for r in runs if r["variant"] == v and float(r[DEPTH]) == depth
                        and float(r[LR]) == lr]
                if not cell:
                    continue
                left = np.log10(dx[i])
                width = np.log10(dx[i + 1]) - left
                for name in OUTCOMES:  # side by side from the left of the cell, in OUTCOMES order
                    share = cell.count(name) / len(cell)
                    if share:
                        ax.add_patch(Rectangle((10 ** left, dy[j]), 10 ** (left + share * width) - 10 ** left,
                                               dy[j + 1] - dy[j], facecolor=PHASE_COLORS[name], lw=0))
                        left += share * width
                ax.add_patch(Rectangle((dx[i], dy[j]), dx[i + 1] - dx[i], dy[j + 1] - dy[j], fill=False,
                                       edgecolor="white", lw=0.8))
        name = v
        if stability.has_line(model, v):
            grid = np.geomspace(depths[0], depths[-1], 50)
            mid, low, high = model.lr50(v, grid)
            ax.fill_between(grid, low, high, color="0.1", alpha=0.15, lw=0)
            ax.plot(grid, mid, color="black", lw=1.5, label="LR50 (model)")
            s = model.slopes[v]
            name = f"{v}\nslope {s.slope:+.2f} [{s.low:+.2f}, {s.high:+.2f}]"
        ax.set_title(plain(name), fontsize="medium")
        ax.set(xscale="log", yscale="log", xlim=(dx[0], dx[-1]), ylim=(dy[0], dy[-1]), xlabel="depth")
        ax.set_xticks(depths, [fmt_value(d) for d in depths])
        ax.set_yticks(rates, [fmt_rate(r) for r in rates])
        ax.minorticks_off()
    axes[0][0].set_ylabel("learning rate")
    handles = [Patch(color=PHASE_COLORS[n], label=n) for n in OUTCOMES] + [
        plt.Line2D([], [], color="black", label="LR50 (model), 95% band")]
    axes[0][-1].legend(handles=handles, fontsize="x-small", loc="upper left", bbox_to_anchor=(1.02, 1.0),
                       borderaxespad=0)
    return _titled(fig, title, "each cell: its runs' outcomes as shares, side by side; line: where half of the "
                   "runs end not ok, one Firth logistic model of every run (docs/statistics.md)", -0.04)


def val_vs_lr_by_depth(runs: list[dict[str, Any]], colors: dict[str, Any], title: str) -> plt.Figure:
    """Mean validation score vs rate, a panel per scheme, a curve per depth (one peak rate: the rate transfers)."""
    from suite.results import score

    split = selection_split(runs)

    def curve(ax: plt.Axes, lrs: list[float], values: list[list[float]], shade: Any, label: str) -> None:
        means = [100 * float(np.mean(x)) for x in values]
        ax.plot(lrs, means, color=shade, marker="o", ms=3, lw=1.2, label=label)
        best = int(np.argmax(means))
        ax.scatter([lrs[best]], [means[best]], color=shade, marker="*", s=90, zorder=3)

    fig, _ = _lr_panels(runs, colors, lambda r: score(r, split), curve,
                        f"{'validation' if split == 'val' else 'test'} accuracy (%)", title)
    _caption(fig, -0.02, "mean over seeds, diverged and failed runs at chance; star: the best rate at that depth")
    fig.tight_layout()
    return fig


def block_profiles(profile: pd.DataFrame, column: str, ylabel: str, colors: dict[str, Any], title: str,
                   log_y: bool = True) -> plt.Figure:
    """``column`` vs block index (log x), a panel per scheme, a line per depth (mean over seeds)."""
    variants = [v for v in colors if v in set(profile["variant"])]
    # Each panel its own y range: schemes differ by orders of magnitude, and a shared axis flattens all but one.
    fig, axes = _grid(len(variants), 3, 3.6, 2.9)
    depths = sorted({float(d) for d in profile[DEPTH]})
    cmap = plt.get_cmap("viridis")
    for ax, v in zip(axes.flat, variants):
        for i, d in enumerate(depths):
            part = profile[(profile["variant"] == v) & (profile[DEPTH].astype(float) == d)].sort_values("block")
            y = part[column].to_numpy(float)
            if part.empty or not np.isfinite(y).any():
                continue
            ax.plot(part["block"].to_numpy(float) + 1, y, color=cmap(i / max(1, len(depths) - 1)), lw=1.2,
                    label=f"depth {fmt_value(d)}")
        ax.set_xscale("log")
        if log_y:
            ax.set_yscale("log")
        _at_least_a_span(ax, profile.loc[profile["variant"] == v, column].to_numpy(float), log_y)
        ax.set(title=plain(v), xlabel="block (1 = first)", ylabel=ylabel)
        ax.grid(alpha=0.3, which="both")
    axes.flat[0].legend(fontsize="small")
    return _titled(fig, title)


MIN_SPAN = 0.1  # a panel's y range is at least this share of its values (a log axis: this many tenths of a decade)


def _at_least_a_span(ax: plt.Axes, y: np.ndarray, log: bool) -> None:
    """Widen a panel whose values hardly vary to :data:`MIN_SPAN` around them: a profile flat to float precision
    drew its last bits as a jagged line with ticks '1, 1, 1, 0.999999'."""
    y = y[np.isfinite(y) & (y > 0)] if log else y[np.isfinite(y)]
    if not y.size:
        return
    lo, hi = (np.log10(y.min()), np.log10(y.max())) if log else (float(y.min()), float(y.max()))
    mid, half = (lo + hi) / 2, max((hi - lo) / 2, MIN_SPAN / 2 if log else MIN_SPAN / 2 * max(abs(lo), abs(hi), 1e-12))
    if hi - lo < 2 * half:
        ax.set_ylim(*((10 ** (mid - half), 10 ** (mid + half)) if log else (mid - half, mid + half)))


def robust_limits(means: np.ndarray, lows: np.ndarray, highs: np.ndarray, log: bool) -> tuple[float, float] | None:
    """(bottom, top) showing every mean and interval ends within one span of them; None when no mean can be drawn."""
    inv = (lambda x: float(10 ** x)) if log else float

    def usable(a: np.ndarray) -> np.ndarray:
        a = np.asarray(a, float)
        return np.log10(a[np.isfinite(a) & (a > 0)]) if log else a[np.isfinite(a)]

    m, ends = usable(means), usable(np.concatenate([lows, highs]))
    if not m.size:
        return None
    bottom, top = float(m.min()), float(m.max())
    span = max(top - bottom, 1.0 if log else 0.1 * float(np.abs(m).max()) or 1.0)
    lo = max(min(bottom, float(ends.min())) if ends.size else bottom, bottom - span)
    hi = min(max(top, float(ends.max())) if ends.size else top, top + span)
    pad = 0.05 * (hi - lo)
    return inv(lo - pad), inv(hi + pad)


def quantity_vs_depth(frame: pd.DataFrame, q: str, ylabel: str, colors: dict[str, Any], title: str,
                      log_y: bool = False) -> plt.Figure:
    """A propagation summary vs depth, a line per scheme, 95% bars, y limits from :func:`robust_limits`."""
    fig, ax = plt.subplots(figsize=(6, 4))
    drawn = _bars_vs_depth(ax, frame, q, colors)
    _depth_axis(ax, frame)
    if log_y:
        ax.set_yscale("log")
    if drawn:
        means, lows, highs = (np.concatenate(parts) for parts in zip(*drawn))
        limits = robust_limits(means, lows, highs, log_y)
        if limits:
            ax.set_ylim(*limits)
            outside = np.sum((lows < limits[0]) | (highs > limits[1]))
            if outside:
                _caption(fig, -0.03, f"{outside} interval(s) reach beyond the axis and are cut at its edge "
                         f"(tables/propagation.csv has them)")
    _finish(ax, ylabel, title, which="both")
    return fig


def draw_propagation(a: Any) -> list[Path]:
    """The figures of a ``suite propagate`` folder (see docs/propagation.md)."""
    out, frame, keys, title = a.root / "figures", a.summary, a.keys, a.title
    colors = scheme_colors(variant_order(list(frame["variant"]), a.baseline))
    profile = profiles(a.root, a.runs, keys)
    written: list[Path] = []
    if not profile.empty and DEPTH in keys:
        for column, ylabel, what, kind, log_y in (
                ("stream_rms", "residual stream RMS", "forward", "stream_rms_vs_block", True),
                ("grad_stream", "‖∂loss/∂stream‖", "backward", "grad_norm_vs_block", True),
                ("mean_cos", "cosine between images", "rank collapse", "rank_collapse_vs_block", False)):
            written += save(block_profiles(profile, column, ylabel, colors, f"{title}: {what}", log_y), out, kind)
    if DEPTH in keys:
        written += save(quantity_vs_depth(frame, "rank_collapse", "cosine between images after the last block",
                                          colors, f"{title}: rank collapse at init"), out, "rank_collapse_vs_depth")
        written += save(quantity_vs_depth(frame, "grad_ratio", "‖∂loss/∂stream‖ first / last block", colors,
                                          f"{title}: gradient ratio", log_y=True), out, "grad_ratio_vs_depth")
    return written


def _heading(label: tuple, skeys: list[str], title: str) -> tuple[str, str, str]:
    """A section's name (``train.lr = 0.001``), its file suffix and the figure title that names it."""
    name = section_title(label, skeys)
    return name, slug(label, skeys), title + (f" ({name})" if name else "")


def _in_section(frame: pd.DataFrame | None, skeys: list[str], label: tuple) -> pd.DataFrame | None:
    """The rows of ``frame`` in the section ``label`` (all of them when nothing splits the sections)."""
    if frame is None or not skeys:
        return frame
    return frame[[group_of(r, skeys) == label for r in frame.to_dict("records")]]


def draw(a: Any) -> list[Path]:
    """Draw every figure that applies to an :class:`~suite.analysis.products.Analysis`; returns the files written."""
    if a.propagation:
        return draw_propagation(a)
    root, runs, summary, keys, title, out = a.root, a.runs, a.summary, a.keys, a.title, a.root / "figures"
    lr, transfer, gamma_settled = (a.frames.get(k) for k in ("lr", "transfer", "gamma_settled"))
    if all(r["status"] == "error" for r in runs):  # nothing finished: nothing to draw
        return []
    colors = scheme_colors(variant_order(list(summary["variant"]), a.baseline))
    skeys = section_keys(keys)
    rest = [k for k in keys if k != LR]  # the learning-rate figures: every rate of a section in one figure
    rkeys = section_keys(rest)
    rated = [r for r in runs if r["status"] != "error" and r.get(LR) is not None and r.get(DEPTH) is not None]
    written: list[Path] = []
    if lr is not None and not lr.empty:
        curves = lr_curves(runs, keys)
        for label, part in sections(lr, rest):
            _, suffix, head = _heading(label, rkeys, title)
            members = _in_section(curves, rkeys, label)
            if members.empty:  # every run of this section ended in error
                continue
            written += save(accuracy_vs_lr(members, colors, head), out, "accuracy_vs_lr", suffix)
            if DEPTH in rest and part[DEPTH].nunique() >= 2:  # a "vs depth" figure needs two depths
                rates = sorted({float(v) for v in members[LR]})
                model = a.depth_models.get(tuple(label))
                written += save(frontier_vs_depth(part, colors, head, rates, model), out, "frontier_vs_depth", suffix)
                done = [r for r in rated if group_of(r, rkeys) == label]
                written += save(phase_diagram(done, model, colors, head), out, "phase_diagram", suffix)
    if transfer is not None and not transfer.empty:
        for label, part in sections(transfer, rest):
            _, suffix, head = _heading(label, rkeys, title)
            members = [r for r in rated if group_of(r, rkeys) == label]
            if not members:  # every run of this section ended in error
                continue
            rates = sorted({float(r[LR]) for r in members})
            if part[DEPTH].nunique() >= 2:
                written += save(best_lr_vs_depth(part, colors, head, rates), out, "best_lr_vs_depth", suffix)
            written += save(val_vs_lr_by_depth(members, colors, head), out, "val_vs_lr_by_depth", suffix)
            for name, figure in (("attn_logit_vs_lr", attn_logit_vs_lr(members, colors, head)),
                                 ("stream_rms_vs_lr", stream_rms_vs_lr(members, colors, head)),
                                 ("gamma_vs_lr", gamma_vs_lr(_in_section(gamma_settled, rkeys, label), colors, head))):
                if figure is not None:
                    written += save(figure, out, name, suffix)
    for label, part in sections(summary, keys):
        name, suffix, head = _heading(label, skeys, title)
        members = [r for r in runs if r["status"] != "error" and group_of(r, skeys) == label]
        if any("steps_to_learn" in r for r in members):
            written += save(time_to_learn(members, colors, head), out, "time_to_learn", suffix)
        if DEPTH in keys and part[DEPTH].nunique() >= 2:
            written += save(accuracy_vs_depth(part, colors, head), out, "accuracy_vs_depth", suffix)
            written += save(not_ok_vs_depth(part, colors, head), out, "not_ok_vs_depth", suffix)
        written += _scale_figures(root, members, out, suffix, name)
        written += _loss_figure(root, members, colors, out, suffix, name)
    return written


def time_to_learn(members: list[dict[str, Any]], colors: dict[str, Any], title: str) -> plt.Figure:
    """Kaplan-Meier curves of the share of runs that have learned by each step, one panel per depth."""
    from suite.analysis.survival import curves

    depths = sorted({float(r[DEPTH]) for r in members if r.get(DEPTH) is not None}) or [math.nan]
    fig, axes = plt.subplots(1, len(depths), figsize=(4 * len(depths), 3.2), squeeze=False, sharey=True)
    for ax, depth in zip(axes[0], depths):
        for v, color in colors.items():
            runs = [r for r in members if r["variant"] == v and (math.isnan(depth) or float(r[DEPTH]) == depth)]
            steps, share = curves(runs)
            if steps.size:
                ax.step(steps, 100 * share, where="post", color=color, label=plain(f"{v} ({len(runs)})"))
        ax.set(title=f"depth {fmt_value(int(depth))}" if not math.isnan(depth) else "", xlabel="step", ylim=(-2, 102))
    axes[0][0].set_ylabel("runs that have learned (%)")
    axes[0][-1].legend(fontsize=7, loc="lower right")
    return _titled(fig, title, "Kaplan-Meier: learned = first held-out evaluation above always guessing the largest "
                   "class (binomial test, alpha 0.01); runs that never learned are censored", -0.06)


def _scale_figures(root: Path, members: list[dict[str, Any]], out: Path, suffix: str, name: str) -> list[Path]:
    written = []
    for v in sorted({r["variant"] for r in members}):
        curves = {}
        for depth in sorted({r.get(DEPTH) for r in members if r["variant"] == v}, key=lambda d: float(d or 0)):
            frames = [read_curves(folder)[1] for r in members
                      if r["variant"] == v and r.get(DEPTH) == depth and (folder := run_folder(root, r))]
            frames = [f for f in frames if not f.empty]
            if frames and depth is not None:
                blocks = pd.concat(frames).groupby(["step", "block"])["scale_mean"].mean()
                curves[float(depth)] = blocks.unstack("block").sort_index()
        if curves:
            written += save(scale_trajectories(curves, v, name), out, "scales", f"_{safe(v)}{suffix}")
    return written


def _loss_figure(root: Path, members: list[dict[str, Any]], colors: dict[str, Any], out: Path, suffix: str,
                 name: str) -> list[Path]:
    curves: dict[float, dict[str, list[tuple[pd.DataFrame, str]]]] = {}
    for v in colors:
        for r in sorted(members, key=lambda r: (str(r.get("seed")), str(r.get("run_id")))):
            if r["variant"] == v and r.get(DEPTH) is not None and (folder := run_folder(root, r)):
                frame = read_curves(folder)[0]
                if not frame.empty:
                    curves.setdefault(float(r[DEPTH]), {}).setdefault(v, []).append((frame, r["status"]))
    return save(loss_curves(curves, colors, name), out, "loss_vs_step", suffix) if curves else []
