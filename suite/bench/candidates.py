"""Other implementations of the same LayerScale, timed against the model's own.

The model's LayerScale (``suite/models/scalebank.py``) keeps every γ in one parameter and folds γ
into the branches' last linears when a step has more rows than those linears have inputs. Each
function here turns a freshly built ``layerscale`` model (per-channel γ on both branches) into one
that computes the same function with the same gradients by another route, in place. They are
``suite bench --variants`` arms (``layerscale:<name>``, see ``arms.py``), so that what each costs
is a table written by a command (docs/benchmark.md, "What LayerScale costs, and why").

* :func:`per_block` (``:per-block``): the implementation before the bank, one γ parameter per
  block and the fused ``addcmul`` in every step.
* :func:`fold_layerscale` (``:folded``): per-block γ folded into each branch's last linear,
  ``F.linear(h, γ[:, None]·W, γ·b)``, block by block (several small autograd nodes per block).
* :func:`use_function` (``:function``): per-block γ, the residual update as one custom autograd
  function whose backward is the minimal one (``grad·γ`` and ``Σ grad·branch``), without the extra
  ``branch·value`` pass of ``addcmul``'s derivative.
* :func:`never_fold` / :func:`always_fold` (``:no-fold``, ``:always-fold``): the bank with its
  folding rule forced one way, to check the rule at a shape.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from suite.models.layerscale import LayerScale
from suite.models.scalebank import PARAM


def _layerscales(model: nn.Module) -> list[LayerScale]:
    found = [m for m in model.modules() if type(m) is LayerScale]
    if not found:
        raise ValueError("model has no per-channel LayerScale to re-implement")
    return found


def per_block(model: nn.Module) -> nn.Module:
    """Undo the model's scale bank: one γ parameter per LayerScale again, ``addcmul`` always."""
    bank = getattr(model, "scale_bank", None)
    if bank is None:
        _layerscales(model)  # nothing to undo: fine if the model has per-block LayerScales
        return model
    for ls, row in zip(bank.scales, getattr(model, PARAM).detach().unbind(0)):
        del ls.__dict__["gamma"]
        ls.gamma = nn.Parameter(row.clone())
    del model._parameters[PARAM]
    model.scale_bank = None
    return model


def _both_branches(model: nn.Module) -> None:
    for block in model.blocks:
        if not (isinstance(block.ls1, LayerScale) and isinstance(block.ls2, LayerScale)):
            raise ValueError("folding needs per-channel LayerScale on both branches")


# ----------------------------------------------------------------------------- :folded


class ScaledLinear(nn.Module):
    """``γ ⊙ linear(h)`` computed as ``F.linear(h, γ[:, None] * W, γ * b)``.

    The scale touches the (C, hidden) weight instead of the (B, N, C) activations, in forward and
    backward (γ's gradient is a weight-sized reduction), so it pays off when B·N exceeds the
    weight's input width (hidden): batch 128 at 197 tokens, not batch 4 at 65.
    """

    def __init__(self, linear: nn.Linear, gamma: nn.Parameter) -> None:
        super().__init__()
        self.linear, self.gamma = linear, gamma

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        g = self.gamma
        return F.linear(h, self.linear.weight * g[:, None], self.linear.bias * g)


def fold_layerscale(model: nn.Module) -> nn.Module:
    """Move each block's ``ls1``/``ls2`` γ into ``attn.proj``/``mlp.fc2`` (in place, same function)."""
    _both_branches(model)
    per_block(model)
    for block in model.blocks:
        block.attn.proj = ScaledLinear(block.attn.proj, block.ls1.gamma)
        block.mlp.fc2 = ScaledLinear(block.mlp.fc2, block.ls2.gamma)
        block.ls1, block.ls2 = nn.Identity(), nn.Identity()
    return model


# ----------------------------------------------------------------------------- :function


class ScaledResidual(torch.autograd.Function):
    """``x + γ ⊙ branch`` with a hand-written backward.

    ``addcmul``'s derivative computes ``grad * (branch * value)`` for γ: one more pass over the
    activations than needed. This backward does ``grad * γ`` for the branch and ``Σ grad * branch``
    for γ, and nothing else. (The ``ctx`` form of ``forward``: its per-call overhead is a few µs,
    the ``setup_context`` form's several times that.)
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, gamma: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(gamma, branch)
        return torch.addcmul(x, gamma, branch)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        gamma, branch = ctx.saved_tensors
        grad_gamma = None
        if ctx.needs_input_grad[1]:
            grad_gamma = (grad * branch).sum(tuple(range(grad.dim() - 1))).reshape(gamma.shape)
        return grad, grad_gamma, grad * gamma


class FunctionLayerScale(LayerScale):
    """:class:`LayerScale` whose residual update is :class:`ScaledResidual`."""

    def add_to(self, x: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
        return ScaledResidual.apply(x, self.gamma, branch)


def use_function(model: nn.Module) -> nn.Module:
    """Turn every :class:`LayerScale` of ``model`` into a :class:`FunctionLayerScale` (in place)."""
    for module in _layerscales(per_block(model)):
        module.__class__ = FunctionLayerScale
    return model


# ----------------------------------------------------------------------------- the bank's rule, forced


def _bank(model: nn.Module):
    bank = getattr(model, "scale_bank", None)
    if bank is None:
        raise ValueError("model has no scale bank (no learnable per-channel LayerScale)")
    return bank


def never_fold(model: nn.Module) -> nn.Module:
    """The bank, never folding γ into the linears (one parameter, ``addcmul`` per residual add)."""
    _bank(model).fold = "never"
    return model


def always_fold(model: nn.Module) -> nn.Module:
    """The bank, folding γ into the linears at every training forward, whatever the shape."""
    _both_branches(model)
    _bank(model).fold = "always"
    return model
