"""``train.precision: auto``: fp32 below the width where bf16 only adds casts, bf16 from it, on CUDA."""

from __future__ import annotations

import torch

from suite import store
from suite.config import BF16_MIN_WIDTH, load_config, resolve_precision
from suite.engine.precision import set_matmul_precision


def cfg(dim: int, precision: str = "auto"):
    return load_config(None, [f"model.dim={dim}", "model.heads=2", f"train.precision={precision}"])


def test_auto_is_fp32_below_the_width_and_bf16_from_it_on_cuda_and_fp32_on_a_cpu():
    assert BF16_MIN_WIDTH == 128
    for dim, on_cuda in ((32, "fp32"), (BF16_MIN_WIDTH - 2, "fp32"), (BF16_MIN_WIDTH, "bf16"), (384, "bf16")):
        assert resolve_precision(cfg(dim), "cuda").train.precision == on_cuda, dim
        assert resolve_precision(cfg(dim), "cpu").train.precision == "fp32", dim
    # below the width a GPU run and a CPU run of one config are one fp32 run, as an explicit fp32 always was
    assert store.run_id(resolve_precision(cfg(32), "cuda")) == store.run_id(resolve_precision(cfg(32), "cpu"))
    assert store.run_id(resolve_precision(cfg(192), "cuda")) != store.run_id(resolve_precision(cfg(192), "cpu"))
    explicit = cfg(384, "fp32")
    assert resolve_precision(explicit, "cuda") is explicit


def test_matmul_precision_is_left_alone_off_cuda():
    """TF32 exists on CUDA only: a CPU run changes no process-wide matmul setting."""
    before = torch.backends.cuda.matmul.fp32_precision
    set_matmul_precision("fp32", torch.device("cpu"))
    assert torch.backends.cuda.matmul.fp32_precision == before
