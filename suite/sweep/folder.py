"""The results folder of a sweep: whose it is, which runs are done (a ``summary.json``), where each run goes."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import fcntl
import hashlib
import os
import secrets
import warnings
from pathlib import Path
from typing import Any, Iterator

import yaml

from suite import files, store
from suite.config import ConfigError
from suite.results import ABLATION_FILE, RUN_IDS, RUNS_CSV_BYTES, recorded_ablation
from suite.sweep.spec import Ablation, Run


class RunnerError(ConfigError):
    """A user error found before any run starts (busy or foreign folder, no GPU, no Ray)."""


def run_dir(out: Path, run: Run) -> Path:
    return Path(out) / "runs" / run.run_id




@contextlib.contextmanager
def prepare_out(out: Path, ablation: Ablation, run_ids: list[str]) -> Iterator[None]:
    """Lock ``out`` for the sweep's lifetime (the OS drops the lock when the process dies, even by SIGKILL), and write
    ``ablation.yaml`` and its ``run_ids``; RunnerError when another ``suite run`` uses ``out`` or it is not writable."""
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        lock = files.open_append(out / ".lock")
    except OSError as err:
        raise _unwritable(out, err) from None
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise RunnerError(f"{out}: another `suite run` is writing here; wait for it or pass --out DIR") from None
        try:
            store.atomic_write_text(out / ABLATION_FILE, yaml.safe_dump(ablation.resolved, sort_keys=False))
            store.write_json(out / RUN_IDS, run_ids)
        except OSError as err:
            raise _unwritable(out, err) from None
        yield


def _unwritable(out: Path, err: OSError) -> Exception:
    if isinstance(err, store.UnsafeFile):  # names the file itself
        return err
    if store.no_space(err):
        return store.DiskFull(out)
    if out.is_symlink() and not out.exists():
        return RunnerError(f"{out}: a link to {os.readlink(out)}, which does not exist; pass --out DIR with a folder")
    return RunnerError(f"{out}: cannot write there ({err.strerror or err}); pass --out DIR with a writable folder")


FOLDERS = ("runs", "claims", "workers", "slurm", "tables", "figures")  # what a sweep and its analysis write into


def _moved_rate(out: Path, recorded: Any, ablation: Ablation) -> str | None:
    """A cell with runs here at one rate (``recorded``: the folder's ``rates:``) that the ablation now gives another,
    e.g. after its tuning study (``rates_from``) gained runs; None when none moved. A cell without runs may move."""
    from suite.declared import same_value
    from suite.sweep.tuned import LR, cell_key

    now = ablation.resolved.get("rates")
    if not isinstance(recorded, list) or not now:
        return None
    before = {}
    for entry in recorded:
        with contextlib.suppress(KeyError, TypeError):  # a damaged entry: nothing to compare
            if store.is_number(entry[LR]):
                before[cell_key(entry["variant"], entry, ablation.grid)] = entry[LR]
    moved = {}
    for entry in now:
        key = cell_key(entry["variant"], entry, ablation.grid)
        if before.get(key) is not None and not same_value(before[key], entry[LR]):
            moved[key] = (before[key], entry[LR])
    if not moved:
        return None
    held = _held_ids(out)
    for run in ablation.runs:  # the run id each moved cell's runs had at the recorded rate
        key = cell_key(run.variant, run.point, ablation.grid)
        if key in moved and store.run_id(_at_rate(run.cfg, float(moved[key][0]))) in held:
            where = "".join(f" {k}={run.point[k]}" for k in ablation.grid)
            return (f"its runs of {run.variant}{where} used {LR} {moved[key][0]} (its {ABLATION_FILE}'s rates:), and "
                    f"the ablation now gives {moved[key][1]}")
    return None


def _at_rate(cfg: Any, lr: float) -> Any:
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, lr=lr))


def _held_ids(out: Path) -> set[str]:
    """The run ids the folder holds: its run folders' names and its runs.csv's ids (committed without the folders)."""
    held = {p.name for p in (out / "runs").iterdir()} if (out / "runs").is_dir() else set()
    with contextlib.suppress(OSError, ValueError, csv.Error, files.UnsafeFile):  # no readable runs.csv: no ids
        held |= {str(row.get("run_id")) for row in csv.DictReader(io.StringIO(files.read_text(
            out / "runs.csv", RUNS_CSV_BYTES, links=False), newline=""))}
    return held


def check_out(out: Path, ablation: Ablation) -> None:
    """Raise :class:`RunnerError` unless ``out`` is new or holds this ablation, UnsafeFile where it holds a link."""
    try:
        out.resolve()
    except RuntimeError:  # Python's "Symlink loop" (3.11), where an OSError would have said ELOOP
        raise RunnerError(f"{out}: a symbolic link that leads back to itself; pass --out DIR with a folder") from None
    if out.exists() and not out.is_dir():
        raise RunnerError(f"{out}: is a file, not a folder; pass --out DIR with a folder for the results")
    above = next((p for p in out.absolute().parents if p.exists()), None)  # the folder it would be made in
    if not out.exists() and above is not None and not above.is_dir():
        raise RunnerError(f"{out}: {above} is a file, not a folder; pass --out DIR with a folder for the results")
    for name in FOLDERS:
        store.no_link(out / name)
        if (out / name).exists() and not (out / name).is_dir():
            raise RunnerError(f"{out / name}: a file where the sweep keeps a folder; move it away and run the "
                              f"same command again")
    if (out / "claims").is_dir():
        for entry in os.scandir(out / "claims"):
            if not entry.is_file(follow_symlinks=False):
                raise RunnerError(f"{entry.path}: not a plain file where a run's claim belongs; remove it and run "
                                  f"the same command again")
    if (out / "runs").is_dir():
        for entry in os.scandir(out / "runs"):
            store.check_run_folder(Path(entry.path))
    if (out / store.SUMMARY).exists() or (out / store.CONFIG).exists():  # a `suite train` run's own folder
        raise RunnerError(f"{out}: holds a single run (its {store.CONFIG} and {store.SUMMARY} at the top, as "
                          f"`suite train` writes them), not a sweep's results; pass --out DIR with another folder")
    marker = out / ABLATION_FILE
    if marker.exists() or marker.is_symlink():
        try:
            recorded = recorded_ablation(out)
        except ConfigError as err:  # a link, a FIFO, bad YAML: say what, rather than that it is another ablation's
            raise RunnerError(f"{err}; remove it, or pass --out DIR to write elsewhere") from None
        if (other := recorded.get("name")) != ablation.name:
            raise RunnerError(f"{out}: holds the runs of ablation '{other}' (see {marker}), not "
                              f"'{ablation.name}'; pass --out DIR to write elsewhere")
        if moved := _moved_rate(out, recorded.get("rates"), ablation):
            raise RunnerError(f"{out}: {moved}; a folder holds one rate per cell (its analysis would pool both): "
                              f"pass --out DIR for the new rates, or restore the old ones")
    elif (out / "runs").is_dir() and any((out / "runs").iterdir()):
        raise RunnerError(f"{out}: has runs but no ablation.yaml, so they are not from '{ablation.name}'; "
                          f"pass --out DIR to write elsewhere")


def split_done(runs: list[Run], out: Path, retry_errors: bool, rerun_other_code: bool = False,
               commit: str | None = None) -> tuple[list[Run], dict[str, dict], dict[str, int]]:
    """``(todo, done: run id -> summary, other: commit -> finished runs it made)``. ``error`` is final unless
    ``retry_errors``; a run another git commit made is counted, and run again when ``rerun_other_code``."""
    here = (commit or "").removesuffix("+dirty")
    todo, done, other = [], {}, {}
    for run in runs:
        summary = store.read_summary(run_dir(out, run))
        if summary is not None and summary.get("kind", "train") != run.kind:
            raise RunnerError(f"{out}: holds {summary.get('kind', 'train')} runs of this ablation, not "
                              f"{run.kind} runs (`suite run` trains, `suite propagate` measures); pass --out DIR")
        was = summary.get("variant") if summary else None
        if isinstance(was, str) and was != run.variant:  # same config, same id: the file renamed its variant
            raise RunnerError(f"{run_dir(out, run)}: ran as variant '{was}', which the ablation now calls "
                              f"'{run.variant}'; the analysis groups by the name a run was made under, so rename it "
                              f"back to '{was}' in the file, or pass --out DIR to run the renamed study anew")
        status = summary.get("status") if summary else None
        if status in store.FINAL_STATUSES or (status == "error" and not retry_errors):
            theirs = str(summary.get("git_commit") or "unknown").removesuffix("+dirty")
            if here and here != "unknown" and theirs != here:
                other[theirs] = other.get(theirs, 0) + 1
                if rerun_other_code:
                    todo.append(run)
                    continue
            done[run.run_id] = summary
        else:
            todo.append(run)
    return todo, done, other


def replaced(out: Path, todo: list[Run]) -> dict[str, str]:
    """Run id -> a fingerprint of the summary each of ``todo`` holds and is to replace (a run of other code under
    --rerun-stale, an error under --retry-errors). It stays until a worker starts that run again, so a sweep stopped
    before then keeps the old result; :func:`finished` does not count it as done meanwhile."""
    stamps = {}
    for run in todo:
        with contextlib.suppress(OSError):
            stamps[run.run_id] = hashlib.sha256((run_dir(out, run) / store.SUMMARY).read_bytes()).hexdigest()
    return stamps


def finished(out: Path, run: Run, stale: dict[str, str]) -> dict | None:
    """The run's summary, unless it is the one ``stale`` (:func:`replaced`) says this sweep is to replace."""
    summary = store.read_summary(run_dir(out, run))
    if summary is not None and run.run_id in stale and replaced(out, [run]).get(run.run_id) == stale[run.run_id]:
        return None
    return summary


def clear_stale(out: Path, run: Run) -> None:
    """Make way for a run about to start: drop a retried run's old ``error`` summary (``record_lost`` would keep it),
    and rename a wrong kind of file where the run folder or summary goes to ``<name>.damaged``, with a warning."""
    folder = run_dir(out, run)
    summary = folder / store.SUMMARY
    for path in (folder, summary):
        if path.exists() and path.is_dir() != (path is folder):
            target = path.with_name(f"{path.name}.damaged")
            target = target.with_name(f"{target.name}-{secrets.token_hex(3)}") if target.exists() else target
            path.rename(target)
            warnings.warn(f"{path}: not what a run leaves there; moved it to {target.name} and running the run "
                          f"again", store.SuiteWarning, stacklevel=2)
    summary.unlink(missing_ok=True)
