"""suite.store: the one JSON policy and the one way to read metrics.jsonl."""

from __future__ import annotations

import errno
import json
import math
import os
import signal

import numpy as np
import pytest
import torch

from suite import files, store


def test_to_json_is_strict_json():
    obj = {"a": np.float32(0.5), "b": torch.tensor(3), "c": [math.nan, math.inf, 1.0], "d": (1, 2),
           "e": np.arange(3), "f": None, "g": True, "h": store.Path("x/y")}
    assert store.to_json(obj) == {"a": 0.5, "b": 3, "c": [None, None, 1.0], "d": [1, 2], "e": [0, 1, 2],
                                  "f": None, "g": True, "h": "x/y"}
    with pytest.raises(TypeError, match="object"):
        store.to_json({"x": object()})


def test_write_json_is_atomic_and_readable(tmp_path):
    store.write_json(tmp_path / "s.json", {"x": np.float64(math.nan), "y": 1})
    assert json.loads((tmp_path / "s.json").read_text()) == {"x": None, "y": 1}
    assert os.listdir(tmp_path) == ["s.json"]  # no temp file left behind


def test_metrics_line_refuses_nan():
    assert store.metrics_line({"step": 1, "loss": 0.5}) == '{"step": 1, "loss": 0.5}\n'
    with pytest.raises(ValueError):
        store.metrics_line({"loss": math.nan})


def test_read_metrics_skips_a_cut_off_last_line_with_a_warning(tmp_path):
    (tmp_path / store.METRICS).write_text('{"step": 1}\n{"step": 2}\n{"step": 3, "lo')
    with pytest.warns(UserWarning, match=r"metrics.jsonl: line 3 is cut off"):
        assert store.read_metrics(tmp_path) == [{"step": 1}, {"step": 2}]


def test_read_metrics_raises_on_damage_before_the_last_line(tmp_path):
    (tmp_path / store.METRICS).write_text('{"step": 1}\n{"ste\n{"step": 3}\n')
    with pytest.raises(store.CorruptFile, match=r"metrics.jsonl: line 2 is not a JSON object; delete the run"):
        store.read_metrics(tmp_path)
    (tmp_path / store.METRICS).write_text('{"step": 1}\n[1, 2]\n')  # complete, but not a record
    with pytest.raises(store.CorruptFile, match="line 2"):
        store.read_metrics(tmp_path)


def test_a_line_longer_than_any_record_is_damage_read_no_further(tmp_path, monkeypatch):
    """A metrics.jsonl of zeros with no line break (a 3 GB sparse file) was read whole: a MemoryError traceback.
    The file is read line by line, and a line past :data:`store.MAX_LINE_BYTES` is a damaged file."""
    monkeypatch.setattr(store, "MAX_LINE_BYTES", 100)
    (tmp_path / store.METRICS).write_bytes(b'{"step": 1}\n' + b"\0" * 1000)
    with pytest.raises(store.CorruptFile, match=r"metrics.jsonl: line 2 is longer than 100 bytes; delete the run"):
        store.read_metrics(tmp_path)
    (tmp_path / store.METRICS).write_bytes(b'{"step": 1}\n' + b'{"step": 2, "x": "' + b"y" * 70 + b'"}\n')
    assert [r["step"] for r in store.read_metrics(tmp_path)] == [1, 2]  # at the bound: a record like any other


def test_a_line_that_is_not_utf8_is_a_damaged_line_not_a_traceback(tmp_path):
    """A byte that is not UTF-8 (0xe9) made the whole read fail with UnicodeDecodeError: `suite analyze` printed a
    44-line traceback and a resumed run ended in error. It is one damaged line like any other."""
    (tmp_path / store.METRICS).write_bytes(b'{"step": 1}\n{"step": 2, "x": "\xe9"}\n{"step": 3}\n')
    with pytest.raises(store.CorruptFile, match=r"metrics.jsonl: line 2 is not a JSON object; delete the run"):
        store.read_metrics(tmp_path)
    with pytest.warns(UserWarning, match=r"line 2 is not a JSON object; dropped it"):
        assert store.read_metrics(tmp_path, skip_damaged=True) == [{"step": 1}, {"step": 3}]
    (tmp_path / store.METRICS).write_bytes('{"x": "é"}\n'.encode())  # UTF-8 itself is read as such
    assert store.read_metrics(tmp_path) == [{"x": "é"}]


def test_read_metrics_of_a_missing_file_is_empty(tmp_path):
    assert store.read_metrics(tmp_path) == []


# ----------------------------------------------------------------------------- hostile files


