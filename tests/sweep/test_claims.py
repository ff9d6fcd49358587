"""Claims on runs (the Slurm backend's workers): one holder, leases, take-over of a dead worker's run."""

from __future__ import annotations

import json
import os
import time

from suite.sweep import claims


def _age(path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_only_one_worker_holds_a_run(tmp_path):
    first = claims.try_claim(tmp_path, "abc", lease_s=60)
    assert first is not None and first.held()
    assert claims.try_claim(tmp_path, "abc", lease_s=60) is None  # a live claim is respected
    assert claims.holder(tmp_path, "abc") == claims.owner_id()
    first.release()
    assert claims.holder(tmp_path, "abc") is None
    assert claims.try_claim(tmp_path, "abc", lease_s=60) is not None


def test_an_expired_claim_is_taken_over_and_its_owner_learns_it_lost(tmp_path):
    dead = claims.try_claim(tmp_path, "abc", lease_s=5)
    _age(dead.path, 6)  # its owner stopped renewing it 6 s ago
    thief = claims.try_claim(tmp_path, "abc", lease_s=5)
    assert thief is not None and thief.held()
    assert not dead.held() and not dead.renew()  # the old owner must stop its run
    dead.release()  # and its release does not drop the new owner's claim
    assert thief.held()
    assert sorted(p.name for p in (tmp_path / claims.CLAIMS).iterdir()) == ["abc.json"]  # nothing left aside


def test_renewing_keeps_a_claim_alive(tmp_path):
    mine = claims.try_claim(tmp_path, "abc", lease_s=5)
    _age(mine.path, 6)
    assert mine.renew()
    assert claims.try_claim(tmp_path, "abc", lease_s=5) is None


def test_heartbeat_renews_and_reports_a_lost_claim(tmp_path):
    beat = claims.Heartbeat(lease_s=0.4)  # renews every 0.1 s
    try:
        mine = claims.try_claim(tmp_path, "abc", lease_s=0.4)
        beat.hold(mine)
        time.sleep(0.6)
        assert claims.try_claim(tmp_path, "abc", lease_s=0.4) is None and not beat.lost.is_set()
        mine.path.write_text(json.dumps({"owner": "someone", "token": "theirs"}))  # taken over
        deadline = time.monotonic() + 5
        while not beat.lost.is_set() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert beat.lost.is_set()
    finally:
        beat.close()


def test_a_damaged_claim_file_is_not_held_by_anyone(tmp_path):
    path = claims.claim_path(tmp_path, "abc")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\xff not json")
    assert claims.holder(tmp_path, "abc") is None
    _age(path, 100)
    assert claims.try_claim(tmp_path, "abc", lease_s=5) is not None  # expired: taken over like any other
