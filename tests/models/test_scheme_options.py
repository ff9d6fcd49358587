"""The scheme options table (suite.registry.SCHEME_OPTIONS) against the model code, and the config checks
it drives: a key the run's scheme does not read is an error naming the key, not a second run id."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from suite.config import ConfigError, ModelConfig, RunConfig, TrainConfig, apply_dict, check_scheme_options, \
    load_config, nest
from suite.engine.optim import build_optimizer
from suite.models import build_model
from suite.registry import SCHEME_OPTIONS, SCHEMES

ROOT = Path(__file__).resolve().parents[2]

# A value away from the default for every option, each one that changes the model of a scheme reading it
# (at depth 6 with base_depth 12: m_L = 1/2; base_depth 3 makes it 2).
CHANGED = {"model.layerscale.placement": "attn", "model.layerscale.granularity": "scalar",
           "model.layerscale.init": 0.5, "model.layerscale.learnable": False, "model.depth_alpha": 0.9,
           "model.base_depth": 3, "model.layerscale.cast": True}


def fingerprint(m: ModelConfig) -> tuple:
    """What a run computes with ``m``: the logits of a fixed batch at init, in fp32 and under bf16 autocast
    (where ``model.layerscale.cast`` acts), every weight's name, shape and whether it learns, and the
    optimiser's groups (learning-rate factor, ε, sizes)."""
    torch.manual_seed(0)
    model = build_model(m)
    x = torch.randn(2, m.in_chans, m.img_size, m.img_size, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = torch.cat([logits, model(x).float()])
    weights = sorted((n, tuple(t.shape), t.requires_grad) for n, t in [*model.named_parameters(), *model.named_buffers()])
    opt = build_optimizer(model, TrainConfig(), m)
    groups = [(g["lr_scale"], g["eps"], sum(p.numel() for p in g["params"])) for g in opt.param_groups]
    return logits, weights, groups


def same(a: tuple, b: tuple) -> bool:
    return a[1:] == b[1:] and torch.equal(a[0], b[0])


def tiny(residual: str) -> ModelConfig:
    return ModelConfig(residual=residual, img_size=8, patch_size=4, in_chans=1, num_classes=3, dim=16, depth=6, heads=2)


def test_every_option_of_the_table_is_a_config_key_and_every_scheme_is_listed():
    assert set(SCHEME_OPTIONS) == set(SCHEMES)
    assert set(SCHEMES.options()) == set(CHANGED)
    for key in SCHEMES.options():
        apply_dict(RunConfig(), nest({key: CHANGED[key]}), "test")  # a real key, and the value its type


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_the_table_says_exactly_which_options_change_what_a_scheme_computes(scheme):
    """Each option changed alone changes the model or its optimiser if and only if the table says that the
    scheme reads it: a key left out would be a silent second run id, a key listed wrongly a false refusal."""
    base = fingerprint(tiny(scheme))
    for key, value in CHANGED.items():
        m = tiny(scheme)
        apply_dict(m, nest({key.removeprefix("model."): value}), "test")
        assert same(fingerprint(m), base) == (key not in SCHEMES.reads(scheme)), (scheme, key)


@pytest.mark.parametrize("overrides, message", [
    (["model.layerscale.init=0.01"],
     "command line: model.layerscale.init 0.01: model.residual preln does not read it, so the setting would only "
     "rename the run; remove it (or set it back to 'cait'), or use a scheme that reads it: layerscale, layerscale-depth"),
    (["model.residual=preln", "model.layerscale.learnable=false"], "model.layerscale.learnable False: model.residual preln"),
    (["model.depth_alpha=0.9"], "model.depth_alpha 0.9: model.residual preln does not read it"),
    (["model.residual=depth-mup", "model.depth_alpha=0.9"],
     "model.depth_alpha 0.9: model.residual depth-mup fixes alpha at 1/2, so the setting would only rename the run"),
    (["model.residual=completep", "model.depth_alpha=0"], "model.residual completep fixes alpha at 1"),
    (["model.residual=rezero", "model.base_depth=4"],
     "model.base_depth 4: model.residual rezero does not read it, so the setting would only rename the run; remove "
     "it (or set it back to 12), or use a scheme that reads it: layerscale-depth, depth_scaled, depth-mup, completep"),
])
def test_an_option_the_scheme_does_not_read_is_refused_naming_the_key(overrides, message):
    with pytest.raises(ConfigError) as err:
        load_config(None, overrides)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("overrides", [
    [],  # every default is present in every config: never refused
    ["model.layerscale.init=cait", "model.depth_alpha=0.5"],  # set to the default: the same run id
    ["model.residual=layerscale", "model.layerscale.init=0.01", "model.layerscale.placement=mlp"],
    ["model.residual=depth_scaled", "model.depth_alpha=0.9", "model.base_depth=3"],
    ["model.residual=depth-mup", "model.base_depth=3"],
    ["model.residual=layerscale-depth", "model.base_depth=3", "model.layerscale.init=1e-4"],
    ["model.residual=layerscale", "model.layerscale.init=0"],  # learnable init 0: a real init
    ["model.residual=layerscale", "model.layerscale.init=1e-6", "model.layerscale.learnable=false"],
])
def test_options_the_scheme_reads_and_defaults_are_accepted(overrides):
    load_config(None, overrides)


@pytest.mark.parametrize("placement, branches", [("both", "attention and MLP branch"), ("attn", "attention branch"),
                                                  ("mlp", "MLP branch")])
def test_a_frozen_layerscale_at_init_0_is_refused(placement, branches):
    with pytest.raises(ConfigError, match=f"model.layerscale.init 0 with model.layerscale.learnable false multiplies "
                                          f"every block's {branches} by a fixed 0"):
        load_config(None, ["model.residual=layerscale", "model.layerscale.init=0.0", "model.layerscale.learnable=false",
                           f"model.layerscale.placement={placement}"])


def test_a_base_shared_by_every_variant_is_the_reference_not_the_defaults():
    """An ablation's base applies to every variant (mechanisms.yaml sets model.base_depth 12 for its depth-scaled
    arms, and its preln arm carries it too): against the base, only what a variant or the grid sets counts."""
    base = RunConfig()
    apply_dict(base, nest({"model.base_depth": 4}), "test")
    preln = copy.deepcopy(base)
    check_scheme_options(preln, base)  # carries the base's base_depth: fine
    with pytest.raises(ConfigError, match="model.base_depth 4: model.residual preln"):
        check_scheme_options(preln, RunConfig())
    variant = copy.deepcopy(base)
    apply_dict(variant, nest({"model.layerscale.init": 0.1}), "test")
    with pytest.raises(ConfigError, match="model.layerscale.init 0.1: model.residual preln does not read it"):
        check_scheme_options(variant, base)


@pytest.mark.parametrize("path", sorted((ROOT / "ablations").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_ablation_sets_only_options_its_schemes_read_over_its_base(path, tmp_path):
    import re
    import shutil

    from suite.sweep.spec import load_ablation

    text = path.read_text()
    if "rates_from:" in text:  # a tuning folder may not be here (cait_depth's, paper's): runs at the base's rate
        shutil.copytree(path.parent, tmp_path / "ablations")
        path = tmp_path / "ablations" / path.name
        path.write_text(re.sub(r"(?m)^rates_from:.*$", "", text))
    ablation = load_ablation(path)
    base = RunConfig()
    apply_dict(base, ablation.resolved.get("base") or {}, str(path))
    for run in ablation.runs:
        check_scheme_options(run.cfg, base, run.label)


def test_a_frozen_depth_aware_layerscale_is_refused_as_frozen_layerscale_under_another_name():
    """layerscale-depth's one rule scales γ's learning rate; frozen, γ has none, and the run trains exactly as frozen
    layerscale under another run id and scheme name (an outside review found equal losses)."""
    with pytest.raises(ConfigError, match="layerscale-depth with model.layerscale.learnable false.*use model.residual: "
                                          "layerscale"):
        load_config(None, ["model.residual=layerscale-depth", "model.layerscale.learnable=false"])
