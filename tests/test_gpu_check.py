"""`make gpu-check` (scripts/gpu_check.py) keeps working without a GPU to run it on: its dry run takes
every step on the CPU and writes every table, each arm's row the moment it ends; its limits come from
the measured dry run and fit the H200 budget, each throughput arm's above its own estimate; a step
past its limit is killed and loses only itself; each missing prerequisite is one line with its fix
(exit 2); and it tells "no GPU" (exit 0) apart from "a GPU torch cannot use" (exit 1)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import namedtuple
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
SCRIPT = SCRIPTS / "gpu_check.py"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gpu_check = _load("gpu_check")  # puts scripts/ on sys.path: the modules below are the ones it uses
import gpu_check_budget as budget  # noqa: E402
import gpu_check_steps  # noqa: E402
import gpu_prechecks  # noqa: E402


def _run(out: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args, str(out)], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=1800)


# ----------------------------------------------------------------------------- the dry run


@pytest.mark.slow
def test_dry_run_takes_every_step_and_writes_every_table(tmp_path, monkeypatch):
    for var in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):  # inductor sets its default into os.environ
        monkeypatch.delenv(var, raising=False)                    # when an earlier test compiled something
    p = _run(tmp_path, GPU_CHECK_DRY="1")
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    names = [s.name for s in gpu_check_steps.steps(tmp_path, "smoke")]
    summary = (tmp_path / "summary.md").read_text().splitlines()[2:]
    assert [row.split(" | ")[0].strip("| ") for row in summary] == names
    assert all(" | ok | 0 | " in row and row.endswith("| yes |") for row in summary), summary
    tables = (tmp_path / "tables.md").read_text()
    assert all(f"## {name}\n" in tables for name in names)
    assert "| preln | 4 |" in tables and "| layerscale | 4 |" in tables  # the deep runs' summaries, at dry depth
    gathered = (tmp_path / "throughput" / "throughput.md").read_text()
    assert [line.split(" | ")[0] for line in gathered.splitlines() if line.startswith("| ") and "x |" in line] == \
        ["| solo", "| co-located 2", "| packed 2"]
    assert "| 1.00x |" in gathered
    # the compile caches were set once for every step, under OUT; the GPU's limits were said first
    first = p.stdout.splitlines()[0]
    assert f"compile caches in {tmp_path / 'cache' / 'inductor'}, {tmp_path / 'cache' / 'triton'}" in first
    total = sum(limit for _, limit, _ in gpu_check.plan(tmp_path, "gpu")) + gpu_check.PROBE_S
    assert f"on an H200 the time limits sum to {total - gpu_check.PROBE_S} s, {total} s with the" in first


def test_the_smoke_and_full_dry_runs_are_the_gpu_steps_on_the_cpu(tmp_path):
    gpu, full, smoke = (gpu_check_steps.steps(tmp_path, m) for m in ("gpu", "full", "smoke"))
    assert [s.name for s in gpu] == [s.name for s in full]
    assert {s.kind for s in smoke} == {s.kind for s in gpu}
    for g, f in zip(gpu, full):
        assert g.work == f.work
        assert ("--device", "cuda") in zip(g.command, g.command[1:]) or g.kind == "pytest"
        assert ("--device", "cpu") in zip(f.command, f.command[1:]) or f.kind == "pytest"
        # the counts that set the operators and the runs are the GPU's: depth, steps, runs, rounds
        for flag in ("--depth", "--rounds", "--steps", "--warmup", "--runs", "--run-steps"):
            if flag in g.command:
                assert f.command[f.command.index(flag) + 1] == g.command[g.command.index(flag) + 1], (g.name, flag)
        for key in ("model.depth=", "train.steps="):
            assert [a for a in g.command if a.startswith(key)] == [a for a in f.command if a.startswith(key)]


# ----------------------------------------------------------------------------- limits and the budget


def test_every_step_has_a_measured_dry_run_of_its_current_command(tmp_path):
    """scripts/gpu_check_dry.json (``--calibrate``) measured the commands the check runs now."""
    dry = budget.load_dry_times()
    full = gpu_check_steps.steps(tmp_path, "full")
    assert sorted(dry) == sorted(s.name for s in full), "run: python scripts/gpu_check.py --calibrate"
    for s in full:
        assert dry[s.name]["command"] == gpu_check.normalized(s.command, tmp_path), s.name
        assert dry[s.name]["dry_s"] > 0


def test_step_limits_sum_within_10_minutes_with_the_probe(tmp_path):
    planned = gpu_check.plan(tmp_path, "gpu")
    limits = [limit for _, limit, _ in planned]
    assert sum(limits) + gpu_check.PROBE_S <= budget.BUDGET_S <= 600, limits
    dry = budget.load_dry_times()
    for step, limit, _ in planned:  # each from its measured dry run, scaled by the stated factor
        assert limit == budget.limit(dry[step.name]["dry_s"], step.work)


def test_each_throughput_arms_limit_is_above_its_own_estimate(tmp_path):
    planned = [(s, limit, est) for s, limit, est in gpu_check.plan(tmp_path, "gpu") if s.kind == "throughput"]
    assert [s.name for s, _, _ in planned] == [f"throughput-{a}" for a, _ in gpu_check_steps.THROUGHPUT_ARMS]
    for step, limit, (low, high) in planned:
        assert 0 < low < high < limit, (step.name, low, high, limit)


def test_no_steps_limit_is_below_its_own_estimate(tmp_path):
    for step, limit, (low, high) in gpu_check.plan(tmp_path, "gpu"):
        assert high <= limit, (step.name, high, limit)


def test_the_deep_steps_are_short():
    assert gpu_check_steps.DEEP_STEPS <= 50
    deep = [(s, limit) for s, limit, _ in gpu_check.plan(Path("OUT"), "gpu") if s.kind == "deep"]
    assert len(deep) == 2 and all(limit <= 60 for _, limit in deep), deep


def test_estimate_and_limit_arithmetic_by_hand():
    work = budget.Work(imports=1, contexts=2, steps=(("solo d12", 100),), compilers=1, graphs=2, runs=3, members=4,
                       tflop=30.0)
    ops_lo, ops_hi = budget.OPS["solo d12"]
    low = (budget.IMPORT_S[0] + 2 * budget.CUDA_INIT_S[0] + budget.FIRST_COMPILE_S[0] + 2 * budget.COMPILE_S[0]
           + 30 / budget.TFLOPS[0] + 100 * ops_lo * budget.OP_S[0] + 3 * budget.RUN_S[0] + 4 * budget.MEMBER_S[0])
    gpu_only = 2 * budget.CUDA_INIT_S[1] + budget.FIRST_COMPILE_S[1] + 2 * budget.COMPILE_S[1] + 30 / budget.TFLOPS[1]
    high = (budget.IMPORT_S[1] + gpu_only + 100 * ops_hi * budget.OP_S[1] + 3 * budget.RUN_S[1]
            + 4 * budget.MEMBER_S[1])
    assert budget.estimate(work) == pytest.approx((low, high))
    assert budget.gpu_only_s(work) == pytest.approx(gpu_only)
    assert budget.limit(10.0, work) == int(-(-(budget.FACTOR * 10.0 + gpu_only) // 1))
    assert budget.limit(10.0, work, factor=budget.FACTOR + 0.5) == budget.limit(10.0, work) + 5


# ----------------------------------------------------------------------------- rows as each arm ends

Fake = namedtuple("Fake", "name command kind work")


def _arm(name: str, sleep: float, out: Path) -> Fake:
    """A throughput step that writes its row as throughput_arm.py does, after ``sleep`` seconds."""
    row = {"arm": name.replace("-", " "), "workers": 1, "threads_per_run": 1, "pack": 1, "gpu": None, "runs": 2,
           "steps": 2, "wall_s": 1.0, "runs_per_hour": 7200.0 if name == "solo" else 14400.0, "statuses": "ok"}
    code = (f"import json, pathlib, time; time.sleep({sleep}); p = pathlib.Path({str(out / 'throughput')!r}); "
            f"p.mkdir(exist_ok=True); (p / '{name}.json').write_text(json.dumps({{'row': {row!r}}})); print('row')")
    return Fake(f"throughput-{name}", [sys.executable, "-c", code], "throughput", None)


def test_a_step_past_its_limit_loses_only_its_own_row(tmp_path):
    (tmp_path / "summary.md").write_text("")
    arms = ["solo", "packed-16", "packed-64"]
    t0 = time.monotonic()
    results = [gpu_check.run(_arm("solo", 0, tmp_path), 60, tmp_path, dict(os.environ), arms),
               gpu_check.run(_arm("packed-16", 60, tmp_path), 2, tmp_path, dict(os.environ), arms),
               gpu_check.run(_arm("packed-64", 0, tmp_path), 60, tmp_path, dict(os.environ), arms)]
    assert time.monotonic() - t0 < 40
    assert [r[0] for r in results] == [True, False, True]
    summary = (tmp_path / "summary.md").read_text().splitlines()
    assert summary[1].startswith("| throughput-packed-16 | FAILED | -9 (timed out) |")
    assert summary[1].endswith("MISSING |")
    gathered = (tmp_path / "throughput" / "throughput.md").read_text()
    assert "| solo | 1 | 1 | 2 | 2 | 1.0 | 7200 | 1.00x | ok |" in gathered
    assert "| packed 64 | 1 | 1 | 2 | 2 | 1.0 | 14400 | 2.00x | ok |" in gathered and "packed 16" not in gathered
    tables = (tmp_path / "tables.md").read_text()
    assert "## throughput-solo\n" in tables and "## throughput-packed-64\n" in tables
    assert "## throughput-packed-16" not in tables


def test_a_step_past_its_limit_is_killed_with_its_children_and_fails(tmp_path):
    (tmp_path / "summary.md").write_text("")
    child = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); " \
            "print('started', flush=True); time.sleep(60)"
    step = Fake("throughput-solo", [sys.executable, "-c", child], "throughput", None)
    t0 = time.monotonic()
    ok, *_ = gpu_check.run(step, 2, tmp_path, dict(os.environ), ["solo"])
    assert not ok and time.monotonic() - t0 < 30
    row = (tmp_path / "summary.md").read_text()
    assert "| throughput-solo | FAILED | -9 (timed out) |" in row and row.rstrip().endswith("| MISSING |")
    assert "started" in (tmp_path / "throughput-solo.log").read_text()


def test_a_rerun_of_some_steps_adds_to_what_out_holds_and_a_full_check_starts_over(tmp_path, monkeypatch, dry):
    out, work = tmp_path / "out", budget.Work(imports=1, contexts=1)
    fakes = [_arm("solo", 0, out)._replace(work=work), _arm("packed-16", 0, out)._replace(work=work)]
    monkeypatch.setattr(gpu_check_steps, "steps", lambda out, mode: fakes)
    for only in ("throughput-solo", "throughput-packed-16"):  # the check split over two commands
        monkeypatch.setenv("GPU_CHECK_ONLY", only)
        assert gpu_check.main([str(out)]) == 0
    summary = (out / "summary.md").read_text()
    assert "| throughput-solo | ok |" in summary and "| throughput-packed-16 | ok |" in summary
    gathered = (out / "throughput" / "throughput.md").read_text()
    assert "| solo | " in gathered and "| 14400 | 2.00x | ok |" in gathered
    assert (out / "tables.md").read_text().count("## throughput-") == 2
    monkeypatch.delenv("GPU_CHECK_ONLY")
    fakes.pop()  # a whole check that runs solo alone: the earlier packed row is not this check's
    assert gpu_check.main([str(out)]) == 0
    assert "packed" not in (out / "throughput" / "throughput.md").read_text()
    assert "packed" not in (out / "summary.md").read_text() and "packed" not in (out / "tables.md").read_text()


def _kill_everything_under(tmp_path: Path) -> None:
    """SIGKILL every process group whose command line names ``tmp_path`` (the check's steps run in
    sessions of their own)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(tmp_path) in cmdline.read_bytes().decode(errors="replace"):
                os.killpg(os.getpgid(int(cmdline.parent.name)), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass


@pytest.mark.slow
def test_a_killed_check_keeps_the_rows_of_the_arms_that_ended(tmp_path):
    """SIGKILL to the whole check (a lease running out) during its second arm: the first arm's row is on disk."""
    env = {**os.environ, "GPU_CHECK_DRY": "1", "GPU_CHECK_ONLY": "throughput-solo,throughput-packed-2"}
    proc = subprocess.Popen([sys.executable, str(SCRIPT), str(tmp_path)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while not (tmp_path / "throughput-packed-2.log").exists() and proc.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        _kill_everything_under(tmp_path)
    assert "| throughput-solo | ok | 0 |" in (tmp_path / "summary.md").read_text()
    assert "| solo | " in (tmp_path / "throughput" / "throughput.md").read_text()
    assert "## throughput-solo\n" in (tmp_path / "tables.md").read_text()
    assert "throughput-packed-2" not in (tmp_path / "summary.md").read_text()
    assert not (tmp_path / "throughput" / "packed-2.json").exists()


# ----------------------------------------------------------------------------- checks before the first step


def _main(capsys, *argv: str) -> tuple[int, list[str]]:
    rc = gpu_check.main(list(argv))
    return rc, capsys.readouterr().err.splitlines()


@pytest.fixture
def dry(monkeypatch):
    monkeypatch.setenv("GPU_CHECK_DRY", "1")


def test_a_missing_c_compiler_is_one_line_with_its_fix(tmp_path):
    bare = tmp_path / "bin"  # a PATH without gcc or clang: Triton would find no compiler
    bare.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "CC"}
    p = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "out")], capture_output=True, text=True,
                       env={**env, "PATH": str(bare), "GPU_CHECK_DRY": "1"}, timeout=300)
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("gpu-check: C compiler:") and "Fix: " in p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "out").exists()


