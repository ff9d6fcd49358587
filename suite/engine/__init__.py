"""The training engine: one run, from a resolved config to a run folder (:func:`train`); nothing here parses arguments
or prints. ``lifecycle.py`` (run folder, errors), ``loop.py`` (the phases), ``divergence.py``, ``steplog.py``,
``outcome.py`` (ok or failed), ``optim.py``, ``probes.py``, ``diagnostics.py`` (why a run broke), ``checkpoint.py``,
``compiled.py``, ``resources.py`` (device, memory), ``pack.py`` and ``packstep.py`` (runs stacked as one model),
``precision.py``, ``propagation.py`` (signal propagation) and ``trackers/`` (TensorBoard, W&B, MLflow)."""

from typing import Any

__all__ = ["train"]


def __getattr__(name: str) -> Any:
    # Imported on first use, so the pre-flight's memory check (`suite.engine.resources`) skips the loop's imports.
    if name == "train":
        from suite.engine.loop import train

        return train
    raise AttributeError(f"module 'suite.engine' has no attribute {name!r}")
