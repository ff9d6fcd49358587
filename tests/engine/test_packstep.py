"""A pack's step as one program: one graph with no breaks, no recompilation across steps, compiled as
eager, kept for the next pack of its shape, and a one-line fallback when CUDA graphs cannot be captured."""

from __future__ import annotations

import functools

import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters

from suite.config import load_config
from suite.data import PackStream, load_dataset
from suite.engine import pack as pack_module
from suite.engine.compiled import pack_members
from suite.engine.lifecycle import RunFolder
from suite.engine.loop import Training
from suite.engine.pack import Pack
from suite.engine.packstep import Program, attention, make_step

# One block: what these tests check (one graph, reuse, padding, the fall-backs) does not depend on the depth, and the
# compile time grows with it; the graph-break test traces two blocks.
BASE = {
    "data.name": "synthetic", "data.synthetic_train": 256, "data.synthetic_test": 64, "data.synthetic_img_size": 16,
    "data.synthetic_classes": 4, "model.patch_size": 4, "model.dim": 32, "model.heads": 2, "model.depth": 1,
    "model.residual": "layerscale", "train.steps": 20, "train.batch_size": 32, "train.warmup_steps": 3,
    "train.log_every": 5, "train.eval_every": 0, "device": "cpu",
}


def cfg(**overrides):
    return load_config(None, [f"{k}={v}" for k, v in {**BASE, **overrides}.items()])


def make_pack(tmp_path, n=3, **overrides) -> Pack:
    """A pack of ``n`` members (seeds 0.., rates 1e-3 x 2^i, warm-ups 3 + i), set up."""
    members, data = [], None
    for i in range(n):
        c = cfg(seed=i, **{"train.lr": 1e-3 * 2**i, "train.warmup_steps": 3 + i, **overrides})
        folder = RunFolder(c, tmp_path / str(i))
        c, _ = folder.start(c)
        data = data or load_dataset(c.data)
        training = Training(c, folder, data, member=i)
        with pack_members():
            training.setup()
        members.append(training)
    return Pack(members)


def batches(pack: Pack, start: int = 0, stop: int = 20):
    c = pack.members[0].cfg
    return PackStream(pack.members[0].data, c.train.batch_size, [m.cfg.seed for m in pack.members], "cpu", False,
                      c.data.device_max_mb, 0).batches(start, stop)


def run(pack: Pack, steps: int, poison_at: int | None = None) -> list[list]:
    """``steps`` pack steps (member 1's batch NaN at ``poison_at``); every member's (step, lr, loss, norm) rows."""
    rows: list[list] = [[] for _ in pack.members]
    for k, (x, y) in enumerate(batches(pack, 0, steps)):
        if k == poison_at:
            x = x.clone()
            x[1] = float("nan")
        pack.step(x, y)
        if len(pack.log) == pack.log.capacity or k == steps - 1:
            for i in range(len(pack.members)):
                rows[i] += pack.log.read(i)
    return rows


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_packed_step_is_one_graph_with_no_breaks(tmp_path, precision):
    """Forward, loss, backward, clipping, the step log, the skip mask and the AdamW update: one graph."""
    pack = make_pack(tmp_path, **{"train.precision": precision, "train.grad_clip": 1.0, "model.depth": 2})
    x, y = next(batches(pack))
    with attention():
        explained = torch._dynamo.explain(make_step(pack.spec))(*pack.state.args(), x, y)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons


def test_a_compiled_pack_steps_20_times_on_one_graph_and_as_the_eager_one(tmp_path):
    """Compiled (through AOTAutograd: the in-place updates functionalised), the step compiles once and
    never again over 20 steps (a recompilation would raise), writes the same step log as the eager
    step, and skips a member that went non-finite on the device as the eager one does."""
    torch._dynamo.reset()
    eager, compiled = make_pack(tmp_path / "eager"), make_pack(tmp_path / "compiled")
    compiled.program = Program(compiled.spec, "default", backend="aot_eager")
    counters.clear()
    x, y = next(batches(compiled))
    compiled.step(x, y)  # the compilation
    eager.step(x, y)
    assert counters["stats"]["unique_graphs"] == 1
    with torch._dynamo.config.patch(error_on_recompile=True):
        got = run(compiled, 19, poison_at=6)
    want = run(eager, 19, poison_at=6)
    assert counters["stats"]["unique_graphs"] == 1
    assert [[r[:2] for r in m] for m in got] == [[r[:2] for r in m] for m in want]  # steps, learning rates
    for g, w in zip(got, want):
        assert [v for r in g for v in r[2:]] == pytest.approx([v for r in w for v in r[2:]], rel=1e-5, nan_ok=True)
    assert compiled.log.bad.tolist() == eager.log.bad.tolist() == [0.0, 1.0, 0.0]
    # the models as functions (the key bias of attention, which moves the logits not at all, follows
    # float noise in its zero gradient, so the parameters are compared through the forward)
    with torch.no_grad():
        assert torch.allclose(compiled.forward(x), eager.forward(x), rtol=1e-4, atol=1e-5)
    assert torch.isfinite(compiled.state.flat).all()


