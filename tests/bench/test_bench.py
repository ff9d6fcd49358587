"""``suite bench`` and the CI gate: A/B statistics on hand-made inputs, tables, and the gate both ways.

The statistics and the gate's decision are pure functions, tested on hand-computed cases. Two tests
run the gate's own measuring functions for a few seconds: it must pass on the real LayerScale and
fail on a deliberately slowed one (extra passes over the activations after each LayerScale).
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
import torch

from suite.bench import gate as bench_gate
from suite.bench.measure import ArmResult, Timer, interleave, measure
from suite.bench.arms import BenchShape, arm_names, build_arm, check_arm, slow_down_layerscale
from suite.bench.gate import ReferencePath, gate, measure_residual, measure_step, residual_path
from suite.bench.report import build_rows, comparisons, efficiency, efficiency_table, markdown_table
from suite.bench.stats import RatioSummary, round_ratios, summarize
from suite.cli import main
from suite.config import TrainConfig
from suite.engine.optim import build_optimizer

TINY = BenchShape(depth=1, dim=32, heads=2, tokens=5, batch=2)


@pytest.fixture
def one_thread():
    """The gate's setting (bench_gate.THREADS), restored afterwards for the other tests."""
    before = torch.get_num_threads()
    torch.set_num_threads(bench_gate.THREADS)
    yield
    torch.set_num_threads(before)


# ----------------------------------------------------------------------------- statistics


def test_round_ratios_by_hand():
    candidate = np.array([[2.0, 4.0], [3.0, 3.0]])  # round means 3, 3
    baseline = np.array([[1.0, 1.0], [2.0, 4.0]])  # round means 1, 3
    np.testing.assert_allclose(round_ratios(candidate, baseline), [3.0, 1.0])


def test_round_ratios_rejects_mismatched_rounds():
    with pytest.raises(ValueError, match="same rounds"):
        round_ratios(np.ones((3, 2)), np.ones((4, 2)))


@pytest.mark.parametrize("n,ranks", [(1, None), (5, None), (6, (1, 6)), (10, (2, 9)), (15, (4, 12)), (20, (6, 15))])
def test_median_interval_is_the_order_statistics_by_hand(n, ranks):
    # n=10: 2 * P(Bin(10, 1/2) <= 1) = 2 * 11/1024 = 0.021 <= 0.05, but 2 * 56/1024 = 0.109 > 0.05 -> x_(2), x_(9).
    s = summarize(np.random.default_rng(n).permutation(np.arange(1.0, n + 1)))  # x_(k) = k
    assert (s.low, s.high) == ranks if ranks else math.isnan(s.low) and math.isnan(s.high)


def test_summarize_small_sample_has_no_interval():
    s = summarize(np.array([1.0, 1.1, 1.2]))
    assert s.median == pytest.approx(1.1) and math.isnan(s.low) and math.isnan(s.high) and s.n == 3


def test_ratio_summary_format():
    assert RatioSummary(1.018, 1.004, 1.031, 20).format() == "+1.8% [+0.4, +3.1]"


# ----------------------------------------------------------------------------- the gate's decision


def test_gate_passes_within_threshold():
    passed, msg = gate(np.full(20, 1.02), 0.05)
    assert passed and msg.startswith("PASS") and "+2.0%" in msg


def test_gate_fails_when_interval_excludes_threshold():
    ratios = np.linspace(1.08, 1.12, 20)  # every round 8-12% slower
    passed, msg = gate(ratios, 0.05)
    assert not passed and msg.startswith("FAIL") and "threshold" in msg


def test_gate_noise_alone_does_not_fail():
    # Median 6% above the baseline, but the interval reaches down to 1%: not significant.
    ratios = np.array([1.01, 1.02, 1.03, 1.04, 1.05, 1.06, 1.06, 1.07, 1.08, 1.09, 1.10, 1.11])
    passed, msg = gate(ratios, 0.05)
    assert passed and "noise" in msg