@pytest.fixture
def deadline():
    """Fail a test that blocks (a FIFO opened for reading waits for a writer) instead of hanging."""
    def expired(signum, frame):
        raise TimeoutError("blocked on a special file")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _victim(tmp_path):
    victim = tmp_path / "elsewhere.txt"
    victim.write_text("precious")
    return victim


def test_atomic_write_replaces_a_planted_link_instead_of_writing_through_it(tmp_path):
    victim = _victim(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").symlink_to(victim)
    store.write_json(run / "summary.json", {"status": "ok"})
    store.atomic_write(run / "checkpoint.pt", lambda f: torch.save({"x": 1}, f))
    assert victim.read_text() == "precious"
    assert not (run / "summary.json").is_symlink() and json.loads((run / "summary.json").read_text()) == {"status": "ok"}


def test_open_append_refuses_a_link_and_a_fifo(tmp_path, deadline):
    victim = _victim(tmp_path)
    (tmp_path / "log.txt").symlink_to(victim)
    with pytest.raises(store.UnsafeFile, match=r"log.txt: is a symbolic link"):
        files.open_append(tmp_path / "log.txt")
    os.mkfifo(tmp_path / "metrics.jsonl")
    with pytest.raises(store.UnsafeFile, match="not a regular file"):
        files.open_append(tmp_path / "metrics.jsonl")
    assert victim.read_text() == "precious"
    with files.open_append(tmp_path / "new.txt") as f:  # a new file is created, as by open(..., "a")
        f.write("x\n")
    assert (tmp_path / "new.txt").read_text() == "x\n"


def test_read_text_refuses_fifos_devices_and_oversized_files(tmp_path, deadline):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    for name in ("fifo", "zero"):
        with pytest.raises(store.UnsafeFile, match="not a regular file"):
            store.read_text(tmp_path / name)
    (tmp_path / "big").write_text("x" * 11)
    with pytest.raises(store.UnsafeFile, match="larger than 10 bytes"):
        store.read_text(tmp_path / "big", max_bytes=10)
    assert store.read_text(tmp_path / "big", max_bytes=11) == "x" * 11
    (tmp_path / "link").symlink_to(tmp_path / "big")  # a link to a regular file is read
    assert store.read_text(tmp_path / "link") == "x" * 11


def test_a_summary_or_metrics_that_is_a_special_file_is_not_read(tmp_path, deadline):
    os.mkfifo(tmp_path / store.SUMMARY)
    with pytest.warns(store.SuiteWarning, match=r"summary.json: not a readable summary \(not a regular file"):
        assert store.read_summary(tmp_path) is None
    (tmp_path / store.METRICS).symlink_to("/dev/zero")  # a link is never read through, whatever it points at
    with pytest.raises(store.CorruptFile, match="metrics.jsonl: is a symbolic link"):
        store.read_metrics(tmp_path)
    (tmp_path / store.METRICS).unlink()
    os.mkfifo(tmp_path / store.METRICS)
    with pytest.raises(store.CorruptFile, match="metrics.jsonl: not a regular file"):
        store.read_metrics(tmp_path)
    assert store.last_logged_step(tmp_path) is None


@pytest.mark.parametrize("planted", ["folder", store.METRICS, "log.txt"])
def test_open_run_folder_refuses_a_linked_folder_or_appended_file(tmp_path, planted):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / store.SUMMARY).write_text("{}")
    run = tmp_path / "run"
    if planted == "folder":
        run.symlink_to(elsewhere)
    else:
        run.mkdir()
        (run / planted).symlink_to(elsewhere / store.SUMMARY)
    with pytest.raises(store.UnsafeFile, match="is a symbolic link"):
        store.open_run_folder(run)
    assert (elsewhere / store.SUMMARY).read_text() == "{}"  # not deleted through the link


def test_results_json_is_strict_and_a_damaged_summary_is_unfinished(tmp_path):
    """NaN / Infinity tokens and nesting too deep to parse are ValueErrors (damage), not numbers or a
    RecursionError; a summary whose accuracy is outside [0, 1] or whose depth is below 1 is no run's."""
    for text in ('{"a": NaN}', '{"a": -Infinity}', "[" * 100_000 + "]" * 100_000):
        with pytest.raises(ValueError):
            store.loads(text)
    assert store.loads('{"a": null}') == {"a": None}
    for summary in ({"test_acc": 1.5}, {"best_val_acc": -0.1}, {"model.depth": 0}):
        (tmp_path / "summary.json").write_text(json.dumps(summary))
        with pytest.warns(store.SuiteWarning, match="run again"):
            assert store.read_summary(tmp_path) is None
    assert store.summary_problem({"test_acc": 1.0, "model.depth": 1}) is None


