"""The training engine: one run, from a resolved config to a run folder.

``loop.py`` (setup / step / evaluate / finish, divergence statuses, timing), ``optim.py`` (AdamW and
the warmup + cosine schedule), ``probes.py`` (per-block probes attached with forward hooks),
``checkpoint.py`` (save, resume), ``resources.py`` (device, peak memory). The sweep runner and
``suite train`` call :func:`train`; nothing here parses arguments or prints.
"""

from suite.engine.loop import train

__all__ = ["train"]
