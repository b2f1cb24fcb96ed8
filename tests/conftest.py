"""Helpers shared by the tests: where the fixtures are, how findings read in failures."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RULE_FIXTURES = ROOT / "tests" / "fixtures" / "rules"

# The tests import torchlint from the source tree even when it is not installed.
if str(ROOT / "server") not in sys.path:
    sys.path.insert(0, str(ROOT / "server"))


def rule_fixture_files():
    return sorted(RULE_FIXTURES.glob("*.py"))


def describe(finding) -> str:
    return "%d:%d %s %s" % (finding.range.start.line, finding.range.start.column, finding.code, finding.message)
