"""A hostile user against the public CLI: bad files, bad values, broken results, full disks.

Each case sets up a folder, runs one `suite` command, and classifies what happened. Most cases run
the command in this process through ``suite.cli.main`` (the entry point ``python -m suite`` calls),
with stdout and stderr caught at the file-descriptor level so that worker processes' output counts
too; a case whose point is a real process (a time limit on a hang, a worker that dies, a mounted
disk, a memory limit) runs it in a process of its own, forked from a server that imported the suite
once. Either way the verdict is one of:

- ``clean error``: exit 2 and exactly one ``error:`` line on stderr, no traceback;
- ``handled``: exit 0 (exit 1 for a case whose run is to end in status ``error``), no traceback, and
  the case's own check holds (e.g. a warning was printed, no file was planted, the run resumed);
- ``traceback``, ``hang``, ``silently accepted`` (exit 0 where an error was due), ``wrong outcome``
  (a check failed: data lost, code executed, ...).

Run it: ``.venv/bin/python tests/hostile_cases.py [WORD ...]`` prints a table of every case (or of those
whose name contains a WORD) and exits 1 unless each ends as it should. ``tests/test_hostile.py`` runs
the same cases one by one.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
TIMEOUT = 120  # seconds a case run in its own process may take before it counts as a hang

TINY = [  # a seconds-long `suite train` on synthetic data
    "data.name=synthetic", "data.synthetic_train=64", "data.synthetic_test=32", "data.synthetic_img_size=8",
    "model.patch_size=4", "model.dim=16", "model.heads=2", "model.depth=1", "train.steps=4", "train.batch_size=16",
    "train.log_every=2", "train.eval_every=0", "device=cpu",
]
SMOKE = ROOT / "ablations" / "smoke.yaml"


@dataclass
class Case:
    """One hostile input: ``setup(dir)`` returns the argv after ``suite`` (and may stash state)."""

    name: str
    group: str
    expect: str  # "error" (exit 2, one line), "ok" (exit 0) or "run error" (the run ends in status error: exit 1)
    setup: Callable[[Path], list[str]]
    check: Callable[[Path, subprocess.CompletedProcess], str | None] = lambda d, p: None  # problem or None
    env: dict[str, str] = field(default_factory=dict)
    needs_mount: bool = False  # mounts a tmpfs (root only); runs in its own process
    timeout: float = TIMEOUT
    process: bool = False  # run in a process of its own: a time limit, a dying worker
    memory_mb: int | None = None  # cap its own process's address space: a blow-up ends, as a traceback

    @property
    def own_process(self) -> bool:
        return self.process or self.needs_mount or bool(self.env) or self.memory_mb is not None


@dataclass
class Outcome:
    case: Case
    verdict: str  # "clean error", "handled", or what went wrong
    code: int | None
    seconds: float
    detail: str

    @property
    def good(self) -> bool:
        return self.verdict in ("clean error", "handled")


# ----------------------------------------------------------------------------- helpers


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(textwrap.dedent(text))
    return path


def smoke_run_ids(d: Path, ablation: Path = SMOKE) -> list[str]:
    from suite.sweep.plan import resolve_runs
    from suite.sweep.spec import load_ablation

    # As `suite run` names them on this machine: no GPU, so precision `auto` resolves to fp32.
    return [r.run_id for r in resolve_runs(load_ablation(ablation).runs, None, "cpu")]


def smoke_folder(d: Path) -> Path:
    """``d/out`` marked as the smoke ablation's results folder, as `suite run` leaves it."""
    write(d / "out" / "ablation.yaml", "name: smoke\n")
    return d / "out"


def first_smoke_run(d: Path) -> list[str]:
    """argv that runs only the first run of the smoke ablation into ``d/out``."""
    return ["run", str(SMOKE), "--out", str(d / "out"), "--workers", "1", "--only", "variant=preln,model.depth=1,seed=0"]


def summary_of(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text())


