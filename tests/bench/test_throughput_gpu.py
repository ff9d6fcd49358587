"""suite bench --throughput on a GPU machine: every arm on one GPU, the first CUDA_VISIBLE_DEVICES names."""

from __future__ import annotations

import os

import torch

from suite.bench.throughput import _only_gpu, bench_gpu
from suite.sweep.plan import visible_gpus


def test_the_bench_gpu_is_the_first_visible_one(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)  # this machine has no GPU to count
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert bench_gpu("cuda") == bench_gpu("auto") == "3" and bench_gpu("cpu") is None
    with _only_gpu("3"):
        assert visible_gpus() == ["3"]  # what the sweep's local workers are handed
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "3,5"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert bench_gpu("cuda") == "0"
    with _only_gpu("0"):
        assert visible_gpus() == ["0"]
    assert "CUDA_VISIBLE_DEVICES" not in os.environ
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    assert bench_gpu("cuda") is None
