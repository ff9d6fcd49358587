"""Depth-scaled residual branches: Depth-μP (α = 1/2) and CompleteP (α = 1).

Each residual branch of a Pre-LN block is multiplied by ``m_L^-α`` with ``m_L = L / L_base``, L the
number of blocks (as in the reference code, where both branches of a block share the multiplier and
``depth_multiplier = n_layer / base_depth``). Each parametrisation pairs the multiplier with AdamW
rules relative to the base depth, so that a learning rate tuned at ``L_base`` transfers to L:

| quantity | rule | α = 1/2 (Depth-μP) | α = 1 (CompleteP) |
|---|---|---|---|
| branch multiplier | ``m_L^-α`` | ``m_L^-1/2`` | ``m_L^-1`` |
| learning rate of every parameter inside the blocks (weights, biases, LayerNorms) | ``η · m_L^(α-1)`` | ``η · m_L^-1/2`` | ``η`` |
| learning rate of the embeddings, the final LayerNorm and the head | ``η`` | ``η`` | ``η`` |
| AdamW ε | ``ε · m_L^-α`` | ``ε · m_L^-1/2`` | ``ε · m_L^-1`` |
| weight decay (torch's AdamW: the step decays by lr × wd) | unchanged | unchanged | unchanged |
| initialisation of hidden weights | unchanged with depth | | |

Sources: Dey et al. 2025, "Don't be lazy: CompleteP enables compute-efficient deep transformers"
(arXiv:2505.01618), Table 1, as implemented in its reference code (EleutherAI/nanoGPT-mup, branch
``completep``: ``model.py`` ``Block.forward`` and ``configure_optimizers``, at width multiplier 1, so
the μP width terms are 1); α = 1/2 is the Depth-μP setting of Yang, Yu, Zhu and Hayou 2023
("Tensor Programs VI", arXiv:2310.02244: branch multiplier 1/√L and Adam learning rate η/√L) and
Bordelon et al. 2023. The suite scales ε for every parameter group alike; the reference code now
scales it for the hidden groups only (docs/schemes.md says why the suite keeps its rule: the steps
differ by a few parts in 100,000 at depth 48). The suite does not scale width, so these are the
depth rules alone.
"""

from __future__ import annotations

from torch import nn

from suite.config import ModelConfig

# The published settings, accepted as `model.residual` names (`suite schemes`).
PUBLISHED = {"depth-mup": 0.5, "completep": 1.0}
SCHEMES = ("depth_scaled", *PUBLISHED)

HIDDEN_PREFIX = "blocks."  # parameters inside the residual blocks: the "hidden" ones


def alpha(m: ModelConfig) -> float | None:
    """α of a depth-scaled scheme (``depth-mup`` 1/2, ``completep`` 1, ``depth_scaled`` its
    ``model.depth_alpha``); None for every other scheme."""
    if m.residual in PUBLISHED:
        return PUBLISHED[m.residual]
    return m.depth_alpha if m.residual == "depth_scaled" else None


def depth_multiplier(m: ModelConfig) -> float:
    """``m_L = L / L_base``."""
    return m.depth / m.base_depth


def branch_multiplier(m: ModelConfig) -> float:
    """What each residual branch is multiplied by: ``m_L^-α`` (1 for schemes that are not depth-scaled)."""
    a = alpha(m)
    return 1.0 if a is None else depth_multiplier(m) ** -a


def hidden_lr_scale(m: ModelConfig) -> float:
    """The factor on the learning rate of parameters inside the blocks: ``m_L^(α-1)``."""
    a = alpha(m)
    return 1.0 if a is None else depth_multiplier(m) ** (a - 1.0)


def eps_scale(m: ModelConfig) -> float:
    """The factor on AdamW's ε: ``m_L^-α``."""
    a = alpha(m)
    return 1.0 if a is None else depth_multiplier(m) ** -a


class BranchMultiplier(nn.Module):
    """``x * c`` for a fixed number c: a depth-scaled branch (not a parameter, not a buffer)."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = float(value)

    def forward(self, x):
        return x * self.value

    def extra_repr(self) -> str:
        return f"{self.value:.4g}"
