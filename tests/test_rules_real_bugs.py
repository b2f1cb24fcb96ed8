"""Bugs rebuilt from public reports (tests/fixtures/real_bugs/): each is found, look-alikes stay quiet.

`benchmarks/real_bugs.py` prints the same measure as a table, per category and layer.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from testkit.expectations import expected_findings
from torchlint.engine import check_source
from torchlint.rules import RULES_BY_CODE
from torchlint.analysis.source import apply_edits

REAL_BUGS = Path(__file__).resolve().parent / "fixtures" / "real_bugs"
FILES = sorted(REAL_BUGS.glob("*.py"))
# Every report of a registered rule's category must be found; a category no rule covers yet
# counts in the recall floor only.
EXACT = frozenset(RULES_BY_CODE)
RECALL_FLOOR = 0.93
# Marks only the jedi layer can find (a helper method's return value); these tests run names only.
JEDI_ONLY = {("tl103_moved_parameters.py", 82, "TL101")}
# Real bugs left unreported on purpose: nothing but a name says the receiver is a tensor (what
# an unknown `sampler.sample()` returns; batches of a `loader` parameter that may be fastai's).
UNKNOWN_RECEIVERS = {("tl203_discarded_moves.py", line, "TL203") for line in (9, 10, 54, 55)}


def _marks_and_found(path):
    text = path.read_text(encoding="utf-8")
    result = check_source(text, str(path))
    assert result.parse_error is None and not result.internal_errors, result
    return text, expected_findings(text), {(f.range.start.line, f.code) for f in result.findings}, result


def test_enough_reports_each_with_its_address():
    marks = 0
    for path in FILES:
        text = path.read_text(encoding="utf-8")
        cases = [line for line in text.splitlines() if line.startswith("# https://") or "    # https://" in line]
        if path.name.startswith("quiet_"):
            assert not expected_findings(text), "%s is a look-alike file: no `# expect:` marks" % path.name
            continue
        assert cases, "%s: every case names the report it comes from" % path.name
        marks += len(expected_findings(text))
    assert marks >= 60


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_false_positive(path):
    _, marks, found, result = _marks_and_found(path)
    unexpected = sorted(found - marks)
    assert not unexpected, "%s: unexpected findings %s" % (path.name, unexpected)


@pytest.mark.parametrize("path", [p for p in FILES if p.name.split("_")[0].upper() in EXACT], ids=lambda p: p.name)
def test_every_report_of_the_category_is_found(path):
    _, marks, found, _ = _marks_and_found(path)
    missing = sorted(m for m in marks - found if m[1] in EXACT and (path.name,) + m not in JEDI_ONLY | UNKNOWN_RECEIVERS)
    assert not missing, "%s: missed %s" % (path.name, missing)


def test_recall_over_all_reports():
    expected = found = 0
    for path in FILES:
        _, marks, reported, _ = _marks_and_found(path)
        expected += len(marks)
        found += len(marks & reported)
    assert found / expected >= RECALL_FLOOR, (found, expected)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_preferred_fixes_leave_code_that_parses(path):
    text, _, _, result = _marks_and_found(path)
    for finding in result.findings:
        for fix in finding.fixes:
            ast.parse(apply_edits(text, fix.edits))
