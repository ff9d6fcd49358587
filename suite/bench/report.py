"""Tables of ``suite bench``: which ratios to report, and ``overhead.{csv,md,json}``."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from suite.bench.arms import BASELINE, CAST, TIMM_ARMS
from suite.bench.measure import GEMM, ArmResult, gemm_flops
from suite.bench.stats import RatioSummary, round_means, summarize
from suite.store import atomic_write_text, to_json, write_json

MIB = 2**20


@dataclass(frozen=True)
class Comparison:
    """One table row: per-round ``prod(num) / prod(den)``."""

    label: str
    kind: str  # "overhead", "ours/timm", "overhead vs timm" or "cast vs plain"
    num: tuple[str, ...]
    den: tuple[str, ...]


def comparisons(names: list[str]) -> list[Comparison]:
    """The rows that the measured arms ``names`` allow (docs/benchmark.md, "suite bench")."""
    names = [n for n in names if n != GEMM]
    have = set(names)
    rows = [Comparison(n, "overhead", (n,), (BASELINE,)) for n in names
            if BASELINE in have and n != BASELINE and n not in TIMM_ARMS]
    if {"timm-preln", "timm-layerscale"} <= have:
        rows.append(Comparison("timm-layerscale", "overhead", ("timm-layerscale",), ("timm-preln",)))
    for timm_arm, ours in TIMM_ARMS.items():
        if {timm_arm, ours} <= have:
            rows.append(Comparison(f"{ours} (ours/timm)", "ours/timm", (ours,), (timm_arm,)))
    if {BASELINE, "layerscale", *TIMM_ARMS} <= have:
        rows.append(Comparison("layerscale (overhead vs timm's)", "overhead vs timm",
                               ("layerscale", "timm-preln"), (BASELINE, "timm-layerscale")))
    if {CAST, "layerscale"} <= have:
        rows.append(Comparison(f"{CAST} / layerscale", "cast vs plain", (CAST,), ("layerscale",)))
    return rows


def _ratios(results: dict[str, ArmResult], c: Comparison, field: str) -> np.ndarray | None:
    arrays = [getattr(results[n], field) for n in c.num + c.den]
    if any(a is None for a in arrays):
        return None
    means = [round_means(a) for a in arrays]
    k = len(c.num)
    return np.prod(means[:k], axis=0) / np.prod(means[k:], axis=0)


def _delta(results: dict[str, ArmResult], c: Comparison, field: str, scale: float = 1.0) -> float | None:
    if len(c.num) != 1:
        return None
    a, b = getattr(results[c.num[0]], field), getattr(results[c.den[0]], field)
    return None if a is None or b is None else (a - b) / scale


def build_rows(results: dict[str, ArmResult], alpha: float = 0.05) -> list[dict[str, Any]]:
    """One dict per :func:`comparisons` row: ratios (median, interval) and memory/parameter deltas."""
    rows = []
    for c in comparisons(list(results)):
        train = summarize(_ratios(results, c, "train_s"), alpha)
        fwd_ratios = _ratios(results, c, "forward_s")
        fwd = summarize(fwd_ratios, alpha) if fwd_ratios is not None else None
        single = len(c.num) == 1
        rows.append({
            "label": c.label, "kind": c.kind, "num": "*".join(c.num), "den": "*".join(c.den),
            "train_ms": 1e3 * float(np.median(results[c.num[0]].train_s)) if single else None,
            "baseline_train_ms": 1e3 * float(np.median(results[c.den[0]].train_s)) if single else None,
            "train_ratio": train.median, "train_low": train.low, "train_high": train.high, "rounds": train.n,
            "forward_ratio": fwd.median if fwd else None, "forward_low": fwd.low if fwd else None,
            "forward_high": fwd.high if fwd else None,
            "saved_delta_mib": _delta(results, c, "saved_bytes", MIB),
            "peak_delta_mib": _delta(results, c, "peak_bytes", MIB),
            "param_delta": _delta(results, c, "params"),
        })
    return rows


def efficiency(results: dict[str, ArmResult], step_flops: int, gemm: int) -> list[dict[str, Any]]:
    """Achieved GFLOP/s of each arm's training step, and its share of a ``gemm``-sized matmul's (``gemm`` 0: none)."""
    ref = None
    if GEMM in results and gemm > 0:
        ref = gemm_flops(gemm) / float(np.median(results[GEMM].train_s)) / 1e9
    rows = []
    for name, r in results.items():
        if name == GEMM:
            continue
        gflops = step_flops / float(np.median(r.train_s)) / 1e9
        rows.append({"arm": name, "train_ms": 1e3 * float(np.median(r.train_s)), "gflops": gflops,
                     "gemm_gflops": ref, "of_gemm": gflops / ref if ref else None})
    return rows


def efficiency_table(rows: list[dict[str, Any]], gemm: int) -> str:
    ref = rows[0]["gemm_gflops"] if rows else None
    head = (f"Achieved GFLOP/s of a training step (analytic FLOPs of the matmuls / median step time), and its "
            f"share of a {gemm} x {gemm} x {gemm} matmul's GFLOP/s ({_fmt(ref)}) on the same cores in the same "
            f"rounds: how far from the hardware each arm runs.\n" if ref else
            "Achieved GFLOP/s of a training step (analytic FLOPs of the matmuls / median step time).\n")
    lines = [head, "| arm | train ms | GFLOP/s | of GEMM |", "|---|---:|---:|---:|"]
    for r in rows:
        share = "n/a" if r["of_gemm"] is None else f"{100 * r['of_gemm']:.0f}%"
        lines.append(f"| {r['arm']} | {_fmt(r['train_ms'])} | {_fmt(r['gflops'])} | {share} |")
    return "\n".join(lines) + "\n"


def _fmt(v: float | None, spec: str = ".1f") -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def _ratio_cell(row: dict[str, Any], prefix: str) -> str:
    if row[f"{prefix}_ratio"] is None:
        return "n/a"
    return RatioSummary(row[f"{prefix}_ratio"], row[f"{prefix}_low"], row[f"{prefix}_high"], row["rounds"]).format()


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table (overheads in percent with their 95% intervals)."""
    lines = [
        "| row | ratio | train ms | train overhead [95% CI] | forward overhead [95% CI] "
        "| Δ saved act. MiB | Δ peak MiB | Δ params |",
        "|---|---|---:|---|---|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['label']} | {r['num']} / {r['den']} | {_fmt(r['train_ms'])} | {_ratio_cell(r, 'train')} "
                     f"| {_ratio_cell(r, 'forward')} | {_fmt(r['saved_delta_mib'], '+.2f')} "
                     f"| {_fmt(r['peak_delta_mib'], '+.1f')} | {_fmt(r['param_delta'], '+,.0f')} |")
    return "\n".join(lines) + "\n"