def test_compiler_lookup_follows_tritons_order():
    which = {"gcc": "/usr/bin/gcc", "cc": "/usr/bin/cc", "clang": "/usr/bin/clang"}
    assert gpu_prechecks.compiler_problem({}, which.get) is None
    assert gpu_prechecks.compiler_problem({}, {"clang": "/c"}.get) is None
    assert gpu_prechecks.compiler_problem({"CC": "/opt/cc"}, {"/opt/cc": "/opt/cc"}.get) is None
    only_cc = gpu_prechecks.compiler_problem({}, {"cc": "/usr/bin/cc"}.get)
    assert "export CC=/usr/bin/cc" in only_cc  # Triton looks for gcc and clang, not cc
    assert "CC=/nowhere is not an executable" in gpu_prechecks.compiler_problem({"CC": "/nowhere"}, which.get)


def test_a_missing_torchvision_is_one_line_with_its_fix(tmp_path, monkeypatch, capsys, dry):
    monkeypatch.setitem(sys.modules, "torchvision", None)  # `import torchvision` raises ImportError
    rc, err = _main(capsys, str(tmp_path / "out"))
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith("gpu-check: torchvision: `import torchvision` failed (ModuleNotFoundError")
    torch_version = gpu_prechecks.installed_version("torch")
    assert f"torchvision=={gpu_prechecks.torchvision_for(torch_version)}" in err[0] and "wheelhouse" in err[0]
    assert not (tmp_path / "out").exists()


