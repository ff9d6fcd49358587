"""`make gpu-check OUT=DIR`: the one prepared check for a machine with a GPU, unattended, within 10 minutes.

Before the first step it checks Python >= 3.11, ``import torchvision``, a C compiler and free disk
(scripts/gpu_prechecks.py), printing one line with the fix for each that fails (exit 2). Then it
prints every step's time limit and estimate and their sum, which with the CUDA probe stays within
:data:`gpu_check_budget.BUDGET_S` (600 s). Steps (scripts/gpu_check_steps.py):

- pytest-cuda: the tests marked ``cuda``; the steps they claim never wait for the host run under
  ``torch.cuda.set_sync_debug_mode("error")`` (the ``sync_free`` fixture, tests/conftest.py);
- overhead-eager, overhead-compiled: LayerScale's training-step overhead on ViT-S/16 at 224 px,
  bf16, eager and compiled block by block as training compiles, for Pre-LN, LayerScale and timm's;
- throughput-solo, -co-located-4, -packed-16, -packed-64: runs per GPU-hour at the default
  ablation's shape, one arm per step (scripts/throughput_arm.py), so a limit reached loses one arm;
- deep-preln, deep-layerscale: 40 steps at depth 96.

Each step runs under its own limit (its whole process group is killed past it) and, the moment it
ends, appends its table to DIR/tables.md and a row to DIR/summary.md; a throughput arm's row goes to
DIR/throughput/ARM.json and DIR/throughput/throughput.md gathers the arms finished so far. Output is
in DIR/<step>.log. The compile caches (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR) are set once for the
whole check, to DIR/cache/ unless already set, so a step, or a later check with the same DIR, reuses
what an earlier one compiled for the same shapes.

With no GPU at all (no working nvidia-smi, no /dev/nvidia0) it prints one line and exits 0; with a GPU
that torch cannot use it prints the probe's error and exits 1; else it exits 1 if any step failed,
timed out or wrote no table. ``GPU_CHECK_ONLY=STEP,STEP`` runs only those, adding their rows to what
DIR holds (a rerun of what a lease cut short, or the check split over two commands). ``GPU_CHECK_DRY=1`` runs every step on the CPU at the smallest counts
(tests/test_gpu_check.py); ``GPU_CHECK_DRY=full`` at the GPU's counts with tiny tensors, and
``--calibrate [DIR]`` does that and records each step's seconds in scripts/gpu_check_dry.json, from
which the limits are set (scripts/gpu_check_budget.py).

``--check-python`` checks only the Python (the Makefile's first line for a venv on an existing torch);
``--needs`` prints what ``make gpu-check USE_SYSTEM_TORCH=1`` installs beside an existing torch;
``--wheels`` the pinned closure of it that ``make wheelhouse`` downloads.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]  # gpu_check_*, suite

import gpu_prechecks  # noqa: E402  (importable on any Python 3: it says when this one is too old)

ROOT = Path(__file__).resolve().parents[1]
# nvidia-smi and torch's first CUDA call (tests on a loaded CPU: more)
PROBE_S = int(os.environ.get("GPU_CHECK_PROBE_S", 30))
DRY_LIMIT_S = 900  # a step's limit on the CPU (dry runs measure; they are not what the budget is for)
NOT_OURS = re.compile(r"torch|torchvision|triton|nvidia-.*|cuda-.*")  # what the machine's torch brings


def needs() -> list[str]:
    """The suite's dependencies but torch, by name only (whatever versions the machine has), and pytest;
    and torchvision pinned to this Python's torch when it cannot be imported here."""
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = [re.match(r"[A-Za-z0-9_.-]+", d)[0] for d in deps]
    found = [n for n in names if not NOT_OURS.fullmatch(n.lower())] + ["pytest"]
    torch = gpu_prechecks.installed_version("torch")
    match = gpu_prechecks.torchvision_for(torch) if torch else None
    if match and gpu_prechecks.torchvision_problem() is not None:
        found.append(f"torchvision=={match}")
    return found


