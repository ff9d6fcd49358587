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


@pytest.mark.parametrize("items, said", [
    (["model.residual=layerscale", "model.layerscale.init=0.1", "model.layerscale={}"],
     "model.layerscale.init: sets a sub-key of model.layerscale, which is given a value too; keep one"),
    (["model.residual=layerscale", "model.layerscale={}", "model.layerscale.init=0.1"],
     "model.layerscale.init: sets a sub-key of model.layerscale, which is given a value too; keep one"),
    (["model.depth.x=4", "model.depth=3"], "model.depth.x: sets a sub-key of model.depth, which is given a value too"),
    (["model.depth=3", "model.depth.x=4"], "model.depth.x: sets a sub-key of model.depth, which is given a value too")])
def test_a_key_and_its_sub_key_on_the_command_line_are_refused_in_either_order(capsys, items, said):
    """`model.layerscale={}` after `model.layerscale.init=0.1` dropped the 0.1 (exit 0, init: cait), and a misspelt
    `model.depth.x` vanished when `model.depth` followed it."""
    assert main(["config", *items]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"command line: {said}" in err


def test_a_data_root_under_a_user_who_does_not_exist_is_one_line(capsys):
    """`~nobody...` cannot be expanded: Path.expanduser raised RuntimeError, a traceback."""
    assert main(["config", "data.root=~nobody_here_at_all"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "data.root ~nobody_here_at_all" in err and "not a usable path" in err


def test_suite_config_reads_an_ablation_that_takes_its_variants_from_extends(tmp_path, capsys):
    """It looked for `variants:` alone, and refused a child ablation as a run config with an unknown key 'extends'."""
    from pathlib import Path

    parent = Path(__file__).resolve().parents[1] / "ablations" / "smoke.yaml"
    child = tmp_path / "child.yaml"
    child.write_text(f"extends: {parent}\nname: child\n")
    assert main(["config", str(child)]) == 0
    out = capsys.readouterr().out
    assert "# run id " in out and "model:" in out


def test_a_held_out_split_of_one_image_names_no_size_it_could_never_have(capsys):
    """A one-image test split of one class can never pass the learning test: it said 'needs about 0 or more'."""
    assert main(["config", "data.name=synthetic", "model.patch_size=4", "data.val_fraction=0",
                 "data.synthetic_test=1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "about 0" not in err and "raise data.synthetic_test" in err


def test_a_file_name_with_control_characters_is_escaped_on_success_too(tmp_path, capsys):
    """Errors escaped them already; `suite validate`, `suite cost` and `suite config` sent them to the terminal."""
    import shutil
    from pathlib import Path

    path = tmp_path / "evil\x1b[2Jname.yaml"
    shutil.copy(Path(__file__).resolve().parents[1] / "ablations" / "smoke.yaml", path)
    for command in (["validate", "--no-data"], ["cost"], ["config"]):
        assert main([*command, str(path)]) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "evil\\x1b[2Jname.yaml" in out, command


@pytest.mark.parametrize("text, said", [
    ("model: null\n", "model must be a mapping of keys to values, got None; e.g. model: {depth: 12}"),
    ("model.depth: 3\n", "'model.depth': a dotted key; in a file write it nested, model: {depth: ...}"),
    ("model: {dpth: 3}\n", "unknown key 'model.dpth' (did you mean 'model.depth'?)")])
def test_a_run_config_files_shape_errors_name_the_fix(tmp_path, capsys, text, said):
    """'model. must be a mapping, got None' (a stray dot, no fix); a dotted key in a file: 'did you mean model?'."""
    path = tmp_path / "run.yaml"
    path.write_text(text)
    assert main(["config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err


@pytest.mark.parametrize("key", ["seed", "device"])
def test_a_key_and_its_value_given_apart_say_how_to_join_them(capsys, key):
    assert main(["config", key, "3"]) == 2
    assert f"to set a key write {key}=3" in capsys.readouterr().err


def test_a_name_yaml_reads_as_a_number_is_told_to_be_quoted(tmp_path):
    from suite.sweep.spec import SpecError, load_ablation

    path = tmp_path / "a.yaml"
    path.write_text("name: 12\nvariants: {a: {model.residual: preln}}\n")
    with pytest.raises(SpecError, match=r"name: '12': YAML reads it as no text .*quote it, e.g. name: '12'"):
        load_ablation(path)


@pytest.mark.parametrize("items, key", [(["data.name=cifar10", "data.test_fraction=0.5"], "data.test_fraction 0.5"),
                                        (["data.img_size=64"], "data.img_size 64"),
                                        (["data.synthetic_classes=4"], "data.synthetic_classes 4")])
def test_a_data_key_the_dataset_never_reads_is_refused(capsys, items, key):
    """It was accepted and changed the run id: two ids for one run, a duplicated sweep cell."""
    assert main(["config", *items]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{key}: data.name" in err and "would only rename the run" in err
    assert main(["config", "data.name=synthetic", "data.synthetic_classes=4", "model.patch_size=4"]) == 0
