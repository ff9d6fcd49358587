"""Benchmarks run only when asked for (``make bench`` = ``pytest tests/bench -m bench``).

Without a ``-m`` expression they are skipped, so a plain ``pytest`` never spends minutes timing;
``-m "not bench"`` in the project's ``addopts`` deselects them outright.
"""

from __future__ import annotations

import pytest
import torch


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.option.markexpr:
        return
    skip = pytest.mark.skip(reason="benchmark: run with `make bench` (pytest tests/bench -m bench)")
    for item in items:
        if "bench" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def single_thread():
    """Time single-threaded, like ``suite bench`` on CPU (see DEVICE_DEFAULTS in suite/cli/bench.py)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
