"""The results layout: stable run ids, atomic writes, provenance, reading runs back.

See ``results/README.md`` for the layout and the ``summary.json`` schema.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import socket
import subprocess
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from suite.config import RunConfig, flatten, to_dict

SCHEMA_VERSION = 1
SUMMARY = "summary.json"
CONFIG = "config.yaml"
METRICS = "metrics.jsonl"
CHECKPOINT = "checkpoint.pt"
FINAL_STATUSES = ("ok", "diverged", "failed")  # a rerun skips these; `error` is retried on request
STATUSES = FINAL_STATUSES + ("error",)

# How a run is executed, not what it computes: excluded from the run id, so the same experiment
# lands in the same folder whatever the machine, worker count or data location.
EXECUTION_KEYS = frozenset({"device", "train.threads", "data.num_workers", "data.root", "data.device_max_mb"})


def run_id(cfg: RunConfig) -> str:
    """Stable 12-hex-digit id of a resolved run config.

    Independent of key order and of the machine (``EXECUTION_KEYS`` are left out); any change of a
    hyperparameter gives a new id, so new runs never overwrite old ones.
    """
    flat = {k: v for k, v in flatten(to_dict(cfg)).items() if k not in EXECUTION_KEYS}
    blob = json.dumps(flat, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temp file in the same folder + ``os.replace``: never a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):  # numpy / torch scalars
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    """The run's summary, or ``None`` if it has not finished (no or unreadable summary.json)."""
    path = Path(run_dir) / SUMMARY
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def iter_summaries(root: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every finished run under ``root`` (recursively), sorted by path."""
    for path in sorted(Path(root).rglob(SUMMARY)):
        summary = read_summary(path.parent)
        if summary is not None:
            yield path.parent, summary


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / METRICS
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ----------------------------------------------------------------------------- provenance


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
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"cpu: {cpu} ({os.cpu_count()} cores, {torch.get_num_threads()} threads)"


def provenance(device: str, name: str | None = None) -> dict[str, str | None]:
    """Versions, code commit, hardware and start time, recorded in every summary.

    Args:
        device: the torch device the run uses (``cpu``, ``cuda``).
        name: the device's name if already known; otherwise it is looked up (imports torch).
    """
    from suite import __version__

    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = None
    return {
        "suite_version": __version__,
        "git_commit": git_commit(),
        "torch_version": torch_version,
        "python_version": platform.python_version(),
        "device_name": name if name is not None else device_name(device),
        "hostname": socket.gethostname(),
        "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def empty_summary(cfg: RunConfig, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The summary of a run before it has any result: every schema key, status ``error``.

    Both the trainer and the sweep runner (for a worker that died) start from this, so the two
    never disagree on the schema (results/README.md).
    """
    return {
        "schema": SCHEMA_VERSION, "run_id": run_id(cfg), "ablation": None, "variant": None,
        "seed": cfg.seed, **(extra or {}), **flatten(to_dict(cfg)),
        "status": "error", "diverged_step": None, "diverged_reason": None, "error": None,
        "steps_done": 0, "final_train_loss": None, "test_acc": None, "best_test_acc": None,
        "step_time_ms": None, "throughput": None, "peak_mem_mb": None, "num_params": None,
    }