def provenance_line(p: dict[str, Any]) -> str:
    """The machine, torch, commit and start time of a bench file's header, from ``store.provenance``."""
    return f"{p['device_name']}; torch {p['torch_version']}; commit {p['git_commit']}; {p['started_at']}"


def write_results(out: Path, stem: str, rows: list[dict[str, Any]], md: str, record: dict[str, Any]) -> list[Path]:
    """``<stem>.csv`` (``rows``, None as empty), ``<stem>.md`` and ``<stem>.json`` (``record``) under ``out``."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["label"])
    writer.writeheader()
    for r in to_json(rows):
        writer.writerow({k: "" if v is None else v for k, v in r.items()})
    paths = [Path(out) / f"{stem}.{ext}" for ext in ("csv", "md", "json")]
    atomic_write_text(paths[0], buf.getvalue())
    atomic_write_text(paths[1], md)
    write_json(paths[2], record)
    return paths


def write_outputs(out: Path, results: dict[str, ArmResult], rows: list[dict[str, Any]],
                  meta: dict[str, Any], speed: list[dict[str, Any]] | None = None,
                  counted: list[dict[str, Any]] | None = None) -> list[Path]:
    """Write ``overhead.{csv,md,json}`` (raw times, and ``meta``'s command, settings, provenance) under ``out``."""
    s = meta["settings"]
    md = [
        f"# Step-time overhead against `{BASELINE}`\n",
        f"`{meta['command']}`\n",
        f"{provenance_line(meta['provenance'])}. "
        f"Shape: depth {s['depth']}, dim {s['dim']}, heads {s['heads']}, tokens {s['tokens']}, batch {s['batch']}; "
        f"{s['device']}, {s['dtype']}{', compiled' if s['compile'] else ', eager'}; {s['rounds']} interleaved rounds "
        f"of {s['steps']} step(s) per visit. Overhead = median of per-round ratios - 1; interval: distribution-free "
        f"95% interval of that median (order statistics). Δ saved act.: activations autograd keeps for backward.\n",
        markdown_table(rows),
    ]
    if speed:
        md.append(efficiency_table(speed, s.get("gemm", 0)))
    if counted:
        from suite.bench.counts import table

        md.append(table(counted))
    arms = {n: {"train_s": r.train_s, "forward_s": r.forward_s, "params": r.params,
                "saved_bytes": r.saved_bytes, "peak_bytes": r.peak_bytes} for n, r in results.items()}
    return write_results(out, "overhead", rows, "\n".join(md),
                         {**meta, "rows": rows, "efficiency": speed or [], "counted": counted or [], "arms": arms})
