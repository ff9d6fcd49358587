"""The training engine: one run, from a resolved config to a run folder.

``lifecycle.py`` (a run's folder, summary and error policy, for every kind of run), ``loop.py``
(setup / step / evaluate / finish, timing), ``divergence.py`` (when a run has diverged: pure rules over
its loss history), ``steplog.py`` (the step's numbers
kept on the device until read), ``outcome.py`` (ok or failed, judged on held-out accuracy by an
exact binomial test), ``optim.py`` (AdamW and the warmup + cosine schedule), ``probes.py``
(per-block probes attached with forward hooks), ``diagnostics.py`` (why a run broke: the peaks of its
attention-logit, entropy, stream and update diagnostics, and which crossed their bounds), ``checkpoint.py`` (save, resume), ``compiled.py``
(``train.compile``), ``resources.py`` (device, peak memory), ``pack.py`` (several runs as one stacked
model; its step as one program of device tensors in ``packstep.py``), ``precision.py`` (what
``train.precision`` sets on the device: TF32 matmuls for fp32 on CUDA), ``propagation.py`` (``suite propagate``: signal propagation instead of training) and
``trackers/`` (TensorBoard, W&B, MLflow sinks). The sweep's worker and ``suite train`` call
:func:`train`; nothing here parses arguments or prints.
"""

from typing import Any

__all__ = ["train"]


def __getattr__(name: str) -> Any:
    # Imported on first use, so that `suite.engine.resources` (the pre-flight's memory check) does not
    # pay for the training loop's imports.
    if name == "train":
        from suite.engine.loop import train

        return train
    raise AttributeError(f"module 'suite.engine' has no attribute {name!r}")