class Payload:
    """A pickle whose loading writes a marker file: the harmless stand-in for `os.system(...)`."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "code from a results folder ran"))


def plant_checkpoint(folder: Path, marker: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "checkpoint.pt", "wb") as f:
        pickle.dump({"model": Payload(marker)}, f)


def warned(p: subprocess.CompletedProcess, text: str) -> str | None:
    return None if any(line.startswith(("warning:", "suite analyze: warning:")) and text in line
                       for line in p.stderr.splitlines()) else f"no warning mentioning {text!r}"


def analysis_runs(d: Path) -> Path:
    """A results folder with two good runs (preln, layerscale) for `suite analyze`."""
    root = d / "res"
    for i, variant in enumerate(["preln", "layerscale"]):
        write(root / "runs" / f"good{i}" / "summary.json", json.dumps({
            "schema": 1, "run_id": f"good{i}", "ablation": "demo", "variant": variant, "seed": 0, "model.depth": 2,
            "model.residual": variant, "status": "ok", "test_acc": 0.8, "step_time_ms": 5.0}))
    return root


def bad_summary(content: bytes | None, name: str = "bad") -> Callable[[Path], list[str]]:
    def setup(d: Path) -> list[str]:
        root = analysis_runs(d)
        if content is None:  # a folder where the summary should be
            (root / "runs" / name / "summary.json").mkdir(parents=True)
        else:
            write(root / "runs" / name / "summary.json", content)
        return ["analyze", str(root), "--no-figures"]
    return setup


def analyzed_without(name: str) -> Callable[[Path, subprocess.CompletedProcess], str | None]:
    def check(d: Path, p: subprocess.CompletedProcess) -> str | None:
        problem = warned(p, f"runs/{name}/summary.json")
        if problem:
            return problem
        runs = (d / "res" / "runs.csv").read_text()
        return f"{name} was analysed" if f"{name}," in runs else None
    return check


# ----------------------------------------------------------------------------- security


def planted_checkpoint(checkpoint_every: int, preempted_mark: bool = False) -> Callable[[Path], list[str]]:
    def setup(d: Path) -> list[str]:
        abl = write(d / "abl.yaml", SMOKE.read_text())
        text = abl.read_text().replace("timing_warmup_steps: 2}", f"timing_warmup_steps: 2, checkpoint_every: {checkpoint_every}}}")
        abl.write_text(text)
        run_id = smoke_run_ids(d, abl)[0]
        plant_checkpoint(smoke_folder(d) / "runs" / run_id, d / "marker")
        if preempted_mark:  # claims the checkpoint was saved at a Slurm preemption, so it is loaded
            write(d / "out" / "runs" / run_id / "preempted.json", '{"step": 3}')
        (d / "run_id").write_text(run_id)
        return ["run", str(abl), "--out", str(d / "out"), "--workers", "1", "--only", "variant=preln,model.depth=1,seed=0"]
    return setup


def no_code_ran(expect_status: str) -> Callable[[Path, subprocess.CompletedProcess], str | None]:
    def check(d: Path, p: subprocess.CompletedProcess) -> str | None:
        if (d / "marker").exists():
            return "the planted checkpoint ran its code"
        folder = d / "out" / "runs" / (d / "run_id").read_text()
        summary = summary_of(folder)
        status = summary["status"]
        if expect_status == "error" and (status != "error" or "refused to load" not in summary["error"]):
            return f"run status {status} ({summary['error']}), expected an error that refuses the checkpoint"
        if expect_status == "final" and status not in ("ok", "failed", "diverged"):
            return f"run status {status} ({summary['error']}), expected it to train from step 0"
        if expect_status == "error" and not (folder / "checkpoint.pt").exists():
            return "the checkpoint of a run that ended in error was deleted"
        return None
    return check


def planted_cifar(d: Path) -> list[str]:
    """A CIFAR-10 folder in the real format whose first batch runs code when unpickled."""
    import numpy as np

    folder = d / "data" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    for name in ["data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch"]:
        (folder / name).write_bytes(pickle.dumps({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 1]}))
    (folder / "batches.meta").write_bytes(pickle.dumps({b"label_names": [b"c%d" % i for i in range(10)]}))
    (folder / "data_batch_1").write_bytes(pickle.dumps({b"data": Payload(d / "marker"), b"labels": [0]}))
    return ["train", "data.name=cifar10", f"data.root={d / 'data'}", "model.patch_size=4", "model.dim=16", "model.heads=2",
            "model.depth=1", "train.steps=2", "train.batch_size=4", "train.eval_every=0", "device=cpu",
            "--out", str(d / "run")]


def no_marker(d: Path, p: subprocess.CompletedProcess) -> str | None:
    if (d / "marker").exists():
        return "the planted pickle ran its code"
    return None if "data_batch_1" in p.stderr else "the error does not name the file"


PRECIOUS = "a file outside the results folder\n"


def elsewhere(d: Path) -> Path:
    """``d/elsewhere``: a folder outside the results folder, with one file that must stay as it is."""
    write(d / "elsewhere" / "checkpoint.pt", PRECIOUS)
    return d / "elsewhere"


def elsewhere_intact(d: Path, p: subprocess.CompletedProcess) -> str | None:
    found = {f.name: f.read_bytes() for f in (d / "elsewhere").iterdir()}
    return None if found == {"checkpoint.pt": PRECIOUS.encode()} else f"written outside the results folder: {sorted(found)}"


def victims_intact(d: Path, p: subprocess.CompletedProcess) -> str | None:
    """Each ``d/victim-*`` file, which a link in the results folder pointed at, is as it was."""
    for f in d.glob("victim-*"):
        if f.read_bytes() != PRECIOUS.encode():
            return f"{f.name} was written through a link"
    return None


def linked_in_sweep(name: str) -> Callable[[Path], list[str]]:
    """`suite run` on a results folder where ``name`` (``runs``, ``claims``, a run folder) is a link to a
    folder elsewhere, or ``.lock`` is a link to a file elsewhere."""
    def setup(d: Path) -> list[str]:
        out = smoke_folder(d)
        target = elsewhere(d)
        if name == "run folder":
            (out / "runs").mkdir()
            os.symlink(target, out / "runs" / smoke_run_ids(d)[0])
        elif name == ".lock":
            os.symlink(d / "elsewhere" / "lock", out / ".lock")
        else:
            os.symlink(target, out / name)
        return first_smoke_run(d)
    return setup


def _dangling(*argv: str) -> Callable[[Path], list[str]]:
    """``argv`` with ``--out`` a link to a path that does not exist."""
    def setup(d: Path) -> list[str]:
        os.symlink(d / "gone", d / "out")
        return [*argv, "--out", str(d / "out")]
    return setup


def linked_in_train(*names: str) -> Callable[[Path], list[str]]:
    """`suite train` (checkpoints every 2 steps) into a run folder where each of ``names`` is a link to a
    file outside it."""
    def setup(d: Path) -> list[str]:
        for name in names:
            victim = write(d / f"victim-{name}", PRECIOUS)
            (d / "run").mkdir(exist_ok=True)
            os.symlink(victim, d / "run" / name)
        return ["train", *TINY, "train.checkpoint_every=2", "--out", str(d / "run")]
    return setup


def linked_in_analysis(name: str) -> Callable[[Path], list[str]]:
    """`suite analyze` of a results folder where output ``name`` is a link: a file for ``runs.csv`` and
    ``findings.md``, a folder for ``tables`` and ``figures``."""
    def setup(d: Path) -> list[str]:
        root = analysis_runs(d)
        if name in ("tables", "figures"):
            os.symlink(elsewhere(d), root / name)
        else:
            os.symlink(write(d / f"victim-{name}", PRECIOUS), root / name)
        return ["analyze", str(root)] + ([] if name == "figures" else ["--no-figures"])
    return setup


OUTSIDE_TEXT = "OUTSIDE-SECRET-7f3a"


def linked_into_page(name: str) -> Callable[[Path], list[str]]:
    """`suite report` of an analysed folder whose ``name`` (``ablation.yaml``, ``runs.csv``) was then replaced by
    a link to a file outside it that holds :data:`OUTSIDE_TEXT` (as a description, or an error cell)."""
    def setup(d: Path) -> list[str]:
        from suite.analysis.analyze import analyze

        root = analysis_runs(d)
        write(root / "ablation.yaml", DEMO_ABLATION)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            analyze(root, figures=False)
        text = (root / name).read_text()
        outside = (text.replace("name: demo", f"name: demo\ndescription: {OUTSIDE_TEXT}") if name == "ablation.yaml"
                   else text.replace(",ok,", f",ok,{OUTSIDE_TEXT}", 1))
        (root / name).unlink()
        os.symlink(write(d / f"outside-{name}", outside), root / name)
        if name == "runs.csv":
            shutil.rmtree(root / "runs")  # a folder shared as runs.csv alone: the link is all there is
        return ["report", str(root)]
    return setup


def _manifest_depth(token: str) -> Callable[[Path], list[str]]:
    """`suite report` of an analysed folder whose analysis.json lists the depth ``token`` (a JSON number)."""
    def setup(d: Path) -> list[str]:
        from suite.analysis.analyze import analyze

        root = analysis_runs(d)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            analyze(root, figures=False)
        data = json.loads((root / "analysis.json").read_text())
        data["depths"] = ["DEPTH"]
        (root / "analysis.json").write_text(json.dumps(data).replace('"DEPTH"', token))
        return ["report", str(root)]
    return setup


def nothing_from_outside(d: Path, p: subprocess.CompletedProcess) -> str | None:
    """No page holds the outside file's text."""
    for page in d.rglob("*.html"):
        if OUTSIDE_TEXT in page.read_text(errors="replace"):
            return f"{page.name} holds text from a file outside the folder"
    return None


