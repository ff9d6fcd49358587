"""Seeds derived from (run seed, purpose, counter) by chaining splitmix64: ``hash()`` is salted per process and
``seed * K + epoch`` collides across seeds."""

from __future__ import annotations

import torch

_MASK = (1 << 64) - 1

# One tag per random stream, so e.g. epoch 3's permutation and step 3's augmentation differ.
PERMUTATION = 1
AUGMENT = 2
SPLIT = 3
SYNTHETIC = 4
VALIDATION = 5


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def mix_seed(*parts: int) -> int:
    """Combine integers (negative too), e.g. ``(PERMUTATION, seed, epoch)``, into one seed in ``[0, 2**63)``."""
    state = 0
    for part in parts:
        state = _splitmix64(state ^ (int(part) & _MASK))
    return state >> 1


def generator(*parts: int) -> torch.Generator:
    """A fresh CPU generator seeded from ``parts`` (CPU so draws are identical on every device)."""
    return torch.Generator().manual_seed(mix_seed(*parts))
