"""Claims on runs: one holder, leases, take-over of a dead worker's run, attempts; clocks are injected."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from suite.sweep import claims


def later(seconds: float):
    """A clock ``seconds`` ahead of the file server's: every claim looks that much older."""
    return lambda: time.time() + seconds


def _holder(out, run_id: str) -> str | None:
    """The owner id in ``run_id``'s claim file, or None when nobody holds it."""
    return claims.read(claims.claim_path(out, run_id)).get("owner")


def test_only_one_worker_holds_a_run(tmp_path):
    first = claims.try_claim(tmp_path, "abc", lease_s=60)
    assert first is not None and first.held() and first.attempt == 1
    assert claims.try_claim(tmp_path, "abc", lease_s=60) is None  # a live claim is respected
    assert _holder(tmp_path, "abc") == claims.owner_id()
    first.release()
    assert _holder(tmp_path, "abc") is None
    assert claims.try_claim(tmp_path, "abc", lease_s=60) is not None


def test_claims_are_json_records(tmp_path):
    mine = claims.try_claim(tmp_path, "abc", lease_s=60)
    record = json.loads(mine.path.read_text())
    assert record["pid"] == os.getpid() and record["token"] == mine.token and record["attempt"] == 1


def test_an_expired_claim_is_taken_over_and_its_owner_learns_it_lost(tmp_path):
    dead = claims.try_claim(tmp_path, "abc", lease_s=5)
    assert claims.try_claim(tmp_path, "abc", lease_s=5, now=later(4)) is None  # within the lease
    assert claims.try_claim(tmp_path, "abc", lease_s=5, take_over=False, now=later(6)) is None
    thief = claims.try_claim(tmp_path, "abc", lease_s=5, now=later(6))  # not renewed for 6 s
    assert thief is not None and thief.held() and thief.attempt == 2
    assert not dead.held() and not dead.renew()  # the old owner must stop its run
    dead.release()  # and its release does not drop the new owner's claim
    assert thief.held()
    assert sorted(p.name for p in (tmp_path / claims.CLAIMS).iterdir()) == ["abc.json"]  # nothing left aside


def test_renewing_keeps_a_claim_alive(tmp_path):
    mine = claims.try_claim(tmp_path, "abc", lease_s=5)
    then = time.time() - 6
    os.utime(mine.path, (then, then))  # not renewed for 6 s
    assert mine.renew()
    assert claims.try_claim(tmp_path, "abc", lease_s=5) is None


def test_a_claim_whose_process_is_gone_on_this_host_is_dead_at_once(tmp_path):
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    mine = claims.try_claim(tmp_path, "abc", lease_s=600)
    record = json.loads(mine.path.read_text())
    mine.path.write_text(json.dumps({**record, "pid": int(child.stdout), "token": "theirs"}))
    assert claims.dead(mine.path, 600) is True
    taken = claims.try_claim(tmp_path, "abc", lease_s=600)
    assert taken is not None and taken.attempt == 2


def test_expire_keeps_the_attempt_count_and_clear_resets_it(tmp_path):
    first = claims.try_claim(tmp_path, "abc", lease_s=600)
    claims.expire(tmp_path, ["abc"])
    second = claims.try_claim(tmp_path, "abc", lease_s=600)
    assert not first.held() and second.attempt == 2
    claims.clear(tmp_path, ["abc"])
    assert claims.try_claim(tmp_path, "abc", lease_s=600).attempt == 1


def test_heartbeat_renews_and_reports_a_lost_claim(tmp_path):
    beat = claims.Heartbeat(lease_s=60, start=False)  # beats by hand: no thread, no timing
    mine = claims.try_claim(tmp_path, "abc", lease_s=60)
    beat.hold(mine)
    then = time.time() - 100
    os.utime(mine.path, (then, then))
    beat.beat()
    assert claims.try_claim(tmp_path, "abc", lease_s=60) is None and not beat.lost.is_set()  # renewed
    mine.path.write_text(json.dumps({"owner": "someone", "token": "theirs"}))  # taken over
    beat.beat()
    assert beat.lost.is_set()
    beat.hold(None)  # a released claim is not lost
    assert not beat.lost.is_set()
    beat.close()


def test_a_damaged_claim_file_is_not_held_by_anyone(tmp_path):
    path = claims.claim_path(tmp_path, "abc")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\xff not json")
    assert _holder(tmp_path, "abc") is None
    assert claims.try_claim(tmp_path, "abc", lease_s=5) is None  # not known dead until its lease ends
    assert claims.try_claim(tmp_path, "abc", lease_s=5, now=later(100)) is not None


def test_a_claim_whose_pid_now_belongs_to_another_process_is_dead(tmp_path):
    """The pid is alive, but it is not the process that claimed: it started at another time (pid reuse)."""
    mine = claims.try_claim(tmp_path, "abc", lease_s=600)
    record = json.loads(mine.path.read_text())
    assert record["pid_start"] == claims.process_start(os.getpid()) is not None
    mine.path.write_text(json.dumps({**record, "token": "theirs", "pid_start": record["pid_start"] + "0"}))
    assert claims.dead(mine.path, 600) is True
    mine.path.write_text(json.dumps({**record, "token": "theirs"}))  # the very process: alive
    assert claims.dead(mine.path, 600) is False


def test_a_claim_touched_into_the_future_is_dead_after_its_lease_at_most(tmp_path):
    """A killed worker's claim with a modification time a year ahead stalled the sweep for a year."""
    mine = claims.try_claim(tmp_path, "abc", lease_s=60)
    record = json.loads(mine.path.read_text())
    mine.path.write_text(json.dumps({**record, "token": "theirs", "host": "another-node"}))  # no pid to look at
    year = time.time() + 365 * 86400
    os.utime(mine.path, (year, year))
    assert claims.dead(mine.path, 60) is True
    ahead = time.time() + 30  # within the lease of skew: alive now, dead once 90 s have passed
    os.utime(mine.path, (ahead, ahead))
    assert claims.dead(mine.path, 60) is False and claims.dead(mine.path, 60, now=later(91)) is True
    taken = claims.try_claim(tmp_path, "abc", lease_s=60, now=later(91))
    assert taken is not None and taken.attempt == 2


def test_a_take_over_lost_to_another_worker_gives_up_and_leaves_nothing(tmp_path, monkeypatch):
    """Two workers see the same dead claim; the other renames it aside first, so this one's rename finds nothing."""
    claims.try_claim(tmp_path, "abc", lease_s=5)
    real_rename = os.rename

    def beaten(src, dst):
        real_rename(src, str(src) + ".expired-other")  # the other worker's move
        return real_rename(src, dst)

    monkeypatch.setattr(claims.os, "rename", beaten)
    assert claims.try_claim(tmp_path, "abc", lease_s=5, now=later(6)) is None
    assert sorted(p.name for p in (tmp_path / claims.CLAIMS).iterdir()) == ["abc.json.expired-other"]


def test_a_claim_renewed_while_being_taken_over_goes_back_to_its_owner(tmp_path, monkeypatch):
    """Its owner touched it between the look and the rename: the claim is put back, whole, and still held."""
    owner = claims.try_claim(tmp_path, "abc", lease_s=5)
    looks = iter([True, False])  # dead at the first look, alive again once moved aside
    monkeypatch.setattr(claims, "dead", lambda path, lease_s, now=time.time: next(looks))
    assert claims.try_claim(tmp_path, "abc", lease_s=5, now=later(6)) is None
    assert owner.held() and owner.renew() and owner.attempt == 1
    assert sorted(p.name for p in (tmp_path / claims.CLAIMS).iterdir()) == ["abc.json"]
