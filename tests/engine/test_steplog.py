"""The step that does not wait for the host: the same statuses and steps as reading every step, no
host sync inside a step, and no update after a non-finite one (CPU runs the CUDA code path)."""

from __future__ import annotations

import math

import pytest
import torch

from suite.config import load_config
from suite.engine.lifecycle import RunFolder
from suite.engine.loop import Training
from suite.engine.steplog import StepLog

BASE = {
    "data.name": "synthetic", "data.synthetic_train": 256, "data.synthetic_test": 64, "data.synthetic_img_size": 16,
    "data.synthetic_classes": 4, "model.patch_size": 4, "model.dim": 32, "model.heads": 2, "model.depth": 2,
    "train.steps": 30, "train.lr": 3e-3, "train.batch_size": 32, "train.warmup_steps": 2, "train.eval_every": 0,
    "train.timing_warmup_steps": 2, "device": "cpu",
}
FIELDS = ("status", "diverged_step", "diverged_reason", "failed_reason", "steps_to_learn", "steps_done",
          "final_train_loss", "test_acc", "val_acc", "spikes_recovered")


def cfg(**overrides):
    return load_config(None, [f"{k}={v}" for k, v in {**BASE, **overrides}.items()])


def run(tmp_path, config, poison=None, fused=True):
    """Train with the engine's loop; ``poison(out, step)`` replaces the model's output."""
    folder = RunFolder(config, tmp_path)
    config, _ = folder.start(config)
    training = Training(config, folder)
    training.setup()
    if not fused:  # the path without a fused AdamW: the host checks every step
        training.sync_free = False
        training.optimizer.found_inf = None
    if poison is not None:
        model = training.step_fn
        training.step_fn = lambda x: poison(model(x), training.state.step)
    training.loop(progress=False, on_step=None)
    training.finish()
    return training


def nan_at(step):
    return lambda out, s: out * math.nan if s == step else out


def spike_at(step):
    return lambda out, s: out * -1e4 if s == step else out


