"""Checking one file, in a worker process or the main one: plain data in (a :class:`Job`), plain
data out (a :class:`Checked`). A Python file and a notebook's code cells take one path
(:func:`check_text`): what differs is how their text is read and how a new text is written back
(:class:`PlainText`, :class:`NotebookText`)."""
from __future__ import annotations

import difflib
import io
import tokenize
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, FrozenSet, List, Optional, Sequence, Tuple, Union

from ..analysis.findings import CheckResult, Finding, ParseError, Position, Severity
from ..analysis.noqa import AddedNoqa, add_noqa
from ..analysis.notebook import (CellMap, CellsChanged, CodeCell, JoinedCells, NotebookError, NotebookFile,
                                 is_notebook, join_cells, read_notebook, split_cells, with_sources)
from ..engine import CheckOptions, check_source
from ..environments import Interpreter
from ..files import read_regular_file
from ..fixing import fix_text
from ..inference.inference_cache import CacheEvents
from ..output import FileReport
from ..settings import DEFAULT_SETTINGS, flag_name, spec_of
from .process_state import ProcessState

if TYPE_CHECKING:
    from ..inference.layer import JediInference


@dataclass(frozen=True)
class Job:
    path: str
    display: str  # how diffs name the file
    options: CheckOptions
    mode: str = "check"  # "check", "fix" (write the fixes), "diff" (show them) or "noqa" (--add-noqa)
    unsafe_fixes: bool = False
    infer: bool = True  # False: --no-infer
    python: Optional[Interpreter] = None  # the environment the jedi layer analyses (None: the default choice)
    root: str = "."  # the project root: where jedi looks for the project's own modules
    cache_dir: Optional[str] = None  # where jedi's answers are kept between runs (None: --no-cache)
    infer_budget: Optional[float] = DEFAULT_SETTINGS.infer_budget  # seconds of jedi per file (None: no limit)
    max_file_size: int = DEFAULT_SETTINGS.max_file_size  # characters; a larger file is not checked
    lines: Optional[FrozenSet[int]] = None  # --changed-lines-only: only findings on these lines (None: all)
    data: Optional[bytes] = None  # the content when it is not read from ``path`` (standard input)
    noqa_hints: bool = False  # --add-noqa: hints get a directive too (they are printed: --show-hints...)


@dataclass
class Checked:
    """One job's outcome. Workers only compute: with --fix the new content comes back here and
    the main process writes it, so stopping the main process stops every write."""

    report: FileReport
    unreadable: str = ""  # why the file could not be read (an error, exit 2)
    original: bytes = b""  # --fix: the content the fixes were computed from
    fixed_data: Optional[bytes] = None  # --fix: the content to write (None: nothing to write)
    unfixed_findings: List[Finding] = field(default_factory=list)  # what to report if the write fails
    notes: List[str] = field(default_factory=list)  # for the user, e.g. inference stopped by the budget
    unfixed_cells: Optional[CellMap] = None  # a notebook's cells before --fix (for unfixed_findings)
    noqa_added: int = 0  # --add-noqa: directives added or extended (written only with fixed_data)
    noqa_left: List[Finding] = field(default_factory=list)  # --add-noqa: findings no directive silences
    cache_events: CacheEvents = CacheEvents()  # what the jedi layer's disk caches met during this file


# -- reading a file ------------------------------------------------------------------------------

