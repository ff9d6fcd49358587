"""The overhead benchmark: what each residual scheme costs per training step, against Pre-LN. ``arms.py`` (the models
measured), ``measure.py`` (interleaved A/B timing), ``stats.py`` (per-round ratios, intervals), ``report.py``
(``overhead.{csv,md,json}``), ``counts.py`` (operators and bytes), ``kernels.py`` (device time per kernel),
``packphases.py`` (``--pack-phases``), ``gate.py`` (the CI gate), ``throughput.py`` (runs per hour). Nothing here parses
arguments or prints: ``suite/cli/`` does."""
