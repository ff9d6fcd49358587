"""Would `train.fail_patience: N` change any status of an ablation? Answered from full runs.

Usage: python scripts/check_fail_patience.py FULL_DIR N[,N...] [STOPPED_DIR] > report.md

FULL_DIR holds the ablation run with ``fail_patience: null`` (every run trained to the end). A run
is stopped by a patience N exactly when its longest streak of steps at chance after warm-up
(``chance_streak_max``) reaches N, and a stopped run is ``failed``; so its status under N is
predicted without running it again. With STOPPED_DIR (the same ablation run with the patience),
the prediction is checked run by run against what happened. Prints a Markdown report; exits 1 if
a status would change (or changed), 2 on bad input.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

KEYS = ("variant", "model.depth", "train.lr", "seed")


def load(folder: Path) -> dict[tuple, dict]:
    runs = {}
    for path in sorted(folder.glob("runs/*/summary.json")):
        s = json.loads(path.read_text())
        runs[tuple(s.get(k) for k in KEYS)] = s
    if not runs:
        raise SystemExit(f"error: {folder}: no runs/*/summary.json; pass a folder `suite run` wrote")
    return runs


def main(argv: list[str]) -> int:
    values = argv[1].split(",") if len(argv) in (2, 3) else []
    if not values or not all(v.isdigit() and int(v) > 0 for v in values):
        print("usage: check_fail_patience.py FULL_DIR N[,N...] [STOPPED_DIR]", file=sys.stderr)
        return 2
    full = load(Path(argv[0]))
    stopped = load(Path(argv[2])) if len(argv) == 3 else None
    reports, status = [], 0
    for value in values:
        text, code = report(full, int(value), stopped, argv)
        reports.append(text)
        status = max(status, code)
    print("\n\n".join(reports))
    return status


def report(full: dict[tuple, dict], patience: int, stopped: dict[tuple, dict] | None,
           argv: list[str]) -> tuple[str, int]:
    changed, checked, mismatched, saved = [], 0, [], 0
    for key, s in sorted(full.items(), key=lambda kv: str(kv[0])):
        if s["status"] == "error":  # no result to change, and no streak recorded
            continue
        streak = s.get("chance_streak_max")
        if streak is None:
            raise SystemExit(f"error: {key}: no chance_streak_max (run made before it was recorded)")
        hit = streak >= patience
        predicted = "failed" if hit else s["status"]
        if predicted != s["status"]:
            changed.append((key, s["status"], streak))
        if hit:
            warmup = s["train.warmup_steps"]
            saved += s["steps_done"] - (warmup + patience)
        if stopped is not None and key in stopped:
            checked += 1
            if stopped[key]["status"] != predicted:
                mismatched.append((key, predicted, stopped[key]["status"]))
    total = sum(s["steps_done"] for s in full.values())
    by_status: dict[str, int] = {}
    for s in full.values():
        by_status[s["status"]] = by_status.get(s["status"], 0) + 1
    longest_ok = max((s["chance_streak_max"] for s in full.values() if s["status"] not in ("failed", "error")),
                     default=0)
    lines = [
        f"## Does `train.fail_patience: {patience}` change a status?", "",
        f"From {len(full)} runs trained to the end ({argv[0]}; "
        + ", ".join(f"{n} {k}" for k, n in sorted(by_status.items())) + ").", "",
        f"- Longest streak at chance after warm-up among runs that did not fail: {longest_ok} steps "
        f"(the patience must exceed it).",
        f"- Runs the patience would stop: "
        f"{sum((s['chance_streak_max'] or 0) >= patience for s in full.values() if s['status'] != 'error')}, "
        f"all of them `failed` when trained to the end: {'yes' if not changed else 'NO'}.",
        f"- Statuses changed: {len(changed)}.",
        f"- Optimizer steps saved, at most (a streak counted from the end of warm-up): {saved:,} of {total:,} "
        f"({100 * saved / total:.1f}%).",
    ]
    for key, status, streak in changed:
        lines.append(f"  - {dict(zip(KEYS, key))}: {status} when trained to the end, streak {streak}")
    if stopped is not None:
        lines.append(f"- Checked against the ablation run with the patience ({argv[2]}): {checked} runs matched "
                     f"by {', '.join(KEYS)}; statuses as predicted: {checked - len(mismatched)} of {checked}.")
        for key, want, got in mismatched:
            lines.append(f"  - {dict(zip(KEYS, key))}: predicted {want}, got {got}")
    return "\n".join(lines), 1 if changed or mismatched else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
