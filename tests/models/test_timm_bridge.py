"""Our ViT against timm's: same weights, same logits."""

from __future__ import annotations

import pytest
import torch

from suite.config import LayerScaleConfig, ModelConfig
from suite.models import build_model
from suite.models.timm_bridge import build_timm_vit, suite_to_timm, timm_init_values, timm_to_suite


def cfg(residual: str, init=1e-5) -> ModelConfig:
    return ModelConfig(residual=residual, img_size=32, patch_size=8, in_chans=3, num_classes=10,
                       dim=48, depth=4, heads=3, layerscale=LayerScaleConfig(init=init))


@pytest.mark.parametrize("residual,init", [("preln", "cait"), ("layerscale", 0.37), ("layerscale", "cait")])
def test_timm_weights_give_equal_logits(residual, init):
    c = cfg(residual, init)
    torch.manual_seed(1)
    timm_model = build_timm_vit(c).eval()
    # Perturb the scales so a mix-up of ls1/ls2 or a dropped gamma would show in the logits.
    with torch.no_grad():
        for name, p in timm_model.named_parameters():
            if name.endswith("gamma"):
                p.uniform_(0.2, 1.5)
    ours = build_model(c).eval()
    ours.load_state_dict(timm_to_suite(timm_model.state_dict()), strict=True)
    x = torch.randn(4, 3, 32, 32)
    with torch.no_grad():
        assert torch.allclose(ours(x), timm_model(x), atol=1e-5)
    # And back: ours -> timm reproduces timm's state exactly.
    back = suite_to_timm(ours.state_dict())
    for k, v in timm_model.state_dict().items():
        assert torch.equal(back[k], v), k


def test_timm_init_values_mapping():
    assert timm_init_values(cfg("preln")) is None
    assert timm_init_values(cfg("layerscale", "cait")) == 0.1  # depth 4
    with pytest.raises(ValueError, match="init_values=0"):
        timm_init_values(cfg("layerscale", 0.0))
    with pytest.raises(ValueError, match="no 'rezero' scheme"):
        timm_init_values(cfg("rezero"))


def test_unconvertible_key_is_an_error_not_dropped():
    ours = build_model(ModelConfig(residual="sandwich", img_size=32, patch_size=8, in_chans=3,
                                   num_classes=10, dim=48, depth=2, heads=3))
    with pytest.raises(KeyError, match="post_norm1"):
        suite_to_timm(ours.state_dict())


def test_timm_backend_builds_timm_model():
    c = cfg("layerscale", 0.5)
    c.backend = "timm"
    model = build_model(c)
    assert type(model).__module__.startswith("timm")
    assert torch.equal(model.blocks[0].ls1.gamma.detach(), torch.full((48,), 0.5))


@pytest.mark.parametrize("key, value", [("placement", "attn"), ("granularity", "scalar"), ("learnable", "false"),
                                        ("cast", "true"), ("init", "0")])
def test_suite_train_refuses_a_layerscale_timm_cannot_express_in_one_line(key, value, tmp_path, capsys):
    """Before, such a run started and ended in error when timm's model was built (a sweep's preflight already
    said it in one line)."""
    from suite.cli import main

    code = main(["train", "--out", str(tmp_path / "run"), "data.name=digits", "model.patch_size=4", "model.backend=timm",
                 "model.residual=layerscale", f"model.layerscale.{key}={value}", "train.steps=2"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "model.backend timm: timm" in err and not (tmp_path / "run").exists()


def test_a_drop_path_schedule_timm_cannot_express_is_refused_not_trained_linearly():
    """timm's ViT spreads drop_path_rate linearly over its blocks: uniform would train linear under a config that
    records uniform."""
    c = cfg("preln")
    c.drop_path, c.drop_path_schedule = 0.2, "uniform"
    with pytest.raises(ValueError, match="drop_path_schedule uniform"):
        timm_init_values(c)
    c.drop_path_schedule = "linear"
    assert timm_init_values(c) is None
    timm_model = build_timm_vit(c)  # and linear is what timm builds, as the suite's linear schedule
    rates = [float(getattr(b.drop_path1, "drop_prob", 0.0)) for b in timm_model.blocks]
    assert rates == pytest.approx([0.2 * i / 3 for i in range(4)])
