"""Applying fixes: to a text (pass after pass, like ruff) and to a file (in place, safely)."""
from __future__ import annotations

import ast
import contextlib
import errno
import os
import re
import signal
import stat
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

from .analysis.findings import CheckResult, Edit, Finding, Position
from .analysis.inference_seam import Inference
from . import collection
from .analysis.source import SourceText, apply_edits
from .engine import DEFAULT_OPTIONS, CheckOptions, check_source
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
    if outcome.fixed:
        tidy = tidy_after_fixes(text, outcome.text)
        if tidy != outcome.text:
            tidy_result = check_source(tidy, path, options, inference)
            if tidy_result.parse_error is None:
                outcome.text, outcome.result = tidy, tidy_result
    return outcome


# -- composing fixes: what several of them leave behind --------------------------------------

def tidy_after_fixes(before: str, after: str) -> str:
    """Merge `with torch.no_grad():` blocks that fixes put next to each other, and remove the
    torch imports that only the replaced code used (`from torch.autograd import Variable`)."""
    try:
        after, tree = _merge_no_grad_blocks(before, after)
        return _drop_imports_left_unused(before, after, tree)
    except (SyntaxError, ValueError):
        return after


def _is_no_grad(stmt: ast.stmt) -> bool:
    if not (isinstance(stmt, ast.With) and len(stmt.items) == 1 and stmt.items[0].optional_vars is None):
        return False
    call = stmt.items[0].context_expr
    func = call.func if isinstance(call, ast.Call) and not call.args and not call.keywords else None
    return (isinstance(func, ast.Attribute) and func.attr == "no_grad") or (
        isinstance(func, ast.Name) and func.id == "no_grad")


def _merge_no_grad_blocks(before: str, after: str) -> Tuple[str, ast.Module]:
    """`with torch.no_grad(): a.copy_(x)` right after another such block, made by a fix: one block.
    Also the tree of the text it returns.

    Merged as if one pair at a time, the first in ``ast.walk``'s order each time, but a level of
    the tree at once: a merge never changes whether another pair of its level merges, and only
    makes pairs one level down (where the two bodies meet), so a file's thousand merges cost a
    few parses, not a thousand."""
    user_text = _Occurrences(before)
    while True:
        tree = ast.parse(after)
        source = SourceText(after)
        headers = _mergeable_headers(tree, source, user_text)
        if not headers:
            return after, tree
        lines = source.lines_with_endings()
        for header in headers:
            lines[header - 1] = ""
        after = "".join(lines)


def _mergeable_headers(tree: ast.Module, source: SourceText, user_text: "_Occurrences") -> List[int]:
    """The header lines of the `no_grad` blocks to merge into the block above them, at the shallowest
    level of the tree that has any."""
    level: List[ast.AST] = [tree]
    while level:
        headers = []
        for node in level:
            for name in ("body", "orelse", "finalbody"):
                block = getattr(node, name, None)
                if not isinstance(block, list):
                    continue
                for first, second in zip(block, block[1:]):
                    if _is_no_grad(first) and _is_no_grad(second) and second.lineno == first.end_lineno + 1 \
                            and second.col_offset == first.col_offset and second.body[0].lineno > second.lineno \
                            and second.body[0].col_offset == first.body[0].col_offset \
                            and source.segment(second) not in user_text:
                        headers.append(second.lineno)
        if headers:
            return headers
        level = [child for node in level for child in ast.iter_child_nodes(node)
                 if isinstance(child, _HOLDS_STATEMENTS)]
    return []


_HOLDS_STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case)  # the nodes a statement can be in


class _Occurrences:
    """Whether a block's text occurs in a text (the file before its fixes), found among the places
    where the block's first line does, which are looked up once per first line: thousands of blocks
    are not each searched for through the whole file."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._places: Dict[str, List[int]] = {}

    def __contains__(self, segment: str) -> bool:
        head = segment[: segment.find("\n") + 1] or segment
        places = self._places.get(head)
        if places is None:
            places = self._places[head] = []
            place = self._text.find(head)
            while place >= 0:
                places.append(place)
                place = self._text.find(head, place + 1)
        return any(self._text.startswith(segment, place) for place in places)


def _drop_imports_left_unused(before: str, after: str, tree: ast.Module) -> str:
    """``tree``: the tree of ``after``."""
    torch_imported = {alias.asname or alias.name.split(".")[0]
                      for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
                      and node.lineno == node.end_lineno
                      for alias in node.names if _is_torch_import(node, alias)}
    used_after = _names_loaded(tree, torch_imported)
    unused = torch_imported - used_after
    used_before = _names_loaded(ast.parse(before), unused) if unused else set()
    lines = SourceText(after).lines_with_endings()
    for node in reversed(tree.body):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno != node.end_lineno:
            continue
        names = []
        for alias in node.names:
            bound = alias.asname or alias.name.split(".")[0]
            names.append((alias, _is_torch_import(node, alias) and bound in used_before and bound not in used_after))
        if not any(drop for _, drop in names):
            continue
        line = lines[node.lineno - 1]
        if line[: node.col_offset].strip() or line[node.end_col_offset:].strip():
            continue  # shares its line with other code (`import x; y()`) or a comment: leave it
        kept = [alias for alias, drop in names if not drop]
        if not kept:
            del lines[node.lineno - 1]
            continue
        spelled = ", ".join(a.name + (" as " + a.asname if a.asname else "") for a in kept)
        newline = line[len(line.rstrip("\r\n")):]
        module = node.module or "" if isinstance(node, ast.ImportFrom) else ""
        head = "from %s%s import " % ("." * node.level, module) if isinstance(node, ast.ImportFrom) else "import "
        lines[node.lineno - 1] = line[: node.col_offset] + head + spelled + newline
    return "".join(lines)


def _is_torch_import(node: Union[ast.Import, ast.ImportFrom], alias: ast.alias) -> bool:
    module = node.module or "" if isinstance(node, ast.ImportFrom) else ""
    return module.startswith("torch") or alias.name.startswith("torch")


def _names_loaded(tree: ast.AST, names: Set[str]) -> Set[str]:
    """Which of ``names`` the tree reads (or deletes) as a name; the walk stops once it found them
    all (usually within the first function: ``import torch``)."""
    found: Set[str] = set()
    todo = [tree] if names else []
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and node.id in names and not isinstance(node.ctx, ast.Store):
            found.add(node.id)
            if len(found) == len(names):
                break
        todo.extend(ast.iter_child_nodes(node))
    return found


def _pick_edits(findings: Sequence[Finding], unsafe: bool, newline: str) -> Tuple[List[Edit], List[Finding]]:
    """Edits of the chosen fixes that do not collide; colliding ones wait for the next pass.

    In the findings' order, a fix is taken when none of its edits collides with an edit taken
    before it (an edit equal to a taken one is not repeated: two fixes adding the same import).
    Each look costs O(log n) (:class:`_TakenEdits`), so a file of thousands of fixes is not
    compared fix by fix."""
    chosen = [(finding, [_with_newline(edit, newline) for edit in fix.edits])
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


def _with_newline(edit: Edit, newline: str) -> Edit:
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
