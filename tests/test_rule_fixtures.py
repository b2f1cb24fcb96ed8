"""Every rule fixture: exactly the announced findings, and every fix leaves working code.

A fixture is a file of plausible PyTorch code in tests/fixtures/rules/. Each line
where a finding must start carries `# expect: TLnnn` (the notation is in
tests/testkit/expectations.py); every other line must stay quiet. `fp_*.py` files announce
nothing: any finding there is a false positive.

Expected fixes are snapshots: tests/fixtures/rules/__snapshots__/NAME.fixed.py.snap is
the text `torchlint check --fix` leaves of NAME.py, and NAME.unsafe-fixed.py.snap the
text `--fix --unsafe-fixes` leaves; a fixture that a fix does not change has none. After
changing a rule's fixes, rewrite them and read the difference before committing:

    UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest -q tests/test_rule_fixtures.py -k snapshot
    git diff tests/fixtures/rules/__snapshots__
"""
from __future__ import annotations

import ast
import os
from collections import Counter

import pytest

from testkit.support import RULE_FIXTURES, describe, rule_fixture_files
from testkit.expectations import expected_after_fix, expected_counts, expected_findings
from torchlint import rules
from torchlint.engine import check_source
from torchlint.fixing import fix_text
from torchlint.analysis.findings import Finding, Fix
from torchlint.analysis.source import SourceText, apply_edits

FIXTURES = rule_fixture_files()
SNAPSHOTS = RULE_FIXTURES / "__snapshots__"
UPDATE_SNAPSHOTS = os.environ.get("UPDATE_SNAPSHOTS", "") not in ("", "0")
DOC_SECTIONS = ("## What it finds", "## Why it is a bug", "## Example", "## Fix")


def _check(path, inference=None):
    text = path.read_text(encoding="utf-8")
    result = check_source(text, str(path), inference=inference)
    assert result.parse_error is None, "%s does not parse: %s" % (path.name, result.parse_error)
    assert not result.internal_errors, "rules crashed on %s:\n%s" % (path.name, "\n".join(result.internal_errors))
    return text, result


@pytest.fixture(scope="module")
def inference():
    from torchlint.inference.layer import JediInference

    return JediInference(str(RULE_FIXTURES))


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_findings_match_expectations(path):
    _assert_expectations(path, *_check(path))


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_findings_match_expectations_with_inference(path, inference):
    """The jedi layer only answers what names could not: it must not add or lose findings here."""
    _assert_expectations(path, *_check(path, inference))


def _assert_expectations(path, text, result):
    """Exactly the announced findings: one per mark, and never one (code, line, column) twice."""
    expected = expected_counts(text)
    found = {}
    for finding in result.findings:
        found.setdefault((finding.range.start.line, finding.code), []).append(finding)

    lines = SourceText(text)
    problems = []
    for key in sorted(set(expected) | set(found)):
        line, code = key
        want, got = expected[key], found.get(key, [])
        if len(got) < want:
            problems.append("missing   %s:%d %s (%d of %d found)   | %s" % (
                path.name, line, code, len(got), want, lines.line(line).strip()))
        elif len(got) > want:
            what = "unexpected" if not want else "%d expected, %d found:" % (want, len(got))
            problems.extend("%s %s:%s" % (what, path.name, describe(f)) for f in got)
        columns = Counter(f.range.start.column for f in got)
        problems.extend("duplicate %s:%d:%d %s reported %d times" % (path.name, line, column, code, times)
                        for column, times in sorted(columns.items()) if times > 1)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_fixes_produce_valid_code(path):
    text, result = _check(path)
    before = Counter(f.code for f in result.findings)
    after_fix = expected_after_fix(text)
    problems = []
    for finding in result.findings:
        problems.extend(_fix_shape_problems(finding))
        line = finding.range.start.line
        allowed = before + Counter({code: n for (at, code), n in after_fix.items() if at == line})
        allowed[finding.code] -= 1
        for fix in finding.fixes:
            problems.extend(_fix_result_problems(path, text, finding, fix, before, allowed))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("unsafe", [False, True], ids=["fix", "unsafe-fix"])