def test_gate_refuses_to_judge_too_few_rounds(tmp_path, capsys):
    # 5 rounds have no distribution-free 95% interval of the median: no verdict either way.
    assert bench_gate.min_rounds() == 6
    for ratios in (np.full(5, 1.5), np.full(5, 1.0), np.array([])):
        with pytest.raises(bench_gate.TooFewRounds, match="at least 6"):
            gate(ratios, 0.05)
    assert gate(np.full(6, 1.5), 0.05)[0] is False  # from 6 rounds on it judges
    assert main(["bench-check", "--step-rounds", "5", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--step-rounds 5" in err and "at least 6" in err
    assert not (tmp_path / "gate.json").exists()


def test_gate_cli_exit_codes(monkeypatch, tmp_path, capsys, one_thread):
    monkeypatch.setattr(bench_gate, "measure_step", lambda **kw: np.full(20, 1.01))
    monkeypatch.setattr(bench_gate, "measure_residual", lambda **kw: np.full(20, 1.30))
    assert main(["bench-check", "--out", str(tmp_path)]) == 1
    out = capsys.readouterr()
    assert "| residual | +30.0%" in out.out and "FAIL" in out.out and "bench-check FAILED" in out.err
    result = json.loads((tmp_path / "gate.json").read_text())
    assert result["passed"] is False and result["checks"]["step"]["passed"] is True
    report = (tmp_path / "gate.md").read_text()
    rounds = f"--step-rounds {bench_gate.STEP_ROUNDS} --residual-rounds {bench_gate.RESIDUAL_ROUNDS}"
    assert f"`suite bench-check {rounds} --threads 1 --out {tmp_path}`" in report
    assert "| residual | +30.0% [+30.0, +30.0] | +10.0% | FAIL |" in report
    monkeypatch.setattr(bench_gate, "measure_residual", lambda **kw: np.full(20, 1.0))
    assert main(["bench-check", "--out", str(tmp_path)]) == 0
    # its first line repeats the run: a threshold that made it pass is in it (it was left out)
    monkeypatch.setattr(bench_gate, "measure_step", lambda **kw: np.full(20, 1.06))
    assert main(["bench-check", "--step-threshold", "0.1", "--out", str(tmp_path)]) == 0
    assert f"`suite bench-check --step-threshold 0.1 {rounds} --threads 1 --out {tmp_path}`" in \
        (tmp_path / "gate.md").read_text()


# ----------------------------------------------------------------------------- arms and shapes


@pytest.mark.parametrize("tokens,img", [(65, 128), (197, 224), (2, 16)])
def test_tokens_count_the_class_token(tokens, img):
    assert BenchShape(tokens=tokens).img_size == img


def test_tokens_must_be_square_plus_one():
    with pytest.raises(ValueError, match="65 = 8x8"):
        BenchShape(tokens=64).img_size  # noqa: B018


def test_unknown_arm_suggests_a_name():
    with pytest.raises(ValueError, match="did you mean 'layerscale'"):
        check_arm("layerscal")


def _muls(out: torch.Tensor) -> int:
    """Multiplies in the autograd graph of ``out``."""
    seen, todo, n = set(), [out.grad_fn], 0
    while todo:
        fn = todo.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        n += type(fn).__name__ == "MulBackward0"
        todo += [f for f, _ in fn.next_functions]
    return n


def test_slow_layerscale_computes_the_same_function_with_more_passes():
    torch.manual_seed(0)
    model = build_arm("layerscale", TINY).eval()
    x = torch.randn(2, 3, TINY.img_size, TINY.img_size)
    before = model(x)
    after = slow_down_layerscale(model, 3)(x)
    torch.testing.assert_close(before, after)
    assert _muls(after) - _muls(before) == 3 * 2 * TINY.depth  # 3 passes after each of 2 LayerScales per block
    with pytest.raises(ValueError, match="no LayerScale"):
        slow_down_layerscale(build_arm("preln", TINY))


def test_reference_path_has_our_gradients_too():
    """The gate's bar computes our residual path's backward, not just its forward."""
    torch.manual_seed(0)
    ours = residual_path(build_arm("layerscale", TINY))
    ref = ReferencePath([g for b in ours for g in (b.ls1.gamma, b.ls2.gamma)])
    x = torch.randn(2, TINY.tokens, TINY.dim)
    ours(x).square().sum().backward()
    ref(x).square().sum().backward()
    mine = [g.grad for b in ours for g in (b.ls1.gamma, b.ls2.gamma)]
    for a, b in zip(mine, [g.grad for g in ref.gammas]):
        torch.testing.assert_close(a, b)


def test_the_frozen_arm_has_no_gamma_gradient():
    model = build_arm("layerscale:frozen", TINY)
    assert not [n for n, _ in model.named_parameters() if n.endswith("gamma")]
    assert sum(n.endswith("gamma") for n in model.state_dict()) == 2 * TINY.depth


def test_reference_path_matches_ours():
    torch.manual_seed(0)
    ours = residual_path(build_arm("layerscale", TINY))
    for p in ours.parameters():
        p.data.uniform_(-1, 1)  # not the init: each γ must meet its own branch
    ref = ReferencePath([g for b in ours for g in (b.ls1.gamma, b.ls2.gamma)])
    x = torch.randn(2, TINY.tokens, TINY.dim)
    torch.testing.assert_close(ours(x), ref(x))


# ----------------------------------------------------------------------------- measurement and tables


class _FakeTimer(Timer):
    """Records the visiting order instead of timing."""

    def __call__(self, fn, calls):
        fn()
        return 1.0


def test_interleave_visits_in_palindromes():
    seen: list[str] = []
    fns = {n: (lambda n=n: seen.append(n)) for n in "ABC"}
    times = interleave(fns, rounds=4, timer=_FakeTimer(), seed=1)
    assert all(t.shape == (4, 2) for t in times.values())
    for r in range(4):
        rnd = seen[6 * r: 6 * r + 6]
        assert rnd == rnd[::-1] and sorted(rnd) == sorted("ABCABC")


def test_interleave_collects_each_rounds_garbage_and_never_inside_a_timed_block():
    """A collection after each round (none lands inside a timed block) of the round's young objects only: a full one
    scans torch's objects too, 0.1 s or more each, and the gate has 90 rounds. The collector is on afterwards."""
    import gc

    collected = []

    def seen(phase, info):
        if phase == "start":
            collected.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        interleave({"A": lambda: collected.append("timed")}, rounds=3, timer=_FakeTimer())
    finally:
        gc.callbacks.remove(seen)
    assert collected == [2] + ["timed", "timed", 1] * 3 and gc.isenabled()


def _arm(train: float, params: int, saved: int) -> ArmResult:
    return ArmResult(train_s=np.full((6, 2), train), forward_s=None, params=params, saved_bytes=saved, peak_bytes=None)


def test_rows_by_hand():
    results = {"preln": _arm(1.0, 100, 0), "layerscale": _arm(1.02, 110, 2**20),
               "timm-preln": _arm(1.0, 100, 0), "timm-layerscale": _arm(1.04, 110, 2**20)}
    rows = {r["label"]: r for r in build_rows(results)}
    assert rows["layerscale"]["train_ratio"] == pytest.approx(1.02)
    assert rows["layerscale"]["param_delta"] == 10 and rows["layerscale"]["saved_delta_mib"] == 1.0
    assert rows["timm-layerscale"]["train_ratio"] == pytest.approx(1.04)
    assert rows["layerscale (ours/timm)"]["train_ratio"] == pytest.approx(1.02 / 1.04)
    assert rows["layerscale (overhead vs timm's)"]["train_ratio"] == pytest.approx(1.02 / 1.04)
    assert rows["layerscale"]["forward_ratio"] is None
    table = markdown_table(build_rows(results))
    assert "| layerscale | layerscale / preln | 1020.0 | +2.0% [+2.0, +2.0] | n/a |" in table


def test_comparisons_need_their_arms():
    labels = [c.label for c in comparisons(["preln", "rezero", "timm-preln"])]
    assert labels == ["rezero", "preln (ours/timm)"]


def test_measure_tiny_shape_gives_finite_times():
    res = measure({n: (lambda n=n: build_arm(n, TINY)) for n in ("preln", "layerscale")}, TINY, rounds=2, warmup=1)
    for r in res.values():
        assert r.train_s.shape == (2, 2) and np.all(np.isfinite(r.train_s)) and np.all(r.train_s > 0)
        assert r.forward_s.shape == (2, 2) and r.peak_bytes is None
    assert res["layerscale"].params - res["preln"].params == 2 * TINY.dim
    # LayerScale keeps each branch output for γ's gradient: two (B, N, C) fp32 tensors per block.
    assert res["layerscale"].saved_bytes - res["preln"].saved_bytes == 2 * 4 * TINY.batch * TINY.tokens * TINY.dim


def test_bench_cli_writes_three_files(tmp_path, one_thread):
    args = ["bench", "--schemes", "layerscale", "timm-preln", "timm-layerscale", "--depth", "1", "--dim", "32",
            "--heads", "2", "--tokens", "5", "--batch", "2", "--rounds", "6", "--out", str(tmp_path)]
    assert main(args) == 0
    data = json.loads((tmp_path / "overhead.json").read_text())  # strict JSON: no NaN
    assert data["settings"]["arms"] == ["preln", "layerscale", "timm-preln", "timm-layerscale"]
    assert data["command"].startswith("suite bench --schemes layerscale timm-preln timm-layerscale --depth 1")
    assert "layerscale (ours/timm)" in (tmp_path / "overhead.md").read_text()
    assert (tmp_path / "overhead.csv").read_text().startswith("label,kind,")
    assert data["command"].endswith("--gemm 1024") and "gemm" not in {r["label"] for r in data["rows"]}
    speed = {r["arm"]: r for r in data["efficiency"]}
    assert set(speed) == set(data["settings"]["arms"])
    assert all(r["gflops"] > 0 and 0 < r["of_gemm"] for r in speed.values())  # the arithmetic: test_efficiency_by_hand
    assert "of GEMM" in (tmp_path / "overhead.md").read_text()


def test_efficiency_by_hand():
    results = {"preln": _arm(0.002, 100, 0), "gemm": _arm(0.01, 0, 0)}
    (row,) = efficiency(results, step_flops=2 * 10**8, gemm=1000)  # 2e9 FLOP matmul in 10 ms: 200 GFLOP/s
    assert row["arm"] == "preln" and row["gflops"] == pytest.approx(100.0) and row["gemm_gflops"] == pytest.approx(200.0)
    assert row["of_gemm"] == pytest.approx(0.5)
    assert "| preln | 2.0 | 100.0 | 50% |" in efficiency_table([row], 1000)
    assert [c.label for c in comparisons(["preln", "layerscale", "gemm"])] == ["layerscale"]


def test_bench_cli_rejects_bad_tokens_and_arms(capsys):
    assert main(["bench", "--tokens", "64"]) == 2
    assert main(["bench", "--schemes", "layerscal"]) == 2
    assert "did you mean" in capsys.readouterr().err


def test_default_arms_cover_every_scheme_timm_and_the_cast_layerscale():
    from suite.registry import SCHEMES

    assert set(SCHEMES) | {"timm-preln", "timm-layerscale", "layerscale:cast"} == set(arm_names())
    assert arm_names(include_timm=False)[-1] == "layerscale:cast"


# ----------------------------------------------------------------------------- the gate, both ways (real timing)
# Marked bench: `make bench` runs them; CI times the real gate once, in `make bench-check`.

GATE_TEST_SHAPE = BenchShape(depth=4, dim=192, heads=3, tokens=65, batch=4)


def _slowed(passes: int):
    return lambda: slow_down_layerscale(build_arm("layerscale", GATE_TEST_SHAPE), passes)


@pytest.mark.bench
def test_gate_passes_on_the_real_layerscale(one_thread):
    step = bench_gate.check(measure_step, bench_gate.STEP_THRESHOLD, "step", shape=GATE_TEST_SHAPE, rounds=16)
    residual = bench_gate.check(measure_residual, bench_gate.RESIDUAL_THRESHOLD, "residual",
                                shape=GATE_TEST_SHAPE, rounds=20)
    assert step[0], step[1]
    assert residual[0], residual[1]


@pytest.mark.bench
def test_gate_fails_on_a_slowed_layerscale(one_thread):
    # The step check gets 60 extra passes per residual add (about +35%, far beyond noise: 12 passes
    # measured +7.4% [+4.9, +8.6] on a busy 2-core runner, too close to the 5% threshold to fail
    # reliably); the residual check a single extra pass, the regression it exists for. One
    # measurement each, no second try.
    step = bench_gate.check(measure_step, bench_gate.STEP_THRESHOLD, "step", shape=GATE_TEST_SHAPE, rounds=16,
                            candidate=_slowed(60), confirm=False)
    # The residual check at the gate's own shape (depth 12), as CI runs it: one extra pass measures
    # about +48% there (suite bench-check --slowdown 1). At depth 4 Python overhead dilutes it to
    # +14% to +18%, too close to the 10% threshold to fail reliably.
    residual = bench_gate.check(measure_residual, bench_gate.RESIDUAL_THRESHOLD, "residual",
                                shape=bench_gate.GATE_SHAPE, rounds=40,
                                candidate=lambda: slow_down_layerscale(build_arm("layerscale", bench_gate.GATE_SHAPE), 1),
                                confirm=False)
    assert not step[0], step[1]
    assert not residual[0], residual[1]


@pytest.mark.bench
def test_ablation_step_check_both_ways(one_thread):
    """At the default ablation's shape the step check passes the real code (the plain LayerScale, a few
    per cent) and fails 8 extra passes per residual add against its 8% threshold."""
    at = bench_gate.ABLATION_SHAPE
    real = bench_gate.check(measure_step, bench_gate.ABLATION_STEP_THRESHOLD, "ablation-step", shape=at, rounds=16)
    slow = bench_gate.check(measure_step, bench_gate.ABLATION_STEP_THRESHOLD, "ablation-step", shape=at, rounds=16,
                            candidate=lambda: slow_down_layerscale(build_arm("layerscale", at), 8), confirm=False)
    assert real[0], real[1]
    assert not slow[0], slow[1]


# ----------------------------------------------------------------------------- CUDA

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.cuda
@cuda
@pytest.mark.parametrize("compile", [False, True])
def test_measure_on_cuda_bf16(compile):
    res = measure({n: (lambda n=n: build_arm(n, TINY)) for n in ("preln", "layerscale")}, TINY, device="cuda",
                  dtype="bf16", compile=compile, rounds=2, warmup=2, steps=2)
    for r in res.values():
        assert np.all(np.isfinite(r.train_s)) and np.all(r.train_s > 0) and r.peak_bytes > 0


@pytest.mark.cuda
@cuda
@pytest.mark.parametrize("arm", arm_names())
def test_training_step_never_waits_for_the_host_on_cuda(arm, sync_free):
    """After its first step, a bf16 step with fused AdamW (what suite bench times, and what a run does
    between two log reads) only queues work: no scheme reads a value back or copies from the host."""
    model = build_arm(arm, TINY).cuda().train()
    opt = build_optimizer(model, TrainConfig())
    x = torch.randn(TINY.batch, 3, TINY.img_size, TINY.img_size, device="cuda")
    y = torch.randint(0, TINY.num_classes, (TINY.batch,), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()  # creates AdamW's state
    with sync_free():
        step()
        step()
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_throughput_arms_train_real_runs_and_report_runs_per_hour(tmp_path):
    from suite.bench.throughput import Arm, markdown, measure_throughput, write_outputs

    base = {"data": {"name": "synthetic", "synthetic_train": 128, "synthetic_test": 32, "synthetic_img_size": 8},
            "model": {"patch_size": 4, "dim": 16, "heads": 2, "depth": 1},
            "train": {"steps": 5, "batch_size": 16, "warmup_steps": 1, "log_every": 5, "eval_every": 0}}
    rows = measure_throughput([Arm("solo", 1, 1), Arm("co-located 2", 2, 1), Arm("packed 2", 1, 1, 2)], runs=2,
                              device="cpu", base=base)
    assert [r["arm"] for r in rows] == ["solo", "co-located 2", "packed 2"] and rows[0]["speedup"] == 1.0
    assert rows[2]["pack"] == 2
    for r in rows:
        assert r["runs"] == 2 and r["steps"] == 5 and r["wall_s"] > 0 and "error" not in r["statuses"]
        assert r["runs_per_hour"] > 0
    meta = {"command": "suite bench --throughput", "shape": "tiny",
            "provenance": {"device_name": "cpu", "torch_version": "x", "git_commit": "y", "started_at": "z"}}
    paths = write_outputs(tmp_path, rows, meta)
    assert [p.name for p in paths] == ["throughput.csv", "throughput.md", "throughput.json"]
    assert "| co-located 2 | 2 x 1 | 1 | 2 | 5 |" in markdown(rows, meta)


def test_throughput_co_located_1_is_one_line(tmp_path, capsys):
    from suite.cli import main

    assert main(["bench", "--throughput", "--co-located", "1", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--co-located 1: must be >= 2" in err


def test_compiled_throughput_arms_compile_from_empty_caches_and_report_their_step(tmp_path, monkeypatch):
    """``--compile`` adds each arm again, compiled: its runs train with ``train.compile: true`` (their
    summaries say so), inductor writes into the command's own fresh cache (the caller's setting is
    back afterwards), and each row carries the median step beside the wall time."""
    from suite.bench import throughput
    from suite.bench.throughput import default_arms, markdown, measure_throughput

    arms = default_arms("cpu", [2], [4], cores=2, compiled=True)
    assert [a.name for a in arms] == ["solo", "co-located 2", "packed 4", "solo compiled", "co-located 2 compiled",
                                      "packed 4 compiled"]
    assert [a.compile for a in arms] == [False] * 3 + [True] * 3 and arms[5].pack == 4 and arms[4].threads == 1

    seen = []
    real = throughput.median_step_ms

    def spy(folder):  # the run folders still exist here, inside the command's temporary folder
        seen.append(([json.loads(p.read_text())["train.compile"] for p in sorted(folder.glob("runs/*/summary.json"))],
                     os.environ["TORCHINDUCTOR_CACHE_DIR"]))
        return real(folder)

    monkeypatch.setattr(throughput, "median_step_ms", spy)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
    base = {"data": {"name": "synthetic", "synthetic_train": 64, "synthetic_test": 16, "synthetic_img_size": 8},
            "model": {"patch_size": 4, "dim": 8, "heads": 2, "depth": 1},
            "train": {"steps": 3, "batch_size": 8, "warmup_steps": 1, "log_every": 3, "eval_every": 0,
                      "timing_warmup_steps": 1}}
    rows = measure_throughput([arms[0], arms[3]],
                              runs=1, device="cpu", base=base)
    assert [s[0] for s in seen] == [[False], [True]]
    cache = seen[1][1]
    assert cache != str(tmp_path / "mine") and cache.endswith("compile-cache")
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "mine")
    assert [r["compile"] for r in rows] == [False, True] and all(r["step_ms"] > 0 for r in rows)
    meta = {"command": "suite bench --throughput --compile", "shape": "tiny",
            "provenance": {"device_name": "cpu", "torch_version": "x", "git_commit": "y", "started_at": "z"}}
    table = markdown(rows, meta)
    assert "eager and compiled" in table and "empty compile caches" in table
    assert f"| solo compiled | 1 x 2 | 1 | 1 | 3 | {rows[1]['wall_s']:.1f} | {rows[1]['step_ms']:.1f} |" in table


def test_pack_phases_splits_each_runs_wall_time_and_counts_a_steps_operators(tmp_path):
    from suite.bench import packphases

    result = packphases.measure(2, 4)
    for arm, runs in (("solo", 1), ("pack", 2)):
        r = result[arm]
        assert r["runs"] == runs and set(r["phases_per_run_s"]) == set(packphases.ORDER)
        assert sum(r["phases_per_run_s"].values()) == pytest.approx(r["wall_per_run_s"])
        assert all(v >= 0 for k, v in r["phases_per_run_s"].items() if k != "other") and r["phases_per_run_s"]["steps"] > 0
    assert 0 < result["solo"]["step_ops"] < result["pack"]["step_ops"]  # vmap dispatches more than one solo step
    text = packphases.markdown(result, "# t")
    assert "| steps |" in text and "pack of 2" in text
    assert main(["bench", "--pack-phases", "1", "--out", str(tmp_path)]) == 2
