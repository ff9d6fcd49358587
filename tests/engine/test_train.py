"""The training engine: statuses, determinism, resume, summary schema, and one real learning check."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
import yaml

from suite import store
from suite.config import BF16_MIN_WIDTH, RunConfig, dump_yaml, flatten, load_config, resolve_precision, to_dict
from suite.engine import train


def tiny(**overrides) -> RunConfig:
    """A seconds-long run on the synthetic dataset."""
    items = {
        "data.name": "synthetic", "data.synthetic_train": 256, "data.synthetic_test": 64,
        "data.synthetic_img_size": 16, "data.synthetic_channels": 3, "data.synthetic_classes": 4,
        "model.patch_size": 4, "model.dim": 32, "model.heads": 2, "model.depth": 2,
        "train.steps": 20, "train.lr": 3e-3, "train.batch_size": 32, "train.warmup_steps": 3, "train.log_every": 5,
        "train.eval_every": 10, "train.timing_warmup_steps": 2, "device": "cpu",
    }
    if overrides.get("data.name", "synthetic") != "synthetic":  # another dataset: the synthetic keys are not its
        items = {k: v for k, v in items.items() if not k.startswith("data.synthetic_")}
    items.update(overrides)
    return load_config(None, [f"{k}={v}" for k, v in items.items()])


def metrics(run_dir):
    return store.read_metrics(run_dir)


def test_same_seed_same_metrics(tmp_path):
    a = train(tiny(**{"model.residual": "layerscale", "model.drop_path": 0.1}), tmp_path / "a")
    b = train(tiny(**{"model.residual": "layerscale", "model.drop_path": 0.1}), tmp_path / "b")
    assert a["status"] == "ok"
    strip = lambda ms: [{k: v for k, v in m.items()} for m in ms]  # noqa: E731
    assert strip(metrics(tmp_path / "a")) == strip(metrics(tmp_path / "b"))
    assert a["final_train_loss"] == b["final_train_loss"] and a["test_acc"] == b["test_acc"]
    c = train(tiny(**{"model.residual": "layerscale", "model.drop_path": 0.1, "seed": 1}), tmp_path / "c")
    assert c["final_train_loss"] != a["final_train_loss"]


def test_huge_lr_diverges_with_its_step(tmp_path):
    s = train(tiny(**{"train.lr": 1e3, "train.warmup_steps": 0, "train.steps": 50}), tmp_path)
    assert s["status"] == "diverged"
    assert isinstance(s["diverged_step"], int) and 0 <= s["diverged_step"] < 50
    assert s["diverged_reason"] in ("nonfinite", "spike")
    assert s["steps_done"] < 50
    assert metrics(tmp_path)[-1] == {"kind": "diverged", "step": s["diverged_step"], "reason": s["diverged_reason"],
                                     "detail": s["diverged_detail"]}


def test_zero_lr_fails_to_train(tmp_path):
    s = train(tiny(**{"train.lr": 0.0, "train.min_lr": 0.0}), tmp_path)
    assert (s["status"], s["failed_reason"], s["steps_to_learn"], s["judged_on"]) == (
        "failed", "never_learned", None, "val")


def test_statuses_follow_held_out_accuracy_and_time_to_learn_is_recorded(tmp_path):
    """The run is judged on its validation evaluations (every 5 steps here), not on its training loss:
    ok when the last one beats always guessing the largest class, with the step of the first that did."""
    from suite.learned import learned

    s = train(tiny(**{"train.eval_every": 5}), tmp_path)
    evals = [m for m in metrics(tmp_path) if m["kind"] == "eval"]
    assert [m["step"] for m in evals] == [5, 10, 15, 20]
    assert all("test_acc" not in m for m in evals[:-1]) and "test_acc" in evals[-1]  # test only at the end
    assert s["status"] == "ok" and s["judged_on"] == "val" and evals[-1]["val_acc"] == s["val_acc"]
    first = next(m["step"] for m in evals if learned(m["val_acc"], s["val_size"], 0.25 + 0.1))
    assert s["steps_to_learn"] in [m["step"] for m in evals] and s["steps_to_learn"] <= first


def _poisoned_run(tmp_path, cfg, poison):
    """A run whose model output is replaced by ``poison(out, step)`` (the engine's own loop)."""
    from suite.engine.lifecycle import RunFolder
    from suite.engine.loop import Training

    run = Training(cfg, RunFolder(cfg, tmp_path))
    run.setup()
    model = run.step_fn
    run.step_fn = lambda x: poison(model(x), run.state.step)
    run.loop(progress=False, on_step=None)
    run.finish()
    return run.summary


@pytest.mark.parametrize("kind,reason", [("nan", "nonfinite"), ("spike", "spike")])
def test_every_divergence_reports_the_step_of_its_bad_loss(tmp_path, kind, reason):
    """A bad loss computed after 7 updates is step 7, whether it is NaN or a spike (a spike said 8)."""
    def poison(out, step):
        if step != 7:
            return out
        return out * math.nan if kind == "nan" else out * -1e4  # the predicted class becomes the least likely

    s = _poisoned_run(tmp_path, tiny(**{"train.warmup_steps": 2, "train.spike_window": 0}), poison)  # one bad step
    assert (s["status"], s["diverged_step"], s["diverged_reason"]) == ("diverged", 7, reason)


def _silenced_from(tmp_path, step: int, **overrides):
    """A run whose model says nothing (every logit equal) from ``step`` on, in training and in
    evaluation alike: its training loss returns to ln C exactly."""
    from suite.engine.lifecycle import RunFolder
    from suite.engine.loop import Training

    cfg = tiny(**{"train.steps": 60, "train.spike_factor": 1e6, **overrides})  # no spike: a return to chance
    run = Training(cfg, RunFolder(cfg, tmp_path))
    run.setup()
    forward = run.model.forward
    run.model.forward = lambda x: forward(x) * (0.0 if run.state.step >= step else 1.0)
    run.loop(progress=False, on_step=None)
    run.finish()
    return run.summary


def test_a_run_whose_training_loss_returns_to_chance_diverged_by_collapse(tmp_path):
    """Back at ln C from step 25 and there for a 20-step window: diverged (collapse) at the step the
    smoothed loss came back within 5% of ln C, whatever its held-out accuracy said."""
    s = _silenced_from(tmp_path, 25, **{"train.collapse_window": 20, "train.steps": 80})
    assert (s["status"], s["diverged_reason"], s["steps_to_learn"]) == ("diverged", "collapse", 10)
    # the smoothed loss (0.9 per step) takes ~26 steps from 0.35 back to within 5% of ln 4
    assert 25 < s["diverged_step"] <= 60 and s["steps_done"] == s["diverged_step"] + 20
    assert "returned to within 5% of ln C" in s["diverged_detail"]


def test_a_run_back_at_chance_for_less_than_the_window_is_judged_on_held_out_accuracy(tmp_path):
    """The same run with the default 50-step window: back at chance too briefly for the rule, so its
    status comes from its evaluations: it had learned at an earlier one, so it failed (collapsed)."""
    s = _silenced_from(tmp_path / "a", 25)
    assert (s["status"], s["failed_reason"], s["steps_to_learn"]) == ("failed", "collapsed", 10)


def test_precision_auto_is_resolved_into_the_run_id(tmp_path):
    """A CPU run under `auto` is the fp32 run (same id, same folder); bf16 is another run."""
    auto = tiny()
    assert auto.train.precision == "auto"
    fp32 = resolve_precision(auto, "cpu")
    assert resolve_precision(auto, "cuda").train.precision == "tf32"  # narrow: on CUDA bf16 would only add casts
    wide = dataclasses.replace(auto, model=dataclasses.replace(auto.model, dim=BF16_MIN_WIDTH))
    bf16 = resolve_precision(wide, "cuda")
    assert (fp32.train.precision, bf16.train.precision) == ("fp32", "bf16")
    assert store.run_id(fp32) == store.run_id(tiny(**{"train.precision": "fp32"}))
    assert len({store.run_id(auto), store.run_id(fp32), store.run_id(bf16)}) == 3
    assert resolve_precision(fp32, "cuda") is fp32  # an explicit precision is never changed
    s = train(auto, tmp_path)
    assert s["run_id"] == store.run_id(fp32) and s["train.precision"] == "fp32"
    assert yaml.safe_load((tmp_path / "config.yaml").read_text())["train"]["precision"] == "fp32"


def test_suite_train_names_its_default_folder_by_the_resolved_run_id(tmp_path, monkeypatch, capsys):
    from suite.cli import main

    monkeypatch.chdir(tmp_path)
    cfg = tiny(**{"train.steps": 2})
    args = [f"{k}={v}" for k, v in flatten(to_dict(cfg)).items()
            if k.split(".")[0] in ("data", "model", "train") and v is not None and not isinstance(v, list)]
    assert main(["train", *args, "device=cpu", "--no-progress"]) == 0
    (folder,) = (tmp_path / "results" / "train").iterdir()
    assert folder.name == store.run_id(resolve_precision(cfg, "cpu")) == json.loads((folder / "summary.json").read_text())["run_id"]


def test_injected_exception_ends_error_and_writes_summary(tmp_path):
    def boom(step):
        if step == 3:
            raise RuntimeError("CUDA out of memory (injected)")

    s = train(tiny(), tmp_path, on_step=boom)
    assert s["status"] == "error"
    assert s["error"] == "RuntimeError: CUDA out of memory (injected)"
    assert json.loads((tmp_path / "summary.json").read_text())["status"] == "error"
    assert "Traceback" in (tmp_path / "log.txt").read_text()


def test_bad_data_is_an_error_status(tmp_path, monkeypatch):
    monkeypatch.delenv("SUITE_DATA_DIR", raising=False)
    s = train(tiny(**{"data.name": "cifar10", "data.root": str(tmp_path / "nope")}), tmp_path / "run")
    assert s["status"] == "error" and "CIFAR-10" in s["error"]


SUMMARY_TYPES = {
    "schema": int, "run_id": str, "seed": int, "status": str, "steps_done": int, "final_train_loss": float,
    "val_acc": float, "best_val_acc": float, "test_acc": float, "best_test_acc": float,
    "train_size": int, "val_size": int, "test_size": int, "step_time_ms": float, "throughput": float,
    "peak_mem_mb": float, "num_params": int, "wall_s": float, "suite_version": str, "git_commit": str,
    "torch_version": str, "python_version": str, "device_name": str, "started_at": str,
    "model.depth": int, "model.residual": str, "train.lr": float,
}


def test_summary_fields_types_and_files(tmp_path):
    cfg = tiny(**{"model.residual": "layerscale"})
    s = train(cfg, tmp_path)
    for key, typ in SUMMARY_TYPES.items():
        assert isinstance(s[key], typ), (key, s[key])
    assert s["diverged_step"] is None and s["error"] is None
    assert s["run_id"] == store.run_id(resolve_precision(cfg, "cpu")) and s["train.precision"] == "fp32"
    assert 0.0 <= s["test_acc"] <= 1.0 and s["best_test_acc"] >= s["test_acc"]
    assert 0.0 <= s["val_acc"] <= 1.0 and s["best_val_acc"] >= s["val_acc"]
    assert (s["train_size"], s["val_size"], s["test_size"]) == (232, 24, 64)  # 6 of each class of 64
    evals = [m for m in metrics(tmp_path) if m["kind"] == "eval"]
    assert [m["step"] for m in evals] == [10, 20] and all("val_acc" in m for m in evals)
    assert "test_acc" not in evals[0] and "test_acc" in evals[-1]  # test is reported once, at the end
    assert s["judged_on"] == "val"
    assert evals[-1]["val_acc"] == s["val_acc"] and evals[-1]["test_acc"] == s["test_acc"]
    assert s["model.img_size"] == 16 and s["model.num_classes"] == 4  # filled from the data
    assert json.loads((tmp_path / "summary.json").read_text()) == s
    resolved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert resolved["model"]["in_chans"] == 3 and resolved["train"]["steps"] == 20
    assert not list(tmp_path.glob(".*tmp"))  # no temp files left behind


def test_metrics_have_per_block_probes_and_scale_at_step0(tmp_path):
    cfg = tiny(**{"model.residual": "layerscale", "model.layerscale.init": 0.25, "train.lr": 0.0,
                  "train.min_lr": 0.0})
    train(cfg, tmp_path)
    lines = metrics(tmp_path)
    step0 = lines[0]
    assert step0["kind"] == "train" and step0["step"] == 0 and step0["loss"] is None
    assert [b["scale_mean"] for b in step0["blocks"]] == [0.25, 0.25]  # exactly the configured init
    first = next(m for m in lines if m["kind"] == "train" and m["step"] > 0)
    assert first["step"] == 5 and len(first["blocks"]) == 2
    for b in first["blocks"]:
        assert b["scale_mean"] == pytest.approx(0.25) and b["scale_max"] == pytest.approx(0.25)
        assert b["attn_ratio"] > 0 and b["mlp_ratio"] > 0 and b["out_rms"] > 0
    evals = [m for m in lines if m["kind"] == "eval"]
    assert [e["step"] for e in evals] == [10, 20]


def test_preln_has_no_scales_but_ratios(tmp_path):
    train(tiny(), tmp_path)
    block = next(m for m in metrics(tmp_path) if m["kind"] == "train")["blocks"][0]
    assert block["scale_mean"] is None and block["attn_ratio"] > 0


def test_killed_run_resumes_to_the_same_result(tmp_path, monkeypatch):
    import torch

    loaded_to = []
    real_load = torch.load

    def spy(*args, **kwargs):
        loaded_to.append(kwargs.get("map_location"))
        return real_load(*args, **kwargs)

    cfg = tiny(**{"train.checkpoint_every": 5, "train.steps": 20, "model.drop_path": 0.1})
    full = train(cfg, tmp_path / "full")

    def kill(step):
        if step == 12:
            raise KeyboardInterrupt  # not an error: the process dies, like SIGINT

    with pytest.raises(KeyboardInterrupt):
        train(cfg, tmp_path / "killed", on_step=kill)
    assert (tmp_path / "killed" / "checkpoint.pt").exists()
    assert not (tmp_path / "killed" / "summary.json").exists()
    monkeypatch.setattr(torch, "load", spy)
    resumed = train(cfg, tmp_path / "killed")
    # Loaded to the CPU, whatever the device: AdamW's step counters must not land on a GPU.
    assert loaded_to == ["cpu"]
    for key in ("status", "final_train_loss", "test_acc", "best_test_acc", "steps_done"):
        assert resumed[key] == full[key], key
    assert metrics(tmp_path / "killed") == metrics(tmp_path / "full")
    assert not (tmp_path / "killed" / "checkpoint.pt").exists()


def test_preempted_run_saves_at_that_step_and_resumes_without_periodic_checkpoints(tmp_path):
    from suite.engine.lifecycle import StopRun

    cfg = tiny(**{"train.steps": 20, "model.drop_path": 0.1})  # checkpoint_every 0: none periodic
    full = train(cfg, tmp_path / "full")
    assert full["resumed_at"] == []

    def preempt(step):
        if step == 13:
            raise StopRun("preempted", save=True)

    with pytest.raises(StopRun):
        train(cfg, tmp_path / "pre", on_step=preempt)
    assert (tmp_path / "pre" / "checkpoint.pt").exists() and (tmp_path / "pre" / "preempted.json").exists()
    assert not (tmp_path / "pre" / "summary.json").exists()
    resumed = train(cfg, tmp_path / "pre")
    assert resumed["resumed_at"] == [13]
    for key in ("status", "final_train_loss", "test_acc", "steps_done"):
        assert resumed[key] == full[key], key
    assert metrics(tmp_path / "pre") == metrics(tmp_path / "full")
    assert not list((tmp_path / "pre").glob("checkpoint.pt")) and not (tmp_path / "pre" / "preempted.json").exists()


def test_a_damaged_log_line_before_the_checkpoint_is_dropped_and_the_run_resumes(tmp_path):
    """Hostile round six: one damaged metrics.jsonl record before a checkpoint turned a resumed run that
    then trained to the end into `error`. The weights come from the checkpoint: the line goes, with a warning."""
    from suite.engine.lifecycle import StopRun
    from suite.store import SuiteWarning

    cfg = tiny(**{"train.steps": 20})
    full = train(cfg, tmp_path / "full")

    def preempt(step):
        if step == 13:
            raise StopRun("preempted", save=True)

    with pytest.raises(StopRun):
        train(cfg, tmp_path / "pre", on_step=preempt)
    log = tmp_path / "pre" / "metrics.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    damaged = next(i for i, line in enumerate(lines) if '"kind": "train"' in line and '"step": 0,' not in line)
    lines[damaged] = '{"kind": "train", "step": 5, "loss": \n'
    log.write_text("".join(lines))
    with pytest.warns(SuiteWarning, match=rf"metrics.jsonl: line {damaged + 1} is not a JSON object; dropped it"):
        resumed = train(cfg, tmp_path / "pre")
    assert resumed["status"] == full["status"] and resumed["steps_done"] == 20 and resumed["resumed_at"] == [13]
    assert len(metrics(tmp_path / "pre")) == len(metrics(tmp_path / "full")) - 1  # only the damaged record is gone


def test_a_preemption_at_the_last_step_lets_the_run_finish(tmp_path):
    from suite.engine.lifecycle import StopRun

    cfg = tiny(**{"train.steps": 10})

    def preempt(step):
        if step == 10:
            raise StopRun("preempted", save=True)

    s = train(cfg, tmp_path / "last", on_step=preempt)  # no exception: nothing is left to redo
    assert s["status"] in ("ok", "failed") and s["steps_done"] == 10
    assert not (tmp_path / "last" / "checkpoint.pt").exists()


def test_a_run_stopped_without_saving_starts_again_from_step_0(tmp_path):
    from suite.engine.lifecycle import StopRun

    cfg = tiny(**{"train.steps": 20})

    def lose(step):
        if step == 7:
            raise StopRun("claim lost", save=False)

    with pytest.raises(StopRun):
        train(cfg, tmp_path / "lost", on_step=lose)
    assert not (tmp_path / "lost" / "checkpoint.pt").exists()
    again = train(cfg, tmp_path / "lost")
    assert again["resumed_at"] == [] and again["steps_done"] == 20


def test_weight_decay_policy_on_1d_params():
    from suite.models import build_model
    from suite.engine.optim import build_optimizer

    cfg = tiny(**{"model.residual": "layerscale", "model.img_size": 16, "model.in_chans": 3,
                  "model.num_classes": 4})
    model = build_model(cfg.model)
    groups = build_optimizer(model, cfg.train).param_groups
    gammas = {id(b.ls1.gamma) for b in model.blocks} | {id(b.ls2.gamma) for b in model.blocks}
    no_decay = next(g for g in groups if any(id(p) in gammas for p in g["params"]))
    assert no_decay["weight_decay"] == 0.0
    cfg.train.decay_1d = True
    groups = build_optimizer(model, cfg.train).param_groups
    assert all(g["weight_decay"] == cfg.train.weight_decay for g in groups)


def test_lr_schedule_warmup_then_cosine():
    from suite.engine.optim import lr_at

    tc = RunConfig().train
    tc.lr, tc.min_lr, tc.warmup_steps = 1.0, 0.0, 4
    assert [lr_at(s, 104, tc) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert lr_at(4, 104, tc) == pytest.approx(1.0)
    assert lr_at(54, 104, tc) == pytest.approx(0.5, abs=0.01)
    assert lr_at(103, 104, tc) == pytest.approx(0.0, abs=1e-9)


@pytest.mark.slow
def test_embedded_mnist_learns_well_above_chance(tmp_path):
    """The real check: a depth-4 Pre-LN ViT on the embedded MNIST subset, a few seconds of CPU."""
    cfg = load_config(None, ["device=cpu", "model.depth=4", "train.steps=200", "train.lr=3e-3",
                             "train.batch_size=64", "train.eval_every=0"])
    s = train(cfg, tmp_path)
    assert s["status"] == "ok"
    assert s["test_acc"] > 0.5, s["test_acc"]  # chance is 0.1


def test_runs_record_how_contended_their_timing_was(tmp_path):
    import torch

    from suite.engine.loop import timing_contention

    cpu = torch.device("cpu")
    assert timing_contention(0.5, 1.0, 1, cpu)["timing_contended"] is True  # half the core: waited for it
    assert timing_contention(1.9, 1.0, 2, cpu) == {**timing_contention(1.9, 1.0, 2, cpu), "timing_cpu_util": 0.95,
                                                   "timing_contended": False}
    assert timing_contention(0.1, 1.0, 1, torch.device("cuda"))["timing_contended"] is None  # not judged on GPU
    s = train(tiny(), tmp_path)
    assert 0 < s["timing_cpu_util"] and isinstance(s["timing_contended"], bool) and s["timing_cores"] >= 1


def test_fused_adamw_is_used_and_computes_the_same_update(tmp_path):
    import copy

    import torch

    from suite.engine.optim import build_optimizer, implementation
    from suite.models import build_model

    assert train(tiny(), tmp_path)["optimizer_impl"] == "fused"
    cfg = tiny()
    torch.manual_seed(0)
    model = build_model(dataclasses.replace(cfg.model, img_size=16, in_chans=3, num_classes=4))
    other = copy.deepcopy(model)
    fused = build_optimizer(model, cfg.train)
    twin = dict(other.named_parameters())
    groups = [{"params": [twin[n] for n, p in model.named_parameters() if any(p is q for q in g["params"])],
               "weight_decay": g["weight_decay"]} for g in fused.param_groups]
    plain = torch.optim.AdamW(groups, lr=cfg.train.lr, betas=cfg.train.betas)  # the default: foreach
    assert implementation(fused) == "fused" and implementation(plain) == "foreach"
    x, y = torch.randn(8, 3, 16, 16), torch.randint(0, 4, (8,))
    losses = {id(model): [], id(other): []}
    for step in range(20):
        for m, opt in ((model, fused), (other, plain)):
            loss = torch.nn.functional.cross_entropy(m(x), y)
            losses[id(m)].append(loss.item())
            loss.backward()
            opt.step()
            opt.zero_grad()
        if step == 0:  # one update: the same to float rounding (each moves a weight by about lr)
            for (name, a), b in zip(model.named_parameters(), other.parameters()):
                assert torch.allclose(a, b, rtol=0, atol=1e-7), name
    # Adam divides by sqrt(v): rounding differences grow where gradients are near 0, not the loss.
    assert losses[id(model)] == pytest.approx(losses[id(other)], rel=1e-3)


def test_checkpoint_of_an_older_format_is_refused_in_one_line(tmp_path):
    """A checkpoint of the scale-bank suite (format 1, no "format" key): its optimizer does not fit."""
    from suite.engine import checkpoint
    from suite.engine.optim import build_optimizer
    from suite.models import build_model

    cfg = tiny(**{"model.residual": "layerscale", "model.img_size": 16, "model.in_chans": 3, "model.num_classes": 4})
    model = build_model(cfg.model)
    opt = build_optimizer(model, cfg.train)
    path = tmp_path / "checkpoint.pt"
    checkpoint.save(path, "r1", model, opt, checkpoint.RunState())
    checkpoint.load(path, "r1", model, opt)  # this format loads
    old = torch.load(path, weights_only=True)
    del old["format"]
    torch.save(old, path)
    with pytest.raises(checkpoint.CheckpointError, match="checkpoint format 1 .*delete it to start this run from step 0"):
        checkpoint.load(path, "r1", model, opt)


def test_suite_train_on_a_disk_that_fills_up_ends_in_one_line(tmp_path, monkeypatch, capsys):
    """The checkpoint fails as torch.save fails on a full disk (a RuntimeError), then the run's traceback
    has no room in log.txt: one line and exit 2, not a traceback; the run has no summary (it runs again)."""
    import errno

    from suite import files
    from suite.cli import main
    from suite.engine import checkpoint

    def torch_save_on_a_full_disk(*args, **kwargs):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 94336 vs 94288")

    real_append = files.open_append

    def append(path):
        if path.name == "log.txt":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real_append(path)

    monkeypatch.setattr(checkpoint, "save", torch_save_on_a_full_disk)
    monkeypatch.setattr(files, "open_append", append)
    cfg = tiny(**{"train.steps": 4, "train.checkpoint_every": 2})
    args = [f"{k}={v}" for k, v in flatten(to_dict(cfg)).items()
            if k.split(".")[0] in ("data", "model", "train") and v is not None and not isinstance(v, list)]
    assert main(["train", *args, "device=cpu", "--no-progress", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: no space left on") and str(tmp_path / "run") in err[0]
    assert not (tmp_path / "run" / "summary.json").exists()


def test_a_run_that_cannot_fit_in_memory_is_refused_in_one_line_before_allocating(tmp_path, monkeypatch, capsys):
    """Params + activations + step log estimated before anything is allocated: a run needing more than the
    device has is one line with the estimate, exit 2 (it used to start, then crash or end `error`)."""
    from suite.cli import main
    from suite.config import memory_estimate
    from suite.engine import resources

    big = ["data.name=synthetic", "data.synthetic_img_size=64", "data.synthetic_train=4096", "model.patch_size=4",
           "model.dim=256", "model.depth=12", "train.batch_size=2048", "device=cpu"]
    need, _ = memory_estimate(load_config(None, big))
    monkeypatch.setattr(resources, "available_memory", lambda device: need / 2)
    assert main(["train", *big, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs at least" in err[0] and "GiB" in err[0] and "train.batch_size" in err[0]
    assert not (tmp_path / "run" / "config.yaml").exists()  # nothing ran
    monkeypatch.undo()
    assert resources.memory_problem(tiny(), torch.device("cpu")) is None  # a few MB: every machine has them


def test_train_out_refuses_a_folder_holding_another_configs_finished_run(tmp_path, capsys):
    from suite.cli import main

    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text(json.dumps({"schema": 1, "run_id": "0123456789ab", "status": "ok",
                                                  "started_at": "2026-12-01T10:00:00+00:00"}))
    assert main(["train", "--out", str(out), "train.steps=1", "data.name=digits", "model.patch_size=4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds the finished run 0123456789ab (ok, 2026-12-01T10:00:00+00:00) of another config" in err
    assert json.loads((out / "summary.json").read_text())["run_id"] == "0123456789ab"  # untouched


def test_overrides_after_options_and_ctrl_c_without_a_traceback(tmp_path):
    """`suite train --out DIR key=value` parses; Ctrl-C ends with one line and exit 130."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "suite", "train", "--out", str(out), "data.name=digits",
                             "model.patch_size=4", "model.depth=1", "model.dim=16", "model.heads=2",
                             "train.steps=1000000", "train.log_every=1", "train.eval_every=0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # as from a terminal: a test process may have come to ignore SIGINT (its
                            # children would inherit that, and Python then installs no Ctrl-C handler)
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not (out / "metrics.jsonl").exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert (out / "metrics.jsonl").exists(), proc.communicate()[1]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == (f"interrupted: {out} saved its last step; the same command resumes it "
                                            f"from there (Ctrl-C twice: stop at once, unsaved)")


def test_fp16_is_refused_where_there_is_no_fp16_training(tmp_path):
    from suite.config import ConfigError

    with pytest.raises(ConfigError, match="train.precision fp16: .* cuda only, not on cpu; use bf16 or fp32"):
        resolve_precision(tiny(**{"train.precision": "fp16"}), "cpu")
    s = train(tiny(**{"train.precision": "fp16"}), tmp_path)  # a library caller gets an `error` run
    assert s["status"] == "error" and "use bf16 or fp32" in s["error"]


def test_fp16_with_loss_scaling_trains_and_counts_skipped_steps(tmp_path, monkeypatch):
    """The fp16 path (autocast + GradScaler) run on the CPU, which torch supports but the suite does not
    offer (too slow to matter): it learns, and a step whose gradients overflow is skipped and counted,
    not taken for a non-finite divergence."""
    import suite.config

    monkeypatch.setattr(suite.config, "FP16_DEVICES", ("cuda", "cpu"))
    clean = train(tiny(**{"train.precision": "fp16", "train.steps": 30}), tmp_path / "a")
    assert (clean["status"], clean["train.precision"]) == ("ok", "fp16")
    assert clean["scaler_skipped_steps"] <= 2  # a step or two where the scale (from 2^16) overflows

    def overflow(out, step):  # the same logits, but gradients that overflow fp16 at steps 5 and 6
        if step not in (5, 6):
            return out
        out = out.float()
        return out + (out - out.detach()) * 1e30

    s = _poisoned_run(tmp_path / "b", tiny(**{"train.precision": "fp16", "train.steps": 30}), overflow)
    assert s["status"] == "ok" and s["scaler_skipped_steps"] >= 2
    s = _poisoned_run(tmp_path / "c", tiny(**{"train.precision": "fp16", "train.steps": 30,
                                              "train.scale_max_skips": 2}), overflow)
    assert (s["status"], s["diverged_reason"], s["diverged_step"]) == ("diverged", "scale_collapse", 6)


def test_the_log_evaluation_schedule():
    from suite.engine.loop import eval_due

    due = [s for s in range(1, 301) if eval_due(s, 50, "log")]
    assert due == [5, 10, 20, 40, 50, 100, 150, 200, 250, 300]
    assert [s for s in range(1, 301) if eval_due(s, 50, "fixed")] == [50, 100, 150, 200, 250, 300]
    assert [s for s in range(1, 100) if eval_due(s, 0, "log")] == []  # 0: only at the end, either way
    assert [s for s in range(1, 100) if eval_due(s, 0, "fixed")] == []


def test_a_log_schedule_run_evaluates_early(tmp_path):
    s = train(tiny(**{"train.eval_schedule": "log", "train.steps": 30, "train.eval_every": 20}), tmp_path)
    assert [r["step"] for r in metrics(tmp_path) if r["kind"] == "eval"] == [5, 10, 20, 30]
    assert s["steps_to_learn"] in (5, 10, 20, 30)


def test_a_held_out_split_too_small_to_pass_is_refused_before_any_run():
    """Two balanced classes, 6 validation images: 100% accuracy has p = 0.5^6 = 0.016 > 0.01, so every run
    would be `failed`; the config is refused instead, naming the size, the size that can pass and the key."""
    from suite.config import ConfigError

    small = {"data.synthetic_classes": 2, "data.synthetic_train": 60}
    with pytest.raises(ConfigError, match=r"data.val_fraction 0.1: the val split .* 6 images .* about 7 or more: "
                                          r"raise data.val_fraction to 0.12 or more"):
        tiny(**small)
    tiny(**small, **{"data.val_fraction": 0.12})
    with pytest.raises(ConfigError, match=r"the test split .* 6 images"):
        tiny(**small, **{"data.val_fraction": 0, "data.synthetic_test": 6})


def test_a_loaded_split_too_small_to_pass_is_refused_by_the_run(tmp_path):
    """Where the class counts are known only from the files (an ImageFolder), the run refuses it: `error`,
    never `failed`."""
    from suite.config import ConfigError
    from suite.data.bundle import TensorSplit
    from suite.engine.loop import check_held_out
    import torch

    class Bundle:
        val, test = TensorSplit(torch.zeros(6, 1, 2, 2, dtype=torch.uint8), torch.tensor([0, 1, 0, 1, 0, 1])), None

    with pytest.raises(ConfigError, match="holds 6 images .* needs about 7"):
        check_held_out(Bundle())
    Bundle.val = TensorSplit(torch.zeros(7, 1, 2, 2, dtype=torch.uint8), torch.tensor([0, 1, 0, 1, 0, 1, 0]))
    with pytest.raises(ConfigError):  # 4 of 7 in one class: 0.57^7 = 0.02
        check_held_out(Bundle())
    Bundle.val = TensorSplit(torch.zeros(8, 1, 2, 2, dtype=torch.uint8), torch.tensor([0, 1, 0, 1, 0, 1, 0, 1]))
    check_held_out(Bundle())

    class Folder(torch.utils.data.Dataset):  # an ImageFolder's validation split is a Subset of it
        targets = [0, 1] * 10

    Bundle.val = torch.utils.data.Subset(Folder(), [0, 1, 2, 3, 4, 5])
    with pytest.raises(ConfigError, match="holds 6 images"):
        check_held_out(Bundle())


def test_a_killed_fp16_run_resumes_with_its_loss_scale(tmp_path, monkeypatch):
    """The scaler's scale and growth counter come back from the checkpoint (the host's copy of them), so a
    resumed fp16 run repeats the unbroken one, skipped steps included (the fp16 path run on the CPU)."""
    import suite.config

    monkeypatch.setattr(suite.config, "FP16_DEVICES", ("cuda", "cpu"))
    cfg = tiny(**{"train.precision": "fp16", "train.checkpoint_every": 5, "train.steps": 20})
    full = train(cfg, tmp_path / "full")

    def kill(step):
        if step == 12:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(cfg, tmp_path / "killed", on_step=kill)
    resumed = train(cfg, tmp_path / "killed")
    for key in ("status", "final_train_loss", "test_acc", "steps_done", "scaler_skipped_steps"):
        assert resumed[key] == full[key], key
    assert metrics(tmp_path / "killed") == metrics(tmp_path / "full")


def test_fp16_on_a_cpu_is_one_line_from_the_cli(tmp_path, capsys):
    from suite.cli import main

    args = ["data.name=synthetic", "model.patch_size=4", "data.synthetic_img_size=8", "train.precision=fp16",
            "train.steps=3", "device=cpu"]
    assert main(["train", *args, "--out", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "train.precision fp16" in err and "use bf16 or fp32" in err
    ablation = tmp_path / "a.yaml"
    ablation.write_text("name: a\nbase: {data: {name: synthetic, synthetic_img_size: 8}, model: {patch_size: 4, "
                        "dim: 16, heads: 2, depth: 1}, train: {steps: 3, precision: fp16}}\n"
                        "variants: {preln: {model.residual: preln}}\nseeds: 1\n")
    assert main(["run", str(ablation), "--out", str(tmp_path / "r"), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "run 'preln seed=0': train.precision fp16" in err


def test_train_out_refuses_another_configs_unfinished_run_and_a_folder_no_run_wrote(tmp_path, capsys):
    """A killed, resumable run of another config lost its checkpoint and metrics to the next `suite train --out`
    (an outside review); a project folder's own config.yaml and summary.json were overwritten. Both are refused in
    one line, exit 2, before anything is written; this config's own unfinished run still resumes."""
    from suite.cli import main

    tiny = ["data.name=digits", "model.patch_size=4", "model.depth=1", "model.dim=16", "model.heads=2",
            "train.eval_every=0", "train.log_every=1"]
    killed = tmp_path / "killed"
    killed.mkdir()
    (killed / "config.yaml").write_text(dump_yaml(load_config(None, [*tiny, "train.steps=50"])))
    (killed / "checkpoint.pt").write_bytes(b"the weights of step 40")
    (killed / "metrics.jsonl").write_text('{"kind": "train", "step": 0}\n')
    assert main(["train", "--out", str(killed), *tiny, "train.steps=2", "train.lr=0.01"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds the unfinished run" in err and "checkpoint and metrics would be lost" in err
    assert (killed / "checkpoint.pt").read_bytes() == b"the weights of step 40"
    assert sorted(p.name for p in killed.iterdir()) == ["checkpoint.pt", "config.yaml", "metrics.jsonl"]
    # its own config resumes: config.yaml holds the shape the run took from its data (digits: 8 px, 1 channel,
    # 10 classes), which the config on the command line leaves None
    import dataclasses

    from suite import store

    mine = resolve_precision(load_config(None, [*tiny, "train.steps=50"]), "cpu")
    taken = dataclasses.replace(mine, model=dataclasses.replace(mine.model, img_size=8, in_chans=1, num_classes=10))
    (killed / "config.yaml").write_text(dump_yaml(taken))
    assert store.run_folder_problem(killed, mine) is None
    assert "another config" in store.run_folder_problem(killed, resolve_precision(
        load_config(None, [*tiny, "train.steps=51"]), "cpu"))

    project = tmp_path / "project"
    project.mkdir()
    (project / "config.yaml").write_text("my app config\n")
    assert main(["train", "--out", str(project), *tiny, "train.steps=2"]) == 2
    assert "holds a config.yaml that is not a run's" in capsys.readouterr().err
    (project / "config.yaml").unlink()
    (project / "notes.txt").write_text("mine\n")
    assert main(["train", "--out", str(project), *tiny, "train.steps=2"]) == 2
    assert "holds files that are not a run's (notes.txt)" in capsys.readouterr().err
    assert sorted(p.name for p in project.iterdir()) == ["notes.txt"]


def test_train_out_on_this_configs_finished_run_says_so_and_trains_nothing(tmp_path, capsys):
    """As `suite run` skips a finished run: the second `suite train` into the same folder keeps the first's result
    (a rerun with other threads could score differently and overwrite it)."""
    from suite.cli import main

    args = ["--out", str(tmp_path / "run"), "data.name=digits", "model.patch_size=4", "model.depth=1",
            "model.dim=16", "model.heads=2", "train.eval_every=0", "train.steps=2"]
    assert main(["train", *args]) == 0
    first = (tmp_path / "run" / "summary.json").read_bytes()
    capsys.readouterr()
    assert main(["train", *args]) == 0
    out, err = capsys.readouterr()
    assert "already finished" in err and "delete the folder to train it again" in err
    assert out.splitlines()[-1].split(":")[0] in ("ok", "failed", "diverged")
    assert (tmp_path / "run" / "summary.json").read_bytes() == first


@pytest.mark.parametrize("name, said", [("cifar10", "CIFAR-10 not found under"), ("cifar100", "CIFAR-100 not found"),
                                        ("imagefolder", "train not found")])
def test_train_with_its_dataset_missing_says_so_in_one_line_and_makes_no_folder(tmp_path, capsys, name, said):
    """It ended `error` with exit 1, two lines and a run folder holding an error summary; a sweep's preflight says it
    in one line, and now so does `suite train`, before anything is written."""
    from suite.cli import main

    out = tmp_path / "run"
    assert main(["train", f"data.name={name}", "model.patch_size=4", f"data.root={tmp_path / 'nowhere'}",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"data.name {name}: " in err and said in err
    assert not out.exists()


def test_device_name_records_the_threads_the_run_trains_with(tmp_path):
    """train.threads was set after the provenance was taken: a 1-thread run was recorded with the process's 2
    threads, so two runs that cannot repeat each other bit for bit looked alike."""
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        summary = train(tiny(**{"train.threads": 1, "train.steps": 2}), tmp_path / "a")
        assert ", 1 threads, " in summary["device_name"], summary["device_name"]
    finally:
        torch.set_num_threads(before)


def test_throughput_counts_the_images_a_step_trains_on(tmp_path):
    """A batch larger than the training split trains on the whole split each step; throughput counted the batch
    size, 19x the real rate in the review's case."""
    summary = train(tiny(**{"train.batch_size": 1024, "train.steps": 6}), tmp_path / "a")
    assert summary["train_size"] < 1024
    assert summary["throughput"] == pytest.approx(summary["train_size"] / (summary["step_time_ms"] / 1e3))
