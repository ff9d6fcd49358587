"""What the ``log`` evaluation schedule costs a run of an ablation's first shape, on this machine.

One held-out evaluation is a forward pass over the validation split; a training step is a forward
and backward pass over one batch. This times both in one process (one thread, as a sweep worker
runs), as medians, and prints the extra evaluations of ``train.eval_schedule: log`` (5, 10, 20, ...
below ``eval_every``) as a share of the run's time with the fixed schedule. Run from the repository
root, on an idle machine:

    .venv/bin/python scripts/eval_cost.py [ablations/default.yaml]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time

import torch


def main(path: str = "ablations/default.yaml") -> None:
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
    base = n * s + fixed * e
    print(f"{path}: depth {cfg.model.depth}, dim {cfg.model.dim}, batch {tc.batch_size}, {n} steps; "
          f"one training step {1e3 * s:.0f} ms, one evaluation ({run.data.val_size or run.data.test_size} images) "
          f"{1e3 * e:.0f} ms = {e / s:.1f} steps")
    print(f"fixed schedule: {fixed} evaluations; log schedule: {log} (+{log - fixed}), "
          f"+{100 * (log - fixed) * e / base:.1f}% of the run's time")


if __name__ == "__main__":
    main(*sys.argv[1:2])
