"""Every case of the hostile-input campaign (tests/hostile_cases.py) ends as it should: a one-line error
(exit 2) or handled (exit 0, the case's check holds); never a traceback, a hang, a silent
acceptance, a lost step or code run from a results folder. `.venv/bin/python tests/hostile_cases.py`
prints the same cases as a table. Most cases run in this process through ``suite.cli.main``; those
whose point is a real process (a time limit, a dying worker, a mounted disk, a memory limit) run in a
process of their own."""

from __future__ import annotations

import pytest

import hostile_cases as hostile  # beside this file; a case's own process is handed ``hostile._child`` by reference

CAN_MOUNT = hostile.can_mount()


@pytest.mark.parametrize("case", hostile.CASES, ids=lambda c: c.name)
def test_hostile_case(case, tmp_path):
    if case.needs_mount and not CAN_MOUNT:
        pytest.skip("needs root to mount a tmpfs (a small disk to fill, a read-only folder)")
    outcome = hostile.run_case(case, tmp_path)
    assert outcome.good, f"{outcome.verdict}: {outcome.detail}"
    assert outcome.verdict == ("clean error" if case.expect == "error" else "handled")


def test_the_campaign_can_fail(tmp_path, monkeypatch):
    """The classifier is not a rubber stamp: exit 0 where an error was due, a failed check, or a command
    that raises (caught in this process as in a fresh one) is bad."""
    silent = hostile.Case("valid file expected to fail", "meta", "error", lambda d: ["validate", str(hostile.SMOKE)])
    assert hostile.run_case(silent, tmp_path).verdict == "silently accepted"
    check = hostile.Case("a check that fails", "meta", "ok", lambda d: ["validate", str(hostile.SMOKE)],
                         lambda d, p: "the check found a problem")
    assert hostile.run_case(check, tmp_path).verdict == "wrong outcome"
    from suite.cli import validate

    def bug(args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(validate, "run", bug)  # a command with a bug: its traceback must be seen
    crash = hostile.Case("a command that raises", "meta", "error", lambda d: ["validate", str(hostile.SMOKE)])
    outcome = hostile.run_case(crash, tmp_path)
    assert (outcome.verdict, outcome.code, outcome.detail) == ("traceback", 1, "RuntimeError: a bug")


def test_a_case_in_its_own_process_is_killed_at_its_time_limit_and_keeps_its_exit_code(tmp_path):
    """The time limit is what turns a hang into a verdict; the exit code and output come back from the process."""
    hang = hostile.Case("watching forever", "hang", "error", lambda d: ["status", str(hostile._pending_sweep(d)),
                                                                       "--watch", "0.1"], process=True, timeout=3)
    outcome = hostile.run_case(hang, tmp_path / "hang")
    assert (outcome.verdict, outcome.code) == ("hang", None)
    error = hostile.Case("an error", "meta", "error", lambda d: ["status", str(d)], process=True, memory_mb=4096)
    (tmp_path / "error").mkdir()
    outcome = hostile.run_case(error, tmp_path / "error")
    assert (outcome.verdict, outcome.code) == ("clean error", 2) and "no ablation.yaml" in outcome.detail
