"""Fixtures for every test folder."""

from __future__ import annotations

import contextlib
import gc
import os

# Before torch (and its OpenMP) loads, here and in every process a test starts: an OpenMP thread that finds no work
# sleeps instead of spinning. The tests keep both cores busy, so a multi-threaded run (a sweep's worker, `suite train`,
# a Slurm job) had threads spinning while a neighbour held their core: 4x the CPU for the same run (issue 63's note).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest  # noqa: E402
import torch  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    """Test processes running side by side (pytest-xdist) share the cores: each one's torch gets its
    share of threads, not all of them, or the OpenMP threads of both wait on each other at every
    operator, and a training test beside a busy neighbour takes several times as long."""
    processes = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if processes > 1:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // processes))


# pytest-xdist (--dist loadfile --no-loadscope-reorder, as `make test` runs it) hands out test files in the order
# they were collected; the slowest ones sat last in that order (tests/test_*.py are collected after every folder),
# where one of them ran alone at the end while the other worker idled. Every file that takes 4 s or more goes first,
# slowest first (by the seconds each took in `make test` here): the short files fill in around them and end both
# workers within a second or two of each other (with the 11 slowest alone ranked, one worker ended 14 s before the
# other). Without --no-loadscope-reorder, xdist sorts files by how many tests they hold instead, and a 40 s file of
# 5 tests goes last again.
SLOWEST_FIRST = ("tests/sweep/test_runner.py", "tests/engine/test_pack.py", "tests/test_hostile.py",
                 "tests/analysis/test_reanalysis.py", "tests/test_doc_examples.py", "tests/bench/test_bench.py",
                 "tests/sweep/test_slurm.py", "tests/test_device_check.py", "tests/engine/test_compiled.py",
                 "tests/engine/test_train.py", "tests/engine/test_packstep.py", "tests/analysis/test_doseresponse.py",
                 "tests/analysis/test_depthslope.py", "tests/engine/test_probes.py", "tests/analysis/test_transfer.py",
                 "tests/analysis/test_report_hostile.py", "tests/test_cli_interrupt.py", "tests/sweep/test_api.py",
                 "tests/analysis/test_analyze.py", "tests/test_layout.py", "tests/analysis/test_products.py",
                 "tests/test_extending.py", "tests/analysis/test_report.py", "tests/analysis/test_hostile_records.py",
                 "tests/engine/test_optim.py", "tests/analysis/test_stats.py", "tests/engine/test_trackers.py",
                 "tests/test_cli_train.py", "tests/sweep/test_spec.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest keep their order


def pytest_collection_finish(session: pytest.Session) -> None:
    """What the test files imported (torch, pandas, matplotlib: hundreds of thousands of objects, all alive until the
    process ends) is left out of the collector's full passes, which otherwise scan it all, 0.1 s a pass (issue 63)."""
    gc.freeze()


@pytest.fixture
def sync_free():
    """A context manager inside which any CUDA call that makes the host wait for the device raises
    (``torch.cuda.set_sync_debug_mode("error")``): wrap the steps a test claims never wait. Set-up cannot
    run inside it: copying a CPU tensor to the GPU waits too."""
    @contextlib.contextmanager
    def guard():
        before = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("error")
        try:
            yield
        finally:
            torch.cuda.set_sync_debug_mode(before)
    return guard