@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_fix_snapshot(path, unsafe):
    """All fixes applied as `--fix` applies them: exactly the stored text, and nothing left behind
    but what has no fix to apply and what `after fix:` marks announce."""
    text, result = _check(path)
    outcome = fix_text(text, str(path), unsafe=unsafe, result=result)
    assert not outcome.errors, "\n".join(outcome.errors)
    assert outcome.result.parse_error is None and not outcome.result.internal_errors, outcome.result

    left = Counter(f.code for f in outcome.result.findings)
    allowed = Counter(f.code for f in result.findings if f.fix_to_apply(unsafe) is None)
    for (_, code), times in expected_after_fix(text).items():
        allowed[code] += times
    extra = [describe(f) for f in outcome.result.findings if left[f.code] > allowed[f.code]]
    assert not extra, "%s: findings left after the fixes that the fixture does not expect:\n%s" % (
        path.name, "\n".join(extra))

    snapshot = SNAPSHOTS / ("%s.%s.py.snap" % (path.stem, "unsafe-fixed" if unsafe else "fixed"))
    expected = outcome.text if outcome.text != text else None
    if UPDATE_SNAPSHOTS:
        if expected is None:
            snapshot.unlink(missing_ok=True)
        else:
            SNAPSHOTS.mkdir(exist_ok=True)
            snapshot.write_bytes(expected.encode("utf-8"))
        return
    stored = snapshot.read_bytes().decode("utf-8") if snapshot.exists() else None
    if expected is None:
        assert stored is None, "the fixes change nothing in %s, but %s exists (UPDATE_SNAPSHOTS=1 removes it)" % (
            path.name, snapshot.name)
        return
    assert stored is not None, "no snapshot %s (UPDATE_SNAPSHOTS=1 writes it)" % snapshot.name
    assert expected == stored, "the fixes of %s no longer give %s (UPDATE_SNAPSHOTS=1 rewrites it)" % (
        path.name, snapshot.name)


def test_every_snapshot_has_its_fixture():
    names = {p.stem for p in FIXTURES}
    stale = [p.name for p in SNAPSHOTS.glob("*.snap") if p.name.split(".")[0] not in names]
    assert not stale, "snapshots of fixtures that no longer exist: %s" % ", ".join(sorted(stale))


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_codes_have_doc_pages(path):
    _, result = _check(path)
    for code in sorted({f.code for f in result.findings}):
        rule = rules.RULES_BY_CODE[code]
        assert rule.doc_path().is_file(), "%s has no doc page at %s" % (code, rule.doc_path())
        doc = rule.doc()
        assert doc.startswith("# %s " % code), "%s doc must start with `# %s <name>`" % (code, code)
        for section in DOC_SECTIONS:
            assert section in doc, "%s doc lacks the section %r" % (code, section)


def _fix_shape_problems(finding: Finding):
    where = describe(finding)
    if not rules.RULES_BY_CODE[finding.code].offers_fixes:
        if finding.fixes:
            yield "%s: this rule declares no fixes but offered %d" % (where, len(finding.fixes))
        return
    if not finding.fixes:
        # Where the right fix cannot be told a rule offers none, and its message says why.
        if "no fix" not in finding.message:
            yield "%s: no fix offered, and the message does not say why (\"no fix: ...\")" % where
        return
    preferred = [fix for fix in finding.fixes if fix.preferred]
    if len(preferred) != 1:
        yield "%s: %d fixes marked preferred, expected exactly 1" % (where, len(preferred))
    for fix in finding.fixes:
        if not fix.edits:
            yield "%s: fix %r has no edits" % (where, fix.title)
        if not fix.title.strip():
            yield "%s: a fix has an empty title" % where


