"""Pre-flight: what would make runs end in ``error``, found before any starts, one line each: data loads and a batch
fits, the model builds (at most :data:`BUILD_DEPTH` blocks), the device exists here and the largest run fits in it."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

from suite.config import DATA_SHAPE_KEYS, RunConfig, approx_params, data_shape, flatten, memory_estimate, to_dict
from suite.sweep.cost import EMBEDDED_TOTAL
from suite.sweep.spec import Run


# An embedded dataset is loaded (seconds) only for a batch near its training split's size; the margin covers rounding.
SPLIT_MARGIN = 0.9
SMALL_MODEL_PARAMS = 20e6  # built on the CPU (80 MB at most) rather than on the meta device
# Every block comes from one builder whose code does not depend on the depth: two blocks run all of it.
BUILD_DEPTH = 2


def preflight(runs: list[Run], src: str, check_device: bool = True, check_data: bool = True,
              device: str | None = None, pack: int = 1) -> list[str]:
    """The problems that would make any of ``runs`` error. ``check_data`` off: models are built at the registered shape;
    ``pack``: a packable run is checked as a pack of up to that many runs of its shape (as many as share it)."""
    from suite.engine.compiled import solo_graph_problem
    from suite.engine.propagation import unmeasurable

    width: dict[str, int] = {}  # run id -> the rows of its pack, for the runs that train in a pack
    if pack > 1:
        from suite.engine.pack import pack_memory_mb, packable
        from suite.sweep.worker import group, pack_widths

        packs = [p for p in group(runs, pack) if p[0].kind == "train" and packable(p[0].cfg) is None]
        rows = pack_widths(packs)  # as the workers will stack them: the largest pack of each shape
        width = {r.run_id: rows[p[0].run_id] for p in packs for r in p}
    problems: list[str] = []
    shapes: dict[str, tuple[int, int, int | None, int | None] | None] = {}
    models: set[str] = set()
    largest: dict[str, tuple[float, Run, int]] = {}  # device -> the run (or pack) needing the most memory
    batches: set[tuple[str, int]] = set()
    for run in runs:
        cfg = run.cfg
        data_key = _key(to_dict(cfg)["data"])
        if data_key not in shapes:
            shapes[data_key] = _data(cfg, run, src, problems) if check_data else data_shape(cfg.data)[:3] + (None,)
        shape = shapes[data_key]
        batch = cfg.train.batch_size  # more than the training images (shape[3]): said once per data and batch
        if shape is not None and shape[3] is not None and batch > shape[3] and (data_key, batch) not in batches:
            batches.add((data_key, batch))
            problems.append(f"{src}: {_cell(run)}: train.batch_size {batch} is more than the {shape[3]} training "
                            f"images of {cfg.data.name}; use at most {shape[3]}")
        if shape is not None:
            model_key = _key({"model": {**to_dict(cfg)["model"], "depth": min(cfg.model.depth, BUILD_DEPTH)},
                              "shape": {"data": shape[:3]}})
            if model_key not in models:
                models.add(model_key)
                _model(cfg, run, src, shape, problems)
        if run.kind == "propagation" and (problem := unmeasurable(cfg)):
            problems.append(f"{src}: {_cell(run)}: {problem}")
        where = device or cfg.device
        packed = run.run_id in width  # under --pack a packable run trains in a pack, alone if need be
        n = width.get(run.run_id, 1)  # rows in its pack
        if run.kind == "train" and not packed:  # a solo run
            if problem := solo_graph_problem(cfg.train.compile, "cpu" if where == "cpu" else "cuda"):
                problems.append(f"{src}: {_cell(run)}: {problem}")
        if check_device and run.kind == "train":
            need = pack_memory_mb(cfg, n) * 2**20 if packed else memory_estimate(cfg)[0]
            if where not in largest or need > largest[where][0]:
                largest[where] = (need, run, n)
    for where, (need, run, n) in largest.items():
        _device(run, where, src, problems, flag=device is not None, pack=n, need=need)
    return list(dict.fromkeys(problems))


def _key(obj: dict[str, Any]) -> str:
    return repr(sorted(flatten(obj).items()))


def _cell(run: Run) -> str:
    return run.label.rsplit(" seed=", 1)[0]  # every seed of a cell shares its data and model


def _data(cfg: RunConfig, run: Run, src: str, problems: list[str]) -> tuple[int, int, int | None, int | None] | None:
    """``(img_size, in_chans, num_classes, train_size)`` of the run's data; None (and a problem) when missing."""
    from suite.data import DataError, load_dataset

    name = cfg.data.name
    img, chans, classes, _ = data_shape(cfg.data)
    try:
        if name == "imagefolder":
            from suite.data.imagefolder import check_layout

            check_layout(cfg.data)  # its images are scanned only by the run: an ImageNet has a million
            return img, chans, classes, None
        if name == "synthetic":
            return img, chans, classes, cfg.data.synthetic_train
        d = cfg.data
        if name in EMBEDDED_TOTAL and cfg.train.batch_size <= (
                SPLIT_MARGIN * EMBEDDED_TOTAL[name] * (1 - d.test_fraction) * (1 - d.val_fraction) - 2 * (classes or 0)):
            return img, chans, classes, None  # always there, and the batch surely fits
        bundle = load_dataset(cfg.data)
    except DataError as err:
        problems.append(f"{src}: {_cell(run)}: data.name {name}: {err}")
        return None
    return bundle.img_size, bundle.in_chans, bundle.num_classes, bundle.train_size


def _model(cfg: RunConfig, run: Run, src: str, shape: tuple, problems: list[str]) -> None:
    import torch

    from suite.models import build_model

    m = cfg.model
    found = dict(zip(DATA_SHAPE_KEYS, shape[:3]))
    for key, value in found.items():
        mine = getattr(m, key)
        if value is not None and mine is not None and mine != value:
            problems.append(f"{src}: {_cell(run)}: model.{key} {mine} does not match {cfg.data.name} ({value}); "
                            f"leave it unset (it comes from the data)")
            return
    filled = dataclasses.replace(m, depth=min(m.depth, BUILD_DEPTH),
                                 **{k: (v if v is not None else getattr(m, k)) for k, v in found.items()})
    if filled.num_classes is None:  # an ImageFolder's classes are counted by the run
        filled = dataclasses.replace(filled, num_classes=2)
    # A large model is built on the meta device (no memory, but seconds on first use). Not `with torch.device("cpu")`
    # for a small one: that mode intercepts every op.
    small = approx_params(filled) <= SMALL_MODEL_PARAMS
    try:
        with contextlib.nullcontext() if small else torch.device("meta"):
            build_model(filled)
    except Exception as err:  # noqa: BLE001 - whatever the builder raises, the run would end in it
        text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        problems.append(f"{src}: {_cell(run)}: the model cannot be built ({type(err).__name__}: {text}); "
                        f"change the model keys of this variant")


def _device(run: Run, where: str, src: str, problems: list[str], flag: bool = False, pack: int = 1,
            need: float = 0.0) -> None:
    """The device exists here and the largest run (or pack) for it fits; ``flag``: the device is ``--device``'s."""
    from suite.engine.resources import memory_problem, resolve_device

    try:
        problem = memory_problem(run.cfg, resolve_device(where), (pack, need) if pack > 1 else None)
    except RuntimeError as err:  # device cuda without a GPU
        if flag:  # the flag's fault, not the file's: one line for the whole sweep
            problems.append(f"--device {where}: torch sees no CUDA device on this machine, where the workers "
                            f"would run; use --device cpu or auto")
            return
        problem = str(err)
    if problem:
        problems.append(f"{src}: {_cell(run)}: {problem}")