def special_file(where: str, kind: str) -> Callable[[Path], list[str]]:
    """A results folder where a regular file is expected but a FIFO (nobody writes to it) or a link to
    ``/dev/zero`` stands: ``where`` is ``summary``, ``metrics`` or ``ablation`` and names the command."""
    def plant(path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(path) if kind == "fifo" else os.symlink("/dev/zero", path)

    def setup(d: Path) -> list[str]:
        if where.startswith("analyze"):
            root = analysis_runs(d)
            plant(root / "runs" / ("bad/summary.json" if where == "analyze summary" else "good0/metrics.jsonl"))
            return ["analyze", str(root)] + (["--no-figures"] if where == "analyze summary" else [])
        ids = smoke_run_ids(d)
        out = d / "out"
        write(out / "ablation.yaml", SMOKE.read_text())
        write(out / "run_ids.json", json.dumps(ids))
        (d / "run_id").write_text(ids[0])
        if where.endswith("ablation"):
            (out / "ablation.yaml").unlink()
            plant(out / "ablation.yaml")
        else:
            plant(out / "runs" / ids[0] / "summary.json")
        return ["status", str(out)] if where.startswith("status") else ["run", str(SMOKE), "--out", str(out), "--dry-run"]
    return setup


def refused_special(d: Path, p: subprocess.CompletedProcess) -> str | None:
    """A FIFO is "not a regular file"; a link (to /dev/zero) is refused as a link before it is followed."""
    said = "not a regular file" in p.stderr or "is a symbolic link" in p.stderr
    return None if said else "the error does not say the file is not a regular one"


def warned_run(d: Path, p: subprocess.CompletedProcess) -> str | None:
    return warned(p, f"runs/{(d / 'run_id').read_text()}/summary.json")


def slurm_damaged_setup(d: Path) -> list[str]:
    """A results folder whose Slurm bookkeeping is garbage: a submission record and a claim."""
    run_id = smoke_run_ids(d)[0]
    folder = smoke_folder(d)
    write(folder / "slurm" / "submission.json", b"\xff{not json")
    write(folder / "claims" / f"{run_id}.json", "[1, 2]")
    old = time.time() - 3600  # an hour old: its lease is long gone
    os.utime(folder / "claims" / f"{run_id}.json", (old, old))
    return ["run", str(SMOKE), "--out", str(folder), "--backend", "slurm", "--slurm-cluster", "local",
            "--slurm-poll", "0.3", "--device", "cpu", "--only", "seed=0,model.depth=1", "--workers", "1"]


def slurm_damaged_check(d: Path, p: subprocess.CompletedProcess) -> str | None:
    found = [summary_of(f)["status"] for f in (d / "out" / "runs").iterdir() if (f / "summary.json").exists()]
    return None if found == ["ok", "ok"] else f"expected 2 ok runs, found {found}"


def umask_setup(d: Path) -> list[str]:
    return ["train", *TINY, "--out", str(d / "run")]


def umask_check(d: Path, p: subprocess.CompletedProcess) -> str | None:
    mode = (d / "run" / "summary.json").stat().st_mode & 0o777
    return None if mode == 0o644 else f"summary.json has mode {oct(mode)} under umask 022"


# ----------------------------------------------------------------------------- data loss


def torn_resume_setup(d: Path) -> list[str]:
    from suite.config import load_config
    from suite.engine import train

    overrides = [o for o in TINY if not o.startswith("train.steps")] + ["train.steps=12", "train.checkpoint_every=4"]
    cfg = load_config(None, overrides)

    def kill(step: int) -> None:
        if step == 9:
            raise KeyboardInterrupt  # a killed process: checkpoint at step 8, metrics up to step 8

    try:
        train(cfg, d / "run", on_step=kill)
    except KeyboardInterrupt:
        pass
    with open(d / "run" / "metrics.jsonl", "a") as f:
        f.write('{"kind": "train", "step": 10, "lo')  # the disk filled up mid-line
    return ["train", *overrides, "--out", str(d / "run")]


def torn_resume_check(d: Path, p: subprocess.CompletedProcess) -> str | None:
    s = summary_of(d / "run")
    if s["status"] == "error":
        return f"the resumed run ended in error: {s['error']}"
    steps = [json.loads(line)["step"] for line in (d / "run" / "metrics.jsonl").read_text().splitlines()]
    if steps != sorted(steps) or steps[-1] != 12:
        return f"metrics steps after resuming: {steps}"
    return None if "is cut off" in p.stderr else "no warning about the cut-off line"


def torn_lost_setup(d: Path) -> list[str]:
    run_id = smoke_run_ids(d)[0]
    write(smoke_folder(d) / "runs" / run_id / "metrics.jsonl", '{"kind": "train", "step": 0}\n{"kind": "tr')
    (d / "run_id").write_text(run_id)
    (d / "env.json").write_text(json.dumps({"SUITE_TEST_CRASH_RUN": run_id}))  # its worker dies at once
    return first_smoke_run(d)


def torn_lost_check(d: Path, p: subprocess.CompletedProcess) -> str | None:
    s = summary_of(d / "out" / "runs" / (d / "run_id").read_text())
    ok = s["status"] == "error" and s["error"].startswith("worker died 3 times on this run (last: exit code 3)")
    return None if ok else f"summary: {s}"


# ----------------------------------------------------------------------------- hangs


def stale_submission_setup(d: Path) -> list[str]:
    """A submission.json whose job pid now belongs to another process (pid 1 here: never a job of
    submitit's local executor): `suite run` refused forever that "Slurm jobs are still working"."""
    write(d / "out" / "slurm" / "submission.json", json.dumps({"cluster": "local", "jobs": ["1"]}))
    (d / "run_id").write_text(first_run_id(d))
    return first_smoke_run(d)


def first_run_id(d: Path) -> str:
    from suite.sweep.plan import resolve_runs
    from suite.sweep.spec import load_ablation

    runs = resolve_runs(load_ablation(SMOKE).runs, "cpu", "cpu")
    return next(r.run_id for r in runs if (r.variant, r.cfg.model.depth, r.seed) == ("preln", 1, 0))


def ran_check(d: Path, p: subprocess.CompletedProcess) -> str | None:
    folder = d / "out" / "runs" / (d / "run_id").read_text()
    if not (folder / "summary.json").exists():
        return "the run was not run"
    return None if summary_of(folder)["status"] in ("ok", "failed", "diverged") else "the run did not end"


def huge_grid(d: Path) -> Path:
    return write(d / "huge.yaml", """\
        name: huge
        base: {data: {name: synthetic}}
        grid:
          train.lr: [%s]
          model.depth: [%s]
        variants: {a: {}, b: {model.residual: layerscale}}
        seeds: 10
        """ % (", ".join(f"{1e-4 * (i + 1):.6g}" for i in range(1000)), ", ".join(str(i) for i in range(1, 101))))


def ray_setup(d: Path) -> list[str]:
    return ["run", str(SMOKE), "--backend", "ray", "--ray-address", "127.0.0.1:1", "--ray-timeout", "3",
            "--out", str(d / "out")]


def nothing_written(d: Path, p: subprocess.CompletedProcess) -> str | None:
    return "the results folder was created" if (d / "out").exists() else None


# ----------------------------------------------------------------------------- broken disks


def mount_tmpfs(d: Path, size: str, readonly: bool = False) -> Path:
    mnt = d / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], check=True, capture_output=True)
    return mnt


def unmount(d: Path) -> None:
    mnt = d / "mnt"
    if mnt.exists() and os.path.ismount(mnt):
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def disk_full_setup(d: Path, *flags: str) -> list[str]:
    mnt = mount_tmpfs(d, "400k")
    # Leave room for a run or two of the smoke ablation, not for all eight.
    free = shutil.disk_usage(mnt).free
    (mnt / "filler").write_bytes(b"\0" * max(0, free - 60 * 1024))
    return ["run", str(SMOKE), "--out", str(mnt / "out"), "--workers", "1", *flags]


def mlflow_down_setup(d: Path) -> list[str]:
    """MLFLOW_TRACKING_URI at a port nobody listens on: MLflow's defaults held the run ~4 minutes."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (d / "env.json").write_text(json.dumps({"MLFLOW_TRACKING_URI": f"http://127.0.0.1:{port}"}))
    return ["train", *TINY, "train.log_to=[mlflow]", "--out", str(d / "run")]


def mlflow_down_check(d: Path, p: subprocess.CompletedProcess) -> str | None:
    warned = [line for line in p.stderr.splitlines() if "mlflow failed and is off for this run" in line]
    return None if len(warned) == 1 else f"{len(warned)} mlflow warnings, not 1"


def disk_full_train_setup(d: Path) -> list[str]:
    """`suite train` whose checkpoint does not fit: torch.save says `RuntimeError: unexpected pos`, and the
    run's traceback then had no room in log.txt either (a traceback, or a run recorded as `error`)."""
    mnt = mount_tmpfs(d, "600k")  # a checkpoint of ~400 kB: one of its tensors is what does not fit
    free = shutil.disk_usage(mnt).free
    (mnt / "filler").write_bytes(b"\0" * max(0, free - 100 * 1024))
    return ["train", *_tiny("model.dim=128", "model.depth=2", "train.steps=40", "train.log_every=10",
                            "train.checkpoint_every=5"), "--out", str(mnt / "run")]


def disk_full_train_check(d: Path, p: subprocess.CompletedProcess) -> str | None:
    if "no space left on" not in p.stderr:
        return "no 'no space left on' message"
    if (d / "mnt" / "run" / "summary.json").exists():
        return "a summary was written: the run counts as finished"
    return None


def disk_full_check(d: Path, p: subprocess.CompletedProcess) -> str | None:
    if "no space left on" not in p.stderr:
        return "no 'no space left on' message"
    out = d / "mnt" / "out"
    leftovers = [str(f.relative_to(out)) for f in out.rglob("*") if f.name.endswith((".tmp",)) or
                 (f.name == "log.txt" and f.stat().st_size == 0)] if out.exists() else []
    if leftovers:
        return f"left behind: {leftovers}"
    for f in out.rglob("summary.json") if out.exists() else []:
        try:
            json.loads(f.read_text())
        except ValueError:
            return f"a damaged summary: {f}"
    return None


def readonly_done_setup(d: Path) -> list[str]:
    mnt = mount_tmpfs(d, "20m")
    argv = first_smoke_run(mnt)
    proc = in_process(argv, d)  # the run to find done; the case itself runs in a process of its own
    if proc.returncode:
        raise RuntimeError(f"setup run failed: {proc.stderr[-500:]}")
    subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True, capture_output=True)
    return argv


def readonly_todo_setup(d: Path) -> list[str]:
    mnt = mount_tmpfs(d, "1m")
    subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True, capture_output=True)
    return first_smoke_run(mnt)


# ----------------------------------------------------------------------------- the cases


def _argv(*argv: str) -> Callable[[Path], list[str]]:
    return lambda d: [a.replace("{d}", str(d)) for a in argv]


