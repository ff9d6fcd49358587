"""``suite cost FILE [--tflops T | --measured MS@DEPTH | --measure] [--workers N]``: an ablation's steps, FLOPs,
device-hours and wall clock before it runs (an upper bound)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re

from suite.cli.checks import at_least, at_most, fail, shown
from suite.sweep.spec import MAX_RUNS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ablation", metavar="FILE", help="ablation YAML")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--tflops", type=float, default=None, metavar="T",
                     help="sustained training throughput to assume, in TFLOP/s (default: 100)")
    how.add_argument("--measured", metavar="MS@DEPTH", help="a step time you measured for this ablation's first run "
                     "shape at that depth, e.g. 38.5@12; the throughput is derived from it")
    how.add_argument("--measure", action="store_true",
                     help="time a few training steps of the first run's shape on this machine's CPU (with "
                          "cores // workers threads) and derive the throughput from them")
    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help="workers (or devices) running at once, for the wall-clock estimate (default: 1)")
    parser.add_argument("--max-runs", type=int, default=MAX_RUNS, metavar="N",
                        help="refuse an ablation of more runs than this (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    from suite.models.flops import train_step_flops
    from suite.sweep.cost import CostError, cost_shape, estimate, measure_step_ms
    from suite.sweep.spec import SpecError, load_ablation
    from suite.sweep.status import format_duration

    if problem := at_least(args, 1, "workers", "max_runs") or at_most(args, 4096, "workers"):
        return fail(problem)
    try:
        ablation = load_ablation(args.ablation, max_runs=args.max_runs)
        cost = estimate(ablation)
        if args.measure:
            threads = max(1, (os.cpu_count() or 1) // args.workers)
            cfg, _ = cost_shape(ablation.runs[0].cfg)
            ms = measure_step_ms(cfg, threads)
            tflops = train_step_flops(cfg.model, cfg.train.batch_size) / (ms / 1e3) / 1e12
            source = (f"measured here: {ms:.1f} ms per step of the first run's shape (depth {cfg.model.depth}) "
                      f"with {threads} CPU thread{'s' if threads > 1 else ''}")
        elif args.measured:
            match = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*@\s*(\d+)\s*", args.measured)
            # MS: up to 10^9 ms (11 days a step); a longer one overflowed into a zero rate (ZeroDivisionError)
            if (not match or not 0 < float(match.group(1)) <= 1e9 or len(match.group(2)) > 4
                    or not 1 <= int(match.group(2)) <= 1000):  # model.depth's range
                return fail(f"--measured {args.measured[:40]}: expected MS@DEPTH (MS > 0 and at most 1e9, DEPTH from "
                            f"1 to 1000), e.g. 38.5@12")
            ms, depth = float(match.group(1)), int(match.group(2))
            cfg, _ = cost_shape(ablation.runs[0].cfg)
            model = dataclasses.replace(cfg.model, depth=depth)
            tflops = train_step_flops(model, cfg.train.batch_size) / (ms / 1e3) / 1e12
            source = f"derived from {ms:g} ms per step at depth {depth}"
        else:
            tflops = args.tflops if args.tflops is not None else 100.0
            if not 1e-6 <= tflops <= 1e6:  # a microflop machine to an exaflop one: past those, a typo
                return fail(f"--tflops {tflops:g}: the sustained TFLOP/s of one device, from 1e-06 to 1e+06")
            source = "assumed, a large GPU's; --measure times a step here instead" if args.tflops is None else "given"
    except SpecError as err:
        return fail(*err.problems)
    except CostError as err:
        return fail(f"{args.ablation}: {err}")
    print(shown(f"{args.ablation}: {ablation.describe()}"))
    unit, scale = next((u, x) for u, x in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9)) if cost.flops >= 0.1 * x
                       or u == "GFLOP")
    print(f"  {cost.steps:,} optimizer steps, {cost.flops / scale:,.1f} {unit} of training (matmuls, forward + "
          f"backward)")
    rate = f"{tflops:,.1f} TFLOP/s" if tflops >= 1 else f"{tflops * 1e3:,.1f} GFLOP/s"
    hours = cost.hours(tflops)
    amount = f"{hours:,.2f} device-hours" if hours >= 0.1 else f"{format_duration(hours * 3600)} of device time"
    print(f"  {amount} at {rate} sustained ({source}); an upper bound: diverged runs end early")
    n = args.workers
    print(f"  wall clock with {n} worker{'s' if n > 1 else ''} at that rate each: about "
          f"{format_duration(hours * 3600 / min(n, cost.runs))} of training, plus each worker's start-up and "
          f"each run's data loading and evaluation")
    return 0
