"""`make install` hands uv the indexes pip is configured with (scripts/uv_args.py), ranked as pip ranks them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("uv_args", Path(__file__).resolve().parents[1] / "scripts" / "uv_args.py")
uv_args = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(uv_args)

LISTING = """\
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.find-links='/opt/wheels'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/elsewhere'
global.index-url='https://mirror.example/simple'
install.index-url='https://install.example/simple'
"""


def test_the_variables_then_install_then_global_win_and_lists_split_on_whitespace():
    assert uv_args.parse(LISTING) == {
        "index-url": ["https://install.example/simple"],
        "extra-index-url": ["file:///opt/pypi/simple", "file:///opt/pypi-more/simple"],
        "find-links": ["/opt/wheels"],
        "constraint": ["/etc/xdg/pip/constraints.txt"],
    }


def test_uv_gets_one_option_per_value_and_picks_the_best_version_across_indexes_as_pip_does():
    args = uv_args.uv_args(uv_args.parse(LISTING))
    assert args[:2] == ["--index-strategy", "unsafe-best-match"]
    pairs = list(zip(args[2::2], args[3::2]))
    assert pairs == [("--index-url", "https://install.example/simple"),
                     ("--extra-index-url", "file:///opt/pypi/simple"),
                     ("--extra-index-url", "file:///opt/pypi-more/simple"),
                     ("--find-links", "/opt/wheels"),
                     ("--constraint", "/etc/xdg/pip/constraints.txt")]


def test_nothing_configured_leaves_uv_on_its_default_index():
    assert uv_args.uv_args(uv_args.parse("")) == ["--index-strategy", "unsafe-best-match"]
    assert uv_args.parse("global.timeout='60'\nnot a line\nglobal.index-url=unquoted (\n") == {}
