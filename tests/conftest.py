"""Fixtures for every test folder."""

from __future__ import annotations

import contextlib

import pytest
import torch


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
