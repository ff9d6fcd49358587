"""Ctrl-C during `suite analyze`: one line and exit 130, whenever it comes, also while the analysis's
libraries (pandas, scipy, matplotlib: seconds) are still loading."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.analysis.test_analyze import write_run

ROOT = Path(__file__).resolve().parents[1]
LAST = "interrupted: suite analyze stopped (Ctrl-C)"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "demo"
    for seed in range(2):
        write_run(root, "preln", 6, seed, acc=0.90 + 0.01 * seed)
        write_run(root, "layerscale", 6, seed, acc=0.93 + 0.01 * seed, scales=True)
    return root


def interrupt(command: list[str], when) -> tuple[int, str]:
    """Start ``command``, send it SIGINT once ``when(proc)`` is true; its exit status and stderr."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            # as from a terminal: a test process may ignore SIGINT, and its children inherit that
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    when(proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


def loading_numpy(proc: subprocess.Popen) -> None:
    """Until ``proc`` has mapped one of numpy's files: it is then importing the analysis's libraries,
    inside main's handler (suite.cli imports no numpy), on a loaded machine as on an idle one."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(OSError):
            if "/numpy/" in Path(f"/proc/{proc.pid}/maps").read_text():
                return
        time.sleep(0.005)


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc")
def test_ctrl_c_while_suite_analyze_loads_its_libraries(folder):
    """The subcommand's module was imported outside main's handler: a KeyboardInterrupt traceback from
    inside numpy or pandas, and exit -2. The signal is sent once numpy's first file is mapped (a fixed
    0.5 s could land in the interpreter's own start on a loaded machine)."""
    code, err = interrupt([sys.executable, "-m", "suite", "analyze", str(folder)], loading_numpy)
    if code == 0:
        pytest.skip("the analysis ended before the signal came: a machine too fast for this test")
    assert code == 130 and "Traceback" not in err, err
    assert err.strip().splitlines() == [LAST]


def test_ctrl_c_while_suite_analyze_analyses(folder):
    """The analysis itself is made to wait (so that the signal lands inside it, on any machine)."""
    script = ("import sys, time\n"
              "import suite.cli.analyze as cli\n"
              "def slow(*a, **k):\n"
              "    print('analysing', flush=True)\n"
              "    time.sleep(60)\n"
              "cli.analyze = slow\n"
              "from suite.cli import main\n"
              f"sys.exit(main(['analyze', {str(folder)!r}]))\n")
    code, err = interrupt([sys.executable, "-c", script], lambda p: p.stdout.readline())
    assert code == 130 and "Traceback" not in err, err
    assert err.strip().splitlines() == [LAST]


def test_ctrl_c_inside_code_a_library_builds_with_exec_exits_130(folder: Path, tmp_path: Path):
    """namedtuple, dataclasses and scipy.stats build functions with exec/eval while they load. CPython
    marks a KeyboardInterrupt that leaves such code as unhandled, and under ``python -m`` a process so
    marked kills itself with SIGINT at exit (status -2) although main caught the interrupt, printed its
    line and returned 130. Here the interrupt is raised inside exec'd code, every time."""
    (tmp_path / "ctrl_c_in_exec.py").write_text(
        "import sys\n"
        "import suite.cli.analyze as cli\n"
        "def loading(*a, **k):\n"
        "    exec('raise KeyboardInterrupt')\n"
        "cli.analyze = loading\n"
        "from suite.cli import main\n"
        f"sys.exit(main(['analyze', {str(folder)!r}]))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    proc = subprocess.run([sys.executable, "-m", "ctrl_c_in_exec"], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=120)
    assert proc.returncode == 130 and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr)
    assert proc.stderr.strip().splitlines() == [LAST]


# A script that signals itself gets Python's Ctrl-C handler first: a test run started with SIGINT ignored (a background
# job of a non-interactive shell) passes that on, Python then installs no handler, and the signal did nothing.
CTRL_C_AS_IN_A_TERMINAL = "import signal\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"


@pytest.mark.parametrize("signum, code, line", [
    (signal.SIGINT, 130, LAST),
    (signal.SIGTERM, 143, "terminated: suite analyze stopped (SIGTERM); no half-written file is left")])
def test_a_stop_signal_a_library_turns_into_another_error_still_stops_in_one_line(folder, signum, code, line):
    """matplotlib's pybind11 converters call a transform's ``__array__``; when the signal's exception
    is raised in there, they clear it and raise ``ValueError: Invalid affine transformation matrix``:
    a Ctrl-C while ``suite analyze`` drew was a matplotlib traceback and exit 1."""
    script = (f"{CTRL_C_AS_IN_A_TERMINAL}import os, sys, time\n"
              "import suite.cli.analyze as cli\n"
              "def drawing(*a, **k):\n"
              "    try:\n"
              f"        os.kill(os.getpid(), {int(signum)})\n"
              "        time.sleep(30)\n"
              "    except BaseException:\n"
              "        raise ValueError('Invalid affine transformation matrix') from None\n"
              "cli.analyze = drawing\n"
              "from suite.cli import main\n"
              f"sys.exit(main(['analyze', {str(folder)!r}]))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == code and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr)
    assert proc.stderr.strip().splitlines() == [line]


def test_a_ctrl_c_that_a_c_extension_turns_into_its_own_error_still_stops_in_one_line(folder):
    """matplotlib's pybind11 converter clears the KeyboardInterrupt its ``__array__`` call raised and raises a
    ValueError with no trace of it: the ValueError comes from the very call the signal interrupted."""
    script = (f"{CTRL_C_AS_IN_A_TERMINAL}import os, signal, sys, time\n"
              "import numpy as np\n"
              "from matplotlib import _path\n"
              "import suite.cli.analyze as cli\n"
              "class Transform:\n"
              "    def __array__(self, *a, **k):\n"
              "        os.kill(os.getpid(), signal.SIGINT)\n"
              "        time.sleep(30)\n"
              "def drawing(*a, **k):\n"
              "    _path.affine_transform(np.zeros((3, 2)), Transform())\n"
              "cli.analyze = drawing\n"
              "from suite.cli import main\n"
              f"sys.exit(main(['analyze', {str(folder)!r}]))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 130 and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr)
    assert proc.stderr.strip().splitlines() == [LAST]


def test_a_real_error_after_a_ctrl_c_a_library_swallowed_is_shown_as_it_is(folder):
    """A library that swallows the Ctrl-C and goes on; then a bug: its ZeroDivisionError is reported (a
    traceback, exit 1), not passed off as the interruption."""
    script = ("import os, signal, sys, time\n"
              "import suite.cli.analyze as cli\n"
              "def drawing(*a, **k):\n"
              "    try:\n"
              "        os.kill(os.getpid(), signal.SIGINT)\n"
              "        time.sleep(30)\n"
              "    except KeyboardInterrupt:\n"
              "        pass\n"
              "    return 1 / 0\n"
              "cli.analyze = drawing\n"
              "from suite.cli import main\n"
              f"sys.exit(main(['analyze', {str(folder)!r}]))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 1 and "ZeroDivisionError: division by zero" in proc.stderr, proc.stderr
    assert "interrupted" not in proc.stderr


def test_ctrl_c_while_the_interpreter_shuts_down_keeps_the_commands_status_and_output():
    """Python puts SIGINT back to the default as it ends; a Ctrl-C then killed a finished command, status -2, its last
    output unflushed. Sent the moment the command returns (a signal from a finaliser at exit is not always delivered,
    so that version of this test passed without the fix), it must change nothing."""
    script = ("import os, signal, sys\n"
              "from suite.cli import console\n"
              "sys.argv = ['suite', 'schemes']\n"
              "code = console()\n"
              "os.kill(os.getpid(), signal.SIGINT)\n"
              "print('after the Ctrl-C', flush=True)\n"
              "sys.exit(code)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", (proc.returncode, proc.stderr)
    assert "layerscale" in proc.stdout and "after the Ctrl-C" in proc.stdout


def test_sigterm_while_suite_analyze_draws_leaves_no_temp_file(folder):
    """SIGTERM (a scheduler's kill, `timeout`) unwinds `suite analyze` like Ctrl-C: every atomic write on
    the way out removes its temp file, so figures/ holds no .*.tmp; one line, exit 143."""
    from suite.analysis.analyze import analyze

    analyze(folder, figures=False)  # runs.csv and tables first: the second analysis spends its time drawing
    figures = folder / "figures"

    def drawing(proc: subprocess.Popen) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if figures.is_dir() and any(figures.iterdir()):
                return
            time.sleep(0.01)

    proc = subprocess.Popen([sys.executable, "-m", "suite", "analyze", str(folder)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    drawing(proc)
    if proc.poll() is not None:
        pytest.skip("the analysis finished before the signal could be sent")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1].startswith("terminated: suite analyze stopped (SIGTERM)")
    assert "Traceback" not in err
    assert not [p.name for p in figures.glob(".*")]


def test_analyze_called_in_a_process_leaves_its_signal_handlers_as_it_found_them(folder):
    """`suite analyze` turns SIGTERM into a clean unwind with a handler of its own, for the command alone: called in
    a notebook or a test, main left it behind (a later SIGTERM raised its exception in whatever ran then), and from
    a thread other than the main one it failed, where Python lets no handler be set."""
    import threading

    from suite.cli import main

    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        assert main(["analyze", str(folder), "--no-figures"]) == 0
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(main(["analyze", str(folder), "--no-figures"])))
    thread.start()
    thread.join()
    assert codes == [0]