def test_a_torchvision_built_for_another_cuda_is_one_line(monkeypatch):
    def fails(name: str) -> None:
        raise RuntimeError("Detected that PyTorch and torchvision were compiled with different CUDA major versions.\n"
                           "PyTorch has CUDA Version=13.0 and torchvision has CUDA Version=12.8.")

    line = gpu_prechecks.torchvision_problem(fails, torch_version="2.11.0+cu130")
    assert "\n" not in line and "RuntimeError: Detected that PyTorch and torchvision" in line
    assert "torchvision==0.26.0 for torch 2.11.0+cu130" in line


def test_low_disk_is_one_line_with_its_fix(tmp_path, monkeypatch, capsys, dry):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10 * 2**30, 9 * 2**30, 2**30))
    rc, err = _main(capsys, str(tmp_path / "out" / "deeper"))
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith(f"gpu-check: disk: 1.0 GiB free on the disk of {tmp_path}")
    assert f"needs {gpu_prechecks.MIN_FREE_GIB} GiB" in err[0] and "Fix: " in err[0]


def test_every_failing_check_says_its_own_line(tmp_path, monkeypatch, capsys, dry):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(1, 1, 0))
    monkeypatch.setitem(sys.modules, "torchvision", None)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CC", raising=False)
    rc, err = _main(capsys, str(tmp_path / "out"))
    assert rc == 2 and [line.split(":")[1].strip() for line in err] == ["torchvision", "C compiler", "disk"]


