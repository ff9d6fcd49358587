"""Packed runs: several runs as one stacked model, each still a complete run of its own."""

from __future__ import annotations

import json
import math

import pytest

from suite import store
from suite.config import load_config
from suite.engine import train
from suite.engine.pack import pack_key, packable, train_pack

BASE = {
    "data.name": "synthetic", "data.synthetic_train": 256, "data.synthetic_test": 64, "data.synthetic_img_size": 16,
    "data.synthetic_classes": 4, "model.patch_size": 4, "model.dim": 32, "model.heads": 2, "model.depth": 2,
    "model.residual": "layerscale", "train.steps": 50, "train.lr": 3e-3, "train.batch_size": 32,
    "train.warmup_steps": 3, "train.log_every": 5, "train.eval_every": 25, "train.timing_warmup_steps": 2,
    "device": "cpu",
}
# Differ between a packed and a solo run by design (timing, how it ran) or by float rounding.
VOLATILE = {"wall_s", "step_time_ms", "throughput", "peak_mem_mb", "started_at", "timing_cpu_util", "timing_load1",
            "timing_cores", "timing_contended", "pack_size", "final_train_loss"}
ACCURACIES = ("val_acc", "best_val_acc", "test_acc", "best_test_acc")  # a borderline image may flip


def cfg(**overrides):
    return load_config(None, [f"{k}={v}" for k, v in {**BASE, **overrides}.items()])


def losses(run_dir):
    return [m["loss"] for m in store.read_metrics(run_dir) if m["kind"] == "train" and m["loss"] is not None]


def test_a_pack_of_4_matches_4_solo_runs_over_50_steps(tmp_path):
    configs = [cfg(seed=s) for s in range(3)] + [cfg(seed=3, **{"train.lr": 1e-3, "model.layerscale.init": 0.1})]
    packed = train_pack(configs, [tmp_path / "pack" / str(i) for i in range(4)])
    for i, c in enumerate(configs):
        solo = train(c, tmp_path / "solo" / str(i))
        assert packed[i]["pack_size"] == 4 and packed[i]["run_id"] == solo["run_id"]
        assert losses(tmp_path / "pack" / str(i)) == pytest.approx(losses(tmp_path / "solo" / str(i)), rel=1e-4)
        assert packed[i]["final_train_loss"] == pytest.approx(solo["final_train_loss"], rel=1e-4)
        for key in ACCURACIES:
            assert packed[i][key] == pytest.approx(solo[key], abs=2 / 64), key
        skip = VOLATILE | set(ACCURACIES)
        assert {k: v for k, v in packed[i].items() if k not in skip} == {k: v for k, v in solo.items() if k not in skip}
    assert len(losses(tmp_path / "pack" / "0")) == 10  # every 5 steps, as a solo run logs


def test_a_member_that_diverges_is_recorded_alone_and_the_others_go_on(tmp_path):
    configs = [cfg(seed=0), cfg(seed=1, **{"train.lr": 1e4}), cfg(seed=2)]
    packed = train_pack(configs, [tmp_path / str(i) for i in range(3)])
    assert packed[1]["status"] == "diverged" and packed[1]["diverged_step"] is not None
    assert store.read_metrics(tmp_path / "1")[-1]["kind"] == "diverged"
    for i in (0, 2):
        solo = train(configs[i], tmp_path / f"solo{i}")
        assert packed[i]["status"] == solo["status"] and packed[i]["steps_done"] == 50
        assert losses(tmp_path / str(i)) == pytest.approx(losses(tmp_path / f"solo{i}"), rel=1e-4)
        assert all(math.isfinite(v) for v in losses(tmp_path / str(i)))


