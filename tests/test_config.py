"""suite.config's readers: a key given twice, in a YAML file or on the command line, is refused in one line instead
of the last one winning silently (as ablation files already were)."""

from __future__ import annotations

import pytest

from suite.cli import main
from suite.config import ConfigError, load_config, parse_overrides, read_yaml


def test_a_run_config_file_with_a_key_given_twice_is_refused_naming_both_lines(tmp_path, capsys):
    path = tmp_path / "run.yaml"
    path.write_text("model: {depth: 4}\ntrain:\n  lr: 0.001\n  steps: 10\n  lr: 0.1\n")
    with pytest.raises(ConfigError, match=r"run.yaml: train.lr: duplicate key \(lines 3 and 5\)"):
        load_config(path)
    assert main(["config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "train.lr: duplicate key" in err


def test_an_ablation_file_lists_every_duplicate_instead(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("name: a\nname: b\nbase: {train: {lr: 1, lr: 2}}\n")
    said: list[str] = []
    assert read_yaml(path, duplicates=said) == {"name": "b", "base": {"train": {"lr": 2}}}
    assert [line.split(": ", 2)[1] for line in said] == ["name", "base.train.lr"]


def test_a_key_set_nested_and_dotted_on_the_command_line_is_given_twice():
    for items in (["model={depth: 3}", "model.depth=2"], ["model.depth=2", "model={depth: 3}"],
                  ["train.lr=1", "train.lr=2"]):
        with pytest.raises(ConfigError, match=r"command line: (model.depth|train.lr): given twice; keep one"):
            parse_overrides(items)
    assert parse_overrides(["model={depth: 3, dim: 16}", "train.lr=0.1"]) == {
        "model": {"depth": 3, "dim": 16}, "train": {"lr": 0.1}}
    assert load_config(None, ["model={depth: 3, dim: 16}"]).model.depth == 3


@pytest.mark.parametrize("precision", ["fp16", "tf32"])
def test_suite_config_refuses_on_cpu_what_suite_train_refuses_there(capsys, precision):
    """`suite config train.precision=fp16 device=cpu` printed a run id for a run `suite train` refuses."""
    assert main(["config", f"train.precision={precision}", "device=cpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"train.precision {precision}" in err
    assert main(["train", f"train.precision={precision}", "device=cpu", "--out", "/nonexistent/never"]) == 2
    assert f"train.precision {precision}" in capsys.readouterr().err
    assert main(["config", f"train.precision={precision}"]) == 0  # device auto: where it runs decides
