"""The sweep runner: an ablation file -> runs -> every run brought to a final ``summary.json``.

``spec.py`` (YAML ablation -> validated, expanded runs; ``--only`` filters), ``folder.py`` (the
results folder: ownership, lock, which runs are done), ``plan.py`` (devices, workers, threads,
backend), ``task.py`` (one run as every backend executes it; the record of a lost run),
``local.py`` (worker processes) and ``ray_backend.py`` (Ray tasks). Nothing here parses arguments
or prints: ``suite run`` (``suite/cli/run.py``) does.
"""
