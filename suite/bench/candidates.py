"""LayerScale implementations measured against the model's own, and not adopted (yet).

Each function turns a freshly built ``layerscale`` model (per-channel γ on both branches) into one
that computes the same function with the same gradients, in place, by a different route. They are
``suite bench`` arms (``layerscale:<name>``, see ``arms.py``) so that any claim about what they
cost is a table written by a command (docs/benchmark.md, "Why LayerScale is not free").

* :func:`fold_layerscale` (``:folded``): γ folded into each branch's last linear,
  ``F.linear(h, γ[:, None]·W, γ·b)``; γ's gradient becomes weight-sized work instead of
  activation-sized work, at the price of several small autograd nodes per block.
* :func:`use_function` (``:function``): the residual update as one custom autograd function whose
  backward is the minimal one (``grad·γ`` for the branch, ``Σ grad·branch`` for γ), without the
  extra ``branch·value`` pass of ``addcmul``'s derivative.
* :func:`flatten_layerscale` (``:flat``): every γ of the model as rows of one parameter (one
  gradient, one optimizer tensor, one ``AccumulateGrad``), handed to the blocks as views.
* :func:`stacked_fold` (``:stacked-fold``): the fold above done for all blocks at once, on the
  last-linear weights stacked (L, C, K), with one flat γ: a handful of autograd nodes per step
  instead of a handful per block, but weight-sized copies every step.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from suite.models.layerscale import LayerScale


def _layerscales(model: nn.Module) -> list[LayerScale]:
    found = [m for m in model.modules() if type(m) is LayerScale]
    if not found:
        raise ValueError("model has no per-channel LayerScale to re-implement")
    return found


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
    for module in _layerscales(model):
        module.__class__ = FunctionLayerScale
    return model


# ----------------------------------------------------------------------------- :flat


def flatten_layerscale(model: nn.Module) -> nn.Module:
    """All γ of ``model`` as the rows of one parameter ``model.layer_scales`` (in place).

    Each :class:`LayerScale` keeps a plain ``gamma`` attribute, set at every forward (a forward
    pre-hook) to its row of ``layer_scales.unbind(0)``: one autograd node hands out all views,
    and their gradients come back as one.
    """
    mods = _layerscales(model)
    if len({m.gamma.shape for m in mods}) != 1:
        raise ValueError("flattening needs every scale of one shape")
    model.layer_scales = nn.Parameter(torch.stack([m.gamma.detach() for m in mods]))
    for m in mods:
        del m._parameters["gamma"]

    def hand_out(module: nn.Module, args: tuple) -> None:
        for m, row in zip(mods, module.layer_scales.unbind(0)):
            m.gamma = row

    model.register_forward_pre_hook(hand_out)
    hand_out(model, ())
    return model


# ----------------------------------------------------------------------------- :stacked-fold


class FoldedLinear(nn.Module):
    """A last linear layer whose weight and bias (already multiplied by γ) are set from outside."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.linear = linear
        self.weight_now: torch.Tensor | None = None
        self.bias_now: torch.Tensor | None = None

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(h, self.weight_now, self.bias_now)


def stacked_fold(model: nn.Module) -> nn.Module:
    """γ folded into ``attn.proj``/``mlp.fc2`` of every block at once (in place, same function).

    ``model.layer_scales`` is (2, L, C): row 0 the attention branches' γ, row 1 the MLP's. At every
    forward a pre-hook stacks the L weights (and biases) of each kind, multiplies them by γ in one
    op and hands each block its slice.
    """
    _both_branches(model)
    blocks = list(model.blocks)
    model.layer_scales = nn.Parameter(torch.stack([
        torch.stack([b.ls1.gamma.detach() for b in blocks]),
        torch.stack([b.ls2.gamma.detach() for b in blocks]),
    ]))
    attn = [FoldedLinear(b.attn.proj) for b in blocks]
    mlp = [FoldedLinear(b.mlp.fc2) for b in blocks]
    for b, a, m in zip(blocks, attn, mlp):
        b.attn.proj, b.mlp.fc2 = a, m
        b.ls1, b.ls2 = nn.Identity(), nn.Identity()

    def fold(module: nn.Module, args: tuple) -> None:
        for row, targets in zip(module.layer_scales, (attn, mlp)):
            weights = torch.stack([t.linear.weight for t in targets]) * row[:, :, None]
            biases = torch.stack([t.linear.bias for t in targets]) * row
            for t, w, b in zip(targets, weights.unbind(0), biases.unbind(0)):
                t.weight_now, t.bias_now = w, b

    model.register_forward_pre_hook(fold)
    return model
