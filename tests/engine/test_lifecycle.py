"""RunFolder: one lifecycle for every kind of run: the folder, the summary, the error policy."""

from __future__ import annotations

import dataclasses
import errno
import json

import pytest

from suite import store
from suite.config import RunConfig
from suite.engine.checkpoint import PREEMPTED
from suite.engine.lifecycle import RunFolder


class _Sink:
    """A tracker stand-in that records how the run closed it (a real sink needs a tracker installed)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def finish(self, summary) -> None:
        self.calls.append(f"finish {summary['status']}")

    def abort(self) -> None:
        self.calls.append("abort")


def _summary(folder):
    return json.loads((folder / store.SUMMARY).read_text())


def test_opening_removes_an_old_summary_and_a_finished_run_drops_its_checkpoint(tmp_path):
    (tmp_path / store.SUMMARY).write_text("{}")
    for name in (store.CHECKPOINT, PREEMPTED):
        (tmp_path / name).write_text("x")
    with RunFolder(RunConfig(), tmp_path) as run:
        assert not (tmp_path / store.SUMMARY).exists()  # unfinished until it ends
        run.summary["status"] = "ok"
    assert _summary(tmp_path)["status"] == "ok" and _summary(tmp_path)["wall_s"] >= 0
    assert not (tmp_path / store.CHECKPOINT).exists() and not (tmp_path / PREEMPTED).exists()


def test_an_exception_of_the_run_is_its_error_status_and_keeps_its_checkpoint(tmp_path):
    (tmp_path / store.CHECKPOINT).write_text("x")
    sink = _Sink()
    with RunFolder(RunConfig(), tmp_path, {"variant": "v"}) as run:
        run.trackers = sink
        raise ValueError("bad thing\nsecond line")
    s = _summary(tmp_path)
    assert (s["status"], s["error"], s["variant"]) == ("error", "ValueError: bad thing", "v")
    assert s["device_name"]  # provenance even when the run failed before it started
    assert "second line" in (tmp_path / "log.txt").read_text()  # the whole traceback, in the log
    assert (tmp_path / store.CHECKPOINT).exists()  # --retry-errors resumes from it
    assert sink.calls == ["finish error"]


@pytest.mark.parametrize("err", [KeyboardInterrupt(), OSError(errno.ENOSPC, "No space left on device")])
def test_what_is_not_the_runs_fault_leaves_it_unfinished(tmp_path, err):
    sink = _Sink()
    expected = KeyboardInterrupt if isinstance(err, KeyboardInterrupt) else store.DiskFull
    with pytest.raises(expected):
        with RunFolder(RunConfig(), tmp_path) as run:
            run.trackers = sink
            raise err
    assert not (tmp_path / store.SUMMARY).exists()  # it runs again next time
    assert sink.calls == ["abort"]


def test_start_resolves_precision_into_the_run_id(tmp_path):
    cfg = dataclasses.replace(RunConfig(), device="cpu")
    run = RunFolder(cfg, tmp_path)
    resolved, device = run.start(cfg)
    assert device.type == "cpu" and resolved.train.precision == "fp32" and cfg.train.precision == "auto"
    assert run.summary["run_id"] == store.run_id(resolved) != store.run_id(cfg)


def test_links_planted_in_a_run_folder_are_replaced_or_dropped_never_followed(tmp_path):
    """summary.json, config.yaml and checkpoint.pt as links to files elsewhere: the summary is written
    over the link (not into its target), a finished run drops the checkpoint link, not the file."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for name in (store.SUMMARY, store.CHECKPOINT, PREEMPTED):
        (elsewhere / name).write_text("precious")
        (run_dir / name).symlink_to(elsewhere / name)
    with RunFolder(RunConfig(), run_dir) as run:
        run.summary["status"] = "ok"
    assert _summary(run_dir)["status"] == "ok" and not (run_dir / store.SUMMARY).is_symlink()
    assert not (run_dir / store.CHECKPOINT).exists() and not (run_dir / PREEMPTED).exists()
    assert all((elsewhere / n).read_text() == "precious" for n in (store.SUMMARY, store.CHECKPOINT, PREEMPTED))


def test_a_run_folder_whose_log_is_a_link_is_refused(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "log.txt").symlink_to(victim)
    with pytest.raises(store.UnsafeFile, match="log.txt: is a symbolic link"):
        RunFolder(RunConfig(), tmp_path / "run")
    assert victim.read_text() == "precious"


def test_a_full_disk_while_logging_a_runs_error_leaves_it_unfinished(tmp_path, monkeypatch):
    """The run's error has no room in log.txt: the disk is full, so the run is unfinished (it runs
    again), not a raw OSError (a traceback from `suite train`, a worker's traceback under --pack)."""
    from suite import files

    def full(path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(files, "open_append", full)
    sink = _Sink()
    with pytest.raises(store.DiskFull):
        with RunFolder(RunConfig(), tmp_path) as run:
            run.trackers = sink
            raise RuntimeError("unexpected pos 94336 vs 94288")  # what torch.save says on a full disk
    assert not (tmp_path / store.SUMMARY).exists()
    assert sink.calls == ["abort"]


def test_a_run_whose_claim_was_taken_over_drops_its_result_right_before_writing(tmp_path):
    """A worker whose claim another took over (clock skew beyond the lease) between two heartbeats wrote
    its summary anyway: the check right before writing drops it, with one warning, as StopRun."""
    import warnings

    from suite.engine.lifecycle import summary_guard
    from suite.engine.lifecycle import StopRun

    sink = _Sink()
    with warnings.catch_warnings(record=True) as caught, summary_guard(lambda: "claim lost: taken over"):
        warnings.simplefilter("always")
        with pytest.raises(StopRun) as stop:
            with RunFolder(RunConfig(), tmp_path) as run:
                run.trackers = sink
                run.summary["status"] = "ok"
    assert stop.value.save is False and not (tmp_path / store.SUMMARY).exists()
    assert sink.calls == ["abort"]
    messages = [str(w.message) for w in caught if issubclass(w.category, store.SuiteWarning)]
    assert len(messages) == 1 and "result dropped" in messages[0] and "claim lost" in messages[0]
    with summary_guard(lambda: None), RunFolder(RunConfig(), tmp_path / "kept") as run:  # still ours: written
        run.summary["status"] = "ok"
    assert _summary(tmp_path / "kept")["status"] == "ok"
