"""PackStream: N runs' batches stacked, equal to N TrainStreams and to the per-step rule, with a
per-step operator count that does not depend on N."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from suite.config import DataConfig
from suite.data import PackStream, TrainStream, load_dataset
from suite.data.seeds import AUGMENT, generator
from suite.data.stream import StepOrder

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def synth():
    # 40 samples in batches of 8: 5 steps per epoch.
    return load_dataset(DataConfig(val_fraction=0, name="synthetic", synthetic_train=40, synthetic_test=13,
                                   synthetic_img_size=8, synthetic_classes=4))


def per_step_rule(bundle, batch_size: int, seed: int, step: int, augment: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch of (seed, step) computed on its own, one step at a time, with the CPU draws copied
    to the device each step: what TrainStream yielded before the draws were made once per epoch."""
    idx = StepOrder(bundle.train_size, batch_size, seed).indices(step)
    x, y = bundle.train.x[idx], bundle.train.y[idx]
    if augment:
        gen = generator(AUGMENT, seed, step)
        b, c, h, w = x.shape
        offsets = torch.randint(0, 9, (b, 2), generator=gen)
        flip = torch.rand(b, generator=gen) < 0.5
        padded = F.pad(x, (4, 4, 4, 4))
        rows = offsets[:, :1] + torch.arange(h)
        cols = offsets[:, 1:] + torch.where(flip[:, None], torch.arange(w).flip(0), torch.arange(w))
        x = padded[torch.arange(b)[:, None, None, None], torch.arange(c)[None, :, None, None],
                   rows[:, None, :, None], cols[:, None, None, :]]
    mean = torch.tensor(bundle.mean, dtype=torch.float32).view(1, -1, 1, 1)
    std = torch.tensor(bundle.std, dtype=torch.float32).view(1, -1, 1, 1)
    return x.to(torch.float32).div_(255).sub_(mean).div_(std), y


@pytest.mark.parametrize("max_device_mb", [64, 0])  # resident, DataLoader
@pytest.mark.parametrize("augment", [False, True])
def test_train_stream_equals_the_per_step_rule(synth, augment, max_device_mb):
    for seed in (0, 3, 11):
        stream = TrainStream(synth, 8, seed, CPU, augment, max_device_mb, 0)
        # From the start across an epoch boundary (step 5), and resumed in the middle of an epoch.
        for start, end in ((0, 7), (8, 12)):
            for step, (x, y) in zip(range(start, end), stream.batches(start, end)):
                want_x, want_y = per_step_rule(synth, 8, seed, step, augment)
                assert torch.equal(x, want_x) and torch.equal(y, want_y), (seed, step)


@pytest.mark.parametrize("max_device_mb", [64, 0])
@pytest.mark.parametrize("augment", [False, True])
def test_pack_equals_one_train_stream_per_seed(synth, augment, max_device_mb):
    seeds = [4, 0, 9]
    pack = PackStream(synth, 8, seeds, CPU, augment, max_device_mb, 0)
    assert pack.steps_per_epoch == 5 and pack.resident == (max_device_mb > 0)
    got = list(pack.batches(3, 12))  # starts mid-epoch, crosses two epoch boundaries
    assert len(got) == 9
    for i, seed in enumerate(seeds):
        solo = TrainStream(synth, 8, seed, CPU, augment, max_device_mb, 0)
        for (x, y), (xs, ys) in zip(got, solo.batches(3, 12)):
            assert x.shape == (3, 8, 3, 8, 8) and x.dtype == torch.float32
            assert y.shape == (3, 8) and y.dtype == torch.int64
            assert torch.equal(x[i], xs) and torch.equal(y[i], ys)


def test_a_split_smaller_than_a_batch_packs_too(synth):
    pack = PackStream(synth, 64, [1, 2], CPU, True, 64, 0)
    (x, y), = list(pack.batches(0, 1))
    assert x.shape == (2, 40, 3, 8, 8)
    assert sorted(y[0].tolist()) == sorted(synth.train.y.tolist())


class _CountOps(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def ops_per_step(bundle, n: int) -> list[int]:
    """Operators dispatched by each step after the first of an epoch (which builds the epoch's draws)."""
    batches = PackStream(bundle, 8, list(range(n)), CPU, True, 64, 0).batches(0, 5)
    next(batches)
    counts = []
    for _ in range(4):
        with _CountOps() as mode:
            next(batches)
        counts.append(mode.count)
    return counts


def test_ops_per_step_do_not_depend_on_the_pack_size(synth):
    small, large = ops_per_step(synth, 2), ops_per_step(synth, 16)
    assert small == large and min(small) > 5  # slice, gather, crop + flip, normalise
