"""suite.registry: every registered name resolves, and unknown names get a did-you-mean."""

from __future__ import annotations

import pytest

from suite.config import ConfigError, load_config
from suite.registry import DATASETS, SCHEMES, Registry, did_you_mean


@pytest.mark.parametrize("registry", [SCHEMES, DATASETS], ids=lambda r: r.key)
def test_every_entry_resolves_to_a_callable(registry):
    assert len(registry) > 0
    for name in registry:
        assert callable(registry.get(name)), name


def test_unknown_names_get_a_did_you_mean_and_the_valid_names():
    assert did_you_mean("layerscal", SCHEMES) == " (did you mean 'layerscale'?)"
    assert did_you_mean("zzz", SCHEMES) == ""
    assert SCHEMES.unknown("rezro") == (
        "model.residual 'rezro' is unknown (did you mean 'rezero'?); valid: "
        "completep, deepnorm, depth-mup, depth_scaled, layerscale, layerscale-depth, postln, preln, rezero, sandwich")
    with pytest.raises(KeyError, match="did you mean 'mnist5k'"):
        DATASETS.get("mnist5")
    with pytest.raises(ConfigError, match=r"model.residual 'preLN' is unknown \(did you mean 'preln'"):
        load_config(None, ["model.residual=preLN"])


def test_a_registry_imports_its_target_on_first_use():
    reg = Registry("demo.key", {"sqrt": "math:sqrt"})
    assert "sqrt" in reg and reg.names() == ["sqrt"]
    assert reg.get("sqrt")(9.0) == 3.0


def test_every_name_has_a_description_for_suite_schemes():
    for registry in (SCHEMES, DATASETS):
        for name in registry.names():
            assert registry.describe(name), name


def test_register_adds_a_name_from_outside_and_refuses_a_taken_name_or_a_foreign_option():
    from suite.registry import Registry

    reg = Registry("model.residual", {"preln": "suite.models.residual:build_preln"}, options={"preln": ("model.x",)})
    build = lambda m, drop_path: None  # noqa: E731
    reg.register("mine", build, "my scheme", ("model.x",))
    assert reg.get("mine") is build and reg.describe("mine") == "my scheme" and reg.reads("mine") == ("model.x",)
    assert reg.readers("model.x") == ["preln", "mine"]
    with pytest.raises(ValueError, match="registered already"):
        reg.register("preln", build)
    with pytest.raises(ValueError, match="model.y is no option of model.residual"):
        reg.register("other", build, options=("model.y",))
