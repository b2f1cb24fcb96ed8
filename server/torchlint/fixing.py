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
from typing import Iterable, Iterator, List, Optional, Sequence, Set, Tuple

from .analysis.findings import CheckResult, Edit, Finding, Position
from .analysis.inference_seam import Inference
from . import collection
from .analysis.source import SourceText, apply_edits
from .engine import DEFAULT_OPTIONS, CheckOptions, check_source
from .rules import ALL_RULES
from .rules.base import Cleanup
from .files import read_regular_file

MAX_PASSES = 10
_LONE_LF = re.compile(r"(?<!\r)\n")


@dataclass
class FixOutcome:
    text: str  # the fixed text (the original when nothing applied)
    result: CheckResult  # what remains in ``text``
    fixed: int = 0  # findings fixed
    errors: List[str] = field(default_factory=list)  # fixes that broke the code (a torchlint bug)


def fix_text(text: str, path: str = "<stdin>", options: CheckOptions = DEFAULT_OPTIONS,
             unsafe: bool = False, inference: Optional[Inference] = None, result: Optional[CheckResult] = None) -> FixOutcome:
    """Apply allowed fixes, re-check, and repeat until nothing changes (at most MAX_PASSES)."""
    # Each pass holds a check's trees and findings while it parses the next text: with the cyclic
    # collector on, every full collection walks them all again (6,000 fixes: 3x the time).
    with collection.paused():
        return _fix_text(text, path, options, unsafe, inference, result)


def _fix_text(text: str, path: str, options: CheckOptions, unsafe: bool, inference: Optional[Inference],
              result: Optional[CheckResult]) -> FixOutcome:
    if result is None:
        result = check_source(text, path, options, inference)
    outcome = FixOutcome(text, result)
    newline = SourceText(text).newline()
    fixed_codes: Set[str] = set()
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
        fixed_codes.update(finding.code for finding in applied)
    if outcome.fixed:
        tidy = tidy_after_fixes(text, outcome.text, fixed_codes)
        if tidy != outcome.text:
            tidy_result = check_source(tidy, path, options, inference)
            if tidy_result.parse_error is None:
                outcome.text, outcome.result = tidy, tidy_result
    return outcome


# -- composing fixes: what several of them leave behind --------------------------------------

def tidy_after_fixes(before: str, after: str, codes: Optional[Iterable[str]] = None) -> str:
    """``after`` (``before`` with fixes applied) with the clean-ups of the rules whose fixes were
    applied (``codes``; None: every rule's), each in the registry's order: what a rule's fixes
    leave for the others' to join (TL201's `with torch.no_grad():` blocks) or an import they left
    unused. A clean-up that fails leaves the text as it was."""
    wanted = None if codes is None else set(codes)
    done: List[Cleanup] = []
    for rule in ALL_RULES:
        if wanted is not None and rule.code not in wanted:
            continue
        for cleanup in rule.cleanups:
            if cleanup in done:
                continue
            done.append(cleanup)
            try:
                after = cleanup(before, after)
            except (SyntaxError, ValueError):
                pass
    return after


def _pick_edits(findings: Sequence[Finding], unsafe: bool, newline: str) -> Tuple[List[Edit], List[Finding]]:
    """Edits of the chosen fixes that do not collide; colliding ones wait for the next pass.

    In the findings' order, a fix is taken when none of its edits collides with an edit taken
    before it (an edit equal to a taken one is not repeated: two fixes adding the same import).
    Each look costs O(log n) (:class:`_TakenEdits`), so a file of thousands of fixes is not
    compared fix by fix."""
    chosen = [(finding, [edit_with_newline(edit, newline) for edit in fix.edits])
              for finding, fix in ((finding, finding.fix_to_apply(unsafe)) for finding in findings) if fix is not None]
    index = _TakenEdits(edit for _, edits in chosen for edit in edits)
    taken: List[Edit] = []
    applied: List[Finding] = []
    for finding, edits in chosen:
        fresh = [edit for edit in edits if edit not in index]
        if any(index.collides(edit) for edit in fresh):
            continue
        for edit in fresh:
            index.add(edit)
        taken.extend(fresh)
        applied.append(finding)
    return taken, applied


