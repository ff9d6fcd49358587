"""One arm of ``suite bench --throughput``, its row written the moment it finishes: ``make gpu-check``'s
throughput steps, one process and one time limit per arm, so a limit reached loses only that arm.

    python scripts/throughput_arm.py ARM --runs N --run-steps S --device cuda --out DIR [--tiny]

ARM is ``solo``, ``co-located-K`` or ``packed-N`` (:func:`suite.bench.throughput.default_arms`'s arms:
on a GPU one worker per run at a time, K workers sharing the GPU, or N runs packed into one stacked
model). The arm trains ``--runs`` runs of the default ablation's shape (``DEFAULT_BASE``) through
:func:`suite.bench.throughput.measure_throughput`, after its untimed warm-up, and writes
``DIR/ARM.json``: the row (wall time, runs per hour, statuses) with the command, shape and
provenance. ``--tiny`` trains the same runs, steps and packs at width 8 and batch 2, one thread per
worker as on a GPU (gpu-check's dry runs on the CPU: the same processes, runs and operators per step,
tiny tensors). Exit 1 and one
``error:`` line if a run ended in error; 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

ARM = re.compile(r"solo|co-located-(\d+)|packed-(\d+)")
LIMITS = {"co-located": 64, "packed": 1024}  # what `suite bench --throughput` accepts
TINY = {"model": {"dim": 8, "heads": 2}, "train": {"batch_size": 2}}


def base(tiny: bool) -> dict[str, dict[str, Any]]:
    """The default ablation's shape (``DEFAULT_BASE``), or with :data:`TINY`'s width and batch."""
    from suite.bench.throughput import DEFAULT_BASE

    out = {k: dict(v) for k, v in DEFAULT_BASE.items()}
    for key, values in (TINY.items() if tiny else ()):
        out[key].update(values)
    return out


def parse_arm(name: str) -> tuple[str, int] | None:
    """(kind, K or N) of ``solo`` (1), ``co-located-K`` (2 <= K <= 64) or ``packed-N`` (2 <= N <= 1024);
    None for anything else."""
    m = ARM.fullmatch(name)
    if m is None:
        return None
    if name == "solo":
        return "solo", 1
    kind, n = name.rsplit("-", 1)
    return (kind, int(n)) if 2 <= int(n) <= LIMITS[kind] else None


def pick(name: str, device: str):  # noqa: ANN201  (a suite.bench.throughput.Arm)
    """The arm ``name`` as :func:`suite.bench.throughput.default_arms` builds it for ``device``."""
    from suite.bench.throughput import default_arms

    kind, n = parse_arm(name)
    arms = default_arms(device, [n] if kind == "co-located" else [], [n] if kind == "packed" else [])
    return next(a for a in arms if a.name.replace(" ", "-") == name)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("arm", help="solo, co-located-K (2..64) or packed-N (2..1024)")
    parser.add_argument("--runs", type=int, required=True, metavar="N")
    parser.add_argument("--run-steps", type=int, default=100, metavar="S")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    parser.add_argument("--out", required=True, help="folder for ARM.json")
    parser.add_argument("--tiny", action="store_true", help="width 8, batch 2 (dry runs on the CPU)")
    args = parser.parse_args(argv)
    if parse_arm(args.arm) is None:
        parser.error(f"ARM {args.arm!r}: expected solo, co-located-K (K 2..64) or packed-N (N 2..1024)")
    if not 1 <= args.runs <= 10**4 or not 1 <= args.run_steps <= 10**6:
        parser.error("--runs must be 1..10000 and --run-steps 1..1000000")

    from suite import store
    from suite.bench.throughput import measure_throughput

    # --tiny lays the arm out as on a GPU (one thread per worker): on a shared CPU a second thread per
    # worker waits at every operator's barrier whenever a neighbour holds its core
    arm, shape = pick(args.arm, "cuda" if args.tiny else args.device), base(args.tiny)
    command = " ".join(["python scripts/throughput_arm.py", *argv])
    prov = store.provenance(args.device)
    try:
        (row,) = measure_throughput([arm], runs=args.runs, steps=args.run_steps, device=args.device, base=shape,
                                    log=lambda line: print(line, flush=True))
    except RuntimeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    row.pop("speedup", None)  # against itself; gpu-check's table divides by the solo arm's row
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    store.write_json(out / f"{args.arm}.json", {"row": row, "command": command, "shape": shape, "provenance": prov})
    print(f"{args.arm}: {row['runs']} runs of {row['steps']} steps in {row['wall_s']:.1f} s, "
          f"{row['runs_per_hour']:.0f} runs per hour; wrote {out / (args.arm + '.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
