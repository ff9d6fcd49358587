"""Depth-scaled residual branches: Depth-μP (α = 1/2) and CompleteP (α = 1). Each Pre-LN branch is multiplied by
``m_L^-α``, ``m_L = L / L_base``; the blocks learn at ``η · m_L^(α-1)`` and ε is ``ε · m_L^-α``, so a rate tuned at
``L_base`` transfers (docs/schemes.md, "Depth-scaled residuals")."""

from __future__ import annotations

from torch import nn

from suite.config import ModelConfig

# The published settings, accepted as `model.residual` names (`suite schemes`).
PUBLISHED = {"depth-mup": 0.5, "completep": 1.0}
SCHEMES = ("depth_scaled", *PUBLISHED)

HIDDEN_PREFIX = "blocks."  # parameters inside the residual blocks: the "hidden" ones


def alpha(m: ModelConfig) -> float | None:
    """α of a depth-scaled scheme (1/2, 1, or ``model.depth_alpha`` for ``depth_scaled``), else None."""
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
    """The factor on AdamW's ε: ``m_L^-α``, as on the branches."""
    return branch_multiplier(m)


class BranchMultiplier(nn.Module):
    """``x * c`` for a fixed number c: a depth-scaled branch (not a parameter, not a buffer)."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = float(value)

    def forward(self, x):
        return x * self.value

    def extra_repr(self) -> str:
        return f"{self.value:.4g}"
