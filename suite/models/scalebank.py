"""All learnable LayerScale γ of a model as one parameter, folded into the last linears when cheaper.

What LayerScale costs per training step is bookkeeping, not arithmetic: per residual add, γ's
gradient (a pass over the saved branch and a reduction), its ``AccumulateGrad`` node and its own
optimizer tensor. At small widths that is a few per cent of a step (``suite bench --variants``).
The bank removes most of it without changing what is computed:

* **One parameter.** The γ of every :class:`LayerScale` live as the rows of ``layer_scales``
  (attention branches first, then MLP branches, in block order): one gradient, one
  ``AccumulateGrad``, one optimizer tensor. Each ``LayerScale`` holds a view of its row (handed out
  at every forward, and after ``.to()``), so block code, probes and ``Block.scales()`` see a
  per-block γ as before. The state dict keeps the per-block keys (``blocks.i.ls1.gamma``), so
  checkpoints, timm conversion and older weights are unchanged. What does change: γ is no longer
  among ``block.parameters()`` (``block.requires_grad_(False)`` leaves it learning; use
  :func:`block_tensors` for per-block norms), and its gradient is ``model.layer_scales.grad``.
* **Folded when the batch is large.** While training with gradients, when the rows of a step
  (batch × tokens) outnumber the input widths of the branches' last linears, γ is folded into
  those linears for all blocks at once: ``F.linear(h, γ[:, None]·W, γ·b)`` with the weights of all
  blocks stacked, one multiply per kind of branch. γ's gradient then comes out of weight-sized work
  (``Σ_k ∂W'·W``) instead of a pass over each saved branch, and the branch output is no longer
  saved for backward. With few rows (ViT-Ti at batch 4 on a CPU) the stacked weights are larger
  than the activations and the plain fused ``addcmul`` is used instead. Evaluation and probes
  (no gradients) always take the plain path.

Measurements behind both choices: ``results/reference/bench/candidates/`` (docs/benchmark.md).
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch
from torch import nn

from suite.models.layers import FoldableLinear
from suite.models.layerscale import LayerScale

PARAM = "layer_scales"


class ScaleBank:
    """The learnable per-channel (or scalar) LayerScales of ``model.blocks``, as one parameter.

    Built once by the model (:func:`install`); not a module, so nothing is registered twice.
    ``fold`` is ``"auto"`` (the rule of :meth:`worth_folding`), or ``"never"`` / ``"always"`` for
    the benchmark arms that check the rule (``suite bench --variants``).
    """

    fold = "auto"

    def __init__(self, model: nn.Module) -> None:
        kinds: dict[str, list[tuple[str, LayerScale, nn.Module]]] = {"attn": [], "mlp": []}
        for i, block in enumerate(model.blocks):
            for attr, kind, linear in (("ls1", "attn", "attn.proj"), ("ls2", "mlp", "mlp.fc2")):
                ls = getattr(block, attr, None)
                if type(ls) is LayerScale and isinstance(ls.gamma, nn.Parameter):
                    kinds[kind].append((f"blocks.{i}.{attr}", ls, block.get_submodule(linear)))
        entries = kinds["attn"] + kinds["mlp"]
        self.names = [name for name, _, _ in entries]
        self.scales = [ls for _, ls, _ in entries]
        self.groups = [  # (first row, the linears γ folds into) per kind of branch
            (0, [lin for _, _, lin in kinds["attn"]]),
            (len(kinds["attn"]), [lin for _, _, lin in kinds["mlp"]]),
        ]
        shapes = {ls.gamma.shape for ls in self.scales}
        self.foldable = all(isinstance(lin, FoldableLinear) and lin.bias is not None
                            for _, lins in self.groups for lin in lins)
        if len(shapes) > 1:
            raise ValueError(f"LayerScale vectors of different shapes cannot share one bank: {shapes}")

    def __len__(self) -> int:
        return len(self.scales)

    def rows(self, block: int) -> list[int]:
        """The rows of ``layer_scales`` that belong to block ``block``."""
        prefix = f"blocks.{block}."
        return [i for i, name in enumerate(self.names) if name.startswith(prefix)]

    def take(self, model: nn.Module) -> None:
        """Move every γ into ``model.layer_scales`` (registered on ``model``) and hand out views."""
        stacked = torch.stack([ls.gamma.detach() for ls in self.scales])
        for ls in self.scales:
            del ls._parameters["gamma"]
        model.register_parameter(PARAM, nn.Parameter(stacked))
        self.hand_back(model)

    def hand_out(self, model: nn.Module, bank: torch.Tensor | None = None) -> None:
        """Give each LayerScale a view of its row of ``model.layer_scales`` (call at each forward)."""
        rows = (getattr(model, PARAM) if bank is None else bank).unbind(0)
        for ls, row in zip(self.scales, rows):
            ls.__dict__["gamma"] = row  # a plain attribute (nn.Module.__setattr__ costs µs per call)

    def hand_back(self, model: nn.Module) -> None:
        """Rows of the detached bank between forwards: they share its memory (values stay live) but
        no graph, so the model stays copyable (``copy.deepcopy`` refuses outputs of a graph)."""
        self.hand_out(model, getattr(model, PARAM).detach())

    @contextlib.contextmanager
    def active(self, model: nn.Module, x: torch.Tensor) -> Iterator[None]:
        """Around the blocks of one forward on tokens ``x`` (B, N, C): views of the bank handed
        out, γ folded if :meth:`worth_folding`, and detached rows handed back afterwards."""
        self.hand_out(model)
        try:
            if self.worth_folding(model, x):
                with self.folded(model):
                    yield
            else:
                yield
        finally:
            self.hand_back(model)

    def worth_folding(self, model: nn.Module, x: torch.Tensor) -> bool:
        """Fold for this forward? Training with gradients, and more rows than weight columns."""
        # Not asked whether the bank requires grad: under functional_call + vmap (packed runs) it
        # says no, and folding computes the same function either way.
        if self.fold == "never" or not (self.foldable and model.training and torch.is_grad_enabled()):
            return False
        if self.fold == "always":
            return True
        # One rule for the whole model: folding one kind of branch alone where it barely has more
        # rows than inputs (ViT-Ti's attention at batch 4) measured slower than not folding at all.
        rows = x.shape[0] * x.shape[1]
        widths = sum(lins[0].in_features for _, lins in self.groups if lins)
        return rows > widths

    @contextlib.contextmanager
    def folded(self, model: nn.Module) -> Iterator[None]:
        """For the forward inside: γ folded into the last linears, the residual adds un-scaled."""
        bank = getattr(model, PARAM)
        try:
            for start, lins in self.groups:
                if not lins:
                    continue
                rows = bank[start:start + len(lins)]
                weights = torch.stack([lin.weight for lin in lins]) * rows[:, :, None]
                biases = torch.stack([lin.bias for lin in lins]) * rows
                for lin, w, b in zip(lins, weights.unbind(0), biases.unbind(0)):
                    lin.__dict__["folded"] = (w, b)
            for ls in self.scales:
                ls.__dict__["folded"] = True
            yield
        finally:
            for _, lins in self.groups:
                for lin in lins:
                    lin.__dict__["folded"] = None
            for ls in self.scales:
                ls.__dict__["folded"] = False

    # ------------------------------------------------------------------ state dict: per-block keys

    def export(self, module: nn.Module, state: dict, prefix: str, local_metadata) -> None:
        """State-dict hook: ``layer_scales`` written as the per-block ``...ls1.gamma`` keys."""
        bank = state.pop(prefix + PARAM, None)
        if bank is None:
            return
        for name, row in zip(self.names, bank.unbind(0)):
            state[f"{prefix}{name}.gamma"] = row  # views of one storage, as a state dict shares its parameters'

    def gather(self, module: nn.Module, state: dict, prefix: str, local_metadata, strict: bool,
               missing_keys: list[str], *args) -> None:
        """Load pre-hook: per-block ``...ls1.gamma`` keys stacked back into ``layer_scales``.

        A key that is absent keeps its row's current value and is reported in ``missing_keys``
        (so a strict load fails naming it, and a non-strict one still loads the others).
        """
        keys = [f"{prefix}{name}.gamma" for name in self.names]
        present = [k in state for k in keys]
        if prefix + PARAM in state or not any(present):
            return  # a bank key already, or no γ at all: load_state_dict reports layer_scales missing
        current = getattr(module, PARAM).detach()
        state[prefix + PARAM] = torch.stack([state.pop(k).to(current) if here else row
                                             for k, here, row in zip(keys, present, current.unbind(0))])
        missing_keys.extend(k for k, here in zip(keys, present) if not here)


def install(model: nn.Module) -> ScaleBank | None:
    """Give ``model`` a :class:`ScaleBank` when it has learnable LayerScales; ``None`` otherwise."""
    bank = ScaleBank(model)
    if not len(bank):
        return None
    bank.take(model)
    # The hooks look the bank up on the module they are called for, so a deep copy uses its own.
    model._register_state_dict_hook(_export)
    model._register_load_state_dict_pre_hook(_gather, with_module=True)
    # load_state_dict(assign=True) replaces the bank's tensor: the views must follow
    model.register_load_state_dict_post_hook(lambda mod, keys: mod.scale_bank.hand_back(mod))
    return bank


def _export(module: nn.Module, state: dict, prefix: str, meta) -> None:
    # Looked up on the module called for, so that a deep copy uses its own bank (or none).
    if getattr(module, "scale_bank", None) is not None:
        module.scale_bank.export(module, state, prefix, meta)


def _gather(module: nn.Module, state: dict, prefix: str, *args) -> None:
    if getattr(module, "scale_bank", None) is not None:
        module.scale_bank.gather(module, state, prefix, *args)


def block_tensors(model: nn.Module, index: int, grads: bool = False) -> list[torch.Tensor | None]:
    """Block ``index``'s parameters (or their gradients), its γ rows of the bank included.

    For per-block measurements (propagation's gradient and update norms): with a bank, a block's
    γ lives in ``model.layer_scales``, not in ``block.parameters()``. Works for any model with
    ``blocks`` (timm's keeps γ in its blocks).
    """
    out = [p.grad if grads else p for p in model.blocks[index].parameters()]
    bank = getattr(model, "scale_bank", None)
    if bank is not None:
        param = getattr(model, PARAM)
        source = param.grad if grads else param
        out += [None if source is None else source[r] for r in bank.rows(index)]
    return out
