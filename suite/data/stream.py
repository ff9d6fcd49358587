"""Training batches as a pure function of (seed, step), and the in-order test batches.

Resuming at step s must give the same batches as never stopping, so nothing here carries state
from one step to the next: epoch e = s // steps_per_epoch is a permutation seeded from
(seed, e), step s takes its slice of it, and its augmentation draws from a generator seeded from
(seed, s). The global RNG is never touched (the trainer's dropout/init draws stay unaffected).

Two paths give identical batches:
* small datasets (both splits' uint8 bytes <= max_device_mb MiB) sit on the device as uint8 and
  are indexed directly - no DataLoader, no host-device copy per step;
* larger ones, and every lazy Dataset (ImageFolder), go through a DataLoader whose batch_sampler
  yields the same per-step index lists.
Either way, augmentation and normalisation run per batch on the device.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Sampler

from suite.data import seeds
from suite.data.augment import normalise, random_crop_flip
from suite.data.bundle import DatasetBundle, Split, TensorSplit

Batch = tuple[Tensor, Tensor]  # (x float32 (B, C, H, W) normalised, y int64 (B,)), on the device


def fits_on_device(bundle: DatasetBundle, max_device_mb: int) -> bool:
    """Whether all splits are in memory and together take at most ``max_device_mb`` MiB."""
    nbytes = bundle.in_memory_bytes()
    return nbytes is not None and nbytes <= max_device_mb * 2**20


class StepOrder:
    """Which training indices make up the batch of each step.

    Args:
        n: number of training samples.
        batch_size: samples per step.
        seed: the run seed.
    """

    def __init__(self, n: int, batch_size: int, seed: int) -> None:
        if n < 1 or batch_size < 1:
            raise ValueError(f"need n >= 1 and batch_size >= 1, got n={n}, batch_size={batch_size}")
        self.n, self.batch_size, self.seed = n, batch_size, seed
        # The last incomplete batch is dropped (every step has the same size); a split smaller
        # than one batch still gives one step, of all n samples.
        self.steps_per_epoch = max(1, n // batch_size)
        self._cached: tuple[int, Tensor] | None = None  # (epoch, permutation): a cache, not state

    def permutation(self, epoch: int) -> Tensor:
        """(n,) int64 order of the training set in ``epoch``."""
        if self._cached is None or self._cached[0] != epoch:
            gen = seeds.generator(seeds.PERMUTATION, self.seed, epoch)
            self._cached = (epoch, torch.randperm(self.n, generator=gen))
        return self._cached[1]

    def indices(self, step: int) -> Tensor:
        """(B,) int64 training indices of ``step``."""
        epoch, pos = divmod(step, self.steps_per_epoch)
        return self.permutation(epoch)[pos * self.batch_size:(pos + 1) * self.batch_size]


class StepBatchSampler(Sampler[list[int]]):
    """DataLoader ``batch_sampler`` yielding the index lists of steps ``start..end-1``."""

    def __init__(self, order: StepOrder, start: int, end: int) -> None:
        self.order, self.start, self.end = order, start, end

    def __iter__(self) -> Iterator[list[int]]:
        for step in range(self.start, self.end):
            yield self.order.indices(step).tolist()

    def __len__(self) -> int:
        return max(0, self.end - self.start)


def _stats(bundle: DatasetBundle, device: torch.device) -> tuple[Tensor, Tensor]:
    """Mean and std as (1, C, 1, 1) float32 tensors on ``device``."""
    mean = torch.tensor(bundle.mean, dtype=torch.float32, device=device).view(1, -1, 1, 1)
    std = torch.tensor(bundle.std, dtype=torch.float32, device=device).view(1, -1, 1, 1)
    return mean, std


def _on_device(bundle: DatasetBundle, split: str, device: torch.device) -> TensorSplit:
    """The in-memory split copied to ``device`` once, then reused."""
    key = (split, str(device))
    if key not in bundle.device_cache:
        data: TensorSplit = getattr(bundle, split)
        bundle.device_cache[key] = TensorSplit(data.x.to(device), data.y.to(device))
    return bundle.device_cache[key]


def _loader(dataset: Split, device: torch.device, num_workers: int, **kwargs: object) -> DataLoader:
    return DataLoader(
        dataset, num_workers=num_workers, pin_memory=device.type == "cuda",
        # A DataLoader draws its workers' base seed from the global RNG unless given a generator.
        generator=torch.Generator().manual_seed(0), **kwargs,
    )


class TrainStream:
    """Training batches for any range of steps, each depending only on (seed, step).

    Args:
        bundle: the loaded dataset.
        batch_size: samples per step.
        seed: the run seed (order and augmentation).
        device: where batches are delivered.
        augment: random crop (zero padding 4) + horizontal flip, per sample.
        max_device_mb: hold the dataset on the device if it takes at most this many MiB.
        num_workers: DataLoader workers when the dataset is not held on the device.

    Attributes:
        steps_per_epoch: ``train_size // batch_size``, at least 1.
    """

    def __init__(self, bundle: DatasetBundle, batch_size: int, seed: int, device: torch.device | str,
                 augment: bool, max_device_mb: int, num_workers: int) -> None:
        self.bundle, self.seed, self.augment = bundle, seed, augment
        self.device = torch.device(device)
        self.num_workers = num_workers
        self.order = StepOrder(bundle.train_size, batch_size, seed)
        self.steps_per_epoch = self.order.steps_per_epoch
        self.resident = fits_on_device(bundle, max_device_mb)
        self._train = _on_device(bundle, "train", self.device) if self.resident else None
        self._mean, self._std = _stats(bundle, self.device)

    def batches(self, start_step: int, end_step: int) -> Iterator[Batch]:
        """Yield the batch of every step in ``range(start_step, end_step)``.

        Yields:
            (x, y): x (B, C, H, W) float32 normalised, y (B,) int64, both on the device.
        """
        if self._train is not None:
            for step in range(start_step, end_step):
                idx = self.order.indices(step).to(self.device)
                yield self._finish(self._train.x[idx], self._train.y[idx], step)
            return
        loader = _loader(self.bundle.train, self.device, self.num_workers,
                         batch_sampler=StepBatchSampler(self.order, start_step, end_step))
        for step, (x, y) in zip(range(start_step, end_step), loader):
            x = x.to(self.device, non_blocking=True)
            yield self._finish(x, y.to(self.device, non_blocking=True), step)

    def _finish(self, x: Tensor, y: Tensor, step: int) -> Batch:
        """Augment (if on) and normalise one uint8 batch already on the device."""
        if self.augment:
            x = random_crop_flip(x, seeds.generator(seeds.AUGMENT, self.seed, step))
        return normalise(x, self._mean, self._std), y


def eval_batches(bundle: DatasetBundle, batch_size: int, device: torch.device | str,
                 max_device_mb: int, num_workers: int, split: str = "test") -> Iterator[Batch]:
    """The whole ``split`` (``"test"`` or ``"val"``) in order, in batches of ``batch_size`` (the last
    may be smaller).

    Yields:
        (x, y): x (B, C, H, W) float32 normalised (no augmentation), y (B,) int64, on the device.
    """
    device = torch.device(device)
    data = bundle.splits()[split]
    mean, std = _stats(bundle, device)
    if fits_on_device(bundle, max_device_mb):
        held = _on_device(bundle, split, device)
        for i in range(0, len(held), batch_size):
            yield normalise(held.x[i:i + batch_size], mean, std), held.y[i:i + batch_size]
        return
    for x, y in _loader(data, device, num_workers, batch_size=batch_size, shuffle=False):
        yield normalise(x.to(device, non_blocking=True), mean, std), y.to(device, non_blocking=True)
