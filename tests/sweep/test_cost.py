"""`suite cost`: steps, FLOPs and device-hours of an ablation before it runs."""

from __future__ import annotations

import math
import re
import textwrap
from pathlib import Path

import pytest

from suite.cli import main
from suite.config import ModelConfig
from suite.models.flops import train_step_flops
from suite.sweep.cost import estimate
from suite.sweep.spec import load_ablation

ROOT = Path(__file__).resolve().parents[2]


def test_counts_steps_and_flops_run_by_run(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text(textwrap.dedent("""
        name: a
        base: {data: {name: cifar10, val_fraction: 0.1}, model: {dim: 64, heads: 2, patch_size: 4},
               train: {batch_size: 100}}
        grid: {model.depth: [2, 4]}
        variants: {short: {train.steps: 10}, epoch: {train.epochs: 1}}
        seeds: 1
    """))
    cost = estimate(load_ablation(path))
    epoch_steps = 45_000 // 100  # CIFAR-10 after the 5,000-image validation split
    assert cost.runs == 4 and cost.steps == 2 * 10 + 2 * epoch_steps
    flops = lambda depth: train_step_flops(ModelConfig(dim=64, heads=2, patch_size=4, depth=depth, img_size=32,  # noqa: E731
                                                       in_chans=3, num_classes=10), 100)
    assert cost.flops == pytest.approx((10 + epoch_steps) * (flops(2) + flops(4)))
    assert cost.hours(1.0) == pytest.approx(cost.flops / 1e12 / 3600)


@pytest.mark.parametrize("name", ["paper_tune", "cait_depth_tune"])
def test_the_gpu_ablations_comments_state_what_suite_cost_computes(name):
    path = ROOT / "ablations" / f"{name}.yaml"
    text = path.read_text()
    ablation = load_ablation(path)
    cost = estimate(ablation)
    found = re.search(r"([\d,]+) runs, ([\d,]+) steps, about ([\d.]+) GPU-hours at an assumed 100 TFLOP/s", text)
    runs, steps = (int(found.group(i).replace(",", "")) for i in (1, 2))
    assert (runs, steps) == (len(ablation.runs), cost.steps)
    assert float(found.group(3)) == pytest.approx(cost.hours(100.0), abs=0.5)


def test_cli_prints_hours_and_rejects_bad_input(tmp_path, capsys):
    assert main(["cost", str(ROOT / "ablations" / "default.yaml"), "--measured", "130@48"]) == 0
    out = capsys.readouterr().out
    assert "40 runs" in out and "12,000 optimizer steps" in out and "derived from 130 ms per step at depth 48" in out
    for bad in ("fast", "1.2.3@12", ".@12", "5@"):
        assert main(["cost", str(ROOT / "ablations" / "default.yaml"), "--measured", bad]) == 2
        assert "expected MS@DEPTH" in capsys.readouterr().err
    (tmp_path / "g.yaml").write_text("name: g\nbase: {data: {name: imagefolder, img_size: 64}, model: {img_size: 64, "
                                     "patch_size: 8, in_chans: 3, num_classes: 5, dim: 32, heads: 2}, train: {steps: 10}}\n"
                                     "variants: {preln: {model.residual: preln}}\nseeds: 1\n")
    assert main(["cost", str(tmp_path / "g.yaml")]) == 0  # the config says its shape and length
    assert "10 optimizer steps" in capsys.readouterr().out
    (tmp_path / "f.yaml").write_text("name: f\nbase: {data: {name: imagefolder}, train: {epochs: 1}}\n"
                                   "variants: {preln: {model.residual: preln}}\nseeds: 1\n")
    assert main(["cost", str(tmp_path / "f.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "train.steps" in err


def test_cait_depth_follows_the_recipe_its_comment_states():
    """Batch-scaled learning rate, 5 warm-up epochs counted on the split the runs train on, uniform drop-path."""
    from suite.sweep.cost import cost_shape, run_steps

    ablation = load_ablation(ROOT / "ablations" / "cait_depth_tune.yaml")
    base = ablation.resolved["base"]["train"]
    assert base["lr"] == pytest.approx(5e-4 * base["batch_size"] / 512)  # the grid sweeps around it
    assert any(lr == pytest.approx(base["lr"]) for lr in ablation.grid["train.lr"])
    for run in ablation.runs:
        cfg, train_size = cost_shape(run.cfg)
        tc = cfg.train
        per_epoch = train_size // tc.batch_size  # whole batches: the stream drops the last incomplete one
        assert (train_size, tc.warmup_steps) == (45_000, 5 * per_epoch)
        assert run_steps(cfg, train_size) == 100 * per_epoch == 17_500
        assert (cfg.model.drop_path, cfg.model.drop_path_schedule) == (0.1, "uniform")


def test_wall_clock_for_n_workers_from_a_step_measured_here(capsys, monkeypatch):
    import suite.sweep.cost as cost_module

    laptop = str(ROOT / "ablations" / "laptop.yaml")
    assert main(["cost", laptop, "--measured", "36@2", "--workers", "2"]) == 0
    out = capsys.readouterr().out
    # 2 runs of 30 steps at 36 ms each: 2.16 s of device time, 1.08 s on each of 2 workers
    assert "0m02s of device time" in out and "wall clock with 2 workers at that rate each: about 0m01s" in out
    seen = {}

    def fake_measure(cfg, threads, steps=8, warmup=3):
        seen.update(depth=cfg.model.depth, threads=threads, img=cfg.model.img_size)
        return 36.0

    monkeypatch.setattr(cost_module, "measure_step_ms", fake_measure)
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert main(["cost", laptop, "--measure", "--workers", "4"]) == 0
    out = capsys.readouterr().out
    assert seen == {"depth": 2, "threads": 2, "img": 8}  # the first run's shape, cores // workers threads
    assert "measured here: 36.0 ms per step of the first run's shape (depth 2) with 2 CPU threads" in out
    assert "wall clock with 4 workers at that rate each: about 0m01s" in out  # 2 runs: at most 2 workers busy
    assert main(["cost", laptop, "--workers", "0"]) == 2 and "--workers 0: must be >= 1" in capsys.readouterr().err


def test_measure_step_ms_times_real_steps():
    cfg = load_ablation(ROOT / "ablations" / "laptop.yaml").runs[0].cfg
    from suite.sweep.cost import measure_step_ms

    assert 0 < measure_step_ms(cfg, threads=1, steps=2, warmup=1) < 60_000


def test_the_estimates_update_is_adamws_step_for_step():
    """``suite run``'s estimate times AdamW's arithmetic written out (a torch optimizer would import torch._dynamo in
    the sweep's parent: test_layout checks that it does not): three updates land where torch's AdamW puts them."""
    import torch

    from suite.sweep.cost import _adamw

    torch.manual_seed(0)
    ours = [torch.nn.Parameter(torch.randn(5, 3)), torch.nn.Parameter(torch.randn(7))]
    theirs = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    update, reference = _adamw(ours), torch.optim.AdamW(theirs, lr=1e-4)
    for _ in range(3):
        for a, b in zip(ours, theirs):
            a.grad = torch.randn_like(a)
            b.grad = a.grad.clone()
        update()
        reference.step()
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-9)


def test_an_epoch_is_the_whole_batches_the_stream_draws_in_training_and_in_the_estimate():
    """train.epochs: 1 trained ceil(n / B) steps while an epoch of the stream is n // B (the last incomplete batch
    dropped), so one epoch was one epoch and a batch of the next: 29 steps against 28 at n = 3600, B = 128."""
    from suite.config import load_config
    from suite.data.stream import StepOrder
    from suite.sweep.cost import run_steps

    for epochs, n, batch in ((1, 3600, 128), (100, 45_000, 256), (2.5, 1000, 100), (1, 50, 128)):
        cfg = load_config(None, [f"train.epochs={epochs}", f"train.batch_size={batch}"])
        per_epoch = StepOrder(n, batch, 0).steps_per_epoch
        assert cfg.train.total_steps(n) == run_steps(cfg, n) == math.ceil(epochs * per_epoch)
    assert load_config(None, ["train.steps=7"]).train.total_steps(10) == 7


def test_the_run_limit_hint_names_a_flag_cost_and_config_take(capsys):
    """'pass --max-runs N if you mean it' named a flag suite cost and suite config did not have."""
    default = str(ROOT / "ablations" / "default.yaml")
    for command in (["cost", default], ["config", default]):
        assert main([*command, "--max-runs", "39"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "pass --max-runs 40 if you mean it" in err
        assert main([*command, "--max-runs", "40"]) == 0
        capsys.readouterr()
