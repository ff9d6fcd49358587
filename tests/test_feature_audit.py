"""Every config key is set by a committed study or named in the docs, and every command-line flag is named in the
README, docs/, the Makefile or .ci/run (scripts/feature_audit.py, issue 63); its committed output is current."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import feature_audit  # noqa: E402

sys.path.remove(str(ROOT / "scripts"))


def test_no_config_key_or_flag_is_used_by_nothing_committed():
    keys, cli = feature_audit.audit()
    assert [k for k, study, doc in keys if not study and not doc] == []
    assert [f"suite {c} {f}" for c, f, shown in cli if not shown] == []
    assert len(keys) > 60 and len(cli) > 100  # it found the config and the CLI


def test_the_committed_audit_is_what_the_script_writes():
    committed = (ROOT / "results" / "reference" / "feature_audit.md").read_text()
    assert committed == feature_audit.markdown(*feature_audit.audit())
