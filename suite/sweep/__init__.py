"""The sweep runner: an ablation file -> runs -> every run brought to a final ``summary.json``.

``sweep.py`` (:func:`run_sweep`: the sweep as a library call), ``options.py`` (:class:`SweepOptions`:
how to run it, ``suite run``'s flags),
``spec.py`` (YAML ablation -> validated, expanded runs; ``--only`` filters), ``tuned.py`` (``rates_from`` /
``rates``: each cell's learning rate from a tuning study), ``preflight.py`` (what
would make runs error, found before any starts), ``refine.py`` (``--refine``: extend a learning-rate
grid past an edge optimum and up to each arm's failure), ``until.py`` (``--until-decided``: seeds in
rounds), ``folder.py`` (the results folder: ownership, lock, which runs are done), ``plan.py`` (GPUs,
``device: auto``, precision per device), ``worker.py`` (the one pull-based worker every backend runs), ``claims.py`` (who trains
which run: leases, take-over, attempts), ``launcher.py`` (what a backend is: the checks it owns and
its launcher) and ``backends.py`` (the backends by name), ``local.py`` / ``ray_backend.py`` /
``slurm_backend.py`` (the backends: processes, Ray tasks, a Slurm array), ``slurm_jobs.py`` (the Slurm
jobs a results folder records, and which still run), ``guard.py`` (a script that
calls ``run_sweep`` outside ``if __name__ == "__main__":``), ``eta.py`` (the line a sweep says as it
starts its workers), ``status.py`` (``suite status``), ``results.py`` (a
sweep's summaries and metrics as pandas DataFrames, for notebooks), ``cost.py`` (``suite cost``).
Nothing here parses arguments or prints: ``suite run`` (``suite/cli/run.py``) does.
"""