def test_gpu_check_only_names_steps(tmp_path, monkeypatch, capsys, dry):
    monkeypatch.setenv("GPU_CHECK_ONLY", "deep-preln,deep-nothing")
    rc, err = _main(capsys, str(tmp_path / "out"))
    assert rc == 2 and len(err) == 1 and "GPU_CHECK_ONLY names deep-nothing, not a step" in err[0]
    monkeypatch.setenv("GPU_CHECK_ONLY", "deep-preln,throughput-solo")
    assert [s.name for s, _, _ in gpu_check.plan(tmp_path, "gpu")] == ["throughput-solo", "deep-preln"]


@pytest.mark.parametrize("argv", [[], ["--needs"], ["--check-python"]])
def test_a_python_older_than_3_11_is_one_line(tmp_path, monkeypatch, capsys, dry, argv):
    monkeypatch.setattr(sys, "version_info", (3, 10, 14, "final", 0))
    rc, err = _main(capsys, *(argv or [str(tmp_path)]))
    assert rc == 2 and len(err) == 1 and "Python 3.10; the suite needs 3.11 or newer (tomllib)" in err[0], err
    assert "Fix: " in err[0]


def test_torchvision_release_for_each_torch():
    assert gpu_prechecks.torchvision_for("2.11.0+cu130") == "0.26.0"
    assert gpu_prechecks.torchvision_for("2.14.1") == "0.29.1"
    assert gpu_prechecks.torchvision_for("2.9.1+cpu") == "0.24.1"
    assert gpu_prechecks.torchvision_for("1.13.1") is None and gpu_prechecks.torchvision_for("nightly") is None


