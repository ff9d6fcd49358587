"""suite.store: the one JSON policy and the one way to read metrics.jsonl."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
import torch

from suite import store


def test_to_json_is_strict_json():
    obj = {"a": np.float32(0.5), "b": torch.tensor(3), "c": [math.nan, math.inf, 1.0], "d": (1, 2),
           "e": np.arange(3), "f": None, "g": True, "h": store.Path("x/y")}
    assert store.to_json(obj) == {"a": 0.5, "b": 3, "c": [None, None, 1.0], "d": [1, 2], "e": [0, 1, 2],
                                  "f": None, "g": True, "h": "x/y"}
    with pytest.raises(TypeError, match="object"):
        store.to_json({"x": object()})


def test_write_json_is_atomic_and_readable(tmp_path):
    store.write_json(tmp_path / "s.json", {"x": np.float64(math.nan), "y": 1})
    assert json.loads((tmp_path / "s.json").read_text()) == {"x": None, "y": 1}
    assert os.listdir(tmp_path) == ["s.json"]  # no temp file left behind


def test_metrics_line_refuses_nan():
    assert store.metrics_line({"step": 1, "loss": 0.5}) == '{"step": 1, "loss": 0.5}\n'
    with pytest.raises(ValueError):
        store.metrics_line({"loss": math.nan})


def test_read_metrics_skips_a_cut_off_last_line_with_a_warning(tmp_path):
    (tmp_path / store.METRICS).write_text('{"step": 1}\n{"step": 2}\n{"step": 3, "lo')
    with pytest.warns(UserWarning, match=r"metrics.jsonl: line 3 is cut off"):
        assert store.read_metrics(tmp_path) == [{"step": 1}, {"step": 2}]


def test_read_metrics_raises_on_damage_before_the_last_line(tmp_path):
    (tmp_path / store.METRICS).write_text('{"step": 1}\n{"ste\n{"step": 3}\n')
    with pytest.raises(store.CorruptFile, match=r"metrics.jsonl: line 2 is not a JSON object; delete the run"):
        store.read_metrics(tmp_path)
    (tmp_path / store.METRICS).write_text('{"step": 1}\n[1, 2]\n')  # complete, but not a record
    with pytest.raises(store.CorruptFile, match="line 2"):
        store.read_metrics(tmp_path)


def test_read_metrics_of_a_missing_file_is_empty(tmp_path):
    assert store.read_metrics(tmp_path) == []
