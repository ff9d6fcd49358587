"""``suite bench --eval-cost [ABLATION]``: the ``log`` evaluation schedule's cost to a run of an ablation's first shape,
as a share of its time with the fixed schedule (docs/training.md); timed single-threaded, as a worker runs.
"""

from __future__ import annotations

import statistics
import tempfile
import time

import torch


def eval_cost(path: str) -> str:
    """Two lines: the step and evaluation times of ``path``'s first run, and the log schedule's share."""
    from suite.engine.lifecycle import RunFolder
    from suite.engine.loop import Training, eval_due, total_steps
    from suite.sweep.spec import load_ablation

    torch.set_num_threads(1)
    cfg = load_ablation(path).runs[0].cfg
    with tempfile.TemporaryDirectory() as out:
        run = Training(cfg, RunFolder(cfg, out))
        run.setup()
        run.begin()
        x, y = next(run.stream.batches(0, 1))
        step = []
        for _ in range(12):
            started = time.perf_counter()
            run.step(x, y)
            run.read(x)  # the loop reads the step log every log_every steps; the median skips that step
            step.append(time.perf_counter() - started)
        evals = []
        for _ in range(5):
            started = time.perf_counter()
            run.accuracy("val" if run.data.val is not None else "test")
            evals.append(time.perf_counter() - started)
        run.metrics.close()
    s, e = statistics.median(step[2:]), statistics.median(evals)
    tc = cfg.train
    n = total_steps(cfg, run.data.train_size)
    fixed = sum(eval_due(k, tc.eval_every, "fixed") for k in range(1, n + 1))
    log = sum(eval_due(k, tc.eval_every, "log") for k in range(1, n + 1))
    return (f"{path}: depth {cfg.model.depth}, dim {cfg.model.dim}, batch {tc.batch_size}, {n} steps; one training "
            f"step {1e3 * s:.0f} ms, one evaluation ({run.data.val_size or run.data.test_size} images) {1e3 * e:.0f} ms "
            f"= {e / s:.1f} steps\nfixed schedule: {fixed} evaluations; log schedule: {log} (+{log - fixed}), "
            f"+{100 * (log - fixed) * e / (n * s + fixed * e):.1f}% of the run's time\n")
