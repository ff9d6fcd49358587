"""``suite bench-check``: the CI gate on LayerScale's step-time cost (:mod:`suite.bench.gate`, docs/benchmark.md)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import torch

from suite import store
from suite.bench.arms import build_arm, slow_down_layerscale
from suite.bench import gate
from suite.bench.report import provenance_line
from suite.bench.stats import summarize
from suite.cli.checks import at_least, at_most, fail, writable_dir


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--step-threshold", type=float, default=gate.STEP_THRESHOLD,
                        help="allowed training-step overhead over preln (default: %(default)s)")
    parser.add_argument("--residual-threshold", type=float, default=gate.RESIDUAL_THRESHOLD,
                        help="allowed residual-path cost over the update written out (default: %(default)s)")
    parser.add_argument("--ablation-step-threshold", type=float, default=gate.ABLATION_STEP_THRESHOLD,
                        help="allowed training-step overhead at the default ablation's shape (default: %(default)s)")
    parser.add_argument("--step-rounds", type=int, default=gate.STEP_ROUNDS,
                        help="rounds of each step check (default: %(default)s)")
    parser.add_argument("--residual-rounds", type=int, default=gate.RESIDUAL_ROUNDS, help="default: %(default)s")
    parser.add_argument("--threads", type=int, default=gate.THREADS, help="torch CPU threads (default: 1)")
    parser.add_argument("--slowdown", type=int, default=0, metavar="K",
                        help="inject K extra elementwise passes after every LayerScale: must FAIL")
    parser.add_argument("--out", default="results/bench", help="folder for gate.json")
    return parser


def _flags(args: argparse.Namespace) -> list[str]:
    """The flags that repeat this run: the round counts and threads always, every other flag not at its default."""
    defaults = vars(add_arguments(argparse.ArgumentParser()).parse_args([]))
    always = ("step_rounds", "residual_rounds", "threads")
    return [f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items()
            if k in defaults and (k in always or v != defaults[k])]


def run(args: argparse.Namespace) -> int:
    problem = (at_least(args, 1, "threads") or at_most(args, 1024, "threads")
               or at_least(args, 0, "step_threshold", "residual_threshold", "ablation_step_threshold", "slowdown")
               or at_most(args, 10**6, *[k for k in vars(args) if k.endswith("rounds")])
               or at_most(args, 1000, "slowdown")
               or writable_dir(args.out, "--out"))
    if problem:
        return fail(problem)
    for flag in ("step_rounds", "residual_rounds"):
        if getattr(args, flag) < gate.min_rounds():
            return fail(f"--{flag.replace('_', '-')} {getattr(args, flag)}: the gate needs at least {gate.min_rounds()} "
                        f"rounds for a 95% interval and will not judge without one; pass --{flag.replace('_', '-')} "
                        f"{gate.min_rounds()} or more")
    torch.set_num_threads(args.threads)
    shape = gate.GATE_SHAPE

    def candidate(at):  # the LayerScale model each check times: ours, or ours slowed down on purpose
        if not args.slowdown:
            return None
        return lambda: slow_down_layerscale(build_arm("layerscale", at), args.slowdown)

    t0 = time.perf_counter()
    print(f"bench-check: LayerScale vs Pre-LN on cpu ({args.threads} thread(s)), depth {shape.depth}, dim "
          f"{shape.dim}, tokens {shape.tokens}; step batch {shape.batch} x {args.step_rounds} rounds (and at the "
          f"default ablation's shape: dim {gate.ABLATION_SHAPE.dim}, tokens {gate.ABLATION_SHAPE.tokens}, batch "
          f"{gate.ABLATION_SHAPE.batch}), residual path batch {gate.RESIDUAL_BATCH} x {args.residual_rounds} rounds"
          + (f"; injected slowdown: {args.slowdown} extra pass(es)" if args.slowdown else ""), flush=True)
    results, table = {}, ["| check | overhead, median [95% interval] | threshold | verdict | time |",
                          "|---|---|---:|---|---:|"]
    for name, what, fn, threshold, rounds, at in (
        ("step", "training-step overhead over preln (ViT-Ti)", gate.measure_step, args.step_threshold,
         args.step_rounds, shape),
        ("ablation-step", "training-step overhead over preln (default ablation's shape)", gate.measure_step,
         args.ablation_step_threshold, args.step_rounds, gate.ABLATION_SHAPE),
        ("residual", "residual-path cost over the update written out", gate.measure_residual,
         args.residual_threshold, args.residual_rounds, shape),
    ):
        t1 = time.perf_counter()
        passed, message, ratios = gate.check(fn, threshold, what, shape=at, rounds=rounds, candidate=candidate(at))
        s = summarize(ratios)
        results[name] = {"passed": passed, "message": message, "threshold": threshold, "median": s.median,
                         "low": s.low, "high": s.high, "rounds": s.n, "wall_s": round(time.perf_counter() - t1, 1),
                         "ratios": ratios.tolist()}
        table.append(f"| {name} | {s.format()} | {100 * threshold:+.1f}% | {'PASS' if passed else 'FAIL'} "
                     f"| {results[name]['wall_s']:.0f} s |")
    ok = all(r["passed"] for r in results.values())
    messages = [r["message"] for r in results.values()]
    print("\n" + "\n".join(table) + "\n\n" + "\n".join(messages))
    wall = time.perf_counter() - t0
    prov = store.provenance("cpu")
    store.write_json(Path(args.out) / "gate.json", {
        "passed": ok, "checks": results, "slowdown": args.slowdown, "threads": args.threads, "wall_s": round(wall, 1),
        "shape": dataclasses.asdict(shape), "ablation_shape": dataclasses.asdict(gate.ABLATION_SHAPE),
        "residual_batch": gate.RESIDUAL_BATCH, "provenance": prov})
    command = " ".join(["suite bench-check", *_flags(args)])
    store.atomic_write_text(Path(args.out) / "gate.md", "\n".join([
        "# The CI gate on LayerScale's step-time cost\n", f"`{command}`\n",
        f"{provenance_line(prov)}; {wall:.0f} s. Shape: depth {shape.depth}, dim {shape.dim}, heads {shape.heads}, "
        f"tokens {shape.tokens}; step batch {shape.batch}, residual-path batch {gate.RESIDUAL_BATCH}; the "
        f"ablation-step check at depth {gate.ABLATION_SHAPE.depth}, dim {gate.ABLATION_SHAPE.dim}, heads "
        f"{gate.ABLATION_SHAPE.heads}, tokens {gate.ABLATION_SHAPE.tokens}, batch {gate.ABLATION_SHAPE.batch}.\n",
        *table, "", *messages, ""]))
    if not ok:
        print("\nbench-check FAILED: LayerScale got slower. Look for an extra pass over the activations in "
              "suite/models/layerscale.py (LayerScale.forward) or PreLNBlock.forward; if the cost is "
              "intended, update the threshold in suite/bench/gate.py and docs/benchmark.md.", file=sys.stderr)
    print(f"bench-check {'PASSED' if ok else 'FAILED'} in {wall:.0f} s")
    return 0 if ok else 1
