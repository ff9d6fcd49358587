"""The results layout (``results/README.md``): run ids, statuses, atomic writes, JSON, provenance, runs read back; every
product reads and writes results through this module only. Torch-free."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import importlib.metadata
import json
import math
import os
import platform
import re
import secrets
import socket
import subprocess
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Callable

from suite.config import DATA_SHAPE_KEYS, DEPTH, LR, RunConfig, flatten, to_dict
from suite.files import UnsafeFile, no_link, open_regular, read_text  # re-exported

SCHEMA_VERSION = 1
SUMMARY = "summary.json"
CONFIG = "config.yaml"
METRICS = "metrics.jsonl"
CHECKPOINT = "checkpoint.pt"
FINAL_STATUSES = ("ok", "diverged", "failed")  # a rerun skips these; `error` is retried on request
STATUSES = FINAL_STATUSES + ("error",)  # every run ends with exactly one of these

# How a run is executed, not what it computes: excluded from the run id.
EXECUTION_KEYS = frozenset({"device", "train.threads", "data.num_workers", "data.root", "data.device_max_mb",
                            "train.log_to", "train.deterministic", "train.diagnostics"})

# Keys added after runs were committed, left out of the id at the value those runs behaved as, so no run is renamed.
ADDED_KEYS = {"train.spike_window": 20, "model.layerscale.cast": False}


NAME_CHARS = 200  # a variant's or ablation's name: a folder, a figure's legend and a table's row, not a document
RUN_ID = re.compile(r"[0-9a-f]{12}")  # what run_id returns: a run folder's name (fullmatch)


def run_id(cfg: RunConfig) -> str:
    """Stable 12-hex-digit id of a resolved run config: a new id for any change of what the run computes."""
    flat = {k: v for k, v in flatten(to_dict(cfg)).items()
            if k not in EXECUTION_KEYS and not (k in ADDED_KEYS and v == ADDED_KEYS[k])}
    blob = json.dumps(flat, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


class DiskFull(Exception):
    """No space left where a result was being written: the sweep stops, finished runs stay intact."""

    def __init__(self, path: Path | str) -> None:
        super().__init__(f"no space left on {path}")
        self.path = str(path)


def no_space(err: BaseException) -> bool:
    """Whether ``err`` is the operating system saying the disk is full."""
    return isinstance(err, DiskFull) or (isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT))


class _Watched:
    """A file that remembers its last ``write`` error: ``torch.save`` turns a full disk's OSError into another error."""

    def __init__(self, f: IO[bytes]) -> None:
        self.f, self.error = f, None

    def write(self, data: Any) -> int:
        try:
            return self.f.write(data)
        except OSError as err:
            self.error = err
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.f, name)


