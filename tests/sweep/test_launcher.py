"""Each backend owns its checks (suite/sweep/launcher.py, backends.py): the registry, the launcher protocol,
and the local pre-flight (device, memory, data) for every backend whose workers run on this machine."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import pytest
import torch

from suite.cli import main
from suite.sweep.backends import BACKENDS, backend
from suite.sweep.folder import RunnerError
from suite.sweep.launcher import Backend, Launcher
from suite.sweep.sweep import SweepOptions

from test_runner import SMOKE, cpu_runs

ROOT = Path(__file__).resolve().parents[2]
NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")


def test_the_registry_names_every_backend_and_the_sweep_asks_it_not_the_name():
    assert list(BACKENDS) == ["local", "ray", "slurm"]
    assert all(issubclass(b, Backend) and b.name == name for name, b in BACKENDS.items())
    (field,) = [f for f in dataclasses.fields(SweepOptions) if f.name == "backend"]
    assert field.metadata["choices"] == list(BACKENDS)  # --backend's choices come from the registry
    assert "backend ==" not in (ROOT / "suite" / "sweep" / "sweep.py").read_text()
    with pytest.raises(RunnerError, match="^--backend nope: unknown; use local, ray, slurm$"):
        backend("nope")


def test_every_launcher_is_a_launcher(tmp_path):
    from suite.sweep.local import LocalLauncher
    from suite.sweep.ray_backend import RayLauncher
    from suite.sweep.slurm_backend import SlurmLauncher

    for launcher in (LocalLauncher(tmp_path), RayLauncher({"num_cpus": 1}),
                     SlurmLauncher(tmp_path, SweepOptions(backend="slurm"), 1, 0)):
        assert isinstance(launcher, Launcher), type(launcher).__name__


def test_which_backends_run_their_workers_here():
    """Where they do, the pre-flight checks this machine's device and memory before any run."""
    local, ray, slurm = (BACKENDS[n]() for n in ("local", "ray", "slurm"))
    assert local.runs_here(SweepOptions())
    assert ray.runs_here(SweepOptions(backend="ray"))  # a private instance: processes of this machine
    assert not ray.runs_here(SweepOptions(backend="ray", ray_address="10.0.0.1:6379"))
    assert slurm.runs_here(SweepOptions(backend="slurm", slurm_cluster="local"))
    assert not slurm.runs_here(SweepOptions(backend="slurm"))


@NO_CUDA
def test_cuda_on_slurm_s_local_executor_without_a_gpu_fails_before_any_run(tmp_path, capsys):
    """It spent a minute, then recorded every run as `error` (rerun only with --retry-errors)."""
    pytest.importorskip("submitit")
    out = tmp_path / "out"
    assert main(["run", str(SMOKE), "--out", str(out), "--device", "cuda", "--backend", "slurm",
                 "--slurm-cluster", "local"]) == 2
    err = capsys.readouterr().err
    assert err == ("error: --device cuda: torch sees no CUDA device on this machine, where the workers would run; "
                   "use --device cpu or auto\n")
    assert not out.exists()  # refused before the results folder, let alone a job


@NO_CUDA
def test_cuda_on_a_private_ray_instance_without_a_gpu_fails_before_ray_starts(tmp_path, capsys):
    pytest.importorskip("ray")
    out = tmp_path / "out"
    assert main(["run", str(SMOKE), "--out", str(out), "--device", "cuda", "--backend", "ray"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --device cuda: torch sees no CUDA device")
    assert not out.exists()
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()


def test_cuda_for_slurm_jobs_given_no_gpu_is_refused_without_submitting(tmp_path):
    """A cluster's nodes decide their devices, but jobs asked for with 0 GPUs cannot train on cuda."""
    runs = cpu_runs(SMOKE)
    slurm = BACKENDS["slurm"]()
    opts = slurm.settle(SweepOptions(backend="slurm", device="cuda", slurm_gpus_per_job=0))
    with pytest.raises(RunnerError, match=r"^--device cuda: --slurm-gpus-per-job 0 gives the worker jobs no GPU; "
                                          r"pass --slurm-gpus-per-job 1 or --device cpu$"):
        slurm.place(tmp_path, runs, opts)
    assert not (tmp_path / "slurm").exists()  # nothing submitted
    placed = slurm.place(tmp_path, runs, dataclasses.replace(opts, device="cpu"))
    assert (placed.workers, placed.threads, placed.device, placed.poll_s) == (64, 1, "cpu", 10.0)
    assert slurm.settle(SweepOptions(backend="slurm", device="cpu")).slurm_gpus_per_job == 0
    assert slurm.settle(SweepOptions(backend="slurm")).slurm_gpus_per_job == 1  # a cluster's nodes have GPUs


def test_stopping_workers_that_a_ctrl_c_kept_from_starting(tmp_path):
    """Ctrl-C while the workers start: those not started yet are skipped (it was an AssertionError,
    'can only join a started process')."""
    import multiprocessing

    from suite.sweep.local import LocalLauncher

    launcher = LocalLauncher(tmp_path)
    launcher.procs = [multiprocessing.get_context("spawn").Process(target=print)]
    launcher.grace_s = 0
    launcher.stop()
    launcher.close()
    assert launcher.procs[0].pid is None


def test_a_local_sweep_looks_again_as_soon_as_a_worker_ends(tmp_path):
    """The wait between looks at the results folder ends when a worker does (it slept its whole 0.5 s, at the end of
    every sweep), and a worker that ended earlier does not end the next wait at once."""
    import multiprocessing

    from suite.sweep.local import LocalLauncher

    launcher = LocalLauncher(tmp_path)
    ctx = multiprocessing.get_context("spawn")
    launcher.procs = [ctx.Process(target=time.sleep, args=(a,)) for a in (0.5, 60)]
    for p in launcher.procs:
        p.start()
    try:
        t0 = time.monotonic()
        launcher.wait(60)
        assert time.monotonic() - t0 < 30
        launcher.procs[0].join()
        t0 = time.monotonic()
        launcher.wait(0.5)
        assert time.monotonic() - t0 >= 0.45  # the ended worker is not waited on again
    finally:
        launcher.procs[1].kill()
        launcher.procs[1].join()
