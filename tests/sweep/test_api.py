"""The Python API for notebooks: ``from suite import run_sweep, load_runs, load_metrics, analyze``."""

from __future__ import annotations

import subprocess
from pathlib import Path
import sys

import pytest

TINY = {
    "name": "tiny",
    "base": {"data": {"name": "synthetic", "synthetic_train": 64, "synthetic_test": 32, "synthetic_img_size": 8,
                      "synthetic_classes": 4},
             "model": {"patch_size": 4, "dim": 16, "heads": 2, "depth": 1},
             "train": {"steps": 3, "batch_size": 16, "warmup_steps": 1, "log_every": 1, "eval_every": 0,
                       "timing_warmup_steps": 1}},
    "variants": {"preln": {"model.residual": "preln"}, "layerscale": {"model.residual": "layerscale"}},
    "seeds": 1,
}


def test_import_suite_is_lazy():
    code = ("import sys, suite; assert 'pandas' not in sys.modules and 'suite.sweep' not in sys.modules; "
            "suite.run_sweep; suite.SweepOptions; suite.load_runs; assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
    # reading an ablation (validate, cost, run's first second) needs no pandas: it is half a second to import
    subprocess.run([sys.executable, "-c", "import sys, suite.sweep.spec; assert 'pandas' not in sys.modules"], check=True)
    import suite

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        suite.nope  # noqa: B018


def test_a_sweep_from_a_notebook(tmp_path):
    from suite import SweepOptions, analyze, load_metrics, load_runs, run_sweep

    seen = []
    sweep = run_sweep(TINY, tmp_path / "out", SweepOptions(device="cpu", workers=1, threads=1),
                      report=lambda sweep, run, result: seen.append((run.variant, result["status"])))
    # Three steps are too few to learn: `failed` (loss at chance) is a final status like `ok`.
    assert sweep.stopped is None and sweep.code == 0 and sorted(v for v, _ in seen) == ["layerscale", "preln"]
    assert {s for _, s in seen} <= {"ok", "failed"} and len(sweep.todo) == 2 and not sweep.done
    assert sweep.counts()["ok"] + sweep.counts()["failed"] == 2 and sweep.counts()["error"] == 0
    assert repr(sweep).startswith(f"Sweep('tiny', {str(tmp_path / 'out')!r}, 2 runs: ")  # not every run's config

    runs = load_runs(tmp_path / "out")
    assert sorted(runs["variant"]) == ["layerscale", "preln"] and sorted(runs["status"]) == sorted(s for _, s in seen)
    assert set(runs["model.depth"]) == {1} and runs["test_acc"].between(0, 1).all()

    metrics = load_metrics(tmp_path / "out" / runs["run_dir"][0])
    steps = list(metrics.loc[metrics["kind"] == "train", "step"])
    assert steps == sorted(set(steps)) and steps[-3:] == [1, 2, 3]

    table = analyze(tmp_path / "out", figures=False, formats=("csv",))
    assert set(table["variant"]) == {"layerscale", "preln"}

    again = run_sweep(TINY, tmp_path / "out", SweepOptions(device="cpu"))  # resumes: nothing left to run
    assert not again.todo and len(again.done) == 2 and not again.results
    # a primary comparison declared after the runs is recorded for `suite analyze`, with nothing run
    declared = {**TINY, "primary": {"scheme": "layerscale", "baseline": "preln"}}
    assert not run_sweep(declared, tmp_path / "out", SweepOptions(device="cpu")).results
    assert "primary:" in (tmp_path / "out" / "ablation.yaml").read_text()


def test_bad_options_are_one_line_errors(tmp_path):
    from suite import SweepOptions, run_sweep
    from suite.config import ConfigError

    with pytest.raises(ConfigError, match=r"^--attempts 0: must be >= 1$"):
        run_sweep(TINY, tmp_path / "out", SweepOptions(attempts=0))
    with pytest.raises(ConfigError, match="--backend nope: unknown"):
        run_sweep(TINY, tmp_path / "out", SweepOptions(backend="nope"))
    assert not (tmp_path / "out").exists()


def test_a_resumed_sweep_gives_a_run_the_threads_it_would_have_had(tmp_path, monkeypatch):
    """Issue 27, integrity: with 2 workers on 4 cores every run trains with 2 threads; when one run is
    left after an interruption it must not get all 4 (its result would differ in the last digits)."""
    import json
    import os

    from suite import SweepOptions, run_sweep

    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    first = run_sweep(TINY, tmp_path / "out", SweepOptions(device="cpu", workers=2))
    summaries = {p.parent.name: json.loads(p.read_text()) for p in (tmp_path / "out" / "runs").glob("*/summary.json")}
    assert {s["train.threads"] for s in summaries.values()} == {2} and len(first.todo) == 2
    victim = sorted(summaries)[0]
    (tmp_path / "out" / "runs" / victim / "summary.json").unlink()  # as if killed before it finished
    again = run_sweep(TINY, tmp_path / "out", SweepOptions(device="cpu", workers=2))
    assert [r.run_id for r in again.todo] == [victim]
    assert json.loads((tmp_path / "out" / "runs" / victim / "summary.json").read_text())["train.threads"] == 2


def _script(tmp_path, guarded: bool):
    """A script that calls run_sweep on TINY, at module level or under the __main__ guard."""
    import json
    import os
    from pathlib import Path

    call = (f"sweep = run_sweep(json.loads({json.dumps(json.dumps(TINY))}), {str(tmp_path / 'out')!r}, "
            f"SweepOptions(device='cpu', workers=1, threads=1))\nprint('counts', sum(sweep.counts().values()))\n")
    body = "if __name__ == '__main__':\n" + "".join(f"    {line}\n" for line in call.splitlines()) if guarded else call
    path = tmp_path / "my_sweep.py"
    path.write_text(f"import json\n\nfrom suite import SweepOptions, run_sweep\n\n{body}")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return path, subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env, capture_output=True, text=True,
                                timeout=300)


