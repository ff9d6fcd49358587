"""``suite status DIR [--watch [S]]``: where a sweep stands, from its results folder alone (any machine)."""

from __future__ import annotations

import argparse
import time

from suite.cli.checks import at_least, at_most, fail, shown


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out", metavar="DIR", help="the results folder of a `suite run` (its --out)")
    parser.add_argument("--watch", nargs="?", type=float, const=10.0, default=None, metavar="S",
                        help="redraw every S seconds (default 10) until every run is done or Ctrl-C")


def render(status) -> str:
    from suite.store import STATUSES
    from suite.sweep.status import STATES, format_duration

    counts, total = status.counts, len(status.runs)
    lines = [f"{status.name}: {total} runs: " + ", ".join(f"{counts[s]} {s}" for s in STATES)]
    done = status.statuses
    if counts["done"]:
        lines.append("  done: " + ", ".join(f"{done[s]} {s}" for s in STATUSES))
    n_running = counts["running"]
    if status.mean_run_s is None:
        pace = "no finished run to time yet"
    else:
        pace = f"a run takes {format_duration(status.mean_run_s)} (mean of the last finished)"
        if status.runs_per_hour is not None:
            pace += f"; {n_running} running: {status.runs_per_hour:.1f} runs/hour"
    eta = format_duration(status.eta_s) if status.eta_s is not None else (
        "none: no run is running (run the same `suite run` again to finish)" if total > counts["done"] and not n_running
        else "unknown")
    lines.append(f"  {pace}; eta {eta}")
    if status.from_csv:
        lines.append(f"  {status.from_csv} of the runs done have no run folder here, only a row of runs.csv (a committed "
                     f"results folder): `suite run` into this folder would train them again")
    if gone := [v for v in status.runs if v.worker_gone]:
        lines.append(f"  {len(gone)} runs interrupted: their worker is gone (its claim is dead or missing); "
                     f"the next `suite run` resumes them")
    width = max([len(v) for v in status.by_variant] + [7])
    lines += ["", f"  {'variant':<{width}}  " + "  ".join(f"{s:>11}" for s in STATES + STATUSES)]
    lines += [f"  {variant:<{width}}  " + "  ".join(f"{c[s]:>11}" for s in STATES + STATUSES)
              for variant, c in status.by_variant.items()]
    if status.slurm is not None:
        sl = status.slurm
        where = "local executor" if sl.cluster == "local" else "Slurm"
        line = f"  slurm: last submission {sl.jobs} worker jobs ({where}) at {sl.submitted_at}; {sl.claimed} runs claimed"
        if sl.expired:
            line += (f", {sl.expired} claims not renewed within the {sl.lease_s:g} s lease (dead workers: another "
                     f"worker or the next `suite run` takes them over)")
        lines.append(line)
    if running := [v for v in status.runs if v.state == "running"]:
        lines += ["", "running:"] + [f"  {v.run.label}  step {v.step if v.step is not None else '?'}/"
                                     f"{v.steps if v.steps is not None else '?'}" for v in running]
    if status.errors:
        lines += ["", "errors (rerun them with suite run --retry-errors):"]
        lines += [f"  {v.run.label}  {shown(v.folder)}: {shown(v.error or 'no message')}" for v in status.errors]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from suite.sweep.status import StatusError, sweep_status

    if problem := at_least(args, 0.1, "watch") or at_most(args, 86400, "watch"):  # not a busy loop, not OverflowError
        return fail(f"{problem} (seconds between redraws)")
    try:
        while True:
            status = sweep_status(args.out)
            text = render(status)
            if args.watch is None:
                print(text)
                return 0
            print("\033[2J\033[H" + text + f"\n\n(every {args.watch:g} s; Ctrl-C to stop)", flush=True)
            if status.counts["done"] == len(status.runs):
                return 0
            time.sleep(args.watch)
    except StatusError as err:
        return fail(str(err))
    except KeyboardInterrupt:
        return 0
