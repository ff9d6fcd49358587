"""The overhead benchmark: what each residual scheme costs per training step, against Pre-LN.

``arms.py`` (the models measured and their shape), ``measure.py`` (interleaved A/B timing), ``stats.py`` (per-round
ratios and their intervals), ``report.py`` (``overhead.{csv,md,json}``), ``counts.py`` (operators and bytes, counted),
``kernels.py`` (device time per kernel, for the device check), ``packphases.py`` (``--pack-phases``), ``diagnostics.py``
(``--diagnostics``), ``profile.py`` (``--profile``), ``evalcost.py`` (``--eval-cost``), ``gate.py`` (the CI gate) and
``throughput.py`` (runs per hour). Nothing here parses arguments or prints: ``suite/cli/`` does.
"""