def atomic_write(path: Path, write: Callable[[IO[bytes]], Any]) -> None:
    """Write a file by ``write(f)`` into a temp file, then ``os.replace``: never half-written, a link at ``path`` is
    replaced, not followed; permissions are a new file's, so a group keeps reading it. DiskFull leaves the old file."""
    path = Path(path)
    tmp, watched = None, None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        while True:  # the name is known before the file exists, so a stop handled just after the open removes it
            tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
            try:  # 0o666 less the umask: a new file's permissions
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                             0o666)
                break
            except FileExistsError:  # another writer's temp file: never ours to remove
                tmp = None
        with os.fdopen(fd, "wb") as f:
            watched = _Watched(f)
            write(watched)  # type: ignore[arg-type]
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        if tmp is not None:  # may never have been made (the open failed): its error, not the unlink's, is said
            with contextlib.suppress(OSError):
                Path(tmp).unlink(missing_ok=True)
        if no_space(err) or (watched is not None and no_space(watched.error)):
            raise DiskFull(path.parent) from None
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` as UTF-8 through :func:`atomic_write`."""
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def to_json(obj: Any) -> Any:
    """``obj`` as strict JSON values (numpy / torch to Python, non-finite floats None); TypeError for other types."""
    if isinstance(obj, dict):
        return {str(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_json(v) for v in obj]
    if obj is None or isinstance(obj, (str, int)):  # bool is an int
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "tolist"):  # numpy / torch scalars and arrays
        return to_json(obj.tolist())
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as indented strict JSON (:func:`to_json`), atomically."""
    atomic_write_text(path, json.dumps(to_json(obj), indent=2, allow_nan=False) + "\n")


class SuiteWarning(UserWarning):
    """Something a user should know that does not stop the command; shown as one line."""


def one_line_warnings() -> None:
    """Show :class:`SuiteWarning` as ``warning: <message>`` (every time), other warnings as Python does."""
    plain = warnings.formatwarning
    if getattr(plain, "one_line", False):
        return

    def fmt(message, category, filename, lineno, line=None):
        if issubclass(category, SuiteWarning):
            return f"warning: {message}\n"
        return plain(message, category, filename, lineno, line)

    fmt.one_line = True
    warnings.formatwarning = fmt
    warnings.simplefilter("always", SuiteWarning)


def check_run_folder(out: Path) -> None:
    """Refuse a run folder that is a symbolic link, or whose appended files are (see :func:`no_link`)."""
    for path in (out, out / METRICS, out / "log.txt"):  # the files appended to (the others are replaced whole)
        no_link(path)


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet reads as the start of a formula


def neutral(value: object) -> object:
    """A CSV text cell that starts like a formula (OWASP's rule against CSV injection), or like one already so
    guarded, with a ``'`` before it; :func:`unneutral` gives it back exactly."""
    if isinstance(value, str) and value.lstrip("'").startswith(FORMULA_START) and (
            value.startswith(FORMULA_START) or value.startswith("'")):
        return "'" + value
    return value


def unneutral(text: str) -> str:
    """A CSV cell as it was before :func:`neutral`."""
    return text[1:] if text.startswith("'") and text.lstrip("'").startswith(FORMULA_START) else text


def run_folder_problem(out: Path, cfg: RunConfig) -> str | None:
    """Why the folder ``out`` cannot take the run of ``cfg``, in words after "--out DIR: ", or None (a new or empty
    folder, or this run's own): it holds another config's run, finished or not (its checkpoint and metrics would be
    lost), or files no run wrote (a project's own config.yaml)."""
    out, rid = Path(out), run_id(cfg)
    try:
        entries = sorted(e for e in os.listdir(out) if not (e.startswith(".") and e.endswith(".tmp")))
    except OSError:  # absent, or not a folder: the caller's writable_dir says so
        return None
    if not entries:
        return None
    if linked := [e for e in entries if (out / e).is_symlink()]:  # no run writes one; never read through it
        return f"holds {linked[0]} as a link; a run's files are regular files in its folder"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SuiteWarning)  # an unreadable summary is judged below, by what else is there
        summary = read_summary(out)
    if summary is not None and not isinstance(summary.get("run_id"), str):
        return f"holds a {SUMMARY} that no run wrote (it names no run_id)"
    if summary is not None and summary.get("run_id") != rid:
        return (f"holds the finished run {summary.get('run_id')} ({summary.get('status')}, "
                f"{summary.get('started_at') or 'unknown start'}) of another config")
    if summary is not None:
        return None
    if (out / CONFIG).is_file():
        from suite.config import ConfigError, load_config

        try:
            held_cfg = load_config(out / CONFIG)
        except (ConfigError, OSError, ValueError, UnsafeFile) as err:
            return f"holds a {CONFIG} that is not a run's ({str(err).splitlines()[0][:120]})"
        # the file holds the shape the run took from its data where the config left it None: so does ours here
        shape = {k: getattr(held_cfg.model, k) for k in DATA_SHAPE_KEYS if getattr(cfg.model, k) is None}
        held = run_id(held_cfg)
        if held != run_id(dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, **shape))):
            return (f"holds the unfinished run {held} of another config (its checkpoint and metrics would be "
                    f"lost)")
        return None
    return f"holds files that are not a run's ({', '.join(entries[:3])}{', ...' if len(entries) > 3 else ''})"


def open_run_folder(out: Path) -> None:
    """Create or reuse a run folder, unfinished (no ``summary.json``) and without a killed write's temp files."""
    check_run_folder(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / SUMMARY).unlink(missing_ok=True)
        for stale in out.glob(".*.tmp"):  # unlink removes a planted link itself, never its target
            stale.unlink(missing_ok=True)
    except OSError as err:
        if no_space(err):
            raise DiskFull(out) from None
        raise


def _not_json(token: str) -> Any:
    raise ValueError(f"{token} is not a JSON value (the suite writes null for a number it does not have)")


MAX_INT_DIGITS = 300  # a float holds up to about 1.8e308: a longer integer would overflow where it is compared


def _int(token: str) -> int:
    if len(token.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(token.lstrip('-'))} digits is not a value a run writes")
    return int(token)


def loads(text: str) -> Any:
    """``json.loads`` for results files: ``NaN``/``Infinity`` tokens, an integer too long for a float or too-deep
    nesting are a ValueError too."""
    try:
        return json.loads(text, parse_constant=_not_json, parse_int=_int)
    except RecursionError:
        raise ValueError("nested too deeply to parse") from None


def read_json(path: Path, links: bool = True) -> Any:
    """:func:`loads` of :func:`read_text`: a capped regular file of strict JSON (``links`` False: not a link)."""
    return loads(read_text(path, links=links))


# Summary fields that are shares: outside [0, 1] the file was edited or damaged, not written by a run.
ACCURACIES = ("val_acc", "best_val_acc", "test_acc", "best_test_acc")


def summary_problem(summary: dict[str, Any]) -> str | None:
    """Why a summary's values cannot be a run's (an accuracy outside [0, 1], a depth below 1), or None."""
    for key in ACCURACIES:
        value = summary.get(key)
        if is_number(value) and not 0 <= value <= 1:
            return f"'{key}' is {value!r}, not in [0, 1]"
    for key, low, high, top in ((DEPTH, 1, MAX_DEPTH, MAX_DEPTH), ("seed", 0, 2**63 - 1, "2**63 - 1")):
        value = summary.get(key)
        if is_int(value) and not low <= value <= high:
            return f"'{key}' is {str(value)[:20]}, not from {low} to {top}"
    lr = summary.get(LR)
    if lr is not None and not (is_number(lr) and math.isfinite(lr) and lr > 0):
        return f"'train.lr' is {str(lr)[:20]!r}, not a finite number > 0"
    for key in ("variant", "ablation", "run_id"):  # names land in Markdown headings and table cells
        value = summary.get(key)
        if isinstance(value, str) and any(ord(c) < 32 or ord(c) == 127 for c in value):
            return f"'{key}' holds a line break or another control character"
    for key, allowed in (("failed_reason", FAILED_REASONS), ("diverged_reason", DIVERGED_REASONS)):
        value = summary.get(key)  # a cause lands in findings.md and the report as a word of this list
        if value is not None and value not in allowed:
            return f"'{key}' is {str(value)[:40]!r}, not one of {', '.join(allowed)}"
    # a run of `train.epochs` may record no `train.steps`: its steps done bound it then
    steps = max([v for v in (summary.get("train.steps"), summary.get("steps_done")) if is_int(v)] or [0]) or 10**9
    learn = summary.get("steps_to_learn")
    if learn is not None and not is_int(learn):
        return f"'steps_to_learn' is {str(learn)[:20]!r}, not an integer"
    if is_int(learn) and not 0 <= learn <= steps:
        return f"'steps_to_learn' is {str(learn)[:20]}, not within the run's {steps} steps"
    said = summary.get("crossed")  # diagnostics past their bounds, comma-separated (suite.engine.diagnostics)
    if said not in (None, "") and not (isinstance(said, str) and set(said.split(",")) <= set(DIAGNOSTIC_PEAKS)):
        return f"'crossed' is {str(said)[:40]!r}, not a comma-separated list of {', '.join(DIAGNOSTIC_PEAKS)}"
    for key in DIAGNOSTIC_PEAKS:
        value = summary.get(key)
        if value is not None and not (is_number(value) and math.isfinite(value)):
            return f"'{key}' is {str(value)[:20]!r}, not a finite number"
    for key in MEASURES:  # a mean of two values near 1e308 is inf: the tables would print it, with numpy's warning
        value = summary.get(key)
        if is_number(value) and not 0 <= value <= MEASURE_MAX:
            return f"'{key}' is {str(value)[:20]}, not from 0 to {MEASURE_MAX:g}"
    return None


MEASURES = ("step_time_ms", "throughput", "peak_mem_mb", "wall_s", "num_params")  # times, sizes, counts a run measures
MEASURE_MAX = 1e15  # past any run's (1e15 ms is 30,000 years a step)


def is_int(value: Any) -> bool:  # JSON's true and false read as bools, which Python counts as ints
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# The causes a run's summary may name (suite.engine.outcome, suite.engine.divergence; docs/training.md).
FAILED_REASONS = ("never_learned", "collapsed", "too_low", "unstable")  # unstable: runs before 2026-12-06 only
DIVERGED_REASONS = ("nonfinite", "spike", "collapse", "scale_collapse")
MAX_DEPTH = 1000  # model.depth's range in the run config


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    """The run's summary, or ``None`` if it has not finished; an unreadable one or one holding values no run writes
    (:func:`summary_problem`) counts as unfinished, with a :class:`SuiteWarning`, so the sweep runs it again."""
    path = Path(run_dir) / SUMMARY
    try:
        summary = read_json(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        path, problem = run_dir, "is a file, not a run folder"
    except (OSError, ValueError) as err:  # ValueError: bad JSON or bad UTF-8
        problem = f"not a readable summary ({error_reason(err)})"
    else:
        problem = ("not a JSON object" if not isinstance(summary, dict) else
                   f"'status' is {str(summary.get('status'))[:40]!r}, not one of {', '.join(STATUSES)}"
                   if summary.get("status") not in STATUSES else summary_problem(summary))
    if problem:
        warnings.warn(f"{path}: {problem}; the run will be run again", SuiteWarning, stacklevel=2)
        return None
    return summary


def error_reason(err: BaseException) -> str:
    """Why reading a file failed, in one line: the OS's words, or the first line of the error."""
    return err.strerror if isinstance(err, OSError) and err.strerror else str(err).splitlines()[0]


def metrics_line(record: dict[str, Any]) -> str:
    """One ``metrics.jsonl`` line; every value logged is finite by construction, so a NaN here is a bug and raises."""
    return json.dumps(record, allow_nan=False) + "\n"


MAX_LINE_BYTES = 1 << 26  # one metrics record: a depth-1000 model's per-block diagnostics are about 0.2 MB


class CorruptFile(ValueError):
    """A results file that cannot be read; the message names the file, the line and the fix."""


def read_metrics(run_dir: Path, name: str = METRICS, skip_damaged: bool = False) -> list[dict[str, Any]]:
    """Every record of a run's JSON-lines file ``name`` (``[]`` if none). A cut-off last line is skipped with a warning;
    any other bad line is a :class:`CorruptFile`, or with ``skip_damaged`` (a resumed run) dropped with a warning."""
    path = Path(run_dir) / name
    try:
        f = open_regular(path, max_bytes=None, links=False)  # any length, a regular file in the folder
    except FileNotFoundError:
        return []
    except UnsafeFile as err:
        raise CorruptFile(f"{err}; delete the run folder to rerun it") from None
    records = []
    with f:
        for number, line in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES + 1), b""), 1):
            if len(line) > MAX_LINE_BYTES:  # no record is this long: a damaged file (zeros, no line break)
                raise CorruptFile(f"{path}: line {number} is longer than {MAX_LINE_BYTES} bytes; delete the run "
                                  f"folder to rerun it")
            if not line.strip():
                continue
            record = None
            with contextlib.suppress(ValueError):  # bad JSON, or bytes that are not UTF-8: a damaged line either way
                record = loads(line.decode("utf-8"))
            last = not line.endswith(b"\n")  # a complete line ends with one: only the last can lack it
            if isinstance(record, dict):
                records.append(record)
            elif last or skip_damaged:
                why = "is cut off (a killed writer?); skipped it" if last else "is not a JSON object; dropped it"
                warnings.warn(f"{path}: line {number} {why}" + ("" if last else " from the log"), SuiteWarning,
                              stacklevel=2)
            else:
                raise CorruptFile(f"{path}: line {number} is not a JSON object; delete the run folder to rerun it")
    return records


def last_logged_step(run_dir: Path, tail_bytes: int = 65536) -> int | None:
    """The ``step`` of the last complete record of a run's ``metrics.jsonl`` (reading only its tail), or None."""
    try:
        with open_regular(Path(run_dir) / METRICS, max_bytes=None) as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - tail_bytes))
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            step = int(loads(line)["step"])
        except (ValueError, KeyError, TypeError, OverflowError):  # a torn or cut line; a step of 1e400
            continue
        if 0 <= step < 2**53:
            return step
    return None


def git_commit() -> str:
    """The suite's git commit (``+dirty`` if its tree has changes), or ``unknown`` outside git."""
    root = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def device_name(device: str) -> str:
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        cpu = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), cpu)
    # The vector kernels torch picked: a CPU run is bitwise repeatable only where this matches.
    isa = torch.backends.cpu.get_cpu_capability()
    return f"cpu: {cpu} ({os.cpu_count()} cores, {torch.get_num_threads()} threads, {isa})"


def provenance(device: str, name: str | None = None) -> dict[str, str | None]:
    """Versions, code commit, hardware and start time, recorded in every summary; ``name`` None: looked up (torch)."""
    from suite import __version__

    torch_version = None
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        torch_version = importlib.metadata.version("torch")
    return {"suite_version": __version__, "git_commit": git_commit(), "torch_version": torch_version,
            "python_version": platform.python_version(), "device_name": device_name(device) if name is None else name,
            "hostname": socket.gethostname(), "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def empty_summary(cfg: RunConfig, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A run's summary before any result (status ``error``): the one schema the trainer and the sweep runner share."""
    return {"schema": SCHEMA_VERSION, "run_id": run_id(cfg), "ablation": None, "variant": None, "seed": cfg.seed,
            **(extra or {}), **flatten(to_dict(cfg)), "status": "error", "diverged_step": None, "diverged_reason": None,
            "failed_reason": None, "steps_to_learn": None, "judged_on": None, "error": None, "steps_done": 0,
            "final_train_loss": None, "spikes_recovered": None, "val_acc": None, "best_val_acc": None, "test_acc": None,
            "best_test_acc": None, "train_size": None, "val_size": None, "test_size": None, "step_time_ms": None,
            "throughput": None, "timing_cpu_util": None, "timing_load1": None, "timing_cores": None,
            "timing_contended": None, "peak_mem_mb": None, "num_params": None, "optimizer_impl": None, "resumed_at": [],
            **{f"{name}{end}": None for name in DIAGNOSTIC_PEAKS for end in ("", "_step")}, "crossed": None}


# the instability diagnostics' extremes a summary keeps (suite.engine.diagnostics.PEAKS; docs/training.md)
DIAGNOSTIC_PEAKS = ("attn_logit_peak", "attn_entropy_low", "stream_rms_peak", "stream_growth_peak", "logit_rms_peak",
                    "update_ratio_peak")