def test_a_script_without_the_main_guard_is_refused_before_any_run(tmp_path):
    """Each local worker imports the script again: it ran the sweep again in every worker, which found the
    folder locked and died, and run_sweep returned with every run recorded as error."""
    path, done = _script(tmp_path, guarded=False)
    assert done.returncode == 1 and "counts" not in done.stdout
    last = done.stderr.strip().splitlines()[-1]
    assert last == (f"suite.sweep.folder.RunnerError: run_sweep: called by {path}:5 outside "
                    f"`if __name__ == \"__main__\":`; each local worker imports that script again, which would "
                    f"start the sweep again; put the call under `if __name__ == \"__main__\":` "
                    f"(docs/ablations.md#from-python-run_sweep)")
    assert not (tmp_path / "out").exists()


def test_the_same_script_under_the_main_guard_runs(tmp_path):
    _, done = _script(tmp_path, guarded=True)
    assert done.returncode == 0 and "counts 2" in done.stdout, done.stderr
    assert len(list((tmp_path / "out" / "runs").glob("*/summary.json"))) == 2


def test_where_a_call_runs_only_as_main():
    import ast

    from suite.sweep.guard import _only_as_main

    def first(src: str) -> ast.stmt:
        return ast.parse(src).body[0]

    guarded = first("if __name__ == '__main__':\n    run()\n")
    assert _only_as_main(guarded, 2) and not _only_as_main(first("run()\n"), 1)
    assert _only_as_main(first("if '__main__' == __name__:\n    run()\n"), 2)
    negated = first("if __name__ != '__main__':\n    pass\nelse:\n    run()\n")
    assert _only_as_main(negated, 4) and not _only_as_main(negated, 2)
    assert not _only_as_main(first("if debug:\n    run()\n"), 2)
    assert not _only_as_main(first("if __name__ == 'other':\n    run()\n"), 2)


@pytest.mark.parametrize("folder, rows", [("stability", 170), ("default", 40), ("tune", 42)])
def test_load_runs_reads_a_committed_folder_from_its_runs_csv(folder, rows):
    """Issue 61: a clone's results folders hold runs.csv without run folders; the notebook API read none."""
    from pathlib import Path

    from suite import load_runs

    runs = load_runs(Path(__file__).resolve().parents[2] / "results" / folder)
    assert len(runs) == rows and runs["run_id"].is_unique and {"variant", "model.depth", "status"} <= set(runs.columns)


@pytest.mark.parametrize("option", [{"ray_address": "10.0.0.1:6379"}, {"slurm_detach": True},
                                    {"slurm_opt": ["account=x"]}])
def test_an_option_of_another_backend_is_refused_not_ignored(tmp_path, option):
    """--ray-address or --slurm-partition without --backend ray/slurm trained everything here, without a word."""
    from suite import SweepOptions, run_sweep
    from suite.sweep.folder import RunnerError

    with pytest.raises(RunnerError, match=r"--(ray|slurm)-[a-z]+: an option of --backend (ray|slurm), and this sweep "
                                          r"runs on --backend local; add --backend"):
        run_sweep(Path(__file__).resolve().parents[2] / "ablations" / "smoke.yaml", tmp_path / "out",
                  SweepOptions(dry_run=True, **option))
    assert not (tmp_path / "out").exists()
