"""The GPU path's one device check: solo, packed, bf16 and compiled runs on CUDA, offline, in one process.

    python3 scripts/device_check.py OUT          # on the GPU machine (docs/gpu-and-ray.md gives the call)
    python3 scripts/device_check.py OUT --dry    # the same phases on the CPU, tiny shapes, eager compiles

Each phase (docs/gpu-and-ray.md) prints its line as it ends, into ``OUT/device_check.md`` and ``.jsonl`` too, so a
time limit keeps what finished; exit 1 if a phase failed. After a run's first steps, a step that waits for the
host fails its phase (``torch.cuda.set_sync_debug_mode("error")``).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DRY = {"data": {"name": "synthetic", "synthetic_train": 64, "synthetic_test": 32, "synthetic_img_size": 8},
       "model": {"patch_size": 4, "dim": 8, "heads": 2, "depth": 2}, "train": {"batch_size": 8, "warmup_steps": 1}}
# WARM_STEPS: a run's steps before the sync guard (a compiled pack compiles, warms CUDA graphs up and records)
STEPS, SOLO_RUNS, PACK, WARM_STEPS = 100, 8, 16, 5
# The overhead phases: LayerScale's floor over Pre-LN on the GPU (issue 62's count: folded into the residual
# add, γ's gradient one more read of the saved branch output, 0.4-0.7% of a ViT-S/16 step) and the margin a
# compiled LayerScale may exceed it by; rounds enough that the interval is narrower than the margin.
FLOOR, MARGIN, ROUNDS = 1.005, 0.02, 40
OVERHEAD_ARMS = ("preln", "layerscale", "layerscale:cast", "timm-preln", "timm-layerscale")
PROFILED_ARMS = ("preln", "layerscale", "layerscale:cast")
STUDY = "ablations/default.yaml"  # the whole study the `study` phase runs, packed and (a sample) solo
PHASES = ("env", "solo", "pack", "bf16", "pack-compiled", "pack-reuse", "solo-compiled", "overhead-eager",
          "overhead-compiled", "kernels-eager", "kernels-compiled", "study")


class Check:
    """Phases, each timed, printed and written as it ends."""

    def __init__(self, out: Path, dry: bool) -> None:
        from suite.bench.throughput import DEFAULT_BASE

        self.out, self.dry, self.failed = out, dry, []
        self.device = "cpu" if dry else "cuda"
        self.base = base = {k: dict(v) for k, v in DEFAULT_BASE.items()}
        for key, values in (DRY.items() if dry else ()):
            base[key].update(values)
        base["train"].update(steps=4 if dry else STEPS, log_every=2 if dry else 10)
        self.runs, self.pack = (2, 3) if dry else (SOLO_RUNS, PACK)
        out.mkdir(parents=True, exist_ok=True)
        self.tmp = tempfile.TemporaryDirectory(prefix="device-check-runs-")  # the runs, removed at exit (not in OUT)
        from suite import files, store

        self.append = files.open_append  # never through a link planted in OUT (nor is the start: it renames)
        store.atomic_write_text(out / "device_check.md", f"# Device check ({'dry, CPU' if dry else 'CUDA'})\n\n")
        store.atomic_write_text(out / "device_check.jsonl", "")

    def cfg(self, seed: int, **overrides):
        from suite.config import flatten, load_config

        flat = {**flatten(self.base), "seed": seed, "device": self.device, **overrides}
        return load_config(None, [f"{k}={v}" for k, v in flat.items()])

    def phase(self, name: str, fn) -> dict | None:
        started = time.perf_counter()
        try:
            ok, line, row = fn()
        except Exception as err:  # noqa: BLE001  (a phase that raises fails alone; the next ones still run)
            ok, line, row = False, f"{type(err).__name__}: {str(err).splitlines()[0][:300] if str(err) else ''}", {}
        seconds = time.perf_counter() - started
        text = f"{name}: {'ok' if ok else 'FAIL'}, {line} ({seconds:.1f} s)"
        print(text, flush=True)
        for file, line in (("device_check.md", f"- {text}"),
                           ("device_check.jsonl", json.dumps({"phase": name, "ok": ok, "seconds": round(seconds, 2), **row}))):
            with self.append(self.out / file) as f:
                f.write(line + "\n")
        self.failed += [] if ok else [name]
        return row if ok else None

    def train(self, seeds: list[int], folder: str, width: int | None = None, **overrides) -> tuple[list[dict], float]:
        """Solo runs of ``seeds`` one after another, or (``width`` not None) one pack padded to ``width`` rows:
        their summaries and the wall seconds."""
        from suite.engine import train
        from suite.engine.pack import train_pack

        started, cfgs = time.perf_counter(), [self.cfg(s, **overrides) for s in seeds]
        dirs = [Path(self.tmp.name) / folder / str(s) for s in seeds]
        out = ([train(c, d, progress=False) for c, d in zip(cfgs, dirs)] if width is None
               else train_pack(cfgs, dirs, width=width))
        return out, time.perf_counter() - started


def same_losses(runs: list[dict], reference: list[dict], p_min: float = 0.01, shift_min: float = 1e-3,
                gross: float = 0.25) -> dict:
    """Whether ``runs`` trained as ``reference`` did, seed by seed (the same seeds, another code path): the log
    ratios of their final training losses. Rounding (TF32, another kernel's order) sends two trajectories
    apart after a few dozen steps in either direction; a defect (a stale learning rate, a lost update) moves
    every seed one way. So the check fails on a systematic shift (one-sample t-test of the log ratios,
    p < ``p_min``, and a mean ratio beyond ``shift_min``) or on one seed off by more than ``gross``."""
    from scipy import stats

    pairs = [(a["final_train_loss"], b["final_train_loss"]) for a, b in zip(runs, reference)]
    logs = [math.log(a / b) if a and b and a > 0 and b > 0 else float("nan") for a, b in pairs]
    if not logs:
        return {"problem": None, "line": "not compared (no reference)", "pairs": 0}
    worst = max(abs(math.expm1(v)) for v in logs) if all(map(math.isfinite, logs)) else float("nan")
    mean = sum(logs) / len(logs)
    p = stats.ttest_1samp(logs, 0.0).pvalue if len(logs) > 1 and len(set(logs)) > 1 else float("nan")
    row = {"pairs": len(logs), "mean_ratio": math.exp(mean) if math.isfinite(mean) else mean, "p": p,
           "max_rel": worst}
    tested = "every seed identical, no test" if set(logs) == {0.0} else f"p {p:.2g}"
    line = f"{len(logs)} seeds, mean ratio {row['mean_ratio']:.4f} ({tested}), the furthest {worst:.1e}"
    problem = (f"a loss is missing or not positive ({line})" if not math.isfinite(worst)
               else f"one seed off by more than {gross:.0%} ({line})" if worst > gross
               else f"shifted one way ({line})" if p < p_min and abs(math.expm1(mean)) > shift_min else None)
    return {**row, "line": line, "problem": problem}


def errors(summaries: list[dict]) -> str | None:
    bad = [s for s in summaries if s["status"] == "error"]
    return f"{len(bad)} run(s) in error, the first: {bad[0].get('error', '')[:300]}" if bad else None


def guard_steps() -> None:
    """From here on, each run's or pack's steps after its first :data:`WARM_STEPS` raise if they wait for the host."""
    import torch
    from suite.engine.loop import Training
    from suite.engine.pack import Pack

    def guarded(original):
        @functools.wraps(original)
        def step(self, x, y):
            self._device_check_steps = getattr(self, "_device_check_steps", 0) + 1
            if self._device_check_steps <= WARM_STEPS:
                return original(self, x, y)
            torch.cuda.set_sync_debug_mode("error")
            try:
                return original(self, x, y)
            finally:
                torch.cuda.set_sync_debug_mode("default")
        return step

    for cls in (Training, Pack):
        cls.step = guarded(cls.step)


def main(argv: list[str]) -> int:
    from suite.cli import Parser  # a bad flag is one line naming it, exit 2

    parser = Parser(prog="device_check.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for device_check.md and device_check.jsonl")
    parser.add_argument("--dry", action="store_true", help="on the CPU, tiny shapes, compiled with dynamo's eager backends")
    parser.add_argument("--phases", nargs="+", choices=PHASES, default=list(PHASES), metavar="PHASE",
                        help=f"run only these phases, in the usual order (default: all: {' '.join(PHASES)})")
    args = parser.parse_args(argv)
    try:
        import torch
        from torch._dynamo.utils import counters
    except ImportError as err:
        print(f"device check: {sys.executable} cannot import torch ({err}); run it with the Python that has torch")
        return 2

    try:
        check = Check(args.out, args.dry)
    except OSError as err:
        print(f"device check: {args.out}: cannot write there ({err.strerror}); pass a folder")
        return 2
    if not args.dry and not torch.cuda.is_available():
        print("device check: torch sees no CUDA device (torch.cuda.is_available() is False); --dry runs it on the CPU")
        return 1
    if args.dry:  # dynamo's eager backends: the same graphs, no C compiler, seconds instead of minutes
        from suite.engine import pack, packstep

        torch.compile = functools.partial(torch.compile, backend="eager")
        pack.Program = functools.partial(packstep.Program, backend="aot_eager")  # functionalises the in-place update

    def env():
        from suite.engine.precision import set_matmul_precision

        set_matmul_precision("tf32", torch.device(check.device))
        row = {"gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "none",
               "torch": torch.__version__, "triton": importlib.metadata.version("triton") if importlib.util.find_spec("triton") else None,
               "c_compiler": next((shutil.which(c) for c in ("cc", "gcc", "clang") if shutil.which(c)), None),
               "tf32_matmul": torch.get_float32_matmul_precision()}
        return row["c_compiler"] is not None or args.dry, ", ".join(f"{k} {v}" for k, v in row.items()), row

    solo, eager, compiled = {}, {}, {}

    def solo_runs():
        runs, wall = check.train(list(range(check.runs)), "solo")
        solo.update(runs=runs, per_hour=len(runs) * 3600 / wall)
        row = {"runs_per_hour": round(solo["per_hour"]), "step_time_ms": runs[-1].get("step_time_ms"),
               "precision": runs[0]["train.precision"], "statuses": [s["status"] for s in runs]}
        return errors(runs) is None, errors(runs) or f"{len(runs)} runs, {row['runs_per_hour']} runs per hour, " \
                                                     f"step {_ms(row['step_time_ms'])}, precision {row['precision']}", row

    def eager_pack():
        runs, wall = check.train(list(range(check.pack)), "pack", width=0)
        eager["runs"] = runs
        per_hour = len(runs) * 3600 / wall
        same = same_losses(runs, solo.get("runs", []))
        row = {"runs_per_hour": round(per_hour), "vs_solo": round(per_hour / solo["per_hour"], 2) if solo else None,
               "vs_solo_loss": same}
        problem = errors(runs) or (f"losses against the solo runs': {same['problem']}" if same["problem"] else None)
        return problem is None, problem or (f"{len(runs)} runs, {row['runs_per_hour']} runs per hour, "
                                            f"x{row['vs_solo']} solo; losses vs solo {same['line']}"), row

    def bf16():
        (s,), _ = check.train([0], "bf16", **{"model.dim": 128, "model.heads": 4, "train.precision": "bf16"})
        return s["status"] not in ("error", "diverged"), f"width 128: run {_status(s, check.dry)}" \
            f"{' ' + s['error'] if s.get('error') else ''}, val acc {s.get('val_acc')}, step {_ms(s.get('step_time_ms'))}", \
            {"status": s["status"], "step_time_ms": s.get("step_time_ms")}

    def compiled_pack():
        counters.clear()
        runs, wall = check.train(list(range(check.pack)), "pack-compiled", width=check.pack,
                                      **{"train.compile": True})
        graphs, breaks = counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())
        used = {s.get("cuda_graphs") for s in runs}
        same = same_losses(runs, eager.get("runs", []))
        compiled["wall"] = wall
        row = {"graphs": graphs, "graph_breaks": breaks, "cuda_graphs": sorted(map(str, used)), "wall_s": round(wall, 1),
               "vs_eager_loss": same, "runs_per_hour": round(len(runs) * 3600 / wall)}
        problem = (errors(runs) or (f"{graphs} graphs, {breaks} breaks" if graphs != 1 or breaks else None)
                   or (f"CUDA graphs used: {used}" if used != {check.device == "cuda"} else None)
                   or (f"losses against the eager pack's: {same['problem']}" if same["problem"] else None))
        return problem is None, problem or (f"1 graph, no break, CUDA graphs {used.pop()}, {wall:.0f} s with the "
                                            f"compile; losses vs eager {same['line']}"), row

    def reuse():
        before = counters["stats"]["unique_graphs"]
        seeds = list(range(check.pack, check.pack + max(1, check.pack * 3 // 4)))
        runs, wall = check.train(seeds, "pack-reuse", width=check.pack, **{"train.compile": True})
        new = counters["stats"]["unique_graphs"] - before
        # counted whole: this phase's runs and the compiled pack's before it, with its compile, for this many
        # runs of one shape (a compiled pack pays its compile once per shape and worker)
        first = compiled.get("wall", 0.0)
        whole = (len(runs) + check.pack) * 3600 / (wall + first) if first else None
        row = {"new_graphs": new, "runs": len(runs), "wall_s": round(wall, 1),
               "runs_per_hour_after_compile": round(len(runs) * 3600 / wall),
               "runs_per_hour_with_compile": round(whole) if whole else None, "runs_of_the_shape": len(runs) + check.pack}
        counted = ""
        if whole:
            vs = f", x{whole / solo['per_hour']:.2f} solo" if solo else ""
            counted = (f"; counted whole with the compiled pack before it and its compile, {row['runs_of_the_shape']} "
                       f"runs of one shape: {row['runs_per_hour_with_compile']} runs per hour{vs}")
        return errors(runs) is None and new == 0, errors(runs) or \
            (f"{len(runs)} runs padded to {check.pack}: {new} new graphs, {wall:.1f} s, "
             f"{row['runs_per_hour_after_compile']} runs per hour once compiled{counted}"), row

    def solo_compiled():
        from suite.engine.compiled import solo_graph_problem

        refused = solo_graph_problem("reduce-overhead", check.device)
        runs, _ = check.train([0], "solo-compiled", **{"train.compile": True})
        ok = errors(runs) is None and (refused is not None or check.device != "cuda")
        return ok, errors(runs) or (f"run {_status(runs[0], check.dry)}, step {_ms(runs[0].get('step_time_ms'))}; "
                                    f"reduce-overhead: "
                                    f"{'refused: ' + refused.split(';')[0] if refused else 'allowed on ' + check.device}"), \
            {"status": runs[0]["status"], "reduce_overhead_refused": refused is not None}

    shape = bench_shape(args.dry)

    def overhead(compile_: bool):
        from suite.bench.arms import build_arm
        from suite.bench.measure import measure
        from suite.bench.report import build_rows

        res = measure({n: (lambda n=n: build_arm(n, shape)) for n in OVERHEAD_ARMS}, shape,
                      device=check.device, dtype="bf16", compile=compile_, rounds=2 if args.dry else ROUNDS,
                      warmup=1 if args.dry else 5, steps=1 if args.dry else 5, forward=False)
        rows = {r["label"]: {k: r[k] for k in ("train_ratio", "train_low", "train_high", "train_ms", "baseline_train_ms")}
                for r in build_rows(res)}
        problem = None if args.dry else judge(rows, compile_)
        line = (f"{'; '.join(f'{label} x{_ratio(r)}' for label, r in rows.items())}; Pre-LN "
                f"{rows['layerscale']['baseline_train_ms']:.2f} ms")
        return problem is None, (problem + "; " if problem else "") + line, {"rows": rows, "problem": problem}

    def kernels(compile_: bool):
        from suite.bench import kernels as k
        from suite.store import atomic_write_text

        tables = k.profile_arms(list(PROFILED_ARMS), shape, check.device, "bf16", compile_,
                                steps=2 if args.dry else 5, warmup=1 if args.dry else 5)
        what = "ops" if args.dry else "kernels"
        name = f"kernel_profile_{'compiled' if compile_ else 'eager'}.md"
        atomic_write_text(args.out / name, f"# Device time per step against Pre-LN ({'dry, CPU' if args.dry else 'CUDA'})\n\n"
                          f"{shape_line(shape)}; `scripts/device_check.py`, suite/bench/kernels.py\n\n"
                          + k.markdown(tables, "compiled" if compile_ else "eager"))
        totals = {a: {w: sum(t[w].values()) for w in ("kernels", "ops")} for a, t in tables.items()}
        return True, f"{name}: " + "; ".join(k.top_lines(tables, a, what) for a in PROFILED_ARMS[1:]), {"totals_us": totals}

    def study():
        return study_phase(args.out, check, args.dry)

    if check.device == "cuda":
        guard_steps()
    named = {"env": env, "solo": solo_runs, "pack": eager_pack, "bf16": bf16, "pack-compiled": compiled_pack,
             "pack-reuse": reuse, "solo-compiled": solo_compiled, "overhead-eager": lambda: overhead(False),
             "overhead-compiled": lambda: overhead(True), "kernels-eager": lambda: kernels(False),
             "kernels-compiled": lambda: kernels(True), "study": study}
    for name in PHASES:
        if name in args.phases:
            check.phase(name, named[name])
    print(f"device check: {'all phases ok' if not check.failed else 'failed: ' + ', '.join(check.failed)}; "
          f"{args.out / 'device_check.md'}")
    return 1 if check.failed else 0


def bench_shape(dry: bool):
    from suite.bench.arms import BenchShape

    return BenchShape(depth=1, dim=12, heads=6, tokens=5, batch=2) if dry else \
        BenchShape(depth=12, dim=384, heads=6, tokens=197, batch=128)  # ViT-S/16 at 224 px


def shape_line(shape) -> str:
    return (f"depth {shape.depth}, width {shape.dim}, {shape.heads} heads, {shape.tokens} tokens, batch {shape.batch}, "
            f"bf16 autocast, fused AdamW")


def judge(rows: dict[str, dict], compiled: bool) -> str | None:
    """Why an overhead phase fails, or None: the suite's LayerScale costs more than timm's beyond its interval
    (eager or compiled), or, compiled, LayerScale over Pre-LN lies more than :data:`MARGIN` past :data:`FLOOR`
    or its interval is wider than the margin (too few rounds to tell)."""
    problems = []
    vs = rows.get("layerscale (overhead vs timm's)")
    if vs and math.isfinite(vs["train_low"]) and vs["train_low"] > 1:
        problems.append(f"the suite's LayerScale costs more than timm's beyond its interval (x{_ratio(vs)})")
    ls = rows["layerscale"]
    if compiled:
        width = ls["train_high"] - ls["train_low"]
        if not math.isfinite(width) or width > MARGIN:
            problems.append(f"LayerScale's interval is {100 * width:.1f} points wide, wider than the "
                            f"{100 * MARGIN:.0f}-point margin: more rounds are needed to judge it")
        elif ls["train_ratio"] > FLOOR + MARGIN:
            problems.append(f"compiled LayerScale over Pre-LN x{_ratio(ls)} lies more than {100 * MARGIN:.0f} points "
                            f"past the floor (x{FLOOR})")
    return "; ".join(problems) or None


def _ratio(r: dict) -> str:
    low, high = r["train_low"], r["train_high"]
    band = f"[{low:.3f}, {high:.3f}]" if math.isfinite(low) and math.isfinite(high) else "(no interval: too few rounds)"
    return f"{r['train_ratio']:.3f} {band}"


def study_phase(out: Path, check: Check, dry: bool) -> tuple[bool, str, dict]:
    """A whole committed study (:data:`STUDY`) through the sweep on one device, everything counted (workers'
    start-up, data, setup, steps, probes, evaluation, writes): packed, one pack per shape and a pack worker
    per shape, against solo runs of one worker, measured on one run per shape and extrapolated to the study
    (its start-up once, then each shape's runs at its measured run's wall time)."""
    import subprocess

    tmp = Path(check.tmp.name) / "study"
    # dry: 2 seeds of 4 steps on a small synthetic set of MNIST's size (evaluating 48 blocks on MNIST-5k took most of it)
    short = ["train.steps=4", "train.log_every=2", "train.eval_every=2", "data.name=synthetic", "data.synthetic_train=64",
             "data.synthetic_test=32", "data.synthetic_img_size=28"] if dry else []

    def sweep(folder: str, *extra: str) -> tuple[float, list[dict]]:
        cmd = [sys.executable, "-m", "suite", "run", STUDY, "--out", str(tmp / folder), "--device", check.device,
               *extra, *short]
        root = Path(__file__).resolve().parents[1]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=root, env=env)
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[2:])} exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-300:]}")
        return wall, [json.loads(p.read_text()) for p in sorted((tmp / folder).rglob("summary.json"))]

    workers = 2 if dry else 4  # dry: the CI machine's 2 cores, not 4 processes starting torch on them
    # dry: depth 12 only (its 2 shapes), 2 seeds a shape: packs of 2 members, the sweep's whole path, in a few seconds
    few = ",model.depth=12" if dry else ""
    pack_wall, packed = sweep("packed", "--pack", "16", "--workers", str(workers),
                              *(["--only", f"seed=200{few}", "--only", f"seed=201{few}"] if dry else []))
    shape = lambda r: (r["variant"], r["model.depth"])  # noqa: E731
    shapes = sorted({shape(r) for r in packed}, key=str)
    solo_wall, sample = sweep("solo", "--workers", "1", "--only", f"seed=200{few}")
    per_shape = len(packed) / max(len(sample), 1)
    solo_est = solo_wall + (per_shape - 1) * sum(r.get("wall_s", 0.0) for r in sample)
    steps_s = {}
    for r in packed:  # a pack's members share its steps: one per shape
        steps_s.setdefault(shape(r), (r.get("step_time_ms") or 0.0) * r["steps_done"] / 1e3)
    row = {"study": STUDY, "runs": len(packed), "shapes": len(shapes), "runs_per_shape": round(per_shape, 1),
           "packed_wall_s": round(pack_wall, 1), "solo_sample_runs": len(sample), "solo_sample_wall_s": round(solo_wall, 1),
           "solo_estimate_s": round(solo_est, 1), "speedup": round(solo_est / pack_wall, 2),
           "packed_runs_per_hour": round(len(packed) * 3600 / pack_wall),
           "solo_runs_per_hour": round(len(packed) * 3600 / solo_est),
           "pack_steps_s": round(sum(steps_s.values()), 1), "statuses": sorted({r["status"] for r in packed + sample})}
    bad = errors(packed + sample)
    return bad is None, bad or (
        f"{STUDY}: {len(packed)} runs in {len(shapes)} shapes, packed (one pack per shape, {workers} pack workers) "
        f"{pack_wall:.0f} s = {row['packed_runs_per_hour']} runs per hour, everything counted; solo "
        f"{row['solo_runs_per_hour']} runs per hour ({len(sample)} runs, one per shape, {solo_wall:.0f} s, "
        f"extrapolated to {per_shape:.0f} runs per shape); x{row['speedup']} solo; the packs' steps "
        f"{row['pack_steps_s']:.0f} s of the {workers} workers' time (the rest: start-up, data, setup, probes, "
        f"evaluation, writes)"), row


def _ms(v: float | None) -> str:
    return f"{v:.2f} ms" if v is not None else "not timed (too few steps)"


def _status(summary: dict, dry: bool) -> str:
    """A phase's run status in words: a dry run's few steps cannot learn, so its `failed` is expected."""
    if dry and summary.get("status") == "failed":
        return "failed (expected: a dry run's steps are too few to learn; the phase checks that it runs)"
    return str(summary.get("status"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
