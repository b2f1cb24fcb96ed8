"""Applying fixes: to a text (pass after pass, like ruff) and to a file (in place, safely)."""
from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import stat
import tempfile
import threading
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

from .analysis.engine import DEFAULT_OPTIONS, CheckOptions, check_source
from .analysis.findings import CheckResult, Edit, Finding, Fix
from .analysis.source import SourceText, apply_edits
from .files import read_regular_file

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


class NotWritten(Exception):
    """A fix that was not written; the message says why and what to do (the file is unchanged)."""


def write_in_place(path: str, data: bytes, original: bytes) -> None:
    """Replace the content of the file at ``path`` (``original`` when it was read) with ``data``.

    The file keeps its inode, so symbolic links stay links (their target is written), hard
    links stay linked, and mode, owner, ACLs and extended attributes are kept. First a hidden
    temporary copy of the new content is written next to the file and read back, then the
    content is copied into the file in place and the copy removed. SIGINT and SIGTERM wait
    until that is done, so they never leave a half-written file or a temporary one; SIGKILL or
    a power cut can leave only the hidden copy (``.NAME.*.tmp``), which then holds the new content.

    Raises :class:`NotWritten` for a read-only file or one that changed since it was read
    (nothing written), and OSError when writing fails (the old content is put back)."""
    with _deferred_interrupts():
        target = os.path.realpath(path)
        status = os.stat(target)
        if not stat.S_ISREG(status.st_mode):
            raise NotWritten("not a regular file; not fixed")
        if not status.st_mode & 0o222 or not os.access(target, os.W_OK):
            raise NotWritten("read-only file; not fixed (make it writable, e.g. with `chmod u+w`, to let --fix "
                             "change it)")
        if read_regular_file(target) != original:
            raise NotWritten("changed on disk while it was being fixed; not fixed (run again)")
        temp = _verified_copy(target, data)
        try:
            try:
                _overwrite(target, data)
            except OSError as err:
                try:
                    _overwrite(target, original)
                except OSError:
                    temp, kept = None, temp  # the only complete copy of the new content now
                    raise OSError(err.errno, "%s; the file may be damaged: its fixed content is in %s"
                                  % (err.strerror or err, kept)) from err
                raise
        finally:
            if temp is not None:
                _remove(temp)


def _verified_copy(target: str, data: bytes) -> str:
    """A hidden temporary file next to ``target`` (else in the temp folder) holding ``data``, read back."""
    name = os.path.basename(target)
    try:
        handle, temp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".%s." % name, suffix=".tmp")
    except OSError:  # the folder is not writable; the file itself may still be
        handle, temp = tempfile.mkstemp(prefix=".torchlint-%s." % name, suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if read_regular_file(temp) != data:
            raise OSError(errno.EIO, "the temporary copy %s reads back different from what was written" % temp)
    except BaseException:
        _remove(temp)
        raise
    return temp


def _overwrite(target: str, data: bytes) -> None:
    """Write ``data`` over the file's content in place (same inode), then cut what is left."""
    descriptor = os.open(target, os.O_WRONLY | getattr(os, "O_BINARY", 0))
    try:
        write_at = getattr(os, "pwrite", _write_at)
        view = memoryview(data)
        written = 0
        while written < len(data):
            written += write_at(descriptor, view[written:], written)
        os.ftruncate(descriptor, len(data))
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _write_at(descriptor: int, data, offset: int) -> int:
    os.lseek(descriptor, offset, os.SEEK_SET)
    return os.write(descriptor, data)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


@contextlib.contextmanager
def _deferred_interrupts():
    """SIGINT and SIGTERM that arrive inside the block take effect when it ends (main thread only:
    Python runs signal handlers there, so elsewhere there is nothing to defer)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: List[int] = []
    previous = {}
    try:
        for name in ("SIGINT", "SIGTERM"):
            signum = getattr(signal, name, None)
            if signum is not None and signal.getsignal(signum) is not None:  # None: set outside Python
                previous[signum] = signal.signal(signum, lambda number, frame: caught.append(number))
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(caught):
            signal.raise_signal(signum)  # now handled as it would have been
