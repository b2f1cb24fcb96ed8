"""Helpers shared by the tests: fixture files and their inline expectations."""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Set, Tuple

ROOT = Path(__file__).resolve().parent.parent
RULE_FIXTURES = ROOT / "tests" / "fixtures" / "rules"

# The tests import torchlint from the source tree even when it is not installed.
if str(ROOT / "server") not in sys.path:
    sys.path.insert(0, str(ROOT / "server"))

# `x = torch.randn(3)  # expect: TL101` or `# expect: TL101, TL301`
EXPECT = re.compile(r"#\s*expect:\s*(TL\d{3}(?:\s*,\s*TL\d{3})*)")


def rule_fixture_files():
    return sorted(RULE_FIXTURES.glob("*.py"))


def expected_findings(text: str) -> Set[Tuple[int, str]]:
    """The (line, code) pairs a fixture's `# expect:` comments announce."""
    expected = set()
    # Split like Python's tokenizer (not str.splitlines, which also breaks on form feeds).
    for lineno, line in enumerate(re.split(r"\r\n|\r|\n", text), start=1):
        match = EXPECT.search(line)
        if match:
            for code in re.split(r"\s*,\s*", match.group(1)):
                expected.add((lineno, code))
    return expected


def describe(finding) -> str:
    return "%d:%d %s %s" % (finding.range.start.line, finding.range.start.column, finding.code, finding.message)
