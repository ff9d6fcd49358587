"""The line `suite run` says as it starts its workers, with suite cost's estimate of the training time."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from suite.models.flops import train_step_flops
from suite.sweep import eta
from suite.sweep.cost import cost_shape, estimate
from suite.sweep.spec import load_ablation

from test_runner import SMOKE


def test_on_gpus_the_estimate_is_suite_cost_s_at_its_assumed_throughput():
    ablation = load_ablation(SMOKE)
    todo = ablation.runs[:6]
    hours = estimate(dataclasses.replace(ablation, runs=todo)).hours(100.0)
    assert hours * 3600 / 4 < 60  # 6 tiny runs on 4 workers
    assert eta.starting_line(ablation, todo, 4, 1, "cuda") == (
        "starting 4 workers; 6 runs, under a minute of training steps by suite cost's estimate "
        "(at an assumed 100 TFLOP/s; start-up and evaluation not counted)")


def test_on_the_cpu_the_throughput_is_measured_here(monkeypatch):
    ablation = load_ablation(SMOKE)
    seen = []
    cfg, _ = cost_shape(ablation.runs[0].cfg)
    flops = train_step_flops(cfg.model, cfg.train.batch_size)
    ms = 1e3 * 12 * 60 * 2 * flops / estimate(ablation).flops  # the step time that makes 12 min of work per worker
    monkeypatch.setattr(eta, "_measure", lambda cfg, threads: seen.append(threads) or ms)
    # each run queued in order on the first free worker: depth 1 and 2 alternate, so one worker ends later
    seconds = eta.queue_seconds([eta.run_flops(r) / flops * ms / 1e3 for r in ablation.runs], 2)
    assert 12 * 60 < seconds < 16 * 60
    assert eta.starting_line(ablation, ablation.runs, 2, 3, "cpu") == (
        f"starting 2 workers; 8 runs, {eta.about(seconds)} of training steps by suite cost's estimate "
        f"({ms:.1f} ms per step of the first run's shape, measured here; start-up and evaluation not counted)")
    assert seen == [3]  # with the workers' threads
    assert eta.starting_line(ablation, ablation.runs[:1], 1, 1, "cpu").startswith("starting 1 worker; 1 run, ")


def test_a_rough_duration():
    assert [eta.about(s) for s in (0, 59, 60, 89, 91, 5399, 5400, 12_600)] == [
        "under a minute", "under a minute", "about 1 min", "about 1 min", "about 2 min", "about 90 min",
        "about 1.5 h", "about 3.5 h"]


def test_no_estimate_where_suite_cost_has_none(monkeypatch):
    ablation = load_ablation(SMOKE)
    propagation = [dataclasses.replace(r, kind="propagation") for r in ablation.runs]
    assert eta.starting_line(ablation, propagation, 2, 1, "cpu") == "starting 2 workers; 8 runs"
    monkeypatch.setattr(eta, "MEASURE_PARAMS", 10)  # too large to time here
    assert eta.starting_line(ablation, ablation.runs, 2, 1, "cpu") == "starting 2 workers; 8 runs"


def test_measuring_leaves_the_caller_s_random_state_and_threads_alone():
    ablation = load_ablation(SMOKE)
    cfg, _ = cost_shape(ablation.runs[0].cfg)
    torch.manual_seed(1234)
    expected = torch.rand(3)
    torch.manual_seed(1234)
    threads = torch.get_num_threads()
    ms = eta._measure(cfg, 1)
    assert ms is not None and ms > 0
    assert torch.equal(torch.rand(3), expected) and torch.get_num_threads() == threads



def test_a_run_is_timed_by_its_shape_not_by_the_first_runs():
    """Issue 61: every estimate was 2-5x short when depth-24 runs came first and depth-96 ones after."""
    from suite.sweep.eta import fit_seconds, queue_seconds, remaining_seconds

    shallow, deep = 1e12, 4e12
    assert fit_seconds([(shallow, 12.0), (deep, 42.0), (shallow, 12.0)]) == pytest.approx((2.0, 1e-11))
    assert fit_seconds([(shallow, 10.0)]) == (0.0, 1e-11)  # one shape: through the origin
    assert fit_seconds([]) is None
    assert queue_seconds([3.0, 3.0, 3.0], 2) == 6.0 and queue_seconds([1.0, 1.0], 2, busy=[5.0]) == 5.0
    # two depth-24 runs done (12 s each), two depth-96 runs left and one in flight halfway, 2 workers
    left = remaining_seconds([(shallow, 12.0), (shallow, 12.0), (deep, 42.0)], [deep, deep], [(deep, 0.5)], 2)
    assert left == pytest.approx(21.0 + 42.0)  # the free worker takes one, the other after its 21 s


def test_the_progress_line_queues_the_runs_left_by_their_shape_over_the_workers():
    """The progress line's ETA after the first depth-1 runs of smoke (depths 1 and 2 alternate): the runs left,
    each timed by its FLOPs on the finished runs' line, queued over --workers; not the first runs' pace."""
    import types

    from suite.cli.run import Progress

    runs = load_ablation(SMOKE).runs
    flops = {r.run_id: eta.run_flops(r) for r in runs}
    shallow = [r for r in runs if r.cfg.model.depth == 1][:2]
    seconds = {r.run_id: 10.0 for r in shallow}  # 10 s per depth-1 run, so b = 10 / its FLOPs
    sweep = types.SimpleNamespace(todo=runs, results={i: {"status": "ok", "wall_s": s} for i, s in seconds.items()})
    left = [r for r in runs if r.run_id not in seconds]
    expected = eta.queue_seconds([10.0 * flops[r.run_id] / flops[shallow[0].run_id] for r in left], 2)
    assert Progress(2).eta(sweep) == pytest.approx(expected)
    assert expected > 10.0 * len(left) / 2  # the depth-2 runs left count for more than the depth-1 ones done
