"""``train.precision: auto``: tf32 below the width where bf16 only adds casts, bf16 from it, on CUDA; fp32 on a CPU."""

from __future__ import annotations

import torch

from suite import store
from suite.config import BF16_MIN_WIDTH, load_config, resolve_precision
from suite.engine.precision import set_matmul_precision


def cfg(dim: int, precision: str = "auto"):
    return load_config(None, [f"model.dim={dim}", "model.heads=2", f"train.precision={precision}"])


def test_auto_is_tf32_below_the_width_and_bf16_from_it_on_cuda_and_fp32_on_a_cpu():
    assert BF16_MIN_WIDTH == 128
    for dim, on_cuda in ((32, "tf32"), (BF16_MIN_WIDTH - 2, "tf32"), (BF16_MIN_WIDTH, "bf16"), (384, "bf16")):
        assert resolve_precision(cfg(dim), "cuda").train.precision == on_cuda, dim
        assert resolve_precision(cfg(dim), "cpu").train.precision == "fp32", dim
    # TF32 rounds matmuls: a GPU run and a CPU run of one config are two runs at every width (they were one
    # below 128, so a folder continued on the other device pooled them)
    for dim in (32, 192):
        assert store.run_id(resolve_precision(cfg(dim), "cuda")) != store.run_id(resolve_precision(cfg(dim), "cpu"))
    explicit = cfg(384, "fp32")
    assert resolve_precision(explicit, "cuda") is explicit


def test_tf32_is_cuda_only_and_sets_tf32_matmuls_there(monkeypatch):
    import pytest

    from suite.config import ConfigError

    with pytest.raises(ConfigError, match="train.precision tf32: TF32 matmuls run on cuda only, not on cpu"):
        resolve_precision(cfg(32, "tf32"), "cpu")
    seen = []
    monkeypatch.setattr(torch, "set_float32_matmul_precision", seen.append)
    for precision in ("tf32", "fp32", "bf16"):
        set_matmul_precision(precision, torch.device("cuda"))
    assert seen == ["high", "highest", "highest"]  # an explicit fp32 on CUDA is IEEE fp32


def test_matmul_precision_is_left_alone_off_cuda():
    """TF32 exists on CUDA only: a CPU run changes no process-wide matmul setting."""
    before = torch.backends.cuda.matmul.fp32_precision
    set_matmul_precision("fp32", torch.device("cpu"))
    assert torch.backends.cuda.matmul.fp32_precision == before
