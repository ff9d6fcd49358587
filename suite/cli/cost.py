"""``suite cost FILE [--tflops T | --measured MS@DEPTH]``: the steps, FLOPs and device-hours of an
ablation before it runs (an upper bound: diverged runs end early)."""

from __future__ import annotations

import argparse
import math
import re
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ablation", metavar="FILE", help="ablation YAML")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--tflops", type=float, default=None, metavar="T",
                     help="sustained training throughput to assume, in TFLOP/s (default: 100)")
    how.add_argument("--measured", metavar="MS@DEPTH",
                     help="a step time you measured for this ablation's first run shape at that depth, "
                          "e.g. 38.5@12; the throughput is derived from it")


def run(args: argparse.Namespace) -> int:
    import dataclasses

    from suite.models.flops import train_step_flops
    from suite.sweep.cost import CostError, _shape, estimate
    from suite.sweep.spec import SpecError, load_ablation

    try:
        ablation = load_ablation(args.ablation)
        cost = estimate(ablation)
        if args.measured:
            match = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*@\s*(\d+)\s*", args.measured)
            if not match or float(match.group(1)) <= 0 or not 1 <= int(match.group(2)) <= 1000:  # model.depth's range
                print(f"error: --measured {args.measured}: expected MS@DEPTH (MS > 0, DEPTH from 1 to 1000), "
                      f"e.g. 38.5@12", file=sys.stderr)
                return 2
            ms, depth = float(match.group(1)), int(match.group(2))
            cfg, _ = _shape(ablation.runs[0].cfg)
            model = dataclasses.replace(cfg.model, depth=depth)
            tflops = train_step_flops(model, cfg.train.batch_size) / (ms / 1e3) / 1e12
            source = f"derived from {ms:g} ms per step at depth {depth}"
        else:
            tflops = args.tflops if args.tflops is not None else 100.0
            if not 0 < tflops < math.inf:
                print("error: --tflops must be a finite number > 0", file=sys.stderr)
                return 2
            source = "assumed" if args.tflops is None else "given"
    except SpecError as err:
        for line in err.problems:
            print(f"error: {line}", file=sys.stderr)
        return 2
    except CostError as err:
        print(f"error: {args.ablation}: {err}", file=sys.stderr)
        return 2
    print(f"{args.ablation}: {ablation.describe()}")
    print(f"  {cost.steps:,} optimizer steps, {cost.flops / 1e15:,.1f} PFLOP of training (matmuls, forward + backward)")
    rate = f"{tflops:,.1f} TFLOP/s" if tflops >= 1 else f"{tflops * 1e3:,.1f} GFLOP/s"
    print(f"  {cost.hours(tflops):,.2f} device-hours at {rate} sustained ({source}); "
          f"an upper bound: diverged runs end early")
    return 0
