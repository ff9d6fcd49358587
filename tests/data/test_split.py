"""Tests of the validation split (suite.data.split): carved from train, stratified, fixed, leak-free."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from PIL import Image

from suite.config import DataConfig
from suite.data import DataError, eval_batches, load_dataset
from suite.data.bundle import DatasetBundle, TensorSplit
from suite.data.split import carve_validation

CPU = torch.device("cpu")


def rows(x: torch.Tensor) -> set[bytes]:
    return {r.numpy().tobytes() for r in x.reshape(len(x), -1)}


@pytest.fixture(scope="module")
def pair():
    """mnist5k without and with the default validation split."""
    return load_dataset(DataConfig(val_fraction=0)), load_dataset(DataConfig())


def test_default_holds_out_a_tenth_of_train_per_class(pair):
    whole, split = pair
    assert whole.val is None and whole.val_size == 0
    assert (split.train_size, split.val_size, split.test_size) == (3600, 400, 1000)
    assert torch.bincount(split.val.y, minlength=10).tolist() == [40] * 10
    assert torch.bincount(split.train.y, minlength=10).tolist() == [360] * 10


def test_val_and_train_partition_the_old_train_and_the_test_set_is_untouched(pair):
    whole, split = pair
    assert torch.equal(split.test.x, whole.test.x) and torch.equal(split.test.y, whole.test.y)
    train, val = rows(split.train.x), rows(split.val.x)
    assert not train & val and train | val == rows(whole.train.x)
    assert not val & rows(whole.test.x)
    # Labels travel with their images.
    label_of = {r.numpy().tobytes(): int(y) for r, y in zip(whole.train.x.reshape(4000, -1), whole.train.y)}
    assert [label_of[r.numpy().tobytes()] for r in split.val.x.reshape(400, -1)] == split.val.y.tolist()


def test_normalisation_is_measured_without_the_validation_images(pair):
    _, split = pair
    expected = split.train.x.double().div(255)
    assert split.mean[0] == pytest.approx(expected.mean().item(), rel=1e-9)
    assert split.std[0] == pytest.approx(expected.std(unbiased=False).item(), rel=1e-9)


def test_the_split_is_fixed_by_split_seed_not_by_the_global_rng(pair):
    _, split = pair
    torch.manual_seed(99)
    assert torch.equal(load_dataset(DataConfig()).val.x, split.val.x)
    other = load_dataset(DataConfig(split_seed=1))
    assert not torch.equal(other.val.x, split.val.x)
    bigger = load_dataset(DataConfig(val_fraction=0.25))
    assert (bigger.train_size, bigger.val_size) == (3000, 1000)


def test_eval_batches_read_the_validation_split_in_order(pair):
    _, split = pair
    for mb in (10**6, 0):  # resident on the device, and through the DataLoader
        got = torch.cat([y for _, y in eval_batches(split, 128, CPU, mb, 0, split="val")])
        assert torch.equal(got, split.val.y)


def test_published_constants_are_kept():
    x = torch.zeros(20, 1, 2, 2, dtype=torch.uint8)
    b = DatasetBundle("c", 2, 1, 2, TensorSplit(x, torch.arange(20) % 2), TensorSplit(x[:4], torch.arange(4) % 2),
                      mean=(0.5,), std=(0.25,))
    carved = carve_validation(b, 0.2, 0)
    assert (carved.mean, carved.std, carved.train_size, carved.val_size) == ((0.5,), (0.25,), 16, 4)


def test_too_few_images_is_a_one_line_error():
    x = torch.zeros(1, 1, 2, 2, dtype=torch.uint8)
    b = DatasetBundle("tiny", 2, 1, 2, TensorSplit(x, torch.zeros(1, dtype=torch.int64)), TensorSplit(x, torch.zeros(1, dtype=torch.int64)),
                      mean=(0.5,), std=(0.25,))
    with pytest.raises(DataError, match=r"too few for a validation split .*data.val_fraction: 0") as err:
        carve_validation(b, 0.1, 0)
    assert "\n" not in str(err.value)


def test_imagefolder_validation_comes_from_train(tmp_path: Path):
    for split, n in (("train", 10), ("val", 2)):
        for name, colour in (("cat", (255, 0, 0)), ("dog", (0, 0, 255))):
            (tmp_path / split / name).mkdir(parents=True)
            for j in range(n):
                Image.new("RGB", (8, 8), colour).save(tmp_path / split / name / f"{j}.png")
    b = load_dataset(DataConfig(name="imagefolder", root=str(tmp_path), img_size=8, val_fraction=0.2))
    assert (b.train_size, b.val_size, b.test_size) == (16, 4, 4)
    got = torch.cat([y for _, y in eval_batches(b, 3, CPU, 10**6, 0, split="val")])
    assert got.tolist() == [0, 0, 1, 1]
    assert set(b.val.indices).isdisjoint(b.train.indices)
