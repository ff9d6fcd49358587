"""The sweep runner: an ablation file -> runs -> every run brought to a final ``summary.json``; nothing here parses
arguments or prints (``suite/cli/run.py`` does). ``sweep.py`` (:func:`run_sweep`), ``options.py`` (``suite run``'s
flags), ``spec.py`` (YAML -> validated runs; ``--only``), ``tuned.py`` (``rates_from`` / ``rates``), ``preflight.py``
(run errors found before any starts), ``refine.py`` (``--refine``), ``folder.py`` (the results folder: owner, lock,
runs done), ``plan.py`` (GPUs, ``device: auto``, precision), ``worker.py`` (the pull-based worker), ``claims.py`` (who
trains which run), ``launcher.py`` / ``backends.py`` (what a backend is; by name), ``local.py`` / ``ray_backend.py`` /
``slurm_backend.py`` (the backends), ``server.py`` (imported by the local fork server alone), ``slurm_jobs.py`` (a
folder's Slurm jobs), ``guard.py`` (``run_sweep`` outside a ``__main__`` guard), ``eta.py`` (the line said as workers
start), ``status.py`` (``suite status``), ``results.py`` (summaries as DataFrames), ``cost.py`` (``suite cost``)."""
