"""``layerscale:kernel``: the scale bank with a compiled residual update, to measure what it would save.

The model's LayerScale (``scalebank.py``) keeps the fused ``addcmul`` below the folding size, whose
derivative makes two passes over the activations per residual add (``grad·γ`` for the branch, then
``grad·branch`` summed over rows for γ) plus a temporary. A compiled backward can do both in one
pass and no temporary. This arm builds that kernel with ``torch.utils.cpp_extension`` (a C++
compiler and ``ninja`` at run time, about half a minute the first time, cached after) and gives every
LayerScale of a bank model, never folded, that residual update, so that ``suite bench`` can say
what a compiled kernel would take off LayerScale's overhead. It is a bench arm, not the model's
path: a model must train on a machine without a compiler, and its sums must not depend on whether
one was there (docs/benchmark.md, "What LayerScale costs, and why").
"""

from __future__ import annotations

import shutil

import torch
from torch import nn

from suite.models.layerscale import LayerScale

ARM = "layerscale:kernel"

SOURCE = r"""
#include <torch/extension.h>

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// x + gamma * branch, with a backward that computes grad * gamma and sum_rows(grad * branch) in one
// pass over the activations. gamma has C entries, the last dimension of x and branch.
struct ScaledResidual : public torch::autograd::Function<ScaledResidual> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, torch::Tensor gamma, torch::Tensor branch) {
    TORCH_CHECK(branch.device().is_cpu() && gamma.device().is_cpu(), "layerscale:kernel is a CPU kernel");
    ctx->save_for_backward({gamma, branch});
    return at::addcmul(x, gamma, branch);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto gamma = saved[0].contiguous();
    auto branch = saved[1].contiguous();
    auto grad = grads[0].contiguous();
    const int64_t C = gamma.numel();
    const int64_t R = grad.numel() / C;
    auto grad_branch = at::empty_like(grad);
    auto grad_gamma = at::zeros_like(gamma);
    AT_DISPATCH_FLOATING_TYPES(grad.scalar_type(), "scaled_residual_backward", [&] {
      const scalar_t* g = grad.data_ptr<scalar_t>();
      const scalar_t* b = branch.data_ptr<scalar_t>();
      const scalar_t* s = gamma.data_ptr<scalar_t>();
      scalar_t* gb = grad_branch.data_ptr<scalar_t>();
      scalar_t* gs = grad_gamma.data_ptr<scalar_t>();
      for (int64_t r = 0; r < R; ++r) {
        const scalar_t* gr = g + r * C;
        const scalar_t* br = b + r * C;
        scalar_t* gbr = gb + r * C;
        for (int64_t c = 0; c < C; ++c) {
          gbr[c] = gr[c] * s[c];
          gs[c] += gr[c] * br[c];
        }
      }
    });
    return {grads[0], grad_gamma, grad_branch};
  }
};

torch::Tensor scaled_residual(torch::Tensor x, torch::Tensor gamma, torch::Tensor branch) {
  return ScaledResidual::apply(x, gamma, branch);
}
"""

_built = None


class KernelBuildError(ValueError):
    """The kernel could not be compiled here (no compiler, no ninja, or a failed build)."""


def build() -> object:
    """The compiled module (built once per process; torch caches the build on disk)."""
    global _built
    if _built is None:
        if shutil.which("c++") is None and shutil.which("g++") is None:
            raise KernelBuildError(f"{ARM} needs a C++ compiler on PATH (c++ or g++); leave the arm out on this machine")
        try:
            import ninja  # noqa: F401  (cpp_extension builds with it)
        except ImportError:
            raise KernelBuildError(f"{ARM} needs ninja to build its kernel: pip install ninja") from None
        from torch.utils.cpp_extension import load_inline

        try:
            _built = load_inline(name="suite_scaled_residual", cpp_sources=[SOURCE], functions=["scaled_residual"],
                                 extra_cflags=["-O3", "-march=native"], verbose=False)
        except (RuntimeError, OSError) as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise KernelBuildError(f"{ARM}: building the kernel failed ({first}); leave the arm out on this machine") from None
    return _built


class KernelLayerScale(LayerScale):
    """:class:`LayerScale` whose residual update is the compiled ``x + γ ⊙ branch``."""

    def add_to(self, x: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
        return _built.scaled_residual(x, self.gamma.to(branch.dtype), branch)


def use_kernel(model: nn.Module) -> nn.Module:
    """Give every per-channel LayerScale of a bank model the compiled update; the bank never folds."""
    bank = getattr(model, "scale_bank", None)
    if bank is None:
        raise ValueError(f"{ARM} needs a model with a scale bank (learnable per-channel LayerScale)")
    build()
    bank.fold = "never"
    for module in model.modules():
        if type(module) is LayerScale:
            module.__class__ = KernelLayerScale
    return model
