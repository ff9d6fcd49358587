"""A training step's device time per kernel and per aten operator, against Pre-LN's: where an arm's overhead goes."""

from __future__ import annotations

import torch

from suite.bench.arms import BASELINE, BenchShape, build_arm
from suite.bench.measure import raise_recompile_limit, autocast_for, make_train_step


def step_tables(prof: torch.profiler.profile, steps: int, cuda: bool) -> dict[str, dict[str, float]]:
    """``{"kernels": name -> µs per step, "ops": aten op -> µs per step}`` from a finished profile."""
    kernels: dict[str, float] = {}
    ops: dict[str, float] = {}
    for e in prof.key_averages():
        device_us = getattr(e, "self_device_time_total", None)
        device_us = getattr(e, "self_cuda_time_total", 0.0) if device_us is None else device_us
        if "CUDA" in str(getattr(e, "device_type", "")):
            kernels[e.key] = kernels.get(e.key, 0.0) + device_us / steps
        elif e.key.startswith("aten::"):
            ops[e.key] = (device_us if cuda else e.self_cpu_time_total) / steps
    return {"kernels": kernels, "ops": {k: v for k, v in ops.items() if v > 0}}


def differences(arm: dict[str, float], base: dict[str, float], top: int = 10) -> list[tuple[str, float, float, float]]:
    """The ``top`` names whose time differs most between ``arm`` and ``base``: ``(name, base, arm, arm - base)``."""
    rows = [(name, base.get(name, 0.0), arm.get(name, 0.0), arm.get(name, 0.0) - base.get(name, 0.0))
            for name in set(arm) | set(base)]
    rows = [r for r in rows if r[3] != 0.0]
    return sorted(rows, key=lambda r: (-abs(r[3]), r[0]))[:top]


def profile_arms(names: list[str], shape: BenchShape, device: str, dtype: str, compile: bool,
                 steps: int = 5, warmup: int = 3) -> dict[str, dict[str, dict[str, float]]]:
    """Each arm's :func:`step_tables`, profiled one arm after another at ``shape``."""
    dev = torch.device(device)
    autocast = autocast_for(dev, dtype)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape.batch, 3, shape.img_size, shape.img_size, generator=g).to(dev)
    y = torch.randint(0, shape.num_classes, (shape.batch,), generator=g).to(dev)
    activities = [torch.profiler.ProfilerActivity.CPU]
    activities += [torch.profiler.ProfilerActivity.CUDA] if dev.type == "cuda" else []
    if compile:
        raise_recompile_limit()
    out = {}
    for name in names:
        torch.manual_seed(0)
        step, _ = make_train_step(build_arm(name, shape).to(dev).train(), x, y, autocast, compile)
        for _ in range(warmup):
            step()
        _sync(dev)
        with torch.profiler.profile(activities=activities) as prof:
            for _ in range(steps):
                step()
            _sync(dev)
        out[name] = step_tables(prof, steps, dev.type == "cuda")
    return out


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def markdown(tables: dict[str, dict[str, dict[str, float]]], title: str, top: int = 10) -> str:
    """Per arm: its total per step against Pre-LN's, and the ``top`` kernels and operators that differ most."""
    base = tables[BASELINE]
    lines = [f"## {title}", ""]
    for name, t in tables.items():
        if name == BASELINE:
            continue
        for what in ("kernels", "ops"):
            total_b, total_a = sum(base[what].values()), sum(t[what].values())
            if not total_b and not total_a:
                continue
            lines += [f"**{name}** against {BASELINE}, {what}: {total_a:,.0f} µs per step against {total_b:,.0f} "
                      f"({total_a - total_b:+,.0f} µs, {_pct(total_a, total_b)})", "",
                      f"| {what[:-1]} | {BASELINE} µs | {name} µs | Δ µs |", "|---|---:|---:|---:|"]
            lines += [f"| `{_cell(n)}` | {b:,.1f} | {a:,.1f} | {d:+,.1f} |"
                      for n, b, a, d in differences(t[what], base[what], top)]
            lines.append("")
    return "\n".join(lines) + "\n"


def _pct(a: float, b: float) -> str:
    return f"{100 * (a / b - 1):+.1f}%" if b else "n/a"


def _cell(name: str, width: int = 110) -> str:
    """A kernel's (often templated C++) name, shortened and made safe in a Markdown table cell."""
    name = " ".join(name.split()).replace("|", "/").replace("`", "'")
    return name if len(name) <= width else name[: width - 1] + "…"


def top_lines(tables: dict[str, dict[str, dict[str, float]]], arm: str, what: str, top: int = 3) -> str:
    """One line: ``arm``'s total against Pre-LN's and its ``top`` differences (for the phase's printed line)."""
    base, t = tables[BASELINE][what], tables[arm][what]
    diffs = "; ".join(f"{_cell(n, 60)} {d:+.0f}" for n, _, _, d in differences(t, base, top))
    return f"{arm} {sum(t.values()) - sum(base.values()):+,.0f} µs/step ({diffs})"