def _file_then(argv: list[str], content: str | bytes, name: str = "x.yaml") -> Callable[[Path], list[str]]:
    def setup(d: Path) -> list[str]:
        path = write(d / name, content)
        return [a.replace("{f}", str(path)).replace("{d}", str(d)) for a in argv]
    return setup


def _out_loop(d: Path) -> list[str]:
    (d / "a").symlink_to(d / "b")
    (d / "b").symlink_to(d / "a")
    return ["run", str(SMOKE), "--out", str(d / "a")]


def _nan_setup(d: Path) -> list[str]:
    # Through the function every summary is written with: NaN and Infinity become null.
    from suite import store

    store.write_json(d / "summary.json", {"test_acc": math.nan, "final_train_loss": math.inf})
    return ["validate", str(SMOKE)]


def _nan_check(d: Path, p: subprocess.CompletedProcess) -> str | None:
    def refuse(token: str):
        raise ValueError(f"{token} in strict JSON")

    try:
        data = json.loads((d / "summary.json").read_text(), parse_constant=refuse)
    except ValueError as err:
        return str(err)
    return None if data == {"test_acc": None, "final_train_loss": None} else f"wrote {data}"


def _rerun_damaged(kind: str) -> Callable[[Path], list[str]]:
    def setup(d: Path) -> list[str]:
        run_id = smoke_run_ids(d)[0]
        folder = smoke_folder(d) / "runs" / run_id
        if kind == "list":
            write(folder / "summary.json", "[1, 2]")
        elif kind == "file-for-folder":
            write(folder, "not a folder")
        elif kind == "folder-for-summary":
            (folder / "summary.json").mkdir(parents=True)
        (d / "run_id").write_text(run_id)
        return first_smoke_run(d)
    return setup


def _rerun_check(d: Path, p: subprocess.CompletedProcess) -> str | None:
    folder = d / "out" / "runs" / (d / "run_id").read_text()
    problem = warned(p, (d / "run_id").read_text())
    if problem:
        return problem
    return None if summary_of(folder)["status"] in ("ok", "failed", "diverged") else "the run was not run again"


def _missing_key(key: str) -> Callable[[Path], list[str]]:
    def setup(d: Path) -> list[str]:
        root = analysis_runs(d)
        good = json.loads((root / "runs" / "good0" / "summary.json").read_text())
        del good[key]
        good["run_id"] = "bad"
        write(root / "runs" / "bad" / "summary.json", json.dumps(good))
        return ["analyze", str(root), "--no-figures"]
    return setup


def _depth_is_int(d: Path, p: subprocess.CompletedProcess) -> str | None:
    problem = analyzed_without("bad")(d, p)
    table = (d / "res" / "tables" / "summary.md").read_text()
    return problem or ("depth 2.0" in table and "depth became a float") or ("not run" in table and "a group shows 'not run'") or None


BASE_ABLATION = """\
    name: x
    base: {data: {name: synthetic, synthetic_img_size: 28}}
    variants: {a: {}}
    """  # valid as it stands (patch 7 divides 28 px), so each case fails only for its own reason


def _analysis_with(name: str, content: str) -> Callable[[Path], list[str]]:
    """A results folder with good runs and a damaged ``ablation.yaml``."""
    def setup(d: Path) -> list[str]:
        root = analysis_runs(d)
        write(root / name, content)
        return ["analyze", str(root), "--no-figures"]
    return setup


DEMO_ABLATION = "name: demo\nvariants: {preln: {}, layerscale: {}}\n"


VALID_ABLATION = BASE_ABLATION


def _tiny(*kvs: str) -> list[str]:
    """TINY with each of ``kvs`` in place of TINY's value for its key (a key may be given once)."""
    keys = {kv.split("=", 1)[0] for kv in kvs}
    return [o for o in TINY if o.split("=", 1)[0] not in keys] + list(kvs)


def _summary_of(**fields) -> bytes:
    """A bad run's summary for `suite analyze`: a good run's fields with ``fields`` over them."""
    return json.dumps({"run_id": "bad", "variant": "preln", "status": "ok", "seed": 1, "model.depth": 2,
                       "test_acc": 0.5, **fields}).encode()


DEEP_JSON = "[" * 100_000 + "]" * 100_000  # json.loads recurses once per level


def _sweep_with_summary(content: str, command: str) -> Callable[[Path], list[str]]:
    """A smoke results folder whose first run's summary.json holds ``content``; ``command`` is
    ``run --dry-run``, ``status`` or ``run`` (the first run only)."""
    def setup(d: Path) -> list[str]:
        ids = smoke_run_ids(d)
        write(d / "out" / "ablation.yaml", SMOKE.read_text())
        write(d / "out" / "run_ids.json", json.dumps(ids))
        write(d / "out" / "runs" / ids[0] / "summary.json", content)
        (d / "run_id").write_text(ids[0])
        if command == "status":
            return ["status", str(d / "out")]
        return ["run", str(SMOKE), "--out", str(d / "out"), "--dry-run"] if command == "run --dry-run" else first_smoke_run(d)
    return setup


def _pending_sweep(d: Path) -> Path:
    """A smoke results folder with nothing run yet: `suite status --watch` keeps watching it."""
    write(d / "out" / "ablation.yaml", SMOKE.read_text())
    write(d / "out" / "run_ids.json", json.dumps(smoke_run_ids(d)))
    return d / "out"


def _says(*words: str) -> Callable[[Path, subprocess.CompletedProcess], str | None]:
    """The error names the key or option: every one of ``words`` is in stderr."""
    return lambda d, p: next((f"the error does not mention {w!r}" for w in words if w not in p.stderr), None)


def TINY_ARGV() -> list[str]:  # noqa: N802 (a constant's shape)
    return ["train", *TINY]


def _claims_damaged(how: str) -> Callable[[Path], list[str]]:
    """A smoke results folder with nothing run yet and a damaged claims/ or workers/ (``how``: ``folder`` a
    claim that is a folder, ``pid`` a claim whose pid no process can have, ``workers`` workers/ a file)."""
    def setup(d: Path) -> list[str]:
        out = _pending_sweep(d)
        first = smoke_run_ids(d)[0]
        if how == "folder":
            (out / "claims" / f"{first}.json").mkdir(parents=True)
        elif how == "pid":
            import socket
            write(out / "claims" / f"{first}.json", json.dumps({"owner": "x", "host": socket.gethostname(),
                                                                "pid": 10**30, "token": "t", "attempt": 1}))
            return ["status", str(out)]
        else:
            write(out / "workers", "")
        return first_smoke_run(d)
    return setup


ALIAS_BOMB = "name: bomb\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10)) + "description: *a9\n"


