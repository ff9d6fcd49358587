"""The overhead benchmark: what each residual scheme costs per training step, against Pre-LN.

``arms.py`` (the models measured and their shape), ``measure.py`` (interleaved A/B timing),
``stats.py`` (per-round ratios, distribution-free intervals of their median), ``report.py``
(``overhead.{csv,md,json}``), ``counts.py`` (operators and bytes of a step, counted), ``kernels.py`` (device
time per kernel against Pre-LN, for the device check), ``packphases.py`` (``--pack-phases``: a run's host time
by phase, solo against a pack member), ``diagnostics.py`` (``--diagnostics``: what the instability diagnostics add
to a step), ``profile.py`` (``--profile``: a step's time by operator family), ``evalcost.py``
(``--eval-cost``: the log evaluation schedule's share of a run), ``gate.py`` (the CI gate's checks and
thresholds) and ``throughput.py`` (runs per hour: solo, co-located and packed runs through the sweep). Nothing here
parses arguments or prints: ``suite bench`` and ``suite bench-check`` (``suite/cli/``) do.
"""
