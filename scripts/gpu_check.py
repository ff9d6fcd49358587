"""`make gpu-check OUT=DIR`: the one prepared check for a machine with a GPU, unattended, in 8 minutes.

Each step runs under its own time limit (:func:`steps`; with the CUDA probe they sum within TOTAL_S)
and, the moment it ends, appends its table to DIR/tables.md and a row to DIR/summary.md; its output
is in DIR/<step>.log:

- pytest-cuda: the tests marked ``cuda``; the steps they claim never wait for the host run under
  ``torch.cuda.set_sync_debug_mode("error")`` (the ``sync_free`` fixture, tests/conftest.py);
- overhead-eager, overhead-compiled: LayerScale's training-step overhead on ViT-S/16 at 224 px,
  bf16, eager and compiled block by block as training compiles, for Pre-LN, LayerScale and timm's;
- throughput: runs per GPU-hour at the default ablation's shape, solo, 4 co-located, packs of 16, 64;
- deep-preln, deep-layerscale: 200 steps at depth 96.

With no GPU at all (no working nvidia-smi, no /dev/nvidia0) it prints one line and exits 0; with a GPU
that torch cannot use it prints the probe's error and exits 1; else it exits 1 if any step failed,
timed out or wrote no table. GPU_CHECK_DRY=1 runs every step on the CPU at tiny shapes instead
(tests/test_gpu_check.py, so CI keeps the script working).

``--needs`` prints what ``make gpu-check USE_SYSTEM_TORCH=1`` installs beside an existing torch;
``--wheels`` the pinned closure of it that ``make wheelhouse`` downloads.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOTAL_S = 450  # the budget of everything after the install; `make gpu-check` installs first (README)
DRY_SLACK = 4  # dry runs start the same processes on a shared 2-core CPU, several times slower than a GPU box
PROBE_S = int(os.environ.get("GPU_CHECK_PROBE_S", 30))  # nvidia-smi and torch's first CUDA call (tests on a loaded CPU: more)
NOT_OURS = re.compile(r"torch|torchvision|triton|nvidia-.*|cuda-.*")  # what the machine's torch brings


def needs() -> list[str]:
    """The suite's dependencies but torch, by name only (whatever versions the machine has), and pytest."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = [re.match(r"[A-Za-z0-9_.-]+", d)[0] for d in deps]
    return [n for n in names if not NOT_OURS.fullmatch(n.lower())] + ["pytest"]


