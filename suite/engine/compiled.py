"""``torch.compile`` for one run in a long-lived process, with no silent fall-back to eager.

A sweep worker trains many runs one after another. Dynamo's caches live as long as the process, so
each new model shape is a recompilation of the same code; past ``recompile_limit`` of them dynamo
stops compiling and runs that code eagerly, without an error, and whether a run was compiled would
then depend on what its worker ran before. Each run therefore starts from empty caches, and hitting
the limit inside one run is an error instead of a fall-back.
"""

from __future__ import annotations

from typing import Any

import torch
import torch._dynamo
from torch import nn


def compile_for_run(model: nn.Module, **options: Any) -> nn.Module:
    """``torch.compile(model, **options)`` after clearing what earlier runs in this process compiled.

    Raises (when called):
        torch._dynamo.exc.FailOnRecompileLimitHit: one run needed more recompilations than the limit.
    """
    torch._dynamo.reset()
    torch._dynamo.config.fail_on_recompile_limit_hit = True
    return torch.compile(model, **options)
