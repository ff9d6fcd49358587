"""Ablation files: expansion, extends, run ids, --only, and one clear line per user error."""

from __future__ import annotations

import dataclasses
import math
import re
import textwrap
from pathlib import Path

import pytest

from suite import store
from suite.config import BF16_MIN_WIDTH
from suite.cli import main
from suite.sweep.folder import RunnerError
from suite.sweep.plan import resolve_runs
from suite.sweep.spec import SpecError, load_ablation, parse_only, select

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "ablations" / "smoke.yaml"
SHIPPED = sorted((ROOT / "ablations").glob("*.yaml"))

TINY_BASE = """
base:
  data: {name: synthetic, synthetic_img_size: 16}
  model: {patch_size: 4, dim: 32, heads: 2}
  train: {steps: 5}
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_smoke_expands_to_grid_x_variants_x_seeds():
    ab = load_ablation(SMOKE)
    assert ab.name == "smoke" and len(ab.runs) == 2 * 2 * 2
    assert len({r.run_id for r in ab.runs}) == 8
    assert {(r.variant, r.cfg.model.depth, r.seed) for r in ab.runs} == {
        (v, d, s) for v in ("preln", "layerscale") for d in (1, 2) for s in (0, 1)}
    first = ab.runs[0]
    assert first.extra == {"ablation": "smoke", "variant": "preln"}
    assert first.label == "preln depth=1 seed=0"
    assert first.run_id == store.run_id(first.cfg)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_ablations_validate(path, capsys):
    text = path.read_text()
    needs_cifar = "cifar" in text or "extends: base/" in text  # the GPU studies' shared base is CIFAR's
    tuned = re.search(r"^rates_from: (\S+)", text, re.M)
    code = main(["validate", str(path), *(["--no-data"] if needs_cifar else [])])  # no CIFAR on CI machines
    if tuned and not (path.parent / tuned.group(1)).is_dir():  # a GPU confirmation whose tuning has not run here
        assert code == 2 and f"does not exist yet; run `suite run {ROOT / 'ablations'}/" in capsys.readouterr().err
        return
    assert code == 0
    assert ": ok: " in capsys.readouterr().out


def test_exclude_and_explicit_seeds(tmp_path):
    path = write(tmp_path, "a.yaml", textwrap.dedent("""
        name: ex
        grid: {model.depth: [1, 2, 3]}
        variants: {a: {model.residual: preln}, b: {model.residual: postln}}
        seeds: [0, 7]
        exclude: [{variant: b, model.depth: [2, 3]}, {variant: a, seed: 7, model.depth: 1}]
    """) + TINY_BASE)
    ab = load_ablation(path)
    assert ab.excluded == 2 * 2 + 1
    assert len(ab.runs) == 3 * 2 * 2 - 5
    assert {r.seed for r in ab.runs} == {0, 7}
    assert not any(r.variant == "b" and r.cfg.model.depth > 1 for r in ab.runs)
    assert "12 runs" not in ab.describe() and "- 5 excluded" in ab.describe()


def test_extends_merges_base_and_replaces_per_key(tmp_path):
    write(tmp_path, "shared/parent.yaml", """
        name: parent
        base: {model: {dim: 32, heads: 2, depth: 1}, train: {lr: 1.0e-3, steps: 5}, data: {name: synthetic}}
        grid: {model.depth: [1, 2]}
        variants: {a: {model.residual: preln}, b: {model.residual: postln}}
        seeds: 3
    """)
    child = write(tmp_path, "child.yaml", """
        name: child
        extends: shared/parent.yaml
        base: {train.lr: 2.0e-3, model: {patch_size: 4}}
        variants: {b: {model.residual: rezero}, c: {model.residual: layerscale}}
        seeds: 1
    """)
    ab = load_ablation(child)
    assert ab.name == "child" and ab.variants == ["a", "b", "c"] and ab.seeds == [0]
    assert list(ab.grid) == ["model.depth"]
    cfg = ab.runs[0].cfg
    assert (cfg.model.dim, cfg.model.patch_size, cfg.train.lr, cfg.train.steps) == (32, 4, 2e-3, 5)
    assert {r.cfg.model.residual for r in ab.runs if r.variant == "b"} == {"rezero"}
    assert "extends" not in ab.resolved and ab.resolved["base"]["train"]["lr"] == 2e-3


def test_run_ids_are_stable_and_ignore_key_order(tmp_path):
    a = write(tmp_path, "a.yaml", "name: x\nseeds: 2\ngrid: {model.depth: [1, 2]}\n"
                                  "variants: {p: {model.residual: preln, train.lr: 0.01}}\n" + TINY_BASE)
    b = write(tmp_path, "b.yaml", TINY_BASE + "variants: {p: {train.lr: 0.01, model.residual: preln}}\n"
                                              "grid: {model.depth: [1, 2]}\nseeds: 2\nname: x\n")
    ids = [r.run_id for r in load_ablation(a).runs]
    assert ids == [r.run_id for r in load_ablation(a).runs] == [r.run_id for r in load_ablation(b).runs]
    c = write(tmp_path, "c.yaml", a.read_text().replace("0.01", "0.02"))
    assert not set(ids) & {r.run_id for r in load_ablation(c).runs}  # new hyperparameter, new runs


BAD_CASES = {
    # case: (file text, the key named, words of the message)
    "yaml-syntax": ("name: x\nbase: {model: [1, 2}\n", "line 2", "invalid YAML"),
    "unknown-field": ("name: x\ndescriptio: y\nvariants: {a: {}}\n", "descriptio", "did you mean 'description'"),
    "typo-config-key": ("name: x\ngrid: {model.dept: [1]}\nvariants: {a: {}}\n", "model.dept", "did you mean 'model.depth'"),
    "wrong-type": ("name: x\ngrid: {model.depth: [a]}\nvariants: {a: {}}\n", "model.depth", "expected an integer"),
    "not-a-list": ("name: x\ngrid: {model.depth: 3}\nvariants: {a: {}}\n", "grid.model.depth", "write `[3]`"),
    "empty-axis": ("name: x\ngrid: {model.depth: []}\nvariants: {a: {}}\n", "grid.model.depth", "empty axis"),
    "unknown-scheme": ("name: x\nvariants: {a: {model.residual: prelnn}}\n", "model.residual", "did you mean 'preln'"),
    "unknown-dataset": ("name: x\nbase: {data: {name: mnist}}\nvariants: {a: {}}\n", "data.name",
                        "did you mean 'mnist5k'"),
    "duplicate-variant": ("name: x\nvariants:\n  a: {model.depth: 1}\n  a: {model.depth: 2}\n", "variants.a",
                          "duplicate variant name (lines 3 and 4)"),
    "missing-extends": ("name: x\nextends: nope.yaml\nvariants: {a: {}}\n", "extends", "'nope.yaml' not found"),
    "bad-seeds": ("name: x\nseeds: 0\nvariants: {a: {}}\n", "seeds", "e.g. `seeds: 3`"),
    "exclude-unknown-variant": ("name: x\nvariants: {preln: {}}\nexclude: [{variant: prelm}]\n",
                                "exclude[0].variant", "did you mean 'preln'"),
    "exclude-matches-nothing": ("name: x\nvariants: {a: {}}\nexclude: [{model.depth: 99}]\n", "exclude[0]",
                                "matches no run"),
    "same-run-twice": ("name: x\nvariants: {a: {model.depth: 2}, b: {model.depth: 2}}\n", "variants",
                       "same run config"),
    "variant-sets-grid-key": ("name: x\ngrid: {model.depth: [1, 2]}\nvariants: {a: {model.depth: 3}}\n",
                              "variants.a", "also a grid axis"),
    "missing-name": ("variants: {a: {}}\n", "name", "missing"),
    "missing-variants": ("name: x\n", "variants", "missing"),
    "bad-name": ("name: a/b\nvariants: {a: {}}\n", "name", "folder name"),
    "reserved-seed": ("name: x\nbase: {seed: 3}\nvariants: {a: {}}\n", "base.seed", "use `seeds:`"),
}


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_each_user_error_is_one_line_with_file_key_and_exit_2(case, tmp_path, capsys):
    text, key, words = BAD_CASES[case]
    path = write(tmp_path, "bad.yaml", text)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: {path}") and key in lines[0] and words in lines[0]


def test_extends_cycle_is_reported(tmp_path, capsys):
    write(tmp_path, "b.yaml", "extends: a.yaml\n")
    a = write(tmp_path, "a.yaml", "name: x\nextends: b.yaml\nvariants: {v: {}}\n")
    assert main(["validate", str(a)]) == 2
    assert "cycle (a.yaml -> b.yaml -> a.yaml)" in capsys.readouterr().err


def test_every_problem_is_reported_at_once(tmp_path, capsys):
    path = write(tmp_path, "bad.yaml", """
        name: x
        descriptio: y
        base: {model: {dept: 3}}
        grid: {model.depth: []}
        variants: {a: {model.residual: preln}}
        seeds: -1
    """)
    assert main(["validate", str(path)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 4


def test_run_refuses_a_bad_file_before_running_anything(tmp_path, capsys):
    path = write(tmp_path, "bad.yaml", BAD_CASES["unknown-scheme"][0])
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_only_filters_and_rejects_unknown_keys():
    ab = load_ablation(SMOKE)
    assert len(select(ab.runs, parse_only(["variant=preln,model.depth=1"], ab))) == 2
    assert len(select(ab.runs, parse_only(["variant=preln,seed=0", "variant=layerscale,seed=1"], ab))) == 4
    assert len(select(ab.runs, parse_only(["train.lr=3e-3"], ab))) == 8  # values coerced like the config
    with pytest.raises(SpecError, match=r"--only: model\.dept: unknown key \(did you mean 'model\.depth'\?\)"):
        parse_only(["model.dept=1"], ab)
    with pytest.raises(SpecError, match="'prelm' is not a variant"):
        parse_only(["variant=prelm"], ab)


def test_dry_run_lists_runs_and_count_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(SMOKE), "--out", str(out), "--dry-run"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split() == ["run_id", "variant", "model.depth", "seed", "state"]
    assert len(lines) == 1 + 8 + 1
    assert lines[-1] == f"8 runs (2 variants x 2 grid points x 2 seeds - 0 excluded): 0 already done, 8 to run -> {out}"
    ids = {r.run_id for r in resolve_runs(load_ablation(SMOKE).runs, None, "cpu")}  # no GPU here: auto is fp32
    assert {line.split()[0] for line in lines[1:-1]} == ids
    assert not out.exists()


def test_bad_only_is_a_one_line_user_error(capsys):
    assert main(["run", str(SMOKE), "--dry-run", "--only", "model.depth=5"]) == 2
    assert "matches none of the 8 runs" in capsys.readouterr().err
    assert main(["run", str(SMOKE), "--dry-run", "--only", "variant=preln,model.dept=1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean 'model.depth'" in err and "Traceback" not in err


def test_resolving_precision_renames_runs_by_device_and_refuses_collisions(tmp_path):
    ab = load_ablation(SMOKE)
    wide = [dataclasses.replace(r, cfg=dataclasses.replace(r.cfg, model=dataclasses.replace(
        r.cfg.model, dim=BF16_MIN_WIDTH, heads=2))) for r in ab.runs]  # narrower models stay fp32 on CUDA
    cpu = resolve_runs(wide, None, "cpu")
    gpu = resolve_runs(wide, None, "cuda")
    assert all(r.cfg.train.precision == "fp32" for r in cpu) and all(r.cfg.train.precision == "bf16" for r in gpu)
    assert not {r.run_id for r in cpu} & {r.run_id for r in gpu}
    assert [r.run_id for r in resolve_runs(wide, "cpu", "cuda")] == [r.run_id for r in cpu]  # --device wins
    asked = []
    resolve_runs(ab.runs, "cpu", lambda: asked.append(1) or "cuda")
    assert not asked  # the auto device is looked up only when a run needs it
    path = tmp_path / "twice.yaml"
    path.write_text(textwrap.dedent("""
        name: twice
        base: {data: {name: synthetic, synthetic_train: 32, synthetic_test: 8}, model: {dim: 128, heads: 2, depth: 1, patch_size: 4}}
        variants:
          auto: {train.precision: auto}
          fp32: {train.precision: fp32}
    """))
    both = load_ablation(path).runs
    assert len(resolve_runs(both, None, "cuda")) == 2
    with pytest.raises(RunnerError, match="are the same run on this device"):
        resolve_runs(both, None, "cpu")


def test_yaml_aliases_are_counted_expanded_and_a_bomb_is_refused(tmp_path):
    """An alias counts as a copy of its anchor (10 ** 9 values for 9 levels of 10), measured in one pass."""
    import yaml

    from suite.config import expanded_size

    assert expanded_size(yaml.compose("a: &x [1, 2]\nb: *x\n")) == 1 + 2 + 2 * 3  # mapping, 2 keys, the list twice
    assert expanded_size(yaml.compose("a: &x [*x]\n")) == math.inf  # an alias inside its own anchor
    bomb = "name: b\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10))
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb + "variants: {a: {}}\n")
    with pytest.raises(SpecError, match="aliases") as err:
        load_ablation(path)
    assert "a value YAML cannot read" not in str(err.value) and str(err.value).count(str(path)) == 1  # said once


def test_suite_config_prints_the_resolved_run_config_that_suite_run_would_make(tmp_path, capsys):
    from suite.config import load_config
    from suite.sweep.plan import resolve_runs

    smoke = ROOT / "ablations" / "smoke.yaml"
    assert main(["config", str(smoke), "--only", "variant=layerscale,model.depth=2"]) == 0
    text = capsys.readouterr().out
    header, body = text.split("\nmodel:", 1)
    (run,) = [r for r in resolve_runs(load_ablation(smoke).runs, None, "cpu")
              if (r.variant, r.cfg.model.depth, r.seed) == ("layerscale", 2, 0)]
    assert f"# run id {run.run_id}" in header and "layerscale depth=2 seed=0 (the first of 2 matching runs" in header
    (tmp_path / "c.yaml").write_text("model:" + body)
    assert store.run_id(load_config(tmp_path / "c.yaml")) == run.run_id  # the printed config is the run
    assert main(["config", "model.depth=3", "train.lr=0.01"]) == 0
    out = capsys.readouterr().out
    assert "# the defaults with model.depth=3 train.lr=0.01" in out and "  depth: 3\n" in out and "  lr: 0.01\n" in out
    for argv, message in (([str(smoke), "model.depth=3"], "key=value overrides are for a run config"),
                          ([str(smoke), "--only", "variant=nope"], "'nope' is not a variant"),
                          (["model.dept=3"], "did you mean")):
        assert main(["config", *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err


def test_a_variant_setting_an_option_its_scheme_ignores_is_refused(tmp_path):
    """model.layerscale.init on a preln variant would be a second run id for the same computation; set in the
    base, shared by every variant (mechanisms.yaml's model.base_depth), it is allowed."""
    path = tmp_path / "a.yaml"
    path.write_text(textwrap.dedent("""\
        name: a
        base: {data: {name: mnist5k}, model: {depth: 2, dim: 16, heads: 2, patch_size: 7}, train: {steps: 2}}
        grid: {train.lr: [0.001]}
        variants:
          preln: {model.residual: preln, model.layerscale.init: 0.1}
          ls: {model.residual: layerscale}
        seeds: 1
    """))
    with pytest.raises(SpecError) as err:
        load_ablation(path)
    assert any("variants.preln" in line and "model.layerscale.init" in line for line in err.value.problems)
    path.write_text(path.read_text().replace("model.layerscale.init: 0.1}", "}").replace(
        "model: {depth: 2,", "model: {layerscale: {init: 0.1}, depth: 2,"))
    assert len(load_ablation(path).runs) == 2


def test_key_value_on_the_command_line_sets_every_runs_base(tmp_path, capsys):
    """`suite run FILE key=value`: an execution key (a tracker) keeps every run id; a result key makes new runs;
    a key the grid or a variant sets, a typo and a bad value are one line each."""
    smoke = Path(__file__).resolve().parents[2] / "ablations" / "smoke.yaml"
    plain = [r.run_id for r in load_ablation(smoke).runs]
    tracked = load_ablation(smoke, overrides=["train.log_to=[tensorboard]"])
    assert [store.run_id(r.cfg) for r in tracked.runs] == plain
    assert all(tuple(r.cfg.train.log_to) == ("tensorboard",) for r in tracked.runs)
    assert tracked.resolved["base"]["train"]["log_to"] == ["tensorboard"] and "depth" not in tracked.resolved["base"]["model"]
    shorter = load_ablation(smoke, overrides=["train.steps=5"])
    assert {r.cfg.train.steps for r in shorter.runs} == {5} and not set(r.run_id for r in shorter.runs) & set(plain)
    for bad, says in (("model.depth=3", "model.depth: the ablation's grid or a variant sets it"),
                      ("model.residual=preln", "model.residual: the ablation's grid or a variant sets it"),
                      ("trian.steps=5", "command line: unknown key 'trian'"),
                      # issue 61: applied and recorded, or refused; a bad value is the command line's, not the file's
                      ("seed=7", "command line: seed: each run's seed comes from the ablation's `seeds:`"),
                      ("seed=-1", "command line: seed=-1: expected an integer from 0"),
                      ("train.batch_size=0", "command line: train.batch_size=0: expected an integer from 1")):
        with pytest.raises(SpecError, match=re.escape(says)):
            load_ablation(smoke, overrides=[bad])
    assert main(["run", str(smoke), "--out", str(tmp_path / "o"), "--dry-run", "train.steps=abc"]) == 2
    assert "command line: train.steps: expected an integer" in capsys.readouterr().err


def test_a_rate_on_the_command_line_is_refused_where_the_file_takes_its_rates():
    """Issue 61: with rates_from, `train.lr=0.5` was recorded as the base rate and applied to no run."""
    default = Path(__file__).resolve().parents[2] / "ablations" / "default.yaml"
    with pytest.raises(SpecError, match=re.escape("command line: train.lr: each run's rate comes from the file's")):
        load_ablation(default, overrides=["train.lr=0.5"])


def test_a_problem_every_variant_shares_is_one_line_naming_the_command_line(capsys):
    """`suite run smoke.yaml model.heads=3` said the same divisibility problem once per variant, blaming the file;
    it is one line for every variant, with the command line's setting that caused it."""
    smoke = Path(__file__).resolve().parents[2] / "ablations" / "smoke.yaml"
    assert main(["run", str(smoke), "model.heads=3", "--out", "/nonexistent/o", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "every variant: model.dim (32) must be divisible by model.heads (3); set model.heads to one of" in err
    assert err.rstrip().endswith("(with the command line's model.heads=3)")


def test_a_number_written_1e_3_is_a_number_everywhere(tmp_path):
    """YAML 1.1 reads 1e-3 as text: the grid kept '1e-3', primary.where matched it as text, and the analysis found
    no run at 0.001 ("Not tested: no runs of b there"); `rates:` refused it; the resolved file wrote it quoted."""
    path = write(tmp_path, "a.yaml", """\
        name: sci
        base: {data: {name: synthetic}, model: {patch_size: 8}, train: {steps: 2}}
        grid: {train.lr: [1e-3, 3e-3], model.depth: [1, 2]}
        variants: {a: {model.residual: preln}, b: {model.residual: layerscale}}
        seeds: 4
        primary: {scheme: b, baseline: a, where: {train.lr: 1e-3, model.depth: 2}}
    """)
    ab = load_ablation(path)
    assert ab.grid["train.lr"] == [0.001, 0.003] and ab.primary.where["train.lr"] == 0.001
    assert {r.cfg.train.lr for r in ab.runs} == {0.001, 0.003}
    assert "'1e-3'" not in str(ab.resolved)
    assert main(["run", str(path), "--dry-run", "--only", "train.lr=1e-3"]) == 0


def test_an_axis_longer_than_the_run_limit_is_refused_before_its_values_are_checked():
    """Each value is checked by building a run config (about a millisecond), and duplicates were counted in
    quadratic time: an axis of 515,000 values took 8 minutes to be refused."""
    raw = {"name": "big", "variants": {"a": {}}, "grid": {"train.steps": [1] * 100_001}}
    with pytest.raises(SpecError, match=r"grid.train.steps: 100,001 values, more runs than the limit"):
        load_ablation(raw)  # said at once: no run config is built for its values
    with pytest.raises(SpecError, match=r"grid.train.steps: value 1 appears twice"):
        load_ablation({**raw, "grid": {"train.steps": [1, 2, 1]}})
    small = {**raw, "grid": {"train.steps": [1] * 11}}  # the cap is --max-runs' limit, whatever it is
    with pytest.raises(SpecError, match=r"grid.train.steps: 11 values, more runs than the limit of 10 on one axis"):
        load_ablation(small, max_runs=10)
    with pytest.raises(SpecError, match=r"grid.train.steps: value 1 appears twice"):
        load_ablation(small, max_runs=20)


def test_a_list_valued_key_is_selected_and_excluded_by_its_list(tmp_path):
    """--only split at every comma (two error lines for `train.betas=[0.9, 0.999]`), and a flat list was read as
    alternatives, so neither --only nor exclude could name one value of train.betas."""
    path = write(tmp_path, "b.yaml", """\
        name: betas
        base: {data: {name: synthetic}, model: {patch_size: 8}, train: {steps: 2}}
        grid: {train.betas: [[0.9, 0.99], [0.9, 0.999]]}
        variants: {a: {model.residual: preln}}
        exclude: [{train.betas: [0.9, 0.99], seed: 1}]
        seeds: 2
    """)
    ab = load_ablation(path)
    assert len(ab.runs) == 3
    only = select(ab.runs, parse_only(["train.betas=[0.9, 0.999],seed=0"], ab))
    assert [(tuple(r.cfg.train.betas), r.seed) for r in only] == [((0.9, 0.999), 0)]
    both = select(ab.runs, parse_only(["train.betas=[[0.9, 0.99], [0.9, 0.999]]"], ab))
    assert len(both) == 3


def test_a_long_extends_chain_is_said_as_one(tmp_path):
    """A chain of 1,500 files reached Python's recursion limit inside the YAML reader: "nested too deeply to read"
    of a one-line file."""
    write(tmp_path, "f0.yaml", "name: chain\nvariants: {a: {}}\n")
    for i in range(1, 40):
        write(tmp_path, f"f{i}.yaml", f"extends: f{i - 1}.yaml\n")
    with pytest.raises(SpecError, match=r"extends: a chain of more than 32 files; merge some of them"):
        load_ablation(tmp_path / "f39.yaml")
    assert load_ablation(tmp_path / "f20.yaml").name == "chain"