CASES = {
    "nonfinite loss at step 13": ({}, nan_at(13)),
    "loss spike at step 17": ({"train.spike_window": 0}, spike_at(17)),
    "recovered spike at step 17": ({}, spike_at(17)),
    "ok": ({}, None),
    "never learned": ({"train.lr": 0.0, "train.min_lr": 0.0}, None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_reading_every_10_steps_gives_what_reading_every_step_gives(tmp_path, case):
    overrides, poison = CASES[case]
    every_step = run(tmp_path / "a", cfg(**overrides, **{"train.log_every": 1}), poison).summary
    every_10 = run(tmp_path / "b", cfg(**overrides, **{"train.log_every": 10}), poison).summary
    without_fused = run(tmp_path / "c", cfg(**overrides, **{"train.log_every": 10}), poison, fused=False).summary
    for key in FIELDS:
        assert every_10[key] == every_step[key] == without_fused[key], key
    if case.startswith("nonfinite"):
        assert (every_10["diverged_step"], every_10["steps_done"]) == (13, 13)
    if case.startswith("loss spike"):
        assert (every_10["diverged_step"], every_10["diverged_reason"]) == (17, "spike")
    if case.startswith("recovered"):
        assert every_10["status"] != "diverged" and every_10["spikes_recovered"] == 1


def test_no_update_after_a_nonfinite_step(tmp_path):
    """The device went on for 7 more steps before the host read step 13's NaN; the fused AdamW
    skipped all of them, so the weights are those of step 13 (as when the host checked every step)."""
    late = run(tmp_path / "late", cfg(**{"train.log_every": 20}), nan_at(13))
    early = run(tmp_path / "early", cfg(**{"train.log_every": 1}), nan_at(13))
    assert late.summary["diverged_step"] == 13
    for a, b in zip(late.model.parameters(), early.model.parameters()):
        assert torch.equal(a, b)
    assert all(torch.isfinite(p).all() for p in late.model.parameters())


def test_a_step_never_waits_for_the_device(tmp_path, monkeypatch):
    training = Training(cfg(**{"train.log_every": 10}), RunFolder(cfg(), tmp_path))
    training.setup()
    assert training.sync_free
    inside = {"step": False}
    real_step = training.step

    def step(x, y):
        inside["step"] = True
        try:
            real_step(x, y)
        finally:
            inside["step"] = False

    def forbidden(name, real):
        def call(self, *args, **kwargs):
            assert not inside["step"], f"Tensor.{name}() inside a training step waits for the device"
            return real(self, *args, **kwargs)
        return call

    for name in ("item", "tolist", "__bool__", "__float__"):
        monkeypatch.setattr(torch.Tensor, name, forbidden(name, getattr(torch.Tensor, name)))
    training.step = step
    reads = []
    real_read = training.steps.read
    training.steps.read = lambda *a: reads.append(1) or real_read(*a)
    training.loop(progress=False, on_step=None)
    assert training.summary["status"] == "ok" and training.state.step == 30
    assert len(reads) == 3  # one transfer per log_every steps


def test_step_log_reads_back_what_it_recorded_and_flags_nonfinite():
    log = StepLog(4, torch.device("cpu"))
    log.record(5, 0.1, torch.tensor(2.0), torch.tensor(3.0))
    log.record(6, 0.2, torch.tensor(1.0), torch.tensor(math.inf))
    assert log.bad.item() == 1.0
    assert log.read() == [(5, 0.1, 2.0, 3.0), (6, 0.2, 1.0, math.inf)]
    log.record(7, 0.3, torch.tensor(1.0), torch.tensor(1.0))
    assert log.bad.item() == 1.0 and log.read() == [(7, 0.3, 1.0, 1.0)]  # sticky: no update after a bad step


def test_probes_read_every_block_in_one_transfer(monkeypatch):
    from suite.engine.probes import probe
    from suite.models import build_model

    config = cfg(**{"model.residual": "layerscale", "model.depth": 4, "model.img_size": 16, "model.in_chans": 3,
                    "model.num_classes": 4})
    model = build_model(config.model)
    x = torch.randn(2, 3, 16, 16)
    expected = probe(model, x)
    calls = {"item": 0, "tolist": 0}
    for name in calls:
        real = getattr(torch.Tensor, name)
        monkeypatch.setattr(torch.Tensor, name,
                            lambda self, *a, _n=name, _r=real, **k: calls.__setitem__(_n, calls[_n] + 1) or _r(self, *a, **k))
    assert probe(model, x) == expected
    assert calls == {"item": 0, "tolist": 1}
    assert len(expected) == 4 and all(r["scale_mean"] is not None and r["attn_ratio"] is not None for r in expected)


def test_step_s_goes_to_row_s_mod_capacity_and_a_window_may_wrap_around():
    """A window that starts mid-buffer (a read before an evaluation) wraps; a step past the capacity
    without a read is refused instead of overwriting the window's first step; a compiled step's
    tensor row writes where the host's int row does."""
    from suite.engine.steplog import write

    log = StepLog(4, torch.device("cpu"), members=2)
    for step in range(6, 10):  # rows 2, 3, 0, 1
        log.record(step, [0.5 * step, 0.25 * step], torch.tensor([step, -step]).float(), torch.tensor([1.0, 2.0]))
    assert log.read(0) == [(s, 0.5 * s, float(s), 1.0) for s in range(6, 10)]
    assert log.read(1) == [(s, 0.25 * s, float(-s), 2.0) for s in range(6, 10)]
    for step in range(10, 14):
        log.record(step, [0.0, 0.0], torch.zeros(2), torch.zeros(2))
    with pytest.raises(RuntimeError, match="at most 4 fit"):
        log.note(14, [0.0, 0.0])
    values, bad = torch.zeros(4, 2, 2), torch.zeros(2)
    write(values, bad, torch.tensor(7) % 4, torch.tensor([1.0, math.nan]), torch.tensor([2.0, 3.0]))
    assert values[3].tolist()[0] == [1.0, 2.0] and bad.tolist() == [0.0, 1.0] and not values[:3].any()