@pytest.mark.parametrize("how", ["killed", "preempted"])
def test_a_stopped_pack_resumes_from_its_members_checkpoints(tmp_path, how):
    """Killed between periodic checkpoints, it resumes from the last one; preempted without periodic
    checkpoints, every member saves the step it stopped at, as a solo run does. Either way the resumed
    pack ends as the uninterrupted one."""
    from suite.engine.lifecycle import StopRun

    every, stop_at, stop = {"killed": (10, 23, KeyboardInterrupt), "preempted": (0, 13, StopRun)}[how]
    configs = [cfg(seed=s, **{"train.steps": 30, "train.checkpoint_every": every}) for s in range(2)]
    full = train_pack(configs, [tmp_path / "full" / str(i) for i in range(2)])

    def interrupt(step):
        if step == stop_at:
            raise KeyboardInterrupt if stop is KeyboardInterrupt else StopRun("preempted", save=True)

    dirs = [tmp_path / how / str(i) for i in range(2)]
    with pytest.raises(stop):
        train_pack(configs, dirs, on_step=interrupt)
    assert all((d / "checkpoint.pt").exists() and not (d / "summary.json").exists() for d in dirs)
    resumed = train_pack(configs, dirs)
    for i in range(2):
        assert resumed[i]["resumed_at"] == [20 if how == "killed" else 13]
        assert resumed[i]["test_acc"] == full[i]["test_acc"] and resumed[i]["status"] == full[i]["status"]
        assert store.read_metrics(dirs[i]) == store.read_metrics(tmp_path / "full" / str(i))


def test_what_can_share_a_pack():
    assert pack_key(cfg(seed=0)) == pack_key(cfg(seed=5, **{"train.lr": 1e-2, "train.weight_decay": 0.1}))
    assert pack_key(cfg()) != pack_key(cfg(**{"model.depth": 3}))
    assert packable(cfg()) is None
    assert "drop-path" in packable(cfg(**{"model.drop_path": 0.1}))
    with pytest.raises(ValueError, match="cannot share a pack"):
        train_pack([cfg(), cfg(**{"model.depth": 3})], ["a", "b"])


def test_suite_run_pack_gives_the_summaries_of_solo_runs(tmp_path, capsys):
    from pathlib import Path

    from suite.cli import main

    smoke = Path(__file__).resolve().parents[2] / "ablations" / "smoke.yaml"
    args = ["--device", "cpu", "--threads", "1", "--workers", "1"]
    assert main(["run", str(smoke), "--out", str(tmp_path / "solo"), *args]) == 0
    assert main(["run", str(smoke), "--out", str(tmp_path / "pack"), "--pack", "4", *args]) == 0
    assert "8 runs: 8 ok" in capsys.readouterr().out
    read = lambda d: {p.parent.name: json.loads(p.read_text()) for p in (d / "runs").glob("*/summary.json")}  # noqa: E731
    solo, packed = read(tmp_path / "solo"), read(tmp_path / "pack")
    assert set(solo) == set(packed)
    assert {s["pack_size"] for s in packed.values()} == {2}  # 2 seeds per variant and depth
    for rid in solo:
        assert packed[rid]["status"] == solo[rid]["status"]
        assert packed[rid]["test_acc"] == pytest.approx(solo[rid]["test_acc"], abs=0.05)


def test_a_pack_of_one_is_exactly_a_solo_run(tmp_path):
    """--pack with nothing to pack it with (one seed): the run goes through the solo engine, bit for bit."""
    from pathlib import Path

    from suite.cli import main

    smoke = Path(__file__).resolve().parents[2] / "ablations" / "smoke.yaml"
    args = ["--device", "cpu", "--threads", "1", "--workers", "1", "--only", "seed=0"]
    assert main(["run", str(smoke), "--out", str(tmp_path / "solo"), *args]) == 0
    assert main(["run", str(smoke), "--out", str(tmp_path / "pack"), "--pack", "4", *args]) == 0
    for summary in sorted((tmp_path / "solo" / "runs").glob("*/summary.json")):
        packed = tmp_path / "pack" / "runs" / summary.parent.name
        assert (packed / "metrics.jsonl").read_text() == (summary.parent / "metrics.jsonl").read_text()
        solo_s, pack_s = json.loads(summary.read_text()), json.loads((packed / "summary.json").read_text())
        assert "pack_size" not in pack_s
        assert {k: v for k, v in pack_s.items() if k not in VOLATILE} == \
            {k: v for k, v in solo_s.items() if k not in VOLATILE}