def test_reopening_a_run_folder_removes_the_temp_files_of_an_interrupted_write(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / ".checkpoint.pt.abc123.tmp").write_bytes(b"half a checkpoint")  # what a SIGKILL mid-write leaves
    (run / "metrics.jsonl").write_text("")
    store.open_run_folder(run)
    assert not list(run.glob("*.tmp")) and (run / "metrics.jsonl").exists()



class _FullDisk:
    """A temp file on a disk with room for ``room`` bytes: a write beyond fails with ENOSPC, and closing
    it does not fail again (as on a disk where the buffered bytes still fit), so only the writer's own
    error is left to say what happened."""

    def __init__(self, room: int) -> None:
        self.room = room

    def write(self, data) -> int:
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(data)
        return len(data)

    def flush(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass


def test_a_full_disk_under_torch_save_is_disk_full_not_a_runtime_error(tmp_path, monkeypatch):
    """torch.save turns the OSError of a full disk into `RuntimeError: unexpected pos ...`: the run then
    counted as `error`, and its traceback, written to the full disk, ended `suite train` in a traceback."""

    def full(fd, mode):
        os.close(fd)
        return _FullDisk(room=1000)  # the header fits, the tensor data does not

    monkeypatch.setattr(store.os, "fdopen", full)
    with pytest.raises(store.DiskFull):
        store.atomic_write(tmp_path / "checkpoint.pt", lambda f: torch.save({"w": torch.zeros(1000)}, f))
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []  # no temp file left behind


def test_a_config_key_added_since_the_committed_runs_renames_none_of_them(tmp_path, capsys, monkeypatch):
    """A key added to the config counts in every run id unless store.ADDED_KEYS lists it at the value old runs
    behaved as: the default study's expansion today must name exactly its committed runs."""
    import csv
    from pathlib import Path

    from suite.cli import main

    root = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(root)
    assert main(["run", "ablations/default.yaml", "--out", str(tmp_path / "d"), "--dry-run"]) == 0
    printed = capsys.readouterr()
    listed = {line.split()[0] for line in printed.out.splitlines() if line.rstrip().endswith("to run")}
    committed = {row["run_id"] for row in csv.DictReader(open(root / "results/default/runs.csv"))}
    assert len(listed) == 40 and listed == committed, printed.out[-500:] + printed.err[-500:]


def test_a_stop_handled_just_after_the_temp_file_is_created_leaves_no_temp_file(tmp_path, monkeypatch):
    """A SIGTERM handled as mkstemp's open returned left its file: the name was not known yet to clean up (the
    interrupt test of `suite analyze` went red on a busy machine, 1 run in 5)."""
    class Stop(BaseException):
        """The handler running at the first check after the open."""

    real = os.open

    def open_then_stop(*args, **kwargs):
        os.close(real(*args, **kwargs))
        raise Stop

    monkeypatch.setattr(os, "open", open_then_stop)
    with pytest.raises(Stop):
        store.atomic_write_text(tmp_path / "fig.png", "x")
    monkeypatch.undo()
    assert not list(tmp_path.iterdir())


def test_atomic_write_gives_a_new_files_permissions_and_keeps_others_temp_files(tmp_path, monkeypatch):
    old = os.umask(0o027)
    try:
        store.atomic_write_text(tmp_path / "a.txt", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o640 and (tmp_path / "a.txt").read_text() == "x"
    names = iter(["taken0", "free00"])  # the first name is another writer's temp file: left alone, another tried
    monkeypatch.setattr(store.secrets, "token_hex", lambda n: next(names))
    other = tmp_path / ".b.txt.taken0.tmp"
    other.write_text("theirs")
    store.atomic_write_text(tmp_path / "b.txt", "y")
    assert other.read_text() == "theirs" and (tmp_path / "b.txt").read_text() == "y"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".b.txt.taken0.tmp", "a.txt", "b.txt"]


def test_a_temp_file_that_could_not_be_made_leaves_the_opens_error(tmp_path, monkeypatch):
    """On a read-only file system the cleanup's unlink failed too, and its error replaced the open's."""
    from pathlib import Path

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    def unlink(self, missing_ok=False):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(os, "open", refuse)
    monkeypatch.setattr(Path, "unlink", unlink)
    with pytest.raises(PermissionError):
        store.atomic_write_text(tmp_path / "a.txt", "x")