def _fix_result_problems(path, text: str, finding: Finding, fix: Fix, count_before: Counter, allowed: Counter):
    where = "%s: fix %r" % (describe(finding), fix.title)
    try:
        fixed = apply_edits(text, fix.edits)
    except ValueError as err:
        yield "%s: edits cannot be applied: %s" % (where, err)
        return
    try:
        ast.parse(fixed)
    except SyntaxError as err:
        yield "%s: fixed code does not parse: %s (line %s: %r)" % (
            where, err.msg, err.lineno, (err.text or "").rstrip())
        return
    after = check_source(fixed, str(path))
    if after.internal_errors:
        yield "%s: rules crashed on the fixed code:\n%s" % (where, "\n".join(after.internal_errors))
    # Fixes may shift lines, so count per code: the finding fixed must be gone, and no finding of
    # any code may appear instead, except those its line announces with `after fix:`.
    after_counts = Counter(f.code for f in after.findings)
    grown = sorted(code for code in after_counts if after_counts[code] > allowed[code])
    for code in grown:
        left = [describe(f) for f in after.findings if f.code == code]
        yield "%s: %s findings %d before, %d after (still: %s)" % (
            where, code, count_before[code], after_counts[code], "; ".join(left))


def test_every_rule_has_a_fixture():
    missing = []
    for rule in rules.ALL_RULES:
        files = sorted(RULE_FIXTURES.glob("%s_*.py" % rule.code.lower()))
        announced = [p for p in files if any(code == rule.code for _, code in
                                             expected_findings(p.read_text(encoding="utf-8")))]
        if not announced:
            missing.append("%s (%s): no tests/fixtures/rules/%s_*.py with `# expect: %s`" % (
                rule.code, rule.name, rule.code.lower(), rule.code))
    assert not missing, "\n".join(missing)


def test_false_positive_fixtures_exist_and_announce_nothing():
    files = sorted(RULE_FIXTURES.glob("fp_*.py"))
    assert files, "no fp_*.py false-positive fixtures"
    for path in files:
        assert not expected_findings(path.read_text(encoding="utf-8")), \
            "%s is a must-stay-quiet fixture: it must not carry `# expect:` comments" % path.name


def test_expectations_parse():
    text = "a = 1  # expect: TL101\nb = 2\nc = 3  #expect:TL101 , TL301\nd = 4  # expect: TL102*2, TL301\n"
    assert expected_findings(text) == {(1, "TL101"), (3, "TL101"), (3, "TL301"), (4, "TL102"), (4, "TL301")}
    assert expected_counts(text) == Counter({(1, "TL101"): 1, (3, "TL101"): 1, (3, "TL301"): 1,
                                             (4, "TL102"): 2, (4, "TL301"): 1})
    assert expected_counts("e = 5  # expect: TL101, TL101\n") == Counter({(1, "TL101"): 2})
    after = "f = 6  # expect: TL102; after fix: TL106\ng = 7  # expect: TL102\n"
    assert expected_counts(after) == Counter({(1, "TL102"): 1, (2, "TL102"): 1})
    assert expected_after_fix(after) == Counter({(1, "TL106"): 1})


def _fake_result(*positions):
    """A check result with one TL101 finding at each (line, column)."""
    from torchlint.analysis.findings import CheckResult, Range, Severity

    found = [Finding("TL101", "m", Severity.WARNING, Range.of(line, col, line, col + 1)) for line, col in positions]
    return CheckResult(findings=found)


@pytest.mark.parametrize("marks, positions, complaint", [
    ("# expect: TL101", [(1, 0), (1, 0)], "duplicate"),  # the same finding twice
    ("# expect: TL101*2", [(1, 0), (1, 0)], "duplicate"),  # two marks do not excuse a duplicate
    ("# expect: TL101", [(1, 0), (1, 4)], "1 expected, 2 found"),  # a second finding needs a mark
    ("# expect: TL101*2", [(1, 0)], "missing"),
    ("", [(1, 0)], "unexpected"),
])
def test_exact_counting_fails(tmp_path, marks, positions, complaint):
    path = tmp_path / "fixture.py"
    with pytest.raises(AssertionError, match=complaint):
        _assert_expectations(path, "x = 1  %s\n" % marks, _fake_result(*positions))


def test_exact_counting_passes_on_two_marked_findings(tmp_path):
    _assert_expectations(tmp_path / "fixture.py", "x = 1  # expect: TL101*2\n", _fake_result((1, 0), (1, 4)))