CASES: list[Case] = [
    # security
    # A sweep whose every run ends `error` exits 1: these sweeps run one run, which is refused.
    Case("planted checkpoint, run with checkpoints", "security", "run error", planted_checkpoint(2), no_code_ran("error")),
    Case("planted checkpoint, run without checkpoints", "security", "ok", planted_checkpoint(0), no_code_ran("final")),
    Case("planted checkpoint marked as preempted", "security", "run error", planted_checkpoint(0, True),
         no_code_ran("error")),
    Case("planted CIFAR pickle", "security", "run error", planted_cifar, no_marker),
    *[Case(f"{name} is a link: suite run refuses", "security", "error", linked_in_sweep(name), elsewhere_intact)
      for name in ("run folder", "runs", "claims", "workers", ".lock")],
    *[Case(f"{name} is a link: suite train refuses", "security", "error", linked_in_train(name), victims_intact)
      for name in ("log.txt", "metrics.jsonl")],
    Case("checkpoint.tmp, summary.json, config.yaml are links: suite train refuses the folder", "security", "error",
         linked_in_train("checkpoint.tmp", "summary.json", "config.yaml"), victims_intact),
    *[Case(f"{name} is a link: suite analyze replaces it", "security", "ok", linked_in_analysis(name), victims_intact)
      for name in ("runs.csv", "findings.md")],
    *[Case(f"{name}/ is a link: suite analyze refuses", "security", "error", linked_in_analysis(name),
           elsewhere_intact) for name in ("tables", "figures")],
    *[Case(f"summary.json is a {kind}: {command.removesuffix(' summary')}", "security", "ok", special_file(command, kind),
           analyzed_without("bad") if command.startswith("analyze") else warned_run, process=True, timeout=60,
           memory_mb=4096) for kind in ("fifo", "link to /dev/zero") for command in ("run --dry-run", "status", "analyze summary")],
    Case("metrics.jsonl is a link to /dev/zero: analyze", "security", "error", special_file("analyze metrics", "zero"),
         refused_special, timeout=60, memory_mb=4096),
    *[Case(f"ablation.yaml is a {kind}: {command}", "security", "error", special_file(f"{command} ablation", kind),
           refused_special, timeout=60, memory_mb=4096) for kind in ("fifo", "link to /dev/zero") for command in ("run --dry-run", "status")],
    Case("files honour the umask", "security", "ok", umask_setup, umask_check),
    # data loss
    Case("torn last metrics line, then resume", "data loss", "ok", torn_resume_setup, torn_resume_check),
    Case("worker dies with a torn metrics line", "data loss", "run error", torn_lost_setup, torn_lost_check,
         process=True),  # its one run is recorded as error: the sweep exits 1
    # hangs and unbounded work
    Case("ray address where nothing listens", "hang", "error", ray_setup, nothing_written, timeout=60, process=True),
    Case("2,000,000-run grid: validate", "hang", "error", lambda d: ["validate", str(huge_grid(d))], timeout=60,
         process=True),
    Case("2,000,000-run grid: run --dry-run", "hang", "error",
         lambda d: ["run", str(huge_grid(d)), "--dry-run"], timeout=60, process=True),
    # tracebacks
    Case("non-UTF-8 ablation", "traceback", "error", _file_then(["validate", "{f}"], b"name: caf\xe9\n")),
    Case("binary ablation", "traceback", "error", _file_then(["validate", "{f}"], bytes(range(256)) * 4)),
    Case("non-UTF-8 run config", "traceback", "error", _file_then(["train", "{f}"], b"seed: 1 # \xff\xfe\n")),
    Case("model.heads 0 in an ablation", "traceback", "error",
         _file_then(["validate", "{f}"], BASE_ABLATION + "grid: {model.heads: [0]}\n")),
    Case("suite train model.heads=0", "traceback", "error", _argv("train", "model.heads=0")),
    Case("suite bench --heads 0", "traceback", "error", _argv("bench", "--heads", "0", "--out", "{d}/b")),
    Case("suite train data.val_fraction=1.5", "silent", "error", _argv("train", "data.val_fraction=1.5")),
    Case("suite train train.eval_every=-5", "silent", "error", _argv("train", "train.eval_every=-5")),
    Case("suite cost on a missing file", "traceback", "error", _argv("cost", "{d}/nope.yaml")),
    Case("suite status on a folder no sweep wrote", "traceback", "error", _argv("status", "{d}")),
    Case("suite propagate on a missing file", "traceback", "error", _argv("propagate", "{d}/nope.yaml")),
    Case("suite status on a broken ablation.yaml", "traceback", "error",
         _file_then(["status", "{d}"], "name: [unclosed\n", name="ablation.yaml")),
    Case("suite cost --measured 0@12", "silent", "error", _argv("cost", str(SMOKE), "--measured", "0@12")),
    # the primary comparison and planning
    Case("primary naming no variant", "silent", "error",
         _file_then(["validate", "{f}"], BASE_ABLATION + "primary: {scheme: b, baseline: a}\n")),
    Case("primary as a list", "traceback", "error", _file_then(["validate", "{f}"], BASE_ABLATION + "primary: [a]\n")),
    Case("suite analyze: ablation.yaml with a broken primary", "traceback", "error",
         _analysis_with("ablation.yaml", DEMO_ABLATION + "primary: {scheme: layerscale, baseline: nope}\n")),
    Case("suite plan on a folder without runs", "traceback", "error", _argv("plan", "{d}")),
    Case("suite plan --effect 0", "silent", "error", lambda d: ["plan", str(analysis_runs(d)), "--effect", "0"]),
    Case("suite train train.log_to=[tb]", "silent", "error", _argv("train", "train.log_to=[tb]")),
    Case("suite train xavier init on timm's ViT", "traceback", "error",
         _argv("train", "model.backend=timm", "model.residual=layerscale", "model.weight_init=xavier")),
    Case("suite run --pack 4 --backend ray", "silent", "ok",  # packing works on every backend; a dry run asks no Ray
         lambda d: ["run", str(SMOKE), "--out", str(d / "out"), "--pack", "4", "--backend", "ray", "--dry-run"]),
    Case("suite train train.log_to=[wandb, wandb]", "silent", "error", _argv("train", "train.log_to=[wandb, wandb]")),
    Case("suite run --backend slurm without sbatch", "traceback", "error",
         lambda d: ["run", str(SMOKE), "--out", str(d / "out"), "--backend", "slurm"]),
    Case("suite run --slurm-opt without =", "traceback", "error",
         lambda d: ["run", str(SMOKE), "--out", str(d / "out"), "--backend", "slurm", "--slurm-cluster", "local",
                    "--slurm-opt", "account"]),
    Case("suite run --slurm-lease 0", "silent", "error",  # --slurm-lease is the old spelling of --lease
         lambda d: ["run", str(SMOKE), "--out", str(d / "out"), "--backend", "slurm", "--slurm-lease", "0"],
         lambda d, p: None if "--lease 0.0: must be >= 1" in p.stderr else f"not the --lease message: {p.stderr}"),
    Case("garbage Slurm submission record and claim", "traceback", "ok", slurm_damaged_setup, slurm_damaged_check),
    Case("suite cost --tflops -5", "silent", "error", _argv("cost", str(SMOKE), "--tflops", "-5")),
    Case("summary.json is a list", "traceback", "ok", bad_summary(b"[1, 2, 3]"), analyzed_without("bad")),
    Case("summary.json is a folder", "traceback", "ok", bad_summary(None), analyzed_without("bad")),
    Case("summary.json is not UTF-8", "traceback", "ok", bad_summary(b'{"status": "ok\xff"}'), analyzed_without("bad")),
    Case("summary.json has test_acc 'abc'", "traceback", "ok",
         bad_summary(json.dumps({"run_id": "bad", "variant": "preln", "status": "ok", "seed": 1, "model.depth": 2,
                                 "test_acc": "abc"}).encode()), analyzed_without("bad")),
    Case("suite run over a summary that is a list", "traceback", "ok", _rerun_damaged("list"), _rerun_check),
    Case("suite run over a run folder that is a file", "traceback", "ok", _rerun_damaged("file-for-folder"),
         _rerun_check),
    Case("suite run over a summary that is a folder", "traceback", "ok", _rerun_damaged("folder-for-summary"),
         _rerun_check),
    Case("suite run --out under /proc", "traceback", "error",
         lambda d: ["run", str(SMOKE), "--out", "/proc/self/no/such", "--only", "seed=0,model.depth=1"]),
    Case("suite run --out /dev/full", "traceback", "error", lambda d: ["run", str(SMOKE), "--out", "/dev/full"]),
    Case("suite run --out an existing file", "traceback", "error",
         _file_then(["run", str(SMOKE), "--out", "{f}"], "a file", name="file.txt")),
    Case("suite train --out /dev/full", "traceback", "error", lambda d: ["train", *TINY, "--out", "/dev/full"]),
    Case("suite bench --out /proc/...", "traceback", "error",
         lambda d: ["bench", "--out", "/proc/self/no/such", "--rounds", "6"]),
    Case("read-only results folder, nothing left to run", "traceback", "ok", readonly_done_setup, needs_mount=True),
    Case("read-only results folder, runs to do", "traceback", "error", readonly_todo_setup, needs_mount=True),
    Case("disk full during a sweep", "traceback", "error", disk_full_setup, disk_full_check, needs_mount=True),
    Case("disk full during suite train (checkpoint, log.txt)", "traceback", "error", disk_full_train_setup,
         disk_full_train_check, needs_mount=True),
    Case("suite bench-check --threads 0", "traceback", "error", _argv("bench-check", "--threads", "0", "--out", "{d}")),
    Case("suite bench-check --threads 10^11", "traceback", "error",
         _argv("bench-check", "--threads", "100000000000", "--out", "{d}"), _says("--threads")),
    Case("suite bench-check --step-rounds 0", "traceback", "error",
         _argv("bench-check", "--step-rounds", "0", "--out", "{d}")),
    Case("suite bench --rounds 0", "traceback", "error", _argv("bench", "--rounds", "0", "--out", "{d}")),
    # silent acceptance
    *[Case(f"suite train {kv}", "silent", "error", _argv("train", kv)) for kv in (
        "model.patch_size=0", "train.lr=.nan", "train.lr=.inf", "model.layerscale.init=.nan",
        "data.synthetic_classes=1", "train.checkpoint_every=-1", "train.eval_every=-5", "train.threads=0")],
    Case("NaN and Infinity in summary.json", "silent", "ok", _nan_setup, _nan_check),
    Case("one key dotted and nested", "silent", "error",
         _file_then(["validate", "{f}"], BASE_ABLATION.replace("base: {data: {name: synthetic, synthetic_img_size: 28}}",
                                                               "base: {model.depth: 2, model: {depth: 3}}"))),
    Case("--only ','", "silent", "error", lambda d: ["run", str(SMOKE), "--only", ",", "--dry-run"]),
    Case("summary without model.depth", "silent", "ok", _missing_key("model.depth"), _depth_is_int),
    Case("summary without seed", "silent", "ok", _missing_key("seed"), _depth_is_int),
    # tracebacks, late errors and silent acceptance -> one line, exit 2, before anything runs
    *[Case(f"exclude matching every run: {cmd}", "traceback", "error",
           _file_then([cmd, "{f}", *([] if cmd == "validate" else ["--out", "{d}/out"])],
                      VALID_ABLATION + "exclude: [{variant: a}]\n"), _says("exclude", "removes all"))
      for cmd in ("validate", "run")],
    *[Case(f"summary with model.depth {depth}", "traceback", "ok", bad_summary(_summary_of(**{"model.depth": depth})),
           analyzed_without("bad")) for depth in (0, -5)],
    Case("suite bench --seed -1", "traceback", "error", _argv("bench", "--seed", "-1", "--out", "{d}/b"), _says("--seed")),
    *[Case(f"{what} with a trailing newline", "silent", "error",
           _file_then(["validate", "{f}"], text), _says(what)) for what, text in (
        ("name", 'name: "x\\n"\nvariants: {a: {}}\n'), ("variants", 'name: x\nvariants: {"a\\n": {}}\n'))],
    Case("variant name with a |", "silent", "error", _file_then(["validate", "{f}"], "name: x\nvariants: {'a|b': {}}\n"),
         _says("variants")),
    *[Case(f"suite train {kv}", "silent", "error", _argv("train", *_tiny(kv), "--out", "{d}/run"), _says(key))
      for kv, key in (("train.lr='1_0'", "train.lr"), ("train.min_lr=0.1", "train.min_lr"), ("seed=" + str(2**70), "seed"),
                      ("model.patch_size=3", "model.patch_size"), ("model.num_classes=5", "model.num_classes"))],
    Case("the same key twice on the command line", "silent", "error",
         _argv("train", *TINY, "seed=1", "seed=2", "--out", "{d}/run"), _says("seed", "twice")),
    Case("seeds: [2**70]", "silent", "error", _file_then(["validate", "{f}"], VALID_ABLATION + f"seeds: [{2**70}]\n"),
         _says("seeds")),
    *[Case(f"summary.json has {what}: analyze", "silent", "ok", bad_summary(content), analyzed_without("bad"))
      for what, content in (("test_acc 1.5", _summary_of(test_acc=1.5)), ("test_acc -0.5", _summary_of(test_acc=-0.5)),
                            ("a NaN token", _summary_of().replace(b'"test_acc": 0.5', b'"test_acc": NaN')),
                            ("an Infinity token", _summary_of().replace(b'"test_acc": 0.5', b'"final_train_loss": Infinity')))],
    *[Case(f"summary.json has {what}: suite run runs it again", "silent", "ok",
           _sweep_with_summary(content, "run"), _rerun_check) for what, content in (
        ("test_acc 1.5", '{"status": "ok", "test_acc": 1.5}'), ("a NaN token", '{"status": "ok", "test_acc": NaN}'))],
    Case("suite cost --tflops inf", "silent", "error", _argv("cost", str(SMOKE), "--tflops", "inf"), _says("--tflops")),
    Case("suite cost --tflops 1e-300 (a 300-digit estimate)", "silent", "error",
         _argv("cost", str(SMOKE), "--tflops", "1e-300"), _says("from 1e-06 to 1e+06")),
    Case("suite run --out a dangling link", "silent", "error", _dangling("run", str(SMOKE), "--device", "cpu"),
         _says("which does not exist")),
    Case("suite train --out a dangling link", "silent", "error", _dangling("train", *TINY), _says("which does not exist")),
    Case("suite cost --measured 5@100000", "silent", "error", _argv("cost", str(SMOKE), "--measured", "5@100000"),
         _says("--measured")),
    Case("suite train --out ''", "silent", "error", _argv("train", *TINY, "--out", ""), _says("--out")),
    # an integer flag given in exponent notation: argparse printed its usage and `suite run: error: ...`
    *[Case(f"suite {cmd} {flag} 1e9", "traceback", "error", _argv(cmd, flag, "1e9", *rest), _says(flag, "1000000000"))
      for cmd, flag, rest in (("run", "--workers", [str(SMOKE), "--dry-run"]), ("bench", "--depth", ["--out", "{d}/b"]))],
    Case("suite train --nope (an unknown option)", "traceback", "error", _argv("train", "--nope"),
         _says("--nope", "--help")),
    Case("data.test_fraction leaving an empty validation split", "late", "error",
         _argv("train", "data.name=digits", "model.patch_size=4", "data.test_fraction=0.9999", "train.steps=1",
               "--out", "{d}/run"), _says("data.test_fraction")),
    Case("data.root that is a file", "late", "error",
         _file_then(["train", "data.name=cifar10", "model.patch_size=4", "data.root={f}", "--out", "{d}/run"], "a file",
                    name="file.txt"), _says("data.root")),
    # round two: bounded work (own processes: before the fix they allocate gigabytes, hang or crash)
    Case("submission.json naming a pid another process holds now", "hang", "ok", stale_submission_setup, ran_check,
         process=True, timeout=120),
    *([Case("MLFLOW_TRACKING_URI at a closed port", "hang", "ok", mlflow_down_setup, mlflow_down_check, timeout=90)]
      if importlib.util.find_spec("mlflow") else []),
    Case("seeds: 1000000000", "blow-up", "error", _file_then(["validate", "{f}"], VALID_ABLATION + "seeds: 1000000000\n"),
         _says("runs"), process=True, timeout=60, memory_mb=4096),
    *[Case(f"suite train {kv}", "blow-up", "error", _argv("train", *_tiny(kv), "--out", "{d}/run"),
           _says(kv.split("=")[0]),
           process=True, timeout=60, memory_mb=4096)
      for kv in ("model.dim=30000", "model.mlp_ratio=1e7", "train.log_every=700000000", "train.steps=1000000000000",
                 "train.epochs=1e300", "train.threads=100000", "data.synthetic_train=100000000")],
    *[Case(f"suite bench {flag} {value}", "blow-up", "error", _argv("bench", flag, value, "--out", "{d}/b"), _says(flag),
           process=True, timeout=60, memory_mb=4096)
      for flag, value in (("--threads", "100000"), ("--depth", "100000"), ("--batch", "1000000000"), ("--gemm", "200000"))],
    Case("suite bench --throughput --co-located 1000000", "blow-up", "error",
         _argv("bench", "--throughput", "--co-located", "1000000", "--out", "{d}/b"), _says("--co-located"),
         process=True, timeout=60, memory_mb=4096),
    Case("suite train needing ~80 GiB of activations under a 4 GiB limit", "blow-up", "error",
         _argv("train", "data.name=synthetic", "data.synthetic_img_size=64", "data.synthetic_train=4096",
               "model.patch_size=4", "model.dim=256", "model.depth=12", "train.batch_size=2048", "device=cpu",
               "--out", "{d}/run"), _says("needs at least", "train.batch_size"), process=True, timeout=120, memory_mb=4096),
    Case("suite run --threads 100000", "blow-up", "error",
         lambda d: [*first_smoke_run(d), "--threads", "100000"], _says("--threads"), process=True, timeout=60),
    *[Case(f"suite status --watch {s}", "hang", "error", lambda d, s=s: ["status", str(_pending_sweep(d)), "--watch", s],
           _says("--watch"), process=True, timeout=30) for s in ("inf", "1e-300")],
    Case("JSON nested 100,000 deep: analyze", "traceback", "ok", bad_summary(DEEP_JSON.encode()), analyzed_without("bad")),
    *[Case(f"JSON nested 100,000 deep: {cmd}", "traceback", "ok", _sweep_with_summary(DEEP_JSON, cmd), warned_run)
      for cmd in ("run --dry-run", "status")],
    Case("YAML alias bomb", "hang", "error", _file_then(["validate", "{f}"], ALIAS_BOMB), _says("alias"),
         process=True, timeout=60, memory_mb=4096),
    Case("YAML nested 100,000 deep", "traceback", "error", _file_then(["validate", "{f}"], "name: " + DEEP_JSON + "\n"),
         _says("nested")),
    # round eight: keys, seeds, rates and extends the loader took for granted (tracebacks before)
    *[Case(f"ablation with {what}", "traceback", "error",
           _file_then(["validate", "{f}"], textwrap.dedent(BASE_ABLATION) + extra), _says(says))
      for what, extra, says in [
          ("a grid key that is a number", "grid: {1: [1]}\n", "not a dotted key"),
          ("a grid key that is a section", "grid: {model: [{depth: 1}]}\n", "name the key, e.g. `model.depth`"),
          ("an exclude key that is a section", "grid: {model.depth: [1, 2]}\nexclude: [{model: {depth: 1}}]\n",
           "a section of keys"),
          ("seeds that are lists", "seeds: [[1]]\n", "seeds:"),
          ("rates: null", "rates: null\n", "rates: empty"),
          ("a rates entry over a list-valued axis and a missing cell",
           "grid: {train.betas: [[0.9, 0.99], [0.9, 0.999]]}\nrates: [{variant: a, train.betas: [0.9, 0.99], "
           "train.lr: 0.001}]\n", "no rate for variant a at train.betas=[0.9, 0.999]"),
          ("extends naming a NUL", 'extends: "a\\0b"\n', "cannot be a file"),
          ("extends naming 5000 characters", "extends: " + "x" * 5000 + "\n", "cannot be a file"),
          ("rates_from naming 5000 characters", "rates_from: " + "x" * 5000 + "\n", "cannot be a folder")]],
    Case("ablation with the same primary twice, at depth 4 and 4.0", "silent", "error",
         _file_then(["validate", "{f}"], textwrap.dedent(BASE_ABLATION).replace(
             "variants: {a: {}}", "variants: {a: {}, b: {model.residual: layerscale}}")
             + "grid: {model.depth: [4, 8]}\nseeds: 4\nprimary: [{scheme: b, baseline: a, where: {model.depth: 4}}, "
               "{scheme: b, baseline: a, where: {model.depth: 4.0}}]\n"), _says("the same comparison as primary[0]")),
    Case("ablation named with 300 characters (validate passed it; the run's folder could not exist)", "traceback",
         "error", _file_then(["validate", "{f}"], textwrap.dedent(BASE_ABLATION).replace("name: x", "name: " + "x" * 300)),
         _says("at most 200")),
    *[Case(f"a 300-character file or folder name: {' '.join(argv[:1])}", "traceback", "error", _argv(*argv),
           _says("at most 255 bytes"))
      for argv in (["validate", "{d}/" + "x" * 300 + ".yaml"], ["status", "{d}/" + "x" * 300],
                   ["run", str(SMOKE), "--out", "{d}/" + "x" * 300, "--dry-run"])],
    Case("--out a symbolic link that leads back to itself", "traceback", "error", _out_loop, _says("leads back")),
    Case("validate --max-runs -1 (blamed the file)", "misleading", "error",
         _argv("validate", "--max-runs", "-1", str(SMOKE)), _says("--max-runs -1: must be >= 1")),
    Case("extends naming a folder (said 'not found')", "misleading", "error",
         _file_then(["validate", "{f}"], textwrap.dedent(BASE_ABLATION) + "extends: sub\n", name="sub/../x.yaml"),
         _says("is not a regular file")),
    Case("an ablation's value YAML reads as an impossible date", "misleading", "error",
         _file_then(["validate", "{f}"], textwrap.dedent(BASE_ABLATION).replace("name: x", "name: 2023-13-45")),
         _says("a value YAML cannot read (month must be in 1..12)")),
    Case("an override value that is half a list (was eight error lines)", "misleading", "error",
         _argv("config", "model.depth=[1"), _says("cannot read the value of 'model.depth' (expected")),
    # round four (issue 51): numbers too long for int(), names too long for a path, nested values, damaged claims
    Case("5000-digit integer in an override", "traceback", "error",
         _argv("train", *TINY[:-2], "model.depth=" + "9" * 5000, "--out", "{d}/run"), _says("model.depth")),
    Case("5000-digit integer in an ablation", "traceback", "error",
         _file_then(["validate", "{f}"], textwrap.dedent(BASE_ABLATION) + "grid: {model.depth: [1, " + "9" * 5000 + "]}\n"),
         _says("too long")),
    Case("5000-digit integer in --only", "traceback", "error",
         lambda d: [*first_smoke_run(d)[:-2], "--only", "model.depth=" + "9" * 5000, "--dry-run"], _says("--only")),
    Case("first key=value over 255 characters", "traceback", "error",
         _argv("train", "a" * 300 + "=1", "--out", "{d}/run"), _says("unknown key")),
    Case("exclude entry with a nested list", "traceback", "error",
         _file_then(["validate", "{f}"], textwrap.dedent(BASE_ABLATION) + "exclude:\n  - {variant: [[a]]}\n"),
         _says("exclude[0].variant")),
    Case("a claim that is a folder", "traceback", "error", _claims_damaged("folder"), _says("claim")),
    Case("a claim with pid 10^30: status", "traceback", "ok", _claims_damaged("pid")),
    Case("workers/ is a file", "late error", "error", _claims_damaged("workers"), _says("workers")),
    *[Case(f"suite train --out a sweep's {where}", "late error", "error",
           lambda d, where=where: [*TINY_ARGV(), "--out", str(_pending_sweep(d) / ("runs" if where == "runs/" else ""))],
           _says("not a run folder")) for where in ("results folder", "runs/")],
    Case("YAML over 1 MiB", "hang", "error", _file_then(["validate", "{f}"], "name: x\ndescription: " + "a" * (2 << 20) + "\n"),
         _says("larger than")),
    # round six (issue 61): each a traceback or a silent wrong result before
    *[Case(f"summary.json has {what}: analyze", "silent", "ok", bad_summary(_summary_of(**fields)), analyzed_without("bad"))
      for what, fields in (("steps_to_learn -5", {"steps_to_learn": -5, "train.steps": 30}),
                           ("steps_to_learn 10^11", {"steps_to_learn": 10**11, "train.steps": 30}),
                           ("steps_to_learn 'abc'", {"steps_to_learn": "abc"}),
                           ("failed_reason 'bogus'", {"status": "failed", "failed_reason": "bogus"}),
                           ("a heading in failed_reason", {"status": "failed", "failed_reason": "x\n## Verdict: LS wins"}),
                           ("an inf attention-logit peak", {"attn_logit_peak": 1e999}))],
    Case("suite cost --measured with 401 digits", "traceback", "error",
         _argv("cost", str(SMOKE), "--measured", "1" * 401 + "@12"), _says("--measured")),
    Case("suite train data.root longer than a file name", "traceback", "error",
         _argv("train", *TINY, "data.root=" + "r" * 300, "--out", "{d}/run"), _says("data.root")),
    Case("suite run FILE seed=7", "silent", "error",
         lambda d: ["run", str(SMOKE), "--out", str(d / "out"), "--dry-run", "seed=7"], _says("seed", "seeds:")),
    Case("suite run FILE train.batch_size=0", "misleading", "error",
         lambda d: ["run", str(SMOKE), "--out", str(d / "out"), "--dry-run", "train.batch_size=0"],
         _says("command line: train.batch_size=0")),
    Case("analysis.json with a 401-digit depth: suite report", "traceback", "error", _manifest_depth("1" * 401),
         _says("analysis.json")),
    Case("ablation.yaml is a link out: suite report", "security", "ok", linked_into_page("ablation.yaml"),
         nothing_from_outside),
    Case("runs.csv is a link out: suite report", "security", "error", linked_into_page("runs.csv"), _says("link")),
    Case("suite analyze: a rates: entry with an integer key", "traceback", "ok",
         _analysis_with("ablation.yaml", DEMO_ABLATION + "rates:\n  - {variant: preln, 12: 3, train.lr: 0.001}\n")),
]


