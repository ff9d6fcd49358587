"""`suite cost`: steps, FLOPs and device-hours of an ablation before it runs."""

from __future__ import annotations

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


def test_the_paper_ablation_comment_states_what_suite_cost_computes():
    path = ROOT / "ablations" / "paper.yaml"
    text = path.read_text()
    ablation = load_ablation(path)
    cost = estimate(ablation)
    runs = int(re.search(r"=\s*(?:#\s*)?([\d,]+) runs", text).group(1).replace(",", ""))
    steps = int(re.search(r"([\d,]+) steps, about", text).group(1).replace(",", ""))
    hours = float(re.search(r"about ([\d.]+) GPU-hours at an assumed 100 TFLOP/s", text).group(1))
    assert (runs, steps) == (len(ablation.runs), cost.steps)
    assert hours == pytest.approx(cost.hours(100.0), abs=0.5)


def test_cli_prints_hours_and_rejects_bad_input(tmp_path, capsys):
    assert main(["cost", str(ROOT / "ablations" / "default.yaml"), "--measured", "130@48"]) == 0
    out = capsys.readouterr().out
    assert "56 runs" in out and "16,800 optimizer steps" in out and "derived from 130 ms per step at depth 48" in out
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
    from suite.sweep.cost import _shape, run_steps

    for run in load_ablation(ROOT / "ablations" / "cait_depth.yaml").runs:
        cfg, train_size = _shape(run.cfg)
        tc = cfg.train
        assert tc.lr == pytest.approx(5e-4 * tc.batch_size / 512)
        per_epoch = -(-train_size // tc.batch_size)
        assert (train_size, tc.warmup_steps) == (45_000, 5 * per_epoch)
        assert run_steps(cfg, train_size) == 100 * 45_000 // 256 + 1  # ceil(100 epochs)
        assert (cfg.model.drop_path, cfg.model.drop_path_schedule) == (0.1, "uniform")
