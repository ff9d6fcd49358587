"""`make gpu-check` (scripts/gpu_check.py) keeps working without a GPU to run it on: its dry run takes
every step on the CPU and writes every table, its limits fit its budget, a step past its limit is
killed, and it tells "no GPU" (exit 0) apart from "a GPU torch cannot use" (exit 1)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.py"
_spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
gpu_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_check)


def _run(out: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(out)], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=1800)


@pytest.mark.slow
def test_dry_run_takes_every_step_and_writes_every_table(tmp_path):
    p = _run(tmp_path, GPU_CHECK_DRY="1")
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    names = [name for name, _, _ in gpu_check.steps(tmp_path, dry=True)]
    summary = (tmp_path / "summary.md").read_text().splitlines()[2:]
    assert [row.split(" | ")[0].strip("| ") for row in summary] == names
    assert all(" | ok | 0 | " in row and row.endswith("| yes |") for row in summary), summary
    tables = (tmp_path / "tables.md").read_text()
    assert all(f"## {name}\n" in tables for name in names)
    assert "| preln | 4 |" in tables and "| layerscale | 4 |" in tables  # the deep runs' summaries, at dry depth


def test_step_limits_sum_within_the_budget_of_8_minutes(tmp_path):
    limits = [limit for _, limit, _ in gpu_check.steps(tmp_path, dry=False)]
    assert sum(limits) + gpu_check.PROBE_S <= gpu_check.TOTAL_S <= 8 * 60


def test_a_step_past_its_limit_is_killed_with_its_children_and_fails(tmp_path):
    (tmp_path / "summary.md").write_text("")
    child = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); " \
            "print('started', flush=True); time.sleep(60)"
    t0 = time.monotonic()
    assert not gpu_check.run("throughput", 2, [sys.executable, "-c", child], tmp_path, dict(os.environ))
    assert time.monotonic() - t0 < 30
    row = (tmp_path / "summary.md").read_text()
    assert "| throughput | FAILED | -9 (timed out) |" in row and row.rstrip().endswith("| MISSING |")
    assert "started" in (tmp_path / "throughput.log").read_text()


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
