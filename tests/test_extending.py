"""docs/extending.md runs: its ``python`` blocks, in order, in one fresh interpreter from the repository root (a
scheme, a dataset, a table and a backend added as the page shows, each checked by its own asserts)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "extending.md"


def blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", PAGE.read_text(), re.M | re.S)


def test_the_guide_covers_each_kind_of_addition_with_an_example():
    text = PAGE.read_text()
    for heading in ("## A residual scheme", "## A dataset", "## A table", "## A backend", "## An endpoint"):
        assert heading in text
    assert len(blocks()) >= 5


def test_every_example_of_the_guide_runs_as_written(tmp_path):
    script = "\n\n".join(blocks()) + "\n\nprint('guide ok')\n"
    # the page's mkdtemp folder is the reader's to look at; the test's goes under its own tmp_path, not /tmp
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "TMPDIR": str(tmp_path)})
    assert proc.returncode == 0 and proc.stdout.strip().endswith("guide ok"), proc.stdout[-2000:] + proc.stderr[-3000:]
