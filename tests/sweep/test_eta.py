"""The line `suite run` says as it starts its workers, with suite cost's estimate of the training time."""

from __future__ import annotations

import dataclasses

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
    ms = 1e3 * 12 * 60 * 2 * flops / estimate(ablation).flops  # the step time that makes 12 min on 2 workers
    monkeypatch.setattr(eta, "_measure", lambda cfg, threads: seen.append(threads) or ms)
    assert eta.starting_line(ablation, ablation.runs, 2, 3, "cpu") == (
        f"starting 2 workers; 8 runs, about 12 min of training steps by suite cost's estimate "
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

