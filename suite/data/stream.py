"""Training batches as a pure function of (seed, step), so a resumed run sees what an unbroken one would, and the
in-order test batches (docs/training.md, "Data")."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Sampler

from suite.config import epoch_steps
from suite.data.augment import crop_flip, crop_flip_draws, normalise
from suite.data.bundle import DatasetBundle, Split, TensorSplit
from suite.data.seeds import AUGMENT, PERMUTATION, generator

Batch = tuple[Tensor, Tensor]  # (x float32 (B, C, H, W) normalised, y int64 (B,)), on the device
PackBatch = tuple[Tensor, Tensor]  # (x float32 (N, B, C, H, W) normalised, y int64 (N, B)), on the device


def fits_on_device(bundle: DatasetBundle, max_device_mb: int) -> bool:
    """Whether all splits are in memory and together take at most ``max_device_mb`` MiB."""
    nbytes = bundle.in_memory_bytes()
    return nbytes is not None and nbytes <= max_device_mb * 2**20


class StepOrder:
    """Which of the ``n`` training indices make up the batch of each step, for run seed ``seed``."""

    def __init__(self, n: int, batch_size: int, seed: int) -> None:
        if n < 1 or batch_size < 1:
            raise ValueError(f"need n >= 1 and batch_size >= 1, got n={n}, batch_size={batch_size}")
        self.n, self.batch_size, self.seed = n, batch_size, seed
        self.steps_per_epoch = epoch_steps(n, batch_size)
        self._cached: tuple[int, Tensor] | None = None  # (epoch, permutation): a cache, not state

    def permutation(self, epoch: int) -> Tensor:
        """(n,) int64 order of the training set in ``epoch``."""
        if self._cached is None or self._cached[0] != epoch:
            gen = generator(PERMUTATION, self.seed, epoch)
            self._cached = (epoch, torch.randperm(self.n, generator=gen))
        return self._cached[1]

    def indices(self, step: int) -> Tensor:
        """(B,) int64 training indices of ``step``."""
        epoch, pos = divmod(step, self.steps_per_epoch)
        return self.permutation(epoch)[pos * self.batch_size:(pos + 1) * self.batch_size]

    def block(self, start: int, stop: int) -> Tensor:
        """The indices of steps ``start..stop-1`` (in one epoch), row k ``indices(start + k)``."""
        epoch, pos = divmod(start, self.steps_per_epoch)
        if not start < stop <= (epoch + 1) * self.steps_per_epoch:
            raise ValueError(f"steps {start}..{stop - 1} are not within one epoch")
        b = min(self.n, self.batch_size)
        return self.permutation(epoch)[pos * b:(pos + stop - start) * b].view(stop - start, b)


class StepBatchSampler(Sampler[list[int]]):
    """DataLoader ``batch_sampler``: for each step ``start..end-1``, the index lists of all ``orders`` concatenated."""

    def __init__(self, orders: list[StepOrder], start: int, end: int) -> None:
        self.orders, self.start, self.end = orders, start, end

    def __iter__(self) -> Iterator[list[int]]:
        for step in range(self.start, self.end):
            yield torch.cat([order.indices(step) for order in self.orders]).tolist()

    def __len__(self) -> int:
        return max(0, self.end - self.start)


def _stats(bundle: DatasetBundle, device: torch.device) -> tuple[Tensor, Tensor]:
    mean = torch.tensor(bundle.mean, dtype=torch.float32, device=device).view(1, -1, 1, 1)
    std = torch.tensor(bundle.std, dtype=torch.float32, device=device).view(1, -1, 1, 1)
    return mean, std


def _on_device(bundle: DatasetBundle, split: str, device: torch.device) -> TensorSplit:
    key = (split, str(device))
    if key not in bundle.device_cache:
        data: TensorSplit = getattr(bundle, split)
        bundle.device_cache[key] = TensorSplit(data.x.to(device), data.y.to(device))
    return bundle.device_cache[key]


def _upload(t: Tensor, device: torch.device) -> Tensor:
    """``t`` copied to ``device`` without making the host wait: from pinned memory on CUDA."""
    if device.type == "cuda":
        t = t.pin_memory()
    return t.to(device, non_blocking=True)


def _epoch_spans(steps_per_epoch: int, start: int, end: int) -> Iterator[tuple[int, int]]:
    while start < end:
        stop = min(end, (start // steps_per_epoch + 1) * steps_per_epoch)
        yield start, stop
        start = stop


def _loader(dataset: Split, device: torch.device, num_workers: int, **kwargs: object) -> DataLoader:
    # A DataLoader draws its workers' base seed from the global RNG unless given a generator.
    return DataLoader(dataset, num_workers=num_workers, pin_memory=device.type == "cuda",
                      generator=torch.Generator().manual_seed(0), **kwargs)


class PackStream:
    """The training batches of N runs that differ only in their seed, stacked: ``x[i], y[i]`` are what
    ``TrainStream(..., seeds[i], ...)`` yields. ``resident``: one device copy of the dataset, else a DataLoader."""

    def __init__(self, bundle: DatasetBundle, batch_size: int, seeds: list[int], device: torch.device | str,
                 augment: bool, max_device_mb: int, num_workers: int) -> None:
        if not seeds:
            raise ValueError("a PackStream needs at least one seed")
        self.bundle, self.seeds, self.augment = bundle, list(seeds), augment
        self.device = torch.device(device)
        self.num_workers = num_workers
        self.orders = [StepOrder(bundle.train_size, batch_size, seed) for seed in self.seeds]
        self.steps_per_epoch = self.orders[0].steps_per_epoch
        self._per_batch = min(bundle.train_size, batch_size)
        self.resident = fits_on_device(bundle, max_device_mb)
        self._train = _on_device(bundle, "train", self.device) if self.resident else None
        self._mean, self._std = _stats(bundle, self.device)

    def batches(self, start_step: int, end_step: int) -> Iterator[PackBatch]:
        """Each step's x (N, B, C, H, W) float32 normalised, y (N, B) int64, on the device, for the steps in range."""
        steps = self._steps(start_step, end_step)
        if self._train is not None:
            for idx, draws in steps:
                yield self._finish(self._train.x[idx], self._train.y[idx], draws)  # (N, B, C, H, W), (N, B)
            return
        loader = _loader(self.bundle.train, self.device, self.num_workers,
                         batch_sampler=StepBatchSampler(self.orders, start_step, end_step))
        shape = (len(self.seeds), self._per_batch)
        for (_, draws), (x, y) in zip(steps, loader):  # x (N * B, C, H, W), y (N * B,)
            x = x.to(self.device, non_blocking=True).unflatten(0, shape)
            yield self._finish(x, y.to(self.device, non_blocking=True).view(shape), draws)

    def _steps(self, start: int, end: int) -> Iterator[tuple[Tensor | None, tuple[Tensor, Tensor] | None]]:
        """Per step: its device indices (resident only) and augmentation draws (or None), uploaded once per epoch."""
        n, b = len(self.seeds), self._per_batch
        for first, stop in _epoch_spans(self.steps_per_epoch, start, end):
            idx = draws = None
            if self._train is not None:
                idx = _upload(torch.stack([order.block(first, stop) for order in self.orders], 1), self.device)
            if self.augment:
                gens = [generator(AUGMENT, seed, step) for step in range(first, stop) for seed in self.seeds]
                offsets, flip = crop_flip_draws(gens, b)  # (S * N, B, 2), (S * N, B)
                draws = (_upload(offsets.view(stop - first, n * b, 2), self.device),
                         _upload(flip.view(stop - first, n * b), self.device))
            for k in range(stop - first):
                yield (None if idx is None else idx[k]), (None if draws is None else (draws[0][k], draws[1][k]))

    def _finish(self, x: Tensor, y: Tensor, draws: tuple[Tensor, Tensor] | None) -> PackBatch:
        """Augment (if on) and normalise one (N, B, C, H, W) uint8 batch already on the device."""
        if draws is not None:
            x = crop_flip(x.flatten(0, 1), *draws).view_as(x)
        return normalise(x, self._mean, self._std), y


class TrainStream:
    """Training batches, each depending only on (seed, step): the one-run case of :class:`PackStream`."""

    def __init__(self, bundle: DatasetBundle, batch_size: int, seed: int, device: torch.device | str,
                 augment: bool, max_device_mb: int, num_workers: int) -> None:
        self._pack = PackStream(bundle, batch_size, [seed], device, augment, max_device_mb, num_workers)
        self.steps_per_epoch, self.resident = self._pack.steps_per_epoch, self._pack.resident

    def batches(self, start_step: int, end_step: int) -> Iterator[Batch]:
        """Each step's x (B, C, H, W) float32 normalised and y (B,) int64, on the device, for the steps in range."""
        for x, y in self._pack.batches(start_step, end_step):
            yield x[0], y[0]


def eval_batches(bundle: DatasetBundle, batch_size: int, device: torch.device | str,
                 max_device_mb: int, num_workers: int, split: str = "test") -> Iterator[Batch]:
    """The whole ``split`` (``"test"`` or ``"val"``) in order, normalised, on the device."""
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