def test_the_next_pack_of_the_same_shape_runs_the_compiled_step_it_left(tmp_path, monkeypatch):
    """A sweep worker trains pack after pack of one shape: the second pack's step compiles nothing (its
    members' set-up compiles no blocks and clears no cache either); a pack of another shape compiles its
    own step once, and the first shape's is still kept after it."""
    from suite.engine.compiled import compile_for_run
    from suite.engine.pack import train_pack

    monkeypatch.setattr(pack_module, "Program", functools.partial(Program, backend="aot_eager"))
    compile_for_run(torch.nn.Linear(2, 2), backend="eager")  # what an earlier solo run left: cleared
    counters.clear()
    compiled = {"train.compile": True}
    first = train_pack([cfg(seed=0, **compiled), cfg(seed=1, **compiled)], [tmp_path / "a0", tmp_path / "a1"])
    second = train_pack([cfg(seed=2, **compiled), cfg(seed=3, **{**compiled, "train.lr": 5e-3})],
                        [tmp_path / "b0", tmp_path / "b1"])
    assert counters["stats"]["unique_graphs"] == 1
    other = train_pack([cfg(seed=0, **{**compiled, "model.depth": 2})] * 2, [tmp_path / "c0", tmp_path / "c1"])
    assert counters["stats"]["unique_graphs"] == 2
    # issue 62: a worker keeps one program per shape for its life; back to the first shape compiles nothing
    again = train_pack([cfg(seed=4, **compiled), cfg(seed=5, **compiled)], [tmp_path / "d0", tmp_path / "d1"])
    assert counters["stats"]["unique_graphs"] == 2
    assert all(s["status"] in ("ok", "failed") and s["steps_done"] == 20 for s in first + second + other + again)
    assert {s["cuda_graphs"] for s in first + second + other + again} == {False}  # on a CPU: no CUDA graphs


def test_a_smaller_compiled_pack_is_padded_to_the_width_and_reuses_the_step(tmp_path, monkeypatch):
    """A sweep's last pack of a shape holds fewer runs than ``--pack``: padded with inert rows to the same
    width it runs the compiled step of the full packs (no second compile), and its members train exactly
    as in an unpadded pack."""
    from suite.engine.pack import train_pack

    monkeypatch.setattr(pack_module, "Program", functools.partial(Program, backend="aot_eager"))
    counters.clear()
    compiled = {"train.compile": True}
    train_pack([cfg(seed=s, **compiled) for s in range(3)], [tmp_path / f"a{s}" for s in range(3)], width=3)
    padded = train_pack([cfg(seed=5, **compiled), cfg(seed=6, **{**compiled, "train.lr": 5e-3})],
                        [tmp_path / "b0", tmp_path / "b1"], width=3)
    assert counters["stats"]["unique_graphs"] == 1
    eager = train_pack([cfg(seed=5), cfg(seed=6, **{"train.lr": 5e-3})], [tmp_path / "c0", tmp_path / "c1"], width=3)
    for p, e in zip(padded, eager):
        assert p["steps_done"] == e["steps_done"] == 20 and p["pack_size"] == 2
        assert p["final_train_loss"] == pytest.approx(e["final_train_loss"], rel=1e-4)


def test_where_cuda_graphs_cannot_be_captured_the_pack_says_why_in_one_line_and_runs_compiled(tmp_path):
    """On a CPU ``reduce-overhead`` has no CUDA graphs to capture: one line, then the step compiled
    without them. On CUDA a capture that fails (the compiler's reason, raised under
    ``cudagraph_or_error``) is said in one line and the step recompiled without them; the step
    that failed to capture runs again, so no step is lost."""
    torch._dynamo.reset()
    lines: list[str] = []
    pack = make_pack(tmp_path / "cpu", 2)
    Program(pack.spec, "reduce-overhead", warn=lines.append, backend="eager")
    assert len(lines) == 1 and "CUDA only" in lines[0] and "compiled without them" in lines[0]

    class NoCapture(Program):
        def _build(self, mode):
            if mode == "reduce-overhead":
                def fail(*args):
                    raise RuntimeError("backend='inductor' raised") from RuntimeError(
                        "skipping cudagraphs due to mutated inputs (2 instances)\nFound from: ...")
                return fail
            return super()._build(mode)

    eager, compiled = make_pack(tmp_path / "eager", 2), make_pack(tmp_path / "compiled", 2)
    compiled.program = NoCapture(compiled.spec, "reduce-overhead", warn=lines.append, backend="eager")
    compiled.program.mode = "reduce-overhead"  # as on CUDA, where it is kept
    compiled.program.fn = compiled.program._build("reduce-overhead")
    lines.clear()
    got, want = run(compiled, 3), run(eager, 3)
    assert lines == ["pack: the compiled step runs without CUDA graphs (skipping cudagraphs due to mutated inputs "
                     "(2 instances)); its host time per step is that of the compiled graph's kernel launches"]
    assert compiled.program.mode == "default"
    for g, w in zip(got, want):
        assert [v for r in g for v in r[2:]] == pytest.approx([v for r in w for v in r[2:]], rel=1e-5)


def test_only_a_cuda_graph_capture_failure_falls_back_to_no_graphs():
    """A step that fails for another reason is not recompiled without graphs: dynamo's hint to set
    capture_scalar_outputs mentions "capture" and is no capture failure."""
    from suite.engine.packstep import _capture_failure

    graphs = ["skipping cudagraphs due to mutated inputs (1 instances)", "disabling cudagraphs due to "
              "override_cudagraphs annotation", "CUDA error: operation not permitted when stream is capturing",
              "skipping cudagraph due to function 3 exceeding max re-recording limit"]
    others = ["Dynamic control flow is not supported; consider torch._dynamo.config.capture_scalar_outputs = True",
              "CUDA out of memory. Tried to allocate 2.00 GiB", "shape mismatch in the captured step"]
    assert all(_capture_failure(RuntimeError(m)) for m in graphs)
    assert not any(_capture_failure(RuntimeError(m)) for m in others)
    try:
        try:
            raise RuntimeError("skipping cudagraphs due to cpu device")
        except RuntimeError as inner:
            raise ValueError("the compiled step failed") from inner
    except ValueError as outer:
        assert _capture_failure(outer)  # found down the chain
