"""Applying fixes: to a text (pass after pass, like ruff) and to a file (atomically)."""
from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

from .analysis.engine import DEFAULT_OPTIONS, CheckOptions, check_source
from .analysis.findings import CheckResult, Edit, Finding, Fix
from .analysis.source import SourceText, apply_edits

MAX_PASSES = 10
_LONE_LF = re.compile(r"(?<!\r)\n")


def allowed(fix: Fix, unsafe: bool) -> bool:
    return fix.is_safe or unsafe


def preferred_fix(finding: Finding) -> Optional[Fix]:
    """The fix the rule recommends (the first one when none is marked)."""
    for fix in finding.fixes:
        if fix.preferred:
            return fix
    return finding.fixes[0] if finding.fixes else None


def choose_fix(finding: Finding, unsafe: bool = False) -> Optional[Fix]:
    """The preferred fix if it may be applied, else the first one that may."""
    best = preferred_fix(finding)
    if best is not None and allowed(best, unsafe):
        return best
    return next((fix for fix in finding.fixes if allowed(fix, unsafe)), None)


@dataclass
class FixOutcome:
    text: str  # the fixed text (the original when nothing applied)
    result: CheckResult  # what remains in ``text``
    fixed: int = 0  # findings fixed
    errors: List[str] = field(default_factory=list)  # fixes that broke the code (a torchlint bug)


def fix_text(text: str, path: str = "<stdin>", options: CheckOptions = DEFAULT_OPTIONS,
             unsafe: bool = False, inference=None, result: Optional[CheckResult] = None) -> FixOutcome:
    """Apply allowed fixes, re-check, and repeat until nothing changes (at most MAX_PASSES)."""
    if result is None:
        result = check_source(text, path, options, inference)
    outcome = FixOutcome(text, result)
    newline = SourceText(text).newline()
    for _ in range(MAX_PASSES):
        if outcome.result.parse_error is not None:
            break
        edits, applied = _pick_edits(outcome.result.findings, unsafe, newline)
        if not applied:
            break
        new_text = apply_edits(outcome.text, edits)
        if new_text == outcome.text:
            break
        new_result = check_source(new_text, path, options, inference)
        if new_result.parse_error is not None:
            outcome.errors.append("fixes for %s made %s unparsable (%s); they were not applied"
                                  % (", ".join(sorted({f.code for f in applied})), path,
                                     new_result.parse_error.message))
            break
        outcome.text, outcome.result, outcome.fixed = new_text, new_result, outcome.fixed + len(applied)
    return outcome


def _pick_edits(findings: Sequence[Finding], unsafe: bool, newline: str) -> Tuple[List[Edit], List[Finding]]:
    """Edits of the chosen fixes that do not collide; colliding ones wait for the next pass."""
    taken: List[Edit] = []
    applied: List[Finding] = []
    for finding in findings:
        fix = choose_fix(finding, unsafe)
        if fix is None:
            continue
        edits = [_with_newline(edit, newline) for edit in fix.edits]
        fresh = [edit for edit in edits if edit not in taken]  # two fixes adding the same import
        if any(_collide(edit, other) for edit in fresh for other in taken):
            continue
        taken.extend(fresh)
        applied.append(finding)
    return taken, applied


def _collide(a: Edit, b: Edit) -> bool:
    a_start, a_end, b_start, b_end = a.range.start, a.range.end, b.range.start, b.range.end
    if a_start == a_end == b_start == b_end:
        return True  # two insertions at one place: their order would be a guess
    return a_start < b_end and b_start < a_end


def _with_newline(edit: Edit, newline: str) -> Edit:
    """Keep a CRLF file CRLF even if a fix was written with bare newlines."""
    if newline == "\n" or "\n" not in edit.new_text:
        return edit
    return Edit(edit.range, _LONE_LF.sub(newline, edit.new_text))


def write_atomic(path: str, data: bytes) -> None:
    """Replace a file's content so that a crash at any point leaves the old or the new file,
    never a truncated one: write a temporary file next to it, fsync, then rename over it."""
    directory = os.path.dirname(os.path.abspath(path))
    mode = os.stat(path).st_mode & 0o7777
    handle, temp = tempfile.mkstemp(dir=directory, prefix=".%s." % os.path.basename(path), suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