# ----------------------------------------------------------------------------- running


def can_mount() -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", tmp], capture_output=True).returncode == 0
        if ok:
            subprocess.run(["umount", tmp], capture_output=True)
        return ok


def in_process(argv: list[str], d: Path) -> subprocess.CompletedProcess:
    """``suite <argv>`` through ``suite.cli.main`` in this process, as ``python -m suite`` would run it
    in ``d`` under umask 022: its exit code, stdout and stderr (a traceback if it raised).

    Output is caught at the file-descriptor level as well, so what spawned workers print is caught; the
    process-wide state a command sets (umask, working folder, warning filters, torch threads) is put back.
    """
    import torch

    from suite.cli import main

    files = []
    for _ in range(2):
        fd, name = tempfile.mkstemp(prefix="hostile-")
        os.close(fd)
        files.append(open(name, "a+", encoding="utf-8"))  # O_APPEND: workers write to the same file
        os.unlink(name)
    out, err = files
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved_fds = [os.dup(1), os.dup(2)]
    saved = (os.umask(0o022), torch.get_num_threads(), warnings.formatwarning)
    try:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        with contextlib.chdir(d), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                warnings.catch_warnings():
            # Printed as the process would print them (pytest would record them instead).
            warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: \
                sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))
            code = _exit_code(main, argv)
    finally:
        out.flush()
        err.flush()
        for fd, saved_fd in zip((1, 2), saved_fds):
            os.dup2(saved_fd, fd)
            os.close(saved_fd)
        os.umask(saved[0])
        torch.set_num_threads(saved[1])
        warnings.formatwarning = saved[2]
    texts = []
    for f in files:
        f.seek(0)
        texts.append(f.read())
        f.close()
    return subprocess.CompletedProcess(["suite", *argv], code, *texts)


