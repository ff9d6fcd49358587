"""The GPU path's device check (scripts/device_check.py) runs end to end on the CPU, and a phase that fails
fails alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "device_check.py"
PHASES = ["env", "solo", "pack", "bf16", "pack-compiled", "pack-reuse", "solo-compiled", "overhead-eager",
          "overhead-compiled", "kernels-eager", "kernels-compiled", "study"]


def test_the_dry_run_takes_every_phase_and_writes_each_line(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--dry"], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [json.loads(line) for line in (tmp_path / "device_check.jsonl").read_text().splitlines()]
    assert [r["phase"] for r in rows] == PHASES and all(r["ok"] for r in rows)
    by = {r["phase"]: r for r in rows}
    assert by["pack-compiled"]["graphs"] == 1 and by["pack-compiled"]["graph_breaks"] == 0
    assert by["pack-reuse"]["new_graphs"] == 0  # a smaller pack, padded: the same compiled step
    assert by["pack"]["vs_solo_loss"]["max_rel"] < 1e-4  # fp32 on a CPU: the pack is the solo run
    md = (tmp_path / "device_check.md").read_text()
    assert all(f"- {p}: ok" in md for p in PHASES)
    assert proc.stdout.splitlines()[-1].startswith("device check: all phases ok")
    # hostile round six: no line says "ok, failed" or "[nan, nan]" without saying why
    assert "ok, failed" not in md and "nan" not in md and "no interval: too few rounds" in md
    assert "run failed (expected: a dry run's steps are too few to learn" in md


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the line a machine without CUDA gets")
def test_without_cuda_it_says_so_in_one_line(tmp_path, capsys):
    # in this process (the dry run above runs the script as a program): a new interpreter costs 4 s for one line
    assert _script().main([str(tmp_path)]) == 1
    assert capsys.readouterr().out.strip().splitlines() == [
        "device check: torch sees no CUDA device (torch.cuda.is_available() is False); --dry runs it on the CPU"]


def _script():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import device_check
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return device_check


def test_losses_that_scatter_both_ways_are_the_same_runs_and_a_shift_or_an_outlier_is_not():
    """The compiled pack's 16 seeds on the H200 ended within 5.4% of the eager pack's, both ways (TF32
    rounding grows over 100 steps): that passes; the same scatter moved 3% one way, or one seed 40% off, fails."""
    same_losses = _script().same_losses
    ref = [{"final_train_loss": 1.0 + 0.05 * i} for i in range(16)]
    scatter = [0.054, -0.04, 0.03, -0.05, 0.01, -0.02, 0.045, -0.035, 0.0, 0.02, -0.01, 0.025, -0.03, 0.015, -0.015, 0.005]

    def runs(shift=0.0, outlier=0.0):
        return [{"final_train_loss": r["final_train_loss"] * (1 + d + shift + (outlier if i == 3 else 0.0))}
                for i, (r, d) in enumerate(zip(ref, scatter))]

    assert same_losses(runs(), ref)["problem"] is None
    assert same_losses(runs(shift=0.03), ref)["problem"].startswith("shifted one way")
    assert same_losses(runs(outlier=0.4), ref)["problem"].startswith("one seed off by more than 25%")
    assert same_losses([{"final_train_loss": float("nan")}] + runs()[1:], ref)["problem"].startswith("a loss is missing")
    same = same_losses(ref, ref)  # a path bit-identical to its reference (dynamo's eager backends on torch 2.11)
    assert same["problem"] is None and "nan" not in same["line"] and "identical" in same["line"]
    assert same_losses(runs(), [])["pairs"] == 0


def test_a_phase_that_raises_fails_alone_and_is_written(tmp_path):
    device_check = _script()
    check = device_check.Check(tmp_path, dry=True)
    assert check.phase("broken", lambda: 1 / 0) is None
    assert check.phase("fine", lambda: (True, "good", {"x": 1})) == {"x": 1}
    assert check.failed == ["broken"]
    assert (tmp_path / "device_check.md").read_text().splitlines()[-2:][0].startswith(
        "- broken: FAIL, ZeroDivisionError: division by zero")


def test_an_out_that_is_a_file_is_one_line_exit_2(tmp_path, capsys):
    (tmp_path / "taken").write_text("")
    assert _script().main([str(tmp_path / "taken"), "--dry"]) == 2
    out, err = capsys.readouterr()
    assert err == ""
    assert out.strip().splitlines() == [f"device check: {tmp_path / 'taken'}: cannot write there (File exists); "
                                                f"pass a folder"]


def test_a_link_planted_in_out_is_replaced_never_written_through(tmp_path):
    """Issue 61: OUT/device_check.md planted as a link to an outside file had that file overwritten."""
    device_check = _script()
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    for name in ("device_check.md", "device_check.jsonl"):
        (out / name).symlink_to(outside)
    check = device_check.Check(out, dry=True)
    check.phase("fine", lambda: (True, "good", {"x": 1}))
    assert outside.read_text() == "precious"
    assert not (out / "device_check.md").is_symlink() and "- fine: ok" in (out / "device_check.md").read_text()


def _row(ratio, low, high):
    return {"train_ratio": ratio, "train_low": low, "train_high": high, "train_ms": 1.0, "baseline_train_ms": 1.0}


def test_the_overhead_phases_judge_compiled_layerscale_against_the_floor_and_ours_against_timms():
    judge = _script().judge
    vs_timm = "layerscale (overhead vs timm's)"
    at_floor = {"layerscale": _row(1.010, 1.004, 1.016), vs_timm: _row(0.99, 0.97, 1.01)}
    assert judge(at_floor, compiled=True) is None and judge(at_floor, compiled=False) is None
    past = {**at_floor, "layerscale": _row(1.030, 1.024, 1.036)}  # more than 2 points past x1.005
    assert "past the floor" in judge(past, compiled=True) and judge(past, compiled=False) is None  # eager: reported only
    wide = {**at_floor, "layerscale": _row(1.010, 0.98, 1.05)}  # the committed compiled interval was 12 points wide
    assert "wider than the 2-point margin" in judge(wide, compiled=True)
    dearer = {**at_floor, vs_timm: _row(1.05, 1.02, 1.08)}  # ours costs more than timm's beyond the interval
    assert "more than timm's" in judge(dearer, compiled=False) and "more than timm's" in judge(dearer, compiled=True)


def test_kernel_differences_are_the_largest_first_and_a_kernel_on_one_side_only_counts_from_zero():
    from suite.bench.kernels import differences, markdown

    base = {"gemm": 100.0, "add": 10.0, "gone": 5.0}
    arm = {"gemm": 101.0, "add": 10.0, "mul_fp32": 20.0}
    assert differences(arm, base) == [("mul_fp32", 0.0, 20.0, 20.0), ("gone", 5.0, 0.0, -5.0), ("gemm", 100.0, 101.0, 1.0)]
    assert differences(arm, base, top=1) == [("mul_fp32", 0.0, 20.0, 20.0)]
    text = markdown({"preln": {"kernels": base, "ops": {}}, "layerscale": {"kernels": {**arm, "a|b`c": 1.0}, "ops": {}}}, "eager")
    assert "132 µs per step against 115 (+17 µs, +14.8%)" in text and "`a/b'c`" in text  # a name cannot break the table


def test_a_phase_that_does_not_exist_is_one_line_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as done:
        _script().main([str(tmp_path), "--dry", "--phases", "bogus"])
    out, err = capsys.readouterr()
    assert done.value.code == 2 and out == ""
    assert err.count("\n") == 1 and "--phases: invalid choice: 'bogus'" in err
