"""``suite validate FILE...``: check ablation files and run the pre-flight, without running anything; one line per
problem and exit 2, or one ``ok`` line per file with its run count."""

from __future__ import annotations

import argparse

from suite.cli.checks import at_least, fail, shown
from suite.sweep.spec import MAX_RUNS, SpecError, load_ablation


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ablations", nargs="+", metavar="FILE", help="ablation YAML file(s)")
    parser.add_argument("--max-runs", type=int, default=MAX_RUNS, metavar="N",
                        help="refuse an ablation of more runs than this (default: %(default)s)")
    parser.add_argument("--no-data", dest="data", action="store_false",
                        help="skip the data checks: a file meant for another machine's data (e.g. CIFAR on a cluster)")


def run(args: argparse.Namespace) -> int:
    from suite.sweep.preflight import preflight  # torch: after the parse

    if problem := at_least(args, 1, "max_runs"):  # as suite run says it, not as the file's fault
        return fail(problem)
    status = 0
    for path in args.ablations:
        try:
            ablation = load_ablation(path, max_runs=args.max_runs)
        except SpecError as err:
            status = fail(*err.problems)
            continue
        problems = preflight(ablation.runs, str(path), check_device=False,  # runs may execute elsewhere
                             check_data=args.data)
        if problems:
            data = args.data and any("data." in p for p in problems)  # data meant for another machine?
            status = fail(*problems[:-1], problems[-1] + ("; or `suite validate --no-data` to check the file without "
                                                          "its data" if data else ""))
            continue
        print(shown(f"{path}: ok: '{ablation.name}', {ablation.describe()} -> results/{ablation.name}"))
        if ablation.primary is not None:
            from suite.declared import as_list

            declared = as_list(ablation.primary)
            how = "tested alone" if len(declared) == 1 else f"one of {len(declared)} tested as one family (Holm)"
            for p in declared:
                margin = f", margin {100 * p.margin:g} points" if p.margin is not None else ""
                print(shown(f"  primary comparison: {p.describe()} ({p.endpoint}{margin}), {how} at alpha 0.05"))
    return status
