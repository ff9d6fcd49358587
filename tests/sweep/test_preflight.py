"""Pre-flight: what would only make runs end in `error` is reported before any run starts, every
problem at once (suite validate, suite run), and a sweep in which every run errors does not exit 0."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch
import yaml

from suite.cli import main
from suite.sweep.worker import CRASH_ENV

from test_runner import ARGS, SMOKE, cpu_runs


def write(tmp_path: Path, variants: dict, base: dict | None = None, seeds: int = 2) -> Path:
    path = tmp_path / "pf.yaml"
    path.write_text(yaml.safe_dump({"name": "pf", "base": base or {"data": {"name": "digits"},
                                                                    "model": {"patch_size": 4, "dim": 16, "heads": 2},
                                                                    "train": {"steps": 2}},
                                    "variants": variants, "seeds": seeds}))
    return path


def test_validate_reports_every_problem_that_would_make_runs_error(tmp_path, capsys):
    path = write(tmp_path, {
        "ok": {"model.residual": "layerscale"},
        "timm-head": {"model.backend": "timm", "model.residual": "layerscale", "model.layerscale.granularity": "head"},
        "timm-zero": {"model.backend": "timm", "model.residual": "layerscale", "model.layerscale.init": 0.0},
        "big-batch": {"train.batch_size": 5000},
        "cifar": {"data.name": "cifar10", "data.root": str(tmp_path / "no-cifar")},
    })
    assert main(["validate", str(path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert all(line.startswith(f"error: {path}: ") for line in lines) and len(lines) == 4, lines
    text = "\n".join(lines)
    assert "timm-head: the model cannot be built (ValueError: timm's ViT only has learnable per-channel" in text
    assert "timm-zero: the model cannot be built (ValueError: timm treats init_values=0" in text
    assert "big-batch: train.batch_size 5000 is more than the 1295 training images of digits; use at most 1295" in text
    assert f"cifar: data.name cifar10: CIFAR-10 not found under {tmp_path / 'no-cifar'}" in text


class Planted:
    def __reduce__(self):
        return (Path.touch, (Path(PLANTED_MARK),))


PLANTED_MARK = "/tmp/suite-preflight-planted-mark"


def test_a_planted_cifar_folder_is_refused_before_anything_runs(tmp_path, capsys):
    folder = tmp_path / "data" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"]:
        (folder / name).write_bytes(pickle.dumps(Planted()))
    Path(PLANTED_MARK).unlink(missing_ok=True)
    path = write(tmp_path, {"c": {"data.name": "cifar10", "data.root": str(tmp_path / "data")}})
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), *ARGS]) == 2
    err = capsys.readouterr().err
    assert "cannot read CIFAR file" in err and "refused to load" in err and err.count("\n") == 1
    assert not Path(PLANTED_MARK).exists() and not (out / "runs").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_run_on_a_missing_device_is_refused_before_anything_runs(tmp_path, capsys):
    out = tmp_path / "out"
    path = write(tmp_path, {"gpu": {"model.residual": "preln"}},
                 base={"device": "cuda", "data": {"name": "digits"}, "model": {"patch_size": 4}})
    assert main(["run", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"error: {path}: gpu: device 'cuda' requested but torch sees no CUDA device" in err
    assert err.count("\n") == 1 and not (out / "runs").exists()
    assert main(["validate", str(path)]) == 0  # the runs may execute elsewhere: validate does not ask


def test_a_sweep_in_which_every_run_errors_exits_1_with_the_first_error(tmp_path, monkeypatch, capsys):
    (victim,) = [r for r in cpu_runs(SMOKE) if r.seed == 0 and r.cfg.model.depth == 1 and r.variant == "preln"]
    monkeypatch.setenv(CRASH_ENV, victim.run_id)
    code = main(["run", str(SMOKE), "--out", str(tmp_path / "out"), "--only", "seed=0,model.depth=1,variant=preln",
                 "--workers", "1", "--attempts", "1", *ARGS])
    err = capsys.readouterr().err
    assert code == 1
    assert f"error: every run ended in error; the first, {victim.label}: no worker finished this run" in err


def test_the_embedded_sizes_are_the_datasets_and_no_data_skips_the_data(tmp_path, capsys):
    from suite.config import DataConfig
    from suite.data import load_dataset
    from suite.sweep.cost import EMBEDDED_TOTAL

    for name, size in EMBEDDED_TOTAL.items():
        bundle = load_dataset(DataConfig(name=name))
        assert bundle.train_size + bundle.val_size + bundle.test_size == size
    for batch, code in ((1295, 0), (1296, 2)):  # digits' training split: 1,295 images
        assert main(["validate", str(write(tmp_path, {"b": {"train.batch_size": batch}}))]) == code
    path = write(tmp_path, {"cifar": {"data.name": "cifar10", "model.patch_size": 4}})
    assert main(["validate", str(path)]) == 2
    assert "CIFAR-10 needs a data folder" in capsys.readouterr().err
    assert main(["validate", str(path), "--no-data"]) == 0


def test_device_override_is_what_the_device_check_sees(tmp_path, capsys):
    """`--device cpu` on a file that says `device: cuda`: the runs execute on the CPU, which exists."""
    path = write(tmp_path, {"gpu": {"model.residual": "preln"}},
                 base={"device": "cuda", "data": {"name": "digits"}, "model": {"patch_size": 4, "depth": 1, "dim": 16,
                                                                               "heads": 2}, "train": {"steps": 2}})
    from suite.sweep.preflight import preflight
    from suite.sweep.spec import load_ablation

    runs = load_ablation(path).runs
    assert preflight(runs, str(path), device="cpu") == []
    if not torch.cuda.is_available():
        assert "sees no CUDA device" in preflight(runs, str(path))[0]


def test_the_memory_check_counts_the_pack(tmp_path, monkeypatch):
    """A run that fits alone may not fit as a pack of 64: --pack multiplies the estimate (every member's
    state and the [N, P] stacks, suite.engine.pack.pack_memory_mb) before any run starts."""
    from suite.config import memory_estimate
    from suite.engine import resources
    from suite.engine.pack import pack_memory_mb
    from suite.sweep.preflight import preflight
    from suite.sweep.spec import load_ablation

    path = write(tmp_path, {"ls": {"model.residual": "layerscale"}}, seeds=64)
    runs = load_ablation(path).runs
    one = memory_estimate(runs[0].cfg)[0]
    assert pack_memory_mb(runs[0].cfg, 64) * 2**20 > 64 * one
    monkeypatch.setattr(resources, "available_memory", lambda device: 4 * one)  # room for one run, not 64
    assert preflight(runs, str(path), check_data=False) == []
    problems = preflight(runs, str(path), check_data=False, pack=64)
    assert len(problems) == 1 and "for a pack of 64 (--pack)" in problems[0] and "lower --pack" in problems[0]
    # A pack holds only the runs of its shape: 2 seeds under --pack 64 are a pack of 2, which fits
    assert pack_memory_mb(runs[0].cfg, 2) * 2**20 < 4 * one
    assert preflight(runs[:2], str(path), check_data=False, pack=64) == []


def test_a_solo_run_may_not_replay_cuda_graphs_block_by_block_but_a_pack_may():
    """train.compile reduce-overhead compiles each block into one shared graph; replayed as a CUDA graph, each
    block's output is overwritten by the next's (pytorch#152887): refused for a solo run, one line."""
    import dataclasses

    from suite.sweep.preflight import preflight
    from suite.sweep.spec import load_ablation

    runs = load_ablation(Path(__file__).resolve().parents[2] / "ablations" / "smoke.yaml").runs[:2]
    graphs = [dataclasses.replace(r, cfg=dataclasses.replace(r.cfg, train=dataclasses.replace(
        r.cfg.train, compile="reduce-overhead"))) for r in runs]
    solo = preflight(graphs, "smoke.yaml", check_device=False, check_data=False, device="cuda")
    assert len(solo) == 2 and all("train.compile reduce-overhead: a run compiled block by block" in p for p in solo)
    assert preflight(graphs, "smoke.yaml", check_device=False, check_data=False, device="cpu") == []
    assert preflight(graphs, "smoke.yaml", check_device=False, check_data=False, device="cuda", pack=2) == []
