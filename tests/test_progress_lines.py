"""suite.cli.progress_lines: what `suite train` prints without a terminal."""

from __future__ import annotations

import io
import json

from suite.cli.progress_lines import ProgressLines, last_loss, line


def test_a_line_has_the_step_the_loss_the_rate_and_the_time_left():
    assert line(120, 200, 4.0, (110, 1.23456)) == "step 120/200 (60%)  loss 1.235 (step 110)  4 steps/s  eta 0m20s"
    assert line(120, 200, 4.0, (120, 0.5)) == "step 120/200 (60%)  loss 0.5  4 steps/s  eta 0m20s"
    assert line(7, None, 2.5, None) == "step 7  2.5 steps/s"  # train.epochs: no total, no eta
    assert line(1, 10, None, None) == "step 1/10 (10%)"


def test_the_loss_is_the_last_logged_train_loss_read_from_the_tail(tmp_path):
    path = tmp_path / "metrics.jsonl"
    assert last_loss(path) is None
    records = [{"kind": "train", "step": 0, "loss": None}, {"kind": "train", "step": 10, "loss": 2.0},
               {"kind": "eval", "step": 10, "val_acc": 0.5}, {"kind": "train", "step": 20, "loss": 1.5}]
    path.write_text("\n".join(json.dumps(r) for r in records) + '\n{"kind": "train", "st')  # a line being written
    assert last_loss(path) == (20, 1.5)
    path.write_text(json.dumps(records[0]) + "\n")
    assert last_loss(path) is None


def test_lines_come_every_few_seconds_and_at_the_last_step(tmp_path):
    now = [100.0]
    out = io.StringIO()
    lines = ProgressLines(tmp_path, total=50, every_s=10, out=out, clock=lambda: now[0])
    for step in range(1, 51):  # 1 s a step; the first step only starts the clock (a resumed run starts late)
        now[0] += 1.0
        lines(step)
    printed = out.getvalue().splitlines()
    assert printed == [f"step {s}/50 ({2 * s}%)  1 steps/s  eta {'0m%02ds' % (50 - s)}" for s in (11, 21, 31, 41)] + [
        "step 50/50 (100%)  1 steps/s  eta 0m00s"]