class _TakenEdits:
    """The edits taken so far, asked whether a new one collides with any of them.

    Two insertions at one place collide (their order would be a guess); otherwise two edits
    collide when their ranges overlap, an insertion when it is strictly inside the other's range.
    Every position an edit may have is known up front (``candidates``), so each is numbered in
    order and counted in Fenwick trees: a look or an addition costs O(log n)."""

    def __init__(self, candidates: Iterable[Edit]) -> None:
        places = sorted({p for edit in candidates for p in (edit.range.start, edit.range.end)},
                        key=lambda p: (p.line, p.column))
        self._number = {place: number for number, place in enumerate(places)}
        self._edits: Set[Edit] = set()
        self._insertions: Set[Position] = set()
        self._starts = _Tally(len(places))  # of the taken edits that replace text
        self._ends = _Tally(len(places))
        self._inserted = _Tally(len(places))  # of the taken insertions

    def __contains__(self, edit: Edit) -> bool:
        return edit in self._edits

    def add(self, edit: Edit) -> None:
        self._edits.add(edit)
        start, end = self._number[edit.range.start], self._number[edit.range.end]
        if start == end:
            self._insertions.add(edit.range.start)
            self._inserted.add(start)
        else:
            self._starts.add(start)
            self._ends.add(end)

    def collides(self, edit: Edit) -> bool:
        start, end = self._number[edit.range.start], self._number[edit.range.end]
        if start == end and edit.range.start in self._insertions:
            return True
        # A taken range [s, e) overlaps this one unless e <= start or s >= end (never both):
        # those starting before ``end`` less those ending at or before ``start``.
        if self._starts.below(end) - self._ends.below(start + 1) > 0:
            return True
        return start != end and self._inserted.below(end) - self._inserted.below(start + 1) > 0


class _Tally:
    """How many numbers below a bound were added, each addition or count in O(log n) (a Fenwick tree)."""

    def __init__(self, size: int) -> None:
        self._tree = [0] * (size + 1)

    def add(self, number: int) -> None:
        number += 1
        while number < len(self._tree):
            self._tree[number] += 1
            number += number & -number

    def below(self, bound: int) -> int:
        total = 0
        while bound > 0:
            total += self._tree[bound]
            bound -= bound & -bound
        return total


def edit_with_newline(edit: Edit, newline: str) -> Edit:
    """Keep a CRLF file CRLF even if a fix was written with bare newlines."""
    if newline == "\n" or "\n" not in edit.new_text:
        return edit
    return Edit(edit.range, _LONE_LF.sub(newline, edit.new_text))


class NotWritten(Exception):  # raised by the write itself, never by a signal handler (those raise BaseExceptions)
    """A fix that was not written; the message says why and what to do (the file is unchanged).
    ``reason``: why, in a few words ("read-only file"); ``advice``: what to do, where ``{flag}``
    stands for the option that asked for the write (see :meth:`says`)."""

    def __init__(self, reason: str, advice: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.advice = advice

    def says(self, outcome: str = "not fixed", flag: str = "--fix") -> str:
        """``read-only file; not fixed (make it writable, ... to let --fix change it)``."""
        advice = self.advice.format(flag=flag)
        return "%s; %s%s" % (self.reason, outcome, " (%s)" % advice if advice else "")

    def __str__(self) -> str:
        return self.says()


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
            raise NotWritten("not a regular file")
        if not status.st_mode & 0o222 or not os.access(target, os.W_OK):
            raise NotWritten("read-only file", "make it writable, e.g. with `chmod u+w`, to let {flag} change it")
        if read_regular_file(target) != original:
            raise NotWritten("changed on disk while it was being fixed", "run again")
        temp: Optional[str] = _verified_copy(target, data)
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


def _write_at(descriptor: int, data: memoryview, offset: int) -> int:
    os.lseek(descriptor, offset, os.SEEK_SET)
    return os.write(descriptor, data)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


@contextlib.contextmanager
def _deferred_interrupts() -> Iterator[None]:
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
