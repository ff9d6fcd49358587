"""``suite bench``: step-time overhead of every residual scheme against Pre-LN, in one process (docs/benchmark.md)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import torch

from suite import store
from suite.bench import report
from suite.bench.arms import BASELINE, BenchShape, arm_names, build_arm, check_arm
from suite.bench.counts import count_arms, table
from suite.bench.measure import measure
from suite.cli.checks import at_least, at_most, fail, writable_dir
from suite.config import MAX_PARAMS, ModelConfig, approx_params
from suite.models.flops import train_step_flops

# Per-device defaults. CPU: single-threaded, since on a shared machine extra threads add noise in proportion to the op
# count (docs/benchmark.md). CUDA: a ViT-S/16 batch; the reference matmul large enough to reach the GPU's peak.
DEVICE_DEFAULTS = {
    "cpu": {"batch": 4, "rounds": 16, "steps": 1, "warmup": 2, "dtype": "fp32", "threads": 1, "gemm": 1024},
    "cuda": {"batch": 128, "rounds": 20, "steps": 5, "warmup": 5, "dtype": "bf16", "threads": None, "gemm": 8192},
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = BenchShape()
    parser.add_argument("--schemes", nargs="+", metavar="ARM",
                        help=f"arms to measure (preln is always added); default: {' '.join(arm_names())}")
    parser.add_argument("--variants", action="store_true",
                        help="add layerscale:scalar, :head and :frozen (docs/benchmark.md)")
    parser.add_argument("--no-timm", dest="timm", action="store_false", help="leave out timm's ViT arms")
    parser.add_argument("--depth", type=int, default=d.depth, help="blocks (default: %(default)s, ViT-Ti)")
    parser.add_argument("--dim", type=int, default=d.dim, help="width (default: %(default)s; ViT-S: 384)")
    parser.add_argument("--heads", type=int, default=d.heads, help="attention heads (default: %(default)s; ViT-S: 6)")
    parser.add_argument("--tokens", type=int, default=d.tokens,
                        help="sequence length incl. the class token, n*n+1 with patch 16 (default: 65 = 128 px; 197 = 224 px)")
    parser.add_argument("--batch", type=int, help="default: 4 on cpu, 128 on cuda")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--compile", action="store_true",
                        help="torch.compile every model (--throughput: every arm again, compiled)")
    parser.add_argument("--dtype", choices=["fp32", "bf16"], help="default: fp32 on cpu, bf16 autocast on cuda")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default: 16 on cpu, 20 on cuda)")
    parser.add_argument("--steps", type=int, help="steps per timed visit (default: 1 on cpu, 5 on cuda)")
    parser.add_argument("--warmup", type=int, help="untimed steps per arm first (default: 2 on cpu, 5 on cuda)")
    parser.add_argument("--no-forward", dest="forward", action="store_false", help="time training steps only")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: 1 on cpu, torch's on cuda)")
    parser.add_argument("--seed", type=int, default=0, help="weights, input and visiting order")
    parser.add_argument("--out", default="results/bench", help="folder for overhead.{csv,md,json}")
    parser.add_argument("--throughput", action="store_true",
                        help="measure runs per hour instead: the default ablation's shape trained solo, "
                             "co-located and packed (throughput.{csv,md,json})")
    parser.add_argument("--pack-phases", type=int, metavar="N",
                        help="host time per run by phase (setup, steps, probes, evaluation, writes), solo against one "
                             "member of an eager pack of N, and a step's operators, on the CPU instead (pack_phases.md)")
    parser.add_argument("--runs", type=int, default=4, metavar="N", help="--throughput: runs per arm (default: %(default)s)")
    parser.add_argument("--run-steps", type=int, default=100, metavar="S",
                        help="--throughput: training steps per run (default: %(default)s)")
    parser.add_argument("--co-located", type=int, nargs="+", default=None, metavar="K",
                        help="--throughput: arms of K runs at once on the device (default: 2 on cpu, 2 4 8 on cuda)")
    parser.add_argument("--packed", type=int, nargs="*", default=None, metavar="N",
                        help="--throughput: arms of N runs packed into one stacked model (default: 4 on cpu, 4 16 64 on "
                             "cuda; none: --packed with no value)")
    parser.add_argument("--gemm", type=int, metavar="N",
                        help="also time an N x N x N matmul in the same rounds, the reference for GFLOP/s "
                             "(default: 1024 on cpu, 8192 on cuda; 0 = off)")


def resolved_command(settings: dict) -> str:
    """The ``suite bench`` command line that repeats this measurement, every default spelled out."""
    s = settings
    parts = ["suite bench", "--schemes", *s["arms"][1:]] if len(s["arms"]) > 1 else ["suite bench"]
    for key in ("depth", "dim", "heads", "tokens", "batch", "device", "dtype", "rounds", "steps", "warmup",
                "threads", "seed", "gemm"):
        parts += [f"--{key}", str(s[key])]
    parts += ["--compile"] if s["compile"] else []
    parts += [] if s["forward"] else ["--no-forward"]
    return " ".join(parts)


def _refused(args: argparse.Namespace, problem: str | None) -> bool:
    """Print the first problem with the flags, a CUDA device or ``--out`` as one ``error:`` line; True if any."""
    if problem is None and args.device == "cuda" and not torch.cuda.is_available():
        problem = "--device cuda: torch sees no CUDA device; use --device cpu"
    problem = problem or writable_dir(args.out, "--out")
    if problem:
        fail(problem)
    return problem is not None


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_throughput(args: argparse.Namespace) -> int:
    """``suite bench --throughput``: runs per hour, solo against co-located and packed (suite/bench/throughput.py)."""
    from suite.bench import throughput

    co_located = args.co_located or ([2] if args.device == "cpu" else [2, 4, 8])
    packed = args.packed if args.packed is not None else ([4] if args.device == "cpu" else [4, 16, 64])
    problem = at_least(args, 1, "runs", "run_steps") or at_most(args, 10**6, "runs", "run_steps") or (
        f"--co-located {max(co_located)}: must be <= 64" if max(co_located) > 64 else None) or (
        f"--packed {max(packed)}: must be <= 1024" if packed and max(packed) > 1024 else None) or (
        f"--co-located {min(co_located)}: must be >= 2" if min(co_located) < 2 else None) or (
        f"--packed {min(packed)}: must be >= 2" if packed and min(packed) < 2 else None)
    if _refused(args, problem):
        return 2
    arms = throughput.default_arms(args.device, co_located, packed, compiled=args.compile)
    command = (f"suite bench --throughput --device {args.device} --runs {args.runs} --run-steps {args.run_steps} "
               f"--co-located {' '.join(map(str, co_located))} --packed {' '.join(map(str, packed))}".rstrip()
               + (" --compile" if args.compile else ""))
    prov = store.provenance(args.device)
    try:
        rows = throughput.measure_throughput(arms, runs=args.runs, steps=args.run_steps, device=args.device, log=_log)
    except RuntimeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    model = throughput.DEFAULT_BASE["model"]
    shape = (f"{throughput.DEFAULT_BASE['data']['name']}, depth {model['depth']}, dim {model['dim']}, "
             f"heads {model['heads']}, patch {model['patch_size']}, batch {throughput.DEFAULT_BASE['train']['batch_size']}")
    meta = {"command": command, "provenance": prov, "shape": shape}
    paths = throughput.write_outputs(Path(args.out), rows, meta)
    print(throughput.markdown(rows, meta))
    print(f"wrote {', '.join(str(p) for p in paths)}")
    return 0


def run_pack_phases(args: argparse.Namespace) -> int:
    """``suite bench --pack-phases N``: a solo run against a member of an eager pack of N, phase by phase."""
    from suite.bench import packphases

    problem = at_least(args, 2, "pack_phases") or at_most(args, 256, "pack_phases") or \
        at_least(args, 2, "run_steps") or at_most(args, 10**5, "run_steps")
    if _refused(args, problem):
        return 2
    torch.set_num_threads(1)  # one core per run, as the sweep's workers train on this machine
    result = packphases.measure(args.pack_phases, args.run_steps, log=_log)
    prov = store.provenance("cpu")
    command = f"suite bench --pack-phases {args.pack_phases} --run-steps {args.run_steps}"
    text = packphases.markdown(result, f"# `{command}`\n\n{report.provenance_line(prov)}")
    path = Path(args.out) / "pack_phases.md"
    store.atomic_write_text(path, text)
    print(text)
    print(f"wrote {path}")
    return 0


# What each mode reads; a flag of another mode set with it is refused rather than ignored.
MODE_FLAGS = {
    "overhead": {"schemes", "variants", "timm", "depth", "dim", "heads", "tokens", "batch", "device", "compile", "dtype",
                 "rounds", "steps", "warmup", "forward", "threads", "seed", "out", "gemm"},
    "throughput": {"throughput", "device", "compile", "out", "runs", "run_steps", "co_located", "packed"},
    "pack_phases": {"pack_phases", "out", "run_steps"},
}


def _unread(args: argparse.Namespace, mode: str) -> str | None:
    """The first flag set away from its default that ``mode`` does not read, as a one-line problem."""
    defaults = vars(add_arguments_parser().parse_args([]))
    for key, value in vars(args).items():
        if key in defaults and key not in MODE_FLAGS[mode] and value != defaults[key]:
            if {key, mode} == {"throughput", "pack_phases"}:
                return "--throughput and --pack-phases: two measurements; run them one at a time"
            what = {"overhead": "the overhead measurement", "throughput": "--throughput",
                    "pack_phases": "--pack-phases"}[mode]
            return f"--{key.replace('_', '-')}: {what} does not read it; drop it"
    return None


def add_arguments_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    mode = "pack_phases" if args.pack_phases is not None else "throughput" if args.throughput else "overhead"
    if problem := _unread(args, mode):
        return fail(problem)
    if mode == "pack_phases":
        return run_pack_phases(args)
    if mode == "throughput":
        return run_throughput(args)
    # The same bounds as the run config's model.depth, model.dim, train.batch_size and train.threads (RANGES)
    problem = (at_least(args, 1, "depth", "dim", "heads", "batch", "rounds", "steps", "threads", "tokens")
               or at_least(args, 0, "warmup", "gemm", "seed") or at_most(args, 1000, "depth")
               or at_most(args, 16384, "dim", "gemm", "tokens") or at_most(args, 1024, "heads", "threads")
               or at_most(args, 65536, "batch") or at_most(args, 10**6, "rounds", "steps", "warmup")
               or at_most(args, 2**63 - 1, "seed"))
    if problem is None and args.dim % args.heads:
        problem = f"--dim {args.dim} must be divisible by --heads {args.heads}"
    if problem is None and approx_params(ModelConfig(depth=args.depth, dim=args.dim)) > MAX_PARAMS:
        problem = f"--depth {args.depth} x --dim {args.dim}: more than {MAX_PARAMS:.0e} parameters; make it smaller"
    if _refused(args, problem):
        return 2
    opt = {k: getattr(args, k) if getattr(args, k) is not None else v for k, v in DEVICE_DEFAULTS[args.device].items()}
    if opt["threads"]:
        torch.set_num_threads(opt["threads"])
    names = arm_names(args.variants, args.timm) if not args.schemes else list(dict.fromkeys([BASELINE] + args.schemes))
    try:
        shape = BenchShape(depth=args.depth, dim=args.dim, heads=args.heads, tokens=args.tokens, batch=opt["batch"])
        shape.img_size  # noqa: B018  (validates tokens before anything is built)
    except ValueError as err:
        return fail(f"--tokens {args.tokens}: {err}")
    try:
        for name in names:
            check_arm(name)
    except ValueError as err:
        return fail(f"{'--schemes' if args.schemes else '--variants'}: {err}")
    settings = {**dataclasses.asdict(shape), "device": args.device, "dtype": opt["dtype"], "compile": args.compile,
                "rounds": opt["rounds"], "steps": opt["steps"], "warmup": opt["warmup"], "forward": args.forward,
                "seed": args.seed, "threads": torch.get_num_threads(), "arms": names, "gemm": opt["gemm"],
                "interval": "distribution-free 95% interval of the median of per-round ratios (order statistics)"}
    prov = store.provenance(args.device)
    t0 = time.perf_counter()
    results = measure(
        {n: (lambda n=n: build_arm(n, shape)) for n in names}, shape, device=args.device, dtype=opt["dtype"],
        compile=args.compile, rounds=opt["rounds"], warmup=opt["warmup"], steps=opt["steps"],
        forward=args.forward, seed=args.seed, log=_log, gemm=opt["gemm"])
    rows = report.build_rows(results)
    speed = report.efficiency(results, train_step_flops(shape.model_config(), shape.batch), opt["gemm"])
    meta = {"command": resolved_command(settings), "settings": settings, "provenance": prov,
            "wall_s": round(time.perf_counter() - t0, 1)}
    counted = count_arms([n for n in names if n != BASELINE], shape)  # on the CPU, after the timing
    paths = report.write_outputs(Path(args.out), results, rows, meta, speed, counted)
    print(report.markdown_table(rows))
    print(report.efficiency_table(speed, opt["gemm"]))
    print(table(counted))
    print(f"wrote {', '.join(str(p) for p in paths)} ({meta['wall_s']:.0f} s)")
    return 0
