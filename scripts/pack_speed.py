"""Milliseconds per run-step of a solo run against packs of 16 and 64, in interleaved rounds.

    .venv/bin/python scripts/pack_speed.py [cpu|cuda]

The shape is launch-bound on purpose (depth 2, width 32, batch 8, synthetic data): what a pack
saves is per-run overhead, not arithmetic. Each round times 20 solo steps (``Training.step``) and 5
steps of each pack (``Pack.step``, divided by N); the medians over 7 rounds and their ratios to solo
are printed. Numbers on a shared machine move; read the ratios.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from suite.config import load_config
from suite.data import PackStream, load_dataset
from suite.engine.lifecycle import RunFolder
from suite.engine.loop import Training
from suite.engine.pack import Pack
from suite.engine.steplog import StepLog

DEVICE = sys.argv[1] if len(sys.argv) > 1 else "cpu"
SHAPE = ["data.name=synthetic", "data.synthetic_train=256", "data.synthetic_test=64", "data.synthetic_img_size=16",
         "data.synthetic_classes=4", "model.patch_size=4", "model.dim=32", "model.heads=2", "model.depth=2",
         "model.residual=layerscale", "train.batch_size=8", f"device={DEVICE}"]


def members(out: Path, n: int) -> list[Training]:
    data, runs = None, []
    for seed in range(n):
        cfg = load_config(None, [*SHAPE, f"seed={seed}"])
        folder = RunFolder(cfg, out / str(seed))
        cfg, _ = folder.start(cfg)
        data = data or load_dataset(cfg.data)
        runs.append(Training(cfg, folder, data, member=seed))
        runs[-1].setup()
    return runs


def timed(step, x, y, k: int, per: int) -> float:
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(k):
        step(x, y)
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t) / k / per


def main() -> None:
    torch.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp())
    solo = members(tmp / "solo", 1)[0]
    solo.steps = StepLog(10**5, solo.device)  # room for every timed step: no host reads in the timing
    solo.optimizer.found_inf = solo.steps.bad[0]
    packs, batches = {}, {}
    for n in (16, 64):
        packs[n] = Pack(members(tmp / str(n), n))
        packs[n].log = StepLog(10**5, packs[n].device, n)
        first = packs[n].members[0]
        batches[n] = next(PackStream(first.data, 8, list(range(n)), first.device, False, 512, 0).batches(0, 1))
    x, y = batches[16][0][0], batches[16][1][0]
    times: dict[str, list[float]] = {"solo": [], "pack 16": [], "pack 64": []}
    for _ in range(7):
        times["solo"].append(timed(solo.step, x, y, 20, 1))
        for n in (16, 64):
            times[f"pack {n}"].append(timed(packs[n].step, *batches[n], 5, n))
    ref = statistics.median(times["solo"])
    for name, values in times.items():
        print(f"{name}: {statistics.median(values) * 1e3:.2f} ms per run-step, x{ref / statistics.median(values):.2f} vs solo")


if __name__ == "__main__":
    main()