def decode_source(data: bytes) -> Tuple[Optional[str], str, Optional[ParseError]]:
    """(text, encoding, error): UTF-8 unless a PEP 263 cookie or a BOM says otherwise.
    Newlines are kept as they are in the file."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except (SyntaxError, LookupError) as err:
        return None, "", ParseError("DecodeError: %s" % (err.msg if isinstance(err, SyntaxError) else err),
                                    Position(1, 0))
    try:
        return data.decode(encoding), encoding, None
    except UnicodeDecodeError as err:
        before = data[: err.start]
        line = before.count(b"\n") + 1
        column = len(before) - (before.rfind(b"\n") + 1)
        return None, encoding, ParseError("DecodeError: not valid %s: %s" % (encoding, err.reason),
                                          Position(line, column))
    except LookupError as err:
        return None, encoding, ParseError("DecodeError: %s" % err, Position(1, 0))


_MAX_BYTES_A_CHARACTER = 4  # UTF-8's longest, and GB18030's


def too_large(job: Job) -> str:
    """Why a file of more than ``job.max_file_size`` characters (the editor's limit too) was not
    checked: parsing and checking it could take minutes and gigabytes
    (benchmarks/README.md#tuned-constants)."""
    flag = flag_name(spec_of("max_file_size"))
    return "larger than %s (%d characters): not checked (exclude it, or give a larger %s)" % (
        flag, job.max_file_size, flag)


@dataclass
class Rewritten:
    """A checked text changed (fixes, noqa directives): what the file becomes."""

    data: Callable[[], bytes]  # the new content (computed when it is to be written)
    diff: Callable[[], str]  # --diff: what changes
    text: str  # the text the new positions are in
    cells: Optional[CellMap] = None  # a notebook: its cells as they become


@dataclass
class PlainText:
    """A Python file's text, as checked and as written back (in its own encoding)."""

    data: bytes  # the content read
    text: str
    encoding: str
    cells: Optional[CellMap] = None
    errors: Tuple[ParseError, ...] = ()

    def rewritten(self, new: str, display: str) -> Optional[Rewritten]:
        return Rewritten(data=lambda: new.encode(self.encoding), diff=lambda: unified_diff(self.text, new, display),
                         text=new)


@dataclass
class NotebookText:
    """A notebook's code cells joined into one text (analysis.notebook); only the changed cells'
    sources change in its JSON."""

    data: bytes  # the JSON read
    notebook: NotebookFile
    joined: JoinedCells
    path: str  # (for join_cells)

    @property
    def text(self) -> str:
        return self.joined.text

    @property
    def cells(self) -> CellMap:
        return self.joined.cells

    @property
    def errors(self) -> Tuple[ParseError, ...]:
        return self.joined.errors

    def rewritten(self, new: str, display: str) -> Optional[Rewritten]:
        """None when no cell changes. Raises CellsChanged when ``new`` does not cut into the same cells."""
        sources = split_cells(self.joined, new)
        json_text = with_sources(self.notebook, sources)
        if not sources:
            return None
        cells = [CodeCell(c.number, sources.get(c.number, c.source)) for c in self.notebook.code_cells]
        rejoined = join_cells(cells, self.path)
        before = {c.number: c.source for c in self.notebook.code_cells}
        return Rewritten(data=lambda: json_text.encode("utf-8"), diff=lambda: "".join(
            unified_diff(before[number], sources[number], "%s:cell %d" % (display, number))
            for number in sorted(sources)), text=rejoined.text, cells=rejoined.cells)


Text = Union[PlainText, NotebookText]


def read_text(job: Job, checked: Checked) -> Optional[Text]:
    """The file's text to check, or None when there is none (``checked`` then says why)."""
    notebook = is_notebook(job.path)
    # A character takes at most 4 bytes: a source file of more is too large, and is not read whole.
    # (A notebook's JSON holds its outputs too: the limit is on its code, once joined.)
    most = None if notebook else _MAX_BYTES_A_CHARACTER * job.max_file_size
    try:
        data = read_regular_file(job.path, most) if job.data is None else job.data
    except OSError as err:
        checked.unreadable = "cannot read: %s" % (err.strerror or err)
        return None
    text = _notebook_text(job, data, checked) if notebook else _plain_text(job, data, most, checked)
    if text is not None and len(text.text) > job.max_file_size:
        checked.unreadable = too_large(job)
        return None
    return text


def _plain_text(job: Job, data: bytes, most: Optional[int], checked: Checked) -> Optional[PlainText]:
    if most is not None and len(data) > most:
        checked.unreadable = too_large(job)
        return None
    text, encoding, checked.report.error = decode_source(data)
    return None if text is None else PlainText(data, text, encoding)


def _notebook_text(job: Job, data: bytes, checked: Checked) -> Optional[NotebookText]:
    try:
        notebook = read_notebook(data)
    except NotebookError as err:
        checked.report.error = ParseError(str(err), Position(1, 0))
        return None
    if notebook.language != "python":
        return None  # an R or Julia notebook: nothing for torchlint
    return NotebookText(data, notebook, join_cells(notebook.code_cells, job.path), job.path)


# -- checking it -----------------------------------------------------------------------------------

def check_file(job: Job, state: ProcessState) -> Checked:
    checked = Checked(FileReport(job.path))
    text = read_text(job, checked)
    if text is not None:
        check_text(job, state, text, checked)
    state.collect_now()
    return checked


def check_text(job: Job, state: ProcessState, text: Text, checked: Checked) -> None:
    """Check the text, then add noqa directives or fix it as the job's mode says."""
    report = checked.report
    report.cells = text.cells
    try:
        inference = state.inference_for(job)
        result = on_lines(check_source(text.text, job.path, job.options, inference), job.lines)
        if job.mode == "noqa" and result.parse_error is None and not text.errors:
            result = _add_noqa(job, text, result, inference, checked)
        elif job.mode != "check" and result.parse_error is None:
            result = _fix(job, text, result, inference, checked)
        _take_layer_news(job, inference, checked)
    except Exception:  # a torchlint bug: report it, check the other files
        report.internal_errors.append("%s: %s" % (job.display, traceback.format_exc(limit=4)))
        return
    report.findings = [_relabel(report, finding) for finding in result.findings]
    report.unchecked = list(result.unchecked)  # (placed in their cells when printed: output.cell_position)
    report.cut_short = list(result.cut_short)
    report.error = result.parse_error or (text.errors[0] if text.errors else None)
    report.internal_errors.extend("%s: %s" % (job.display, e) for e in result.internal_errors)


def _relabel(report: FileReport, finding: Finding) -> Finding:
    """A notebook's finding names its cells' lines; a file's is as it is."""
    return finding if report.cells is None else report.cells.relabel(finding)


def _rewritten(text: Text, new: str, display: str, checked: Checked, not_done: str) -> Optional[Rewritten]:
    """What the file becomes with ``new`` as its text; None when it stays as it is (``not_done``
    is noted, with why, when the new text cannot be cut into the notebook's cells)."""
    if new == text.text:
        return None
    try:
        return text.rewritten(new, display)
    except CellsChanged as err:
        checked.notes.append(not_done % err)
        return None


def _add_noqa(job: Job, text: Text, result: CheckResult, inference: Any, checked: Checked) -> CheckResult:
    added, after = noqa_text(job, text.text, result, inference)
    rewritten = _rewritten(text, added.text, job.display, checked, "no noqa directive added (%s)")
    if rewritten is not None:
        result = after
        checked.noqa_added = added.added
        checked.original, checked.fixed_data = text.data, rewritten.data()
    checked.noqa_left = [_relabel(checked.report, f) for f in noqa_wanted(job, result.findings)]
    return result


def _fix(job: Job, text: Text, result: CheckResult, inference: Any, checked: Checked) -> CheckResult:
    """--fix, --diff: the fixed text's check; the new content, or the diff, in ``checked``."""
    report = checked.report
    unfixed = list(result.findings)
    outcome = fix_text(text.text, job.path, job.options, job.unsafe_fixes, inference, result)
    report.internal_errors.extend(outcome.errors)
    rewritten = _rewritten(text, outcome.text, job.display, checked, "fixes not applied (%s); fix it by hand")
    if rewritten is None:
        return result
    result, report.fixed = outcome.result, outcome.fixed
    if rewritten.cells is not None:
        report.cells = rewritten.cells
    if rewritten.text != outcome.text:  # the positions must be those of the cells written
        result = check_source(rewritten.text, job.path, job.options, inference)
    if job.mode == "diff":
        report.diff = rewritten.diff()
    else:
        checked.original, checked.fixed_data = text.data, rewritten.data()
        checked.unfixed_findings = unfixed
        checked.unfixed_cells = text.cells
    return result


def _take_layer_news(job: Job, inference: Optional["JediInference"], checked: Checked) -> None:
    """What the jedi layer has to say after this file: why its answers stopped short here (the
    budget: a note, and the report says the file was checked by names alone past it), and what
    its disk caches met (said once for the run by the main process)."""
    if inference is None:
        if job.infer:  # jedi could not start, or timed out earlier in this run
            checked.report.names_only = "type inference is off for the rest of this run"
        return
    notes = sorted(set(inference.take_notes().values()))
    checked.notes.extend(notes)
    checked.report.names_only = "; ".join(notes)
    checked.cache_events = inference.take_cache_events()


def on_lines(result: CheckResult, lines: Optional[FrozenSet[int]]) -> CheckResult:
    """``result`` with only the findings that span one of ``lines`` (None: all of them)."""
    if lines is not None:
        result.findings = [f for f in result.findings
                           if any(line in lines for line in range(f.range.start.line, f.range.end.line + 1))]
    return result


def noqa_wanted(job: Job, findings: Sequence[Finding]) -> List[Finding]:
    """The findings --add-noqa silences: those the text output prints (hints only when printed)."""
    return [f for f in findings if job.noqa_hints or f.severity is not Severity.HINT]


def noqa_text(job: Job, text: str, result: CheckResult, inference: Any) -> Tuple[AddedNoqa, CheckResult]:
    """--add-noqa on a parsed text: (what was added, the check of the new text). The new text is
    checked again, so what it still reports is what the directives did not silence."""
    try:
        added = add_noqa(text, noqa_wanted(job, result.findings))
    except (SyntaxError, tokenize.TokenError) as err:
        raise RuntimeError("the tokenizer cannot read the file (%s); no noqa directive added" % err) from None
    if not added.lines:
        return added, result
    after = check_source(added.text, job.path, job.options, inference)
    if after.parse_error is not None:  # never written: a torchlint bug
        raise RuntimeError("the noqa directives made the file unparsable (%s); none was added"
                           % after.parse_error.message)
    return added, on_lines(after, job.lines)


def unified_diff(before: str, after: str, name: str) -> str:
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 fromfile=name, tofile=name)
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n"
                   for line in lines)