# What a fresh `python -m suite` would import for these cases: the fork server imports it once, and each
# case's process starts from a copy of it instead of spending ~10 s of CPU on imports.
PRELOAD = ["torch", "suite.cli", "suite.engine", "suite.sweep.sweep", "suite.sweep.preflight", "suite.cli.run",
           "suite.cli.train", "suite.cli.bench", "suite.cli.analyze", "suite.cli.status", "suite.cli.validate"]


def in_own_process(case: Case, argv: list[str], d: Path) -> subprocess.CompletedProcess:
    """``suite <argv>`` in a process of its own, in ``d``: its own pid, environment, umask and memory limit,
    killed after the case's time limit (raises TimeoutExpired). The process is forked from a server that
    imported the suite once (multiprocessing's forkserver), and runs what ``python -m suite`` runs."""
    import multiprocessing

    env = {**case.env, "PYTHONPATH": str(ROOT)}  # the workers it spawns import this checkout
    if (d / "env.json").exists():
        env.update(json.loads((d / "env.json").read_text()))
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    with tempfile.TemporaryDirectory(prefix="hostile-io-") as io:
        files = [os.path.join(io, "stdout"), os.path.join(io, "stderr")]
        proc = ctx.Process(target=_child, args=(argv, str(d), env, case.memory_mb, files))
        proc.start()
        proc.join(case.timeout)
        if proc.is_alive():
            proc.kill()
            proc.join()
            raise subprocess.TimeoutExpired(argv, case.timeout)
        texts = [Path(f).read_text(errors="replace") if os.path.exists(f) else "" for f in files]
    return subprocess.CompletedProcess(["suite", *argv], proc.exitcode, *texts)