def test_needs_pins_torchvision_only_where_it_cannot_be_imported(monkeypatch):
    assert not any(n.startswith("torchvision") for n in gpu_check.needs())
    monkeypatch.setitem(sys.modules, "torchvision", None)
    torch_version = gpu_prechecks.installed_version("torch")
    assert f"torchvision=={gpu_prechecks.torchvision_for(torch_version)}" in gpu_check.needs()
    assert not any(w.startswith("torchvision") for w in gpu_check.wheels())


def test_the_wheelhouse_refuses_a_torchvision_built_for_another_cuda():
    wheelhouse = _load("wheelhouse")
    assert wheelhouse.cuda_mismatch("2.11.0+cu130", "0.26.0+cu130") is None
    assert wheelhouse.cuda_mismatch("2.11.0+cu130", "0.26.0+cu132") is None  # same major: torchvision imports
    assert wheelhouse.cuda_mismatch("2.11.0", "0.26.0+cu130") is None  # the machine's CUDA unknown
    line = wheelhouse.cuda_mismatch("2.11.0+cu126", "0.26.0+cu130")
    assert "CUDA 13.0" in line and "12.6" in line and "TORCHVISION_INDEX=https://download.pytorch.org/whl/cu126" in line


# ----------------------------------------------------------------------------- no GPU, or one torch cannot use


@pytest.mark.skipif(Path("/dev/nvidia0").exists(), reason="this machine has a GPU")
def test_without_any_gpu_it_says_so_in_one_line_and_exits_0(tmp_path):
    p = _run(tmp_path / "out", PATH=str(tmp_path))  # no nvidia-smi on PATH
    assert p.returncode == 0 and p.stdout.count("\n") == 1 and "no GPU" in p.stdout
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="torch can use this machine's GPU")
def test_a_gpu_torch_cannot_use_fails_with_the_probes_error(tmp_path):
    smi = tmp_path / "nvidia-smi"  # what a machine with a driver answers; torch here has no CUDA device
    smi.write_text("#!/bin/sh\nexit 0\n")
    smi.chmod(0o755)
    p = _run(tmp_path / "out", PATH=f"{tmp_path}{os.pathsep}{os.environ['PATH']}", GPU_CHECK_PROBE_S="180")
    assert p.returncode == 1 and "a GPU is present but torch cannot use it" in p.stderr
    assert "Traceback" in p.stderr and "cuda" in p.stderr.lower()  # the probe's own error, not a summary of it
