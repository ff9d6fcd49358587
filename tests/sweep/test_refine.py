"""`suite run FILE --refine`: a best learning rate at the grid's edge gets the next rate past it."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest
import yaml

from suite.cli import main
from suite.sweep.refine import MAX_ROUNDS, edge_cells, past_edge

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
from test_analyze import write_run  # noqa: E402
from test_api import TINY as API_TINY  # noqa: E402


def test_the_next_rate_keeps_the_grid_spacing():
    assert past_edge([1e-3, 2e-3, 4e-3], "highest") == pytest.approx(8e-3)
    assert past_edge([5.6e-4, 3.2e-3, 1.8e-2], "lowest") == pytest.approx(9.8e-5)
    with pytest.raises(ValueError):
        past_edge([1e-3], "lowest")


def test_edge_cells_are_those_whose_best_rate_is_at_an_edge_and_above_chance(tmp_path):
    for seed in range(2):
        for lr, acc in ((1e-3, 0.5), (2e-3, 0.7)):  # preln: best at the highest rate
            write_run(tmp_path, "preln", 6, seed, lr=lr, acc=acc)
        for lr, acc in ((1e-3, 0.5), (2e-3, 0.4)):  # layerscale: best at the lowest rate
            write_run(tmp_path, "layerscale", 6, seed, lr=lr, acc=acc)
        for lr in (1e-3, 2e-3):  # rezero never learns: its "best" rate is a tie, not an optimum
            write_run(tmp_path, "rezero", 6, seed, lr=lr, status="failed", acc=0.1)
    cells = {c["variant"]: c for c in edge_cells(tmp_path)}
    assert set(cells) == {"preln", "layerscale"}
    assert (cells["preln"]["lr"], cells["preln"]["new"]) == (2e-3, pytest.approx(4e-3))
    assert (cells["layerscale"]["lr"], cells["layerscale"]["new"]) == (1e-3, pytest.approx(5e-4))
    assert cells["preln"]["keys"] == {"model.depth": 6}


BASE = copy.deepcopy(API_TINY["base"])  # the notebook test's runs, with enough data and steps to learn
BASE["data"].update(synthetic_train=128, synthetic_test=64)
BASE["train"].update(steps=12, batch_size=32, warmup_steps=2, log_every=4)
TINY = {
    "name": "refine",
    "base": BASE,
    "grid": {"train.lr": [1.0e-3, 2.0e-3]},  # 12 steps: the larger one is best (val 1.0 vs 0.96), at the edge
    "variants": {"preln": {"model.residual": "preln"}},
    "seeds": 2,
}


def test_refine_adds_rates_past_the_edge_and_stops_at_the_limit_or_an_interior_optimum(tmp_path, capsys):
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(TINY))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--refine", "--device", "cpu", "--workers", "1",
                 "--threads", "1"]) == 0
    printed = capsys.readouterr().out
    rates = sorted({json.loads(p.read_text())["train.lr"] for p in (out / "runs").glob("*/summary.json")})
    # 2e-3 was best, at the top: 4e-3 was added; it ties with 2e-3 (ties go to the smaller), so 2e-3 is interior
    assert rates == [1e-3, 2e-3, pytest.approx(4e-3)]
    assert "refine round 1: preln model.depth=1: best rate 0.002 is at an edge; adding 0.004" in printed
    assert "every best learning rate is interior (after 1 round(s))" in printed and not edge_cells(out)
    assert len(rates) - 2 <= MAX_ROUNDS
    assert main(["run", str(path), "--out", str(out), "--refine", "--dry-run"]) == 2