def wheels() -> list[str]:
    """``name==version`` of every installed distribution :func:`needs` pulls in, CUDA's excepted."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pinned, todo = {}, [Requirement(n) for n in needs() if not n.startswith("torchvision")]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in pinned or NOT_OURS.fullmatch(name) or (req.marker and not req.marker.evaluate({"extra": ""})):
            continue
        dist = metadata.distribution(name)
        pinned[name] = dist.version
        todo += [Requirement(r) for r in dist.requires or []]
    return [f"{n}=={v}" for n, v in sorted(pinned.items())]


def _cells(row: dict, keys: tuple[str, ...]) -> str:
    return "| " + " | ".join(str(row.get(k)) for k in keys) + " |\n"


def throughput_table(folder: Path, arms: list[str]) -> str | None:
    """The arms of ``arms`` that wrote ``folder/ARM.json`` so far, as one table with speed-ups over
    ``solo`` (``-`` until solo has finished); None if none has."""
    rows = [json.loads((folder / f"{a}.json").read_text()) for a in arms if (folder / f"{a}.json").exists()]
    if not rows:
        return None
    solo = next((r["row"]["runs_per_hour"] for r in rows if r["row"]["arm"] == "solo"), None)
    lines = ["| arm | workers | pack | runs | steps | wall s | runs / hour | vs solo | statuses |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in (r["row"] for r in rows):
        ratio = f"{r['runs_per_hour'] / solo:.2f}x" if solo else "-"
        lines.append(f"| {r['arm']} | {r['workers']} | {r['pack']} | {r['runs']} | {r['steps']} | {r['wall_s']:.1f} | "
                     f"{r['runs_per_hour']:.0f} | {ratio} | {r['statuses']} |")
    return "\n".join(lines) + "\n"


def table(step, out: Path) -> str | None:  # noqa: ANN001  (a gpu_check_steps.Step)
    """Step ``step``'s table in Markdown, or None if the step wrote none."""
    if step.kind == "pytest":
        log = (out / f"{step.name}.log").read_text()
        rows = [line.split(" ", 1) for line in log.splitlines()
                if line.split(" ", 1)[0] in ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS")]
        return "| outcome | test |\n|---|---|\n" + "".join(f"| {o} | {t} |\n" for o, t in rows) if rows else None
    if step.kind == "deep":
        path = out / step.name / "summary.json"
        if not path.exists():
            return None
        keys = ("model.residual", "model.depth", "status", "steps_done", "final_train_loss", "test_acc",
                "step_time_ms", "diverged_step", "device_name")
        return f"| {' | '.join(keys)} |\n|{'---|' * len(keys)}\n" + _cells(json.loads(path.read_text()), keys)
    if step.kind == "throughput":
        return throughput_table(out / "throughput", [step.name.removeprefix("throughput-")])
    path = out / step.name / "overhead.md"
    return path.read_text() if path.exists() else None


def become_subreaper() -> bool:
    """Make this process adopt its orphaned descendants (Linux ``PR_SET_CHILD_SUBREAPER``), so that
    :func:`reap` can wait for a step's fork server and workers and count their CPU time; False elsewhere."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def reap(pgid: int, within: float = 10.0) -> None:
    """End what a finished step left in its process group and wait for every process handed to this
    one (at most ``within`` seconds): their CPU time then counts in ``RUSAGE_CHILDREN``. Only for a
    process of its own (``--calibrate``): it waits for any child."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                time.sleep(0.05)
        except ChildProcessError:
            return


def cpu_seconds() -> float:
    """User + system CPU seconds of every waited-for descendant so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run(step, limit: int, out: Path, env: dict[str, str], arms: list[str] = (),  # noqa: ANN001
        reaping: bool = False) -> tuple[bool, float, float | None]:
    """Run ``step`` under ``limit`` seconds (its whole process group), then write its table and summary
    row (and, for a throughput arm, the table of every arm in ``arms`` finished so far). Returns
    (ok, wall seconds, CPU seconds of the step's processes, or None unless ``reaping``: :func:`reap`)."""
    print(f"== {step.name} (limit {limit} s): {' '.join(step.command)}", flush=True)
    t0, cpu0 = time.monotonic(), cpu_seconds()
    with open(out / f"{step.name}.log", "w") as log:
        proc = subprocess.Popen(step.command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc = f"{proc.wait()} (timed out)"
    seconds = time.monotonic() - t0
    if reaping:
        reap(proc.pid)
    cpu = cpu_seconds() - cpu0 if reaping else None
    found = table(step, out)
    ok = rc == 0 and found is not None
    if found is not None:
        with open(out / "tables.md", "a") as f:
            f.write(f"## {step.name}\n\n`{' '.join(step.command)}`\n\n{found}\n")
    gathered = throughput_table(out / "throughput", list(arms)) if step.kind == "throughput" else None
    if gathered is not None:
        (out / "throughput" / "throughput.md").write_text(f"# Runs per GPU-hour, one arm per step\n\n{gathered}")
    with open(out / "summary.md", "a") as f:
        f.write(f"| {step.name} | {'ok' if ok else 'FAILED'} | {rc} | {seconds:.0f} | "
                f"{'-' if cpu is None else f'{cpu:.0f}'} | {limit} | {'yes' if found is not None else 'MISSING'} |\n")
    print(found if ok else (out / f"{step.name}.log").read_text()[-3000:], flush=True)
    return ok, seconds, cpu


def gpu_present() -> bool:
    """A GPU is there: /dev/nvidia0 exists or nvidia-smi answers (a hanging one counts: a driver is there)."""
    smi = shutil.which("nvidia-smi")
    try:
        return Path("/dev/nvidia0").exists() or (smi is not None and subprocess.run(
            [smi], capture_output=True, timeout=PROBE_S / 3).returncode == 0)
    except subprocess.TimeoutExpired:
        return True


def probe(env: dict[str, str]) -> tuple[bool, str]:
    """(torch computes on the GPU, its versions and device or the error)."""
    code = ("import torch; torch.ones(1, device='cuda').sum().item(); "
            "print('torch', torch.__version__, 'CUDA', torch.version.cuda, torch.cuda.get_device_name())")
    try:
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           timeout=PROBE_S * 2 / 3)
    except subprocess.TimeoutExpired:
        return False, f"{sys.executable}: torch did not reach the GPU within {PROBE_S * 2 // 3} s"
    return p.returncode == 0, p.stdout.strip() if p.returncode == 0 else p.stderr


def plan(out: Path, mode: str) -> list[tuple[object, int, tuple[float, float]]]:
    """(step, limit, estimate) of every step in ``mode``: on the GPU the limit is scripts/gpu_check_budget.py's
    (from the measured dry run, or FACTOR x the estimate's high end for a step never measured)."""
    import gpu_check_budget as budget
    from gpu_check_steps import steps

    dry, only = budget.load_dry_times(), os.environ.get("GPU_CHECK_ONLY")
    found = []
    for step in steps(out, mode):
        if only and step.name not in only.split(","):
            continue
        est = budget.estimate(step.work)
        if mode != "gpu":
            limit = DRY_LIMIT_S
        elif step.name in dry:
            limit = budget.limit(dry[step.name]["dry_s"], step.work)
        else:
            limit = math.ceil(budget.FACTOR * est[1])
        found.append((step, limit, est))
    return found


def starting_line(mode: str, planned: list, on_gpu: list) -> str:
    """What the check says before its first step: the steps, the sum of the GPU's limits with the probe
    against the budget, and the estimates' sums."""
    import gpu_check_budget as budget

    total = sum(limit for _, limit, _ in on_gpu) + PROBE_S
    low, high = sum(e[0] for *_, e in on_gpu), sum(e[1] for *_, e in on_gpu)
    where = "on the GPU" if mode == "gpu" else f"dry run on the CPU ({mode}; every limit {DRY_LIMIT_S} s)"
    return (f"gpu-check, {where}: {len(planned)} steps; on an H200 the time limits sum to "
            f"{total - PROBE_S} s, {total} s with the {PROBE_S} s CUDA probe (budget {budget.BUDGET_S} s); "
            f"estimated {low:.0f}-{high:.0f} s")


def normalized(command: list[str], out: Path) -> list[str]:
    """``command`` with this Python, ``out`` and the checkout spelled ``python``, ``OUT``, ``ROOT``."""
    return ["python" if c == sys.executable else c.replace(str(out), "OUT").replace(str(ROOT), "ROOT") for c in command]


def calibration(out: Path, planned: list, seconds: dict[str, tuple[float, float | None]],
                load: tuple[float, float]) -> dict:
    """What ``--calibrate`` records: each step's CPU seconds (``dry_s``: user + system of all its
    processes, which neighbours on a shared machine stretch less than the wall time, also kept), its
    normalised command, the machine and the commit."""
    from suite import store

    prov = store.provenance("cpu")
    steps = {s.name: {"dry_s": round(cpu if cpu is not None else wall, 1), "wall_s": round(wall, 1),
                      "command": normalized(s.command, out)}
             for s, _, _ in planned for wall, cpu in [seconds[s.name]]}
    return {"measured_with": "python scripts/gpu_check.py --calibrate (GPU_CHECK_DRY=full)",
            "machine": prov.get("device_name"), "torch": prov.get("torch_version"), "commit": prov.get("git_commit"),
            "date": prov.get("started_at"), "load_average_1min": {"before": load[0], "after": load[1]},
            "steps": steps}


def main(argv: list[str]) -> int:
    problem = gpu_prechecks.python_problem()
    if problem:
        print(f"gpu-check: {problem}", file=sys.stderr)
        return 2
    if argv[:1] == ["--check-python"]:
        return 0
    if argv[:1] in (["--needs"], ["--wheels"]):
        print("\n".join(needs() if argv[0] == "--needs" else wheels()))
        return 0
    calibrate = argv[:1] == ["--calibrate"]
    argv = argv[1:] if calibrate else argv
    out = Path(argv[0] if argv else "results/gpu-check").resolve()
    dry = "full" if calibrate else os.environ.get("GPU_CHECK_DRY")
    mode = {"1": "smoke", "full": "full"}.get(dry or "", "gpu")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "PYTHONUNBUFFERED": "1"}
    for var, sub in (("TORCHINDUCTOR_CACHE_DIR", "inductor"), ("TRITON_CACHE_DIR", "triton")):
        env[var] = env.get(var) or str(out / "cache" / sub)  # once for the whole check: every step reuses them
    if mode != "gpu":  # dynamo still traces every block; the eager backend spares the CPU minutes of code generation
        env["TORCH_COMPILE_OVERRIDE_BACKENDS"] = ">=0:eager"
    elif not gpu_present():
        print("gpu-check: no GPU here (no working nvidia-smi, no /dev/nvidia0): nothing run")
        return 0
    from gpu_check_steps import steps

    known = [s.name for s in steps(out, mode)]
    unknown = [n for n in os.environ.get("GPU_CHECK_ONLY", "").split(",") if n and n not in known]
    if unknown:
        print(f"gpu-check: GPU_CHECK_ONLY names {', '.join(unknown)}, not a step; the steps: {','.join(known)}",
              file=sys.stderr)
        return 2
    problems = gpu_prechecks.problems(out, Path(tempfile.gettempdir()))
    if problems:
        print("\n".join(f"gpu-check: {p}" for p in problems), file=sys.stderr)
        return 2
    if mode == "gpu":
        ok, said = probe(env)
        if not ok:
            print(f"gpu-check: a GPU is present but torch cannot use it:\n{said}", file=sys.stderr)
            return 1
        print(f"gpu-check: {said}")
    planned, on_gpu = plan(out, mode), plan(out, "gpu")
    print(starting_line(mode, planned, on_gpu) + f"; compile caches in {env['TORCHINDUCTOR_CACHE_DIR']}, "
          f"{env['TRITON_CACHE_DIR']}", flush=True)
    for step, limit, est in on_gpu:  # in a dry run too: what the check would allow on the GPU
        print(f"  {step.name}: limit {limit} s on an H200, estimate {est[0]:.0f}-{est[1]:.0f} s", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    fresh = not os.environ.get("GPU_CHECK_ONLY")  # a rerun of some steps adds to what DIR holds
    if fresh or not (out / "tables.md").exists():
        (out / "tables.md").write_text(f"# gpu-check{'' if mode == 'gpu' else f' (dry run on the CPU: {mode})'}\n\n")
    if fresh or not (out / "summary.md").exists():
        (out / "summary.md").write_text("| step | result | exit | s | CPU s | limit s | table |\n"
                                        "|---|---|---|---:|---:|---:|---|\n")
    arms = [s.name.removeprefix("throughput-") for s in steps(out, mode) if s.kind == "throughput"]
    if fresh:  # rows of an earlier check in DIR are not this one's
        for arm in arms:
            (out / "throughput" / f"{arm}.json").unlink(missing_ok=True)
    reaping = calibrate and become_subreaper()
    load0, failed, seconds = os.getloadavg()[0], [], {}
    for step, limit, _ in planned:
        ok, wall, cpu = run(step, limit, out, env, arms, reaping)
        seconds[step.name] = (wall, cpu)
        failed += [] if ok else [step.name]
    print(f"gpu-check: {'failed: ' + ', '.join(failed) if failed else 'all steps ok'}; tables in {out / 'tables.md'}")
    if calibrate and not failed:
        import gpu_check_budget

        record = calibration(out, planned, seconds, (load0, os.getloadavg()[0]))
        gpu_check_budget.DRY_TIMES.write_text(json.dumps(record, indent=2) + "\n")
        print(f"gpu-check: wrote {gpu_check_budget.DRY_TIMES}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