def _child(argv: list[str], d: str, env: dict[str, str], memory_mb: int | None, files: list[str]) -> None:
    """The case's process: set up as ``python -m suite`` would find it, run, exit as the interpreter would."""
    import atexit

    os.environ.update(env)
    _limit(memory_mb)
    os.chdir(d)
    sys.stdin = open(os.devnull)
    for fd, name in zip((1, 2), files):
        os.dup2(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), fd)
    from suite.cli import main

    try:
        code = _exit_code(main, argv)
    finally:
        atexit._run_exitfuncs()  # as at a normal interpreter exit (multiprocessing ends with os._exit)
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def _exit_code(main: Callable[[list[str]], int], argv: list[str]) -> int:
    """``main(argv)``'s exit code as the interpreter would make it, printing what it would print."""
    try:
        return main(argv)
    except SystemExit as exit:  # argparse, or a command that exits
        if isinstance(exit.code, str):
            print(exit.code, file=sys.stderr)
        return exit.code if isinstance(exit.code, int) else int(exit.code is not None)
    except Exception:  # what the interpreter would print before exiting 1
        traceback.print_exc()
        return 1


def _limit(memory_mb: int | None) -> None:
    os.umask(0o022)
    if memory_mb is not None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))


def run_case(case: Case, d: Path) -> Outcome:
    """Set the case up in ``d``, run its command, and classify the outcome."""
    t0 = time.perf_counter()
    try:
        argv = case.setup(d)
        if case.own_process or (d / "env.json").exists():
            try:
                proc = in_own_process(case, argv, d)
            except subprocess.TimeoutExpired:
                return Outcome(case, "hang", None, time.perf_counter() - t0, f"no answer in {case.timeout:g} s")
        else:
            proc = in_process(argv, d)
        seconds = time.perf_counter() - t0
        last = (proc.stderr.strip().splitlines() or [""])[-1]
        if "Traceback (most recent call last)" in proc.stderr:
            return Outcome(case, "traceback", proc.returncode, seconds, last[:120])
        if case.expect == "error":
            errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
            if proc.returncode == 0:
                return Outcome(case, "silently accepted", 0, seconds, "exit 0")
            if proc.returncode != 2 or len(errors) != 1:
                return Outcome(case, "wrong outcome", proc.returncode, seconds,
                               f"exit {proc.returncode}, {len(errors)} error lines: {last[:100]}")
            problem = case.check(d, proc)
            return Outcome(case, "wrong outcome" if problem else "clean error", 2, seconds, problem or errors[0][:120])
        if proc.returncode != (1 if case.expect == "run error" else 0):
            return Outcome(case, "wrong outcome", proc.returncode, seconds, last[:120])
        problem = case.check(d, proc)
        return Outcome(case, "wrong outcome" if problem else "handled", proc.returncode, seconds, problem or last[:120])
    finally:
        unmount(d)


EXPECTED = {"error": "exit 2, one line", "ok": "exit 0", "run error": "exit 1, run error"}


def table(outcomes: list[Outcome]) -> str:
    lines = ["| group | case | expected | outcome | exit | s | detail |", "|---|---|---|---|---:|---:|---|"]
    for o in outcomes:
        detail = o.detail.replace("|", "\\|")
        lines.append(f"| {o.case.group} | {o.case.name} | {EXPECTED[o.case.expect]} "
                     f"| {o.verdict} | {'' if o.code is None else o.code} | {o.seconds:.1f} | {detail} |")
    bad = [o for o in outcomes if not o.good]
    counts = {v: sum(o.verdict == v for o in outcomes) for v in dict.fromkeys(o.verdict for o in outcomes)}
    lines.append("")
    lines.append(f"{len(outcomes)} cases: " + ", ".join(f"{n} {v}" for v, n in counts.items())
                 + ("" if not bad else f"; {len(bad)} not as they should be"))
    return "\n".join(lines)


def main(words: list[str]) -> int:
    mount = can_mount()
    outcomes = []
    for case in CASES:
        if words and not any(w in case.name for w in words):
            continue
        if case.needs_mount and not mount:
            print(f"skipped (needs root to mount a tmpfs): {case.name}", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
            outcomes.append(run_case(case, Path(tmp)))
        print(f"{outcomes[-1].verdict:<18} {case.name}", file=sys.stderr, flush=True)
    print(table(outcomes))
    return 0 if all(o.good for o in outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