def wheels() -> list[str]:
    """``name==version`` of every installed distribution :func:`needs` pulls in, CUDA's excepted."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pinned, todo = {}, [Requirement(n) for n in needs()]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in pinned or NOT_OURS.fullmatch(name) or (req.marker and not req.marker.evaluate({"extra": ""})):
            continue
        dist = metadata.distribution(name)
        pinned[name] = dist.version
        todo += [Requirement(r) for r in dist.requires or []]
    return [f"{n}=={v}" for n, v in sorted(pinned.items())]


def steps(out: Path, dry: bool) -> list[tuple[str, int, list[str]]]:
    """(name, limit in s, command) of every step; ``dry``: on the CPU, at tiny shapes."""
    py, dev = [sys.executable, "-m", "suite"], ["--device", "cpu" if dry else "cuda"]
    cuda_tests = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py")
                        if "mark.cuda" in p.read_text())
    vit = (["--depth", "1", "--dim", "32", "--heads", "2", "--tokens", "5", "--batch", "2", "--rounds", "2",
            "--steps", "1", "--warmup", "1", "--gemm", "0"] if dry else
           ["--depth", "12", "--dim", "384", "--heads", "6", "--tokens", "197", "--batch", "128", "--gemm", "8192"])
    bench = [*py, "bench", *dev, "--dtype", "bf16", *vit, "--schemes", "layerscale", "timm-layerscale"]
    runs = ["--runs", "1", "--run-steps", "2", "--co-located", "2", "--packed", "2"] if dry else [
        "--runs", "64", "--run-steps", "100", "--co-located", "4", "--packed", "16", "64"]
    deep = [*py, "train", *dev, "data.name=synthetic", "model.heads=3", "model.patch_size=4", "train.eval_every=0",
            "train.log_every=10"]
    deep += (["model.depth=4", "model.dim=12", "data.synthetic_img_size=8", "data.synthetic_train=32",
              "data.synthetic_test=8", "train.steps=2", "train.batch_size=8", "train.warmup_steps=1"] if dry else
             ["model.depth=96", "model.dim=192", "train.steps=200"])
    return [
        ("pytest-cuda", 40, [sys.executable, "-m", "pytest", "-m", "cuda", "-q", "-rA", "-p", "no:cacheprovider",
                             *cuda_tests]),
        ("overhead-eager", 40, [*bench, "--out", str(out / "overhead-eager")]),
        ("overhead-compiled", 120, [*bench, "--compile", "--no-forward", "--out", str(out / "overhead-compiled")]),
        ("throughput", 170, [*py, "bench", "--throughput", *dev, *runs, "--out", str(out / "throughput")]),
        ("deep-preln", 25, [*deep, "model.residual=preln", "--out", str(out / "deep-preln")]),
        ("deep-layerscale", 25, [*deep, "model.residual=layerscale", "--out", str(out / "deep-layerscale")]),
    ]


def table(name: str, out: Path) -> str | None:
    """Step ``name``'s table in Markdown, or None if the step wrote none."""
    if name == "pytest-cuda":
        log = (out / f"{name}.log").read_text()
        rows = [line.split(" ", 1) for line in log.splitlines()
                if line.split(" ", 1)[0] in ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS")]
        return "| outcome | test |\n|---|---|\n" + "".join(f"| {o} | {t} |\n" for o, t in rows) if rows else None
    if name.startswith("deep-"):
        path = out / name / "summary.json"
        if not path.exists():
            return None
        s = json.loads(path.read_text())
        keys = ("model.residual", "model.depth", "status", "steps_done", "final_train_loss", "test_acc",
                "step_time_ms", "diverged_step", "device_name")
        return (f"| {' | '.join(keys)} |\n|{'---|' * len(keys)}\n| {' | '.join(str(s.get(k)) for k in keys)} |\n")
    path = out / name / ("throughput.md" if name == "throughput" else "overhead.md")
    return path.read_text() if path.exists() else None


def run(name: str, limit: int, cmd: list[str], out: Path, env: dict[str, str]) -> bool:
    """Run one step under ``limit`` seconds (its whole process group), then write its table and summary row."""
    print(f"== {name} (limit {limit} s): {' '.join(cmd)}", flush=True)
    t0 = time.monotonic()
    with open(out / f"{name}.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rc = f"{proc.wait()} (timed out)"
    found = table(name, out)
    ok = rc == 0 and found is not None
    if found is not None:
        with open(out / "tables.md", "a") as f:
            f.write(f"## {name}\n\n`{' '.join(cmd)}`\n\n{found}\n")
    with open(out / "summary.md", "a") as f:
        f.write(f"| {name} | {'ok' if ok else 'FAILED'} | {rc} | {time.monotonic() - t0:.0f} | {limit} | "
                f"{'yes' if found is not None else 'MISSING'} |\n")
    print(found if ok else (out / f"{name}.log").read_text()[-3000:], flush=True)
    return ok


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


def main(argv: list[str]) -> int:
    if argv[:1] in (["--needs"], ["--wheels"]):
        print("\n".join(needs() if argv[0] == "--needs" else wheels()))
        return 0
    out = Path(argv[0] if argv else "results/gpu-check").resolve()
    dry = os.environ.get("GPU_CHECK_DRY") == "1"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "PYTHONUNBUFFERED": "1"}
    if dry:  # dynamo still traces every block; the eager backend spares the CPU minutes of code generation
        env["TORCH_COMPILE_OVERRIDE_BACKENDS"] = ">=0:eager"
    elif not gpu_present():
        print("gpu-check: no GPU here (no working nvidia-smi, no /dev/nvidia0): nothing run")
        return 0
    else:
        ok, said = probe(env)
        if not ok:
            print(f"gpu-check: a GPU is present but torch cannot use it:\n{said}", file=sys.stderr)
            return 1
        print(f"gpu-check: {said}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "tables.md").write_text(f"# gpu-check{' (dry run, CPU)' if dry else ''}\n\n")
    (out / "summary.md").write_text("| step | result | exit | s | limit s | table |\n|---|---|---|---:|---:|---|\n")
    slack = DRY_SLACK if dry else 1
    failed = [name for name, limit, cmd in steps(out, dry) if not run(name, limit * slack, cmd, out, env)]
    print(f"gpu-check: {'failed: ' + ', '.join(failed) if failed else 'all steps ok'}; tables in {out / 'tables.md'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
