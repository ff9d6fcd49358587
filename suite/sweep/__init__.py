"""The sweep runner: an ablation file -> runs -> every run brought to a final ``summary.json``.

``sweep.py`` (:func:`run_sweep`: the sweep as a library call), ``options.py`` (:class:`SweepOptions`, ``suite run``'s
flags), ``spec.py`` (YAML ablation -> validated runs; ``--only``), ``tuned.py`` (``rates_from`` / ``rates``),
``preflight.py`` (what would make runs error, found before any starts), ``refine.py`` (``--refine``), ``until.py``
(``--until-decided``), ``folder.py`` (the results folder: ownership, lock, runs done), ``plan.py`` (GPUs, ``device:
auto``, precision), ``worker.py`` (the one pull-based worker), ``claims.py`` (who trains which run), ``launcher.py``
(what a backend is) and ``backends.py`` (the backends by name), ``local.py`` / ``ray_backend.py`` /
``slurm_backend.py`` (the backends), ``slurm_jobs.py`` (the Slurm jobs a folder records), ``guard.py`` (a script
calling ``run_sweep`` outside ``if __name__ == "__main__":``), ``eta.py`` (the line said as workers start),
``status.py`` (``suite status``), ``results.py`` (summaries and metrics as DataFrames), ``cost.py`` (``suite cost``).
Nothing here parses arguments or prints: ``suite run`` (``suite/cli/run.py``) does.
"""
