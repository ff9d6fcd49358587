"""The training engine: one run, from a resolved config to a run folder.

``lifecycle.py`` (run folder, summary, error policy), ``loop.py`` (setup / step / evaluate / finish), ``divergence.py``
(when a run has diverged), ``steplog.py`` (step numbers kept on the device), ``outcome.py`` (ok or failed, on held-out
data), ``optim.py`` (AdamW, warmup + cosine), ``probes.py`` (per-block probes), ``diagnostics.py`` (why a run broke),
``checkpoint.py`` (save, resume), ``compiled.py`` (``train.compile``), ``resources.py`` (device, memory), ``pack.py``
(several runs as one stacked model; its step in ``packstep.py``), ``precision.py`` (TF32), ``propagation.py`` (signal
propagation instead of training) and ``trackers/`` (TensorBoard, W&B, MLflow). The sweep's worker and ``suite train``
call :func:`train`; nothing here parses arguments or prints.
"""

from typing import Any

__all__ = ["train"]


def __getattr__(name: str) -> Any:
    # Imported on first use, so the pre-flight's memory check (`suite.engine.resources`) skips the loop's imports.
    if name == "train":
        from suite.engine.loop import train

        return train
    raise AttributeError(f"module 'suite.engine' has no attribute {name!r}")
