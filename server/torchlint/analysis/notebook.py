"""Jupyter notebooks as one Python text: the code cells joined in order, positions mapped both ways.

The command line (``.ipynb`` files) and the language server (LSP notebook documents) both
analyse a notebook through this module, so a class defined in one cell is seen from the others
(Jupyter runs the cells in one namespace).

How cells become one text:

- each code cell's lines, in order, ending with a newline, and between two cells a comment line
  (:data:`SEPARATOR`) that marks the boundary, so that fixed text can be cut back into cells;
- IPython lines that are not Python (``%magic``, ``!shell``, ``x = !ls``, ``name?``) become a
  placeholder statement at the same indentation (:data:`PLACEHOLDER`): line numbers still map,
  and the original line is put back when the cell is written;
- a cell that starts with a cell magic (``%%bash``, ``%%time``...) or that does not parse on
  its own is blanked (its lines left empty): the other cells are still analysed, and a cell that
  does not parse is reported as such.

Positions: the joined text's 1-based lines map to (cell number, 1-based line in the cell); cell
numbers count every cell of the notebook, Markdown ones too, from 1 (as ruff reports them).

Writing a ``.ipynb`` back changes only the ``source`` values of the cells that changed, spliced
into the original JSON text: outputs, metadata, execution counts, key order and indentation stay
byte for byte.
"""
from __future__ import annotations

import ast
import json
import re
import warnings
from dataclasses import dataclass, replace
from json.decoder import scanstring as _scanstring  # type: ignore[attr-defined]  # (not in typeshed)
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from .parsing import PARSE_LOCK

# json's own string scanner (C where built): (the string's value, the index after its closing quote).
scanstring: Callable[[str, int], Tuple[str, int]] = _scanstring
from .findings import Finding, ParseError, Position

NOTEBOOK_SUFFIX = ".ipynb"
SEPARATOR = "# %% (torchlint: cell boundary)"
PLACEHOLDER = "pass  # (torchlint: IPython line)"

_LINE_END = re.compile(r"\r\n|\r|\n")
_IPYTHON_LINE = re.compile(
    r"\s*(?:[%!]"                            # %magic, !shell
    r"|[\w.]+\s*=\s*[%!]"                    # files = !ls, t = %timeit -o f()
    r"|\?{1,2}[\w.*]+\s*$"                   # ?name, ??name
    r"|[\w.*]+\?{1,2}\s*$)")                 # name?, name??
_CELL_MAGIC = re.compile(r"\s*%%")
_LINE_REFERENCE = re.compile(r"\bline (\d+)\b")


class NotebookError(ValueError):
    """Not a notebook torchlint can read; the message says why."""


def is_notebook(path: str) -> bool:
    return path.lower().endswith(NOTEBOOK_SUFFIX)


# -- cells joined into one text ------------------------------------------------------------------

@dataclass(frozen=True)
class CodeCell:
    number: int  # 1-based position among all the notebook's cells
    source: str


@dataclass(frozen=True)
class CellSpan:
    """Where one cell sits in the joined text."""

    number: int
    first_line: int  # 1-based line of the joined text where the cell starts
    line_count: int  # lines the cell takes there (each ends with a newline)
    ends_with_newline: bool  # its source does
    ipython_lines: Tuple[str, ...] = ()  # the lines that placeholders stand for, in order
    blanked: bool = False  # a cell magic or a syntax error: its lines are empty in the joined text
    placeholder_lines: Tuple[int, ...] = ()  # 1-based lines of the cell that hold a placeholder
    last_line_length: int = 0  # of the cell's last line (where its text ends without a newline)


@dataclass(frozen=True)
class CellMap:
    """The joined text's lines <-> cells' lines. Plain data (it travels between processes)."""

    spans: Tuple[CellSpan, ...]

    def span(self, number: int) -> Optional[CellSpan]:
        return next((span for span in self.spans if span.number == number), None)

    def locate(self, pos: Position) -> Tuple[int, Position]:
        """(cell number, position in the cell) of a joined-text position. A position on a
        boundary line is the start of the next cell; past the last cell, its end."""
        if not self.spans:
            return 0, pos
        for index, span in enumerate(self.spans):
            end = span.first_line + span.line_count  # the boundary line after the cell
            if pos.line < span.first_line:
                return span.number, Position(1, 0)
            if pos.line < end:
                return span.number, Position(pos.line - span.first_line + 1, pos.column)
            if pos.line == end and index + 1 < len(self.spans):
                return self.spans[index + 1].number, Position(1, 0)
        last = self.spans[-1]
        return last.number, Position(last.line_count + (1 if last.ends_with_newline else 0), 0)

    def cell_position(self, pos: Position, end: bool = False) -> Optional[Tuple[int, Position]]:
        """Like :meth:`locate`, but None where an edit could not be placed in a cell: on a blanked
        line, inside a boundary line, or past a cell that has no final newline. The start of a
        boundary line is the start of the next cell, or with ``end`` (an edit's end) the end of
        the cell before it."""
        for index, span in enumerate(self.spans):
            boundary = span.first_line + span.line_count
            if span.first_line <= pos.line < boundary:
                return (span.number, Position(pos.line - span.first_line + 1, pos.column)) \
                    if not span.blanked else None
            if pos.line == boundary:
                if end and pos.column == 0 and not span.blanked:
                    return span.number, (Position(span.line_count + 1, 0) if span.ends_with_newline
                                         else Position(span.line_count, span.last_line_length))
                if index + 1 < len(self.spans):
                    following = self.spans[index + 1]
                    return (following.number, Position(1, 0)) if pos.column == 0 and not following.blanked else None
                return (span.number, Position(span.line_count + 1, 0)) \
                    if pos.column == 0 and span.ends_with_newline and not span.blanked else None
        return None

    def name_lines(self, text: str, here: Optional[int] = None) -> str:
        """A message or fix title with its "line N" (joined-text lines) said as the cell's line:
        "line 4" in cell ``here``, "cell 2, line 4" in another."""
        def name(match: "re.Match[str]") -> str:
            number, pos = self.locate(Position(int(match.group(1)), 0))
            return "line %d" % pos.line if number == here else "cell %d, line %d" % (number, pos.line)
        return _LINE_REFERENCE.sub(name, text) if self.spans else text

    def relabel(self, finding: Finding) -> Finding:
        """The finding with its message and fix titles naming cells' lines (see :meth:`name_lines`)."""
        here = self.locate(finding.range.start)[0]
        fixes = tuple(replace(fix, title=self.name_lines(fix.title, here)) for fix in finding.fixes)
        return replace(finding, message=self.name_lines(finding.message, here), fixes=fixes)

    def joined_position(self, number: int, pos: Position) -> Optional[Position]:
        """The joined-text position of a position in cell ``number`` (None: not a joined cell)."""
        span = self.span(number)
        if span is None:
            return None
        line = min(max(pos.line, 1), span.line_count + 1)
        return Position(span.first_line + line - 1, pos.column if line == pos.line else 0)


@dataclass(frozen=True)
class JoinedCells:
    text: str  # Python: every code cell, in order
    cells: CellMap
    errors: Tuple[ParseError, ...] = ()  # cells that do not parse on their own (joined-text positions)
    skipped: Tuple[Tuple[int, str], ...] = ()  # (cell number, why) for cells left out of the analysis


def join_cells(cells: Sequence[CodeCell], path: str = "<notebook>") -> JoinedCells:
    """One Python text from the code cells (see the module's docstring)."""
    pieces: List[str] = []
    spans: List[CellSpan] = []
    errors: List[ParseError] = []
    skipped: List[Tuple[int, str]] = []
    separator = _unique_separator(cells)
    line = 1
    ipython: Tuple[str, ...]  # each cell's IPython lines and their numbers (below)
    placeholders: Tuple[int, ...]
    for cell in cells:
        if pieces:
            pieces.append(separator + "\n")
            line += 1
        lines = _LINE_END.split(cell.source)
        ends_with_newline = lines[-1] == ""
        if ends_with_newline:
            lines.pop()
        lines = lines or [""]
        blanked = False
        magic = next((text for text in lines if text.strip()), "")
        if _CELL_MAGIC.match(magic):
            skipped.append((cell.number, "cell magic %s" % magic.split()[0]))
            code, ipython, placeholders, blanked = [""] * len(lines), (), (), True
        else:
            code, ipython, placeholders = _replace_ipython_lines(lines)
            error = _syntax_error("\n".join(code) + "\n", path)
            if error is not None:
                errors.append(ParseError(error.message, Position(line + error.position.line - 1,
                                                                 error.position.column)))
                skipped.append((cell.number, error.message))
                code, ipython, placeholders, blanked = [""] * len(lines), (), (), True
        pieces.append("".join(text + "\n" for text in code))
        spans.append(CellSpan(cell.number, line, len(lines), ends_with_newline, ipython, blanked, placeholders,
                              len(lines[-1])))
        line += len(lines)
    return JoinedCells("".join(pieces), CellMap(tuple(spans)), tuple(errors), tuple(skipped))


def _unique_separator(cells: Sequence[CodeCell]) -> str:
    separator = SEPARATOR
    while any(separator in cell.source for cell in cells):  # never mistake a line of the user's
        separator += "-"
    return separator


def _replace_ipython_lines(lines: List[str]) -> Tuple[List[str], Tuple[str, ...], Tuple[int, ...]]:
    """The lines with IPython ones replaced, the replaced lines, and their 1-based numbers."""
    code, replaced, numbers = [], [], []
    for number, text in enumerate(lines, 1):
        if _IPYTHON_LINE.match(text) and not text.lstrip().startswith("#"):
            indent = text[: len(text) - len(text.lstrip())]
            code.append(indent + PLACEHOLDER)
            replaced.append(text)
            numbers.append(number)
        else:
            code.append(text)
    return code, tuple(replaced), tuple(numbers)


def _syntax_error(text: str, path: str) -> Optional[ParseError]:
    try:
        with PARSE_LOCK, warnings.catch_warnings():  # the AST builder is not thread-safe (see engine)
            warnings.simplefilter("ignore")
            ast.parse(text, filename=path)
    except SyntaxError as err:
        return ParseError("SyntaxError: %s" % err.msg, Position(err.lineno or 1, max((err.offset or 1) - 1, 0)))
    except (ValueError, RecursionError, MemoryError) as err:
        return ParseError("cannot parse: %s" % (str(err) or "too deeply nested"), Position(1, 0))
    return None


class CellsChanged(ValueError):
    """Fixed text that no longer cuts into the same cells (a fix crossed a boundary or an IPython line)."""


def split_cells(joined: JoinedCells, text: str) -> Dict[int, str]:
    """The new source of each cell that ``text`` (the joined text after fixes) changes.
    Raises :class:`CellsChanged` when the boundaries or IPython placeholders did not survive."""
    spans = joined.cells.spans
    separator = _separator_of(joined)
    parts = [] if not spans else _split_lines(text, separator)
    if len(parts) != len(spans):
        raise CellsChanged("a fix moved code across a cell boundary")
    old_parts = _split_lines(joined.text, separator) if spans else []
    changed: Dict[int, str] = {}
    for span, old, new in zip(spans, old_parts, parts):
        if new == old:
            continue
        if span.blanked:
            raise CellsChanged("a fix would change cell %d, which is not analysed" % span.number)
        lines = new.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        restored, pending = [], list(span.ipython_lines)
        for line_text in lines:
            if line_text.strip() == PLACEHOLDER:
                if not pending:
                    raise CellsChanged("a fix changed an IPython line of cell %d" % span.number)
                restored.append(pending.pop(0))
            else:
                restored.append(line_text)
        if pending:
            raise CellsChanged("a fix removed an IPython line of cell %d" % span.number)
        source = "\n".join(restored)
        changed[span.number] = source + "\n" if span.ends_with_newline or not restored else source
    return changed


def _separator_of(joined: JoinedCells) -> str:
    spans = joined.cells.spans
    if len(spans) < 2:
        return SEPARATOR
    lines = _LINE_END.split(joined.text)
    return lines[spans[1].first_line - 2]


def _split_lines(text: str, separator: str) -> List[str]:
    """The text between separator lines (newlines kept), one part per cell."""
    parts: List[str] = []
    current: List[str] = []
    for line_text in text.splitlines(keepends=True):
        if line_text.rstrip("\r\n") == separator:
            parts.append("".join(current))
            current = []
        else:
            current.append(line_text)
    parts.append("".join(current))
    return parts


# -- .ipynb files --------------------------------------------------------------------------------

@dataclass(frozen=True)
class NotebookFile:
    text: str  # the JSON text, as read
    code_cells: Tuple[CodeCell, ...]
    source_spans: Dict[int, Tuple[int, int]]  # cell number -> offsets of its "source" value in ``text``
    language: str  # the kernel's language ("python" when the notebook does not say)


def read_notebook(data: bytes) -> NotebookFile:
    """A notebook from a file's bytes (nbformat 4 JSON); raises :class:`NotebookError`."""
    try:
        text = data.decode("utf-8")  # a byte-order mark is kept, and written back
    except UnicodeDecodeError as err:
        raise NotebookError("not a notebook: not valid UTF-8 (%s at byte %d)" % (err.reason, err.start))
    start = len(text) - len(text.lstrip("\ufeff"))
    try:
        document = json.loads(text[start:])
    except ValueError as err:
        raise NotebookError("not a notebook: invalid JSON: %s" % err)
    except RecursionError:
        raise NotebookError("not a notebook: JSON nested too deeply")
    if not isinstance(document, dict) or not isinstance(document.get("cells"), list):
        raise NotebookError("not a notebook: no \"cells\" list (torchlint reads nbformat 4 notebooks)")
    metadata: Dict[str, Any] = document["metadata"] if isinstance(document.get("metadata"), dict) else {}
    language = _language(metadata)
    cells = []
    for index, cell in enumerate(document["cells"]):
        number = index + 1
        if not isinstance(cell, dict):
            raise NotebookError("cell %d is not a JSON object" % number)
        if cell.get("cell_type") != "code" or not _python_cell(cell):
            continue
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(line, str) for line in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise NotebookError("cell %d: \"source\" is neither a string nor a list of strings" % number)
        cells.append(CodeCell(number, source))
    try:
        spans = _source_spans(text, start)
    except RecursionError:
        raise NotebookError("not a notebook: JSON nested too deeply")
    return NotebookFile(text, tuple(cells), spans, language)


def _language(metadata: Dict[str, Any]) -> str:
    for key, field in (("kernelspec", "language"), ("language_info", "name")):
        value = metadata.get(key)
        if isinstance(value, dict) and isinstance(value.get(field), str):
            name: str = value[field]
            return name.lower()
    return "python"


def _python_cell(cell: Dict[str, Any]) -> bool:
    """VS Code marks cells of another language in a Python notebook (metadata.vscode.languageId)."""
    vscode = cell.get("metadata", {}).get("vscode") if isinstance(cell.get("metadata"), dict) else None
    language = vscode.get("languageId") if isinstance(vscode, dict) else None
    return language in (None, "python")


def with_sources(notebook: NotebookFile, sources: Dict[int, str]) -> str:
    """The notebook's JSON text with the given cells' sources replaced; nothing else changes."""
    text = notebook.text
    newline = "\r\n" if "\r\n" in text else "\n"
    ascii_only = text.isascii() and "\\u" in text
    pieces, cursor = [], 0
    for number in sorted(sources):
        if number not in notebook.source_spans:
            raise CellsChanged("cell %d has no \"source\" to replace" % number)
        start, end = notebook.source_spans[number]
        pieces.append(text[cursor:start])
        pieces.append(_encode_source(text, start, end, sources[number], newline, ascii_only))
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


def _encode_source(text: str, start: int, end: int, source: str, newline: str, ascii_only: bool) -> str:
    """``source`` as JSON in the style of the value it replaces (a string, or a list of lines one
    per line at the same indentation, as nbformat writes them)."""
    old = text[start:end]
    if old.startswith('"'):
        return json.dumps(source, ensure_ascii=ascii_only)
    lines = [json.dumps(line, ensure_ascii=ascii_only) for line in source.splitlines(keepends=True)]
    if not lines:
        return "[]"
    if "\n" not in old:
        return "[" + ", ".join(lines) + "]"
    line_start = text.rfind("\n", 0, start) + 1
    indent = re.match(r"[ \t]*", text[line_start:])
    assert indent is not None  # (it matches the empty string too)
    key_indent = indent.group(0)
    item = re.match(r"\[\s*?\n([ \t]*)\S", old)
    closing = re.search(r"\n([ \t]*)\]$", old)
    item_indent = item.group(1) if item else key_indent + " "
    closing_indent = closing.group(1) if closing else key_indent
    return "[" + newline + ("," + newline).join(item_indent + line for line in lines) + newline + closing_indent + "]"


# A small JSON scanner that records where each cell's "source" value is in the text: json.loads
# has already checked the document, so this only follows its structure.
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_SCALAR = re.compile(r"-?\d[\d.eE+-]*|true|false|null")


def _source_spans(text: str, start: int) -> Dict[int, Tuple[int, int]]:
    spans: Dict[int, Tuple[int, int]] = {}
    index = _skip_ws(text, start)
    for key, value_start, value_end in _members(text, index):
        if key != "cells" or text[value_start] != "[":
            continue
        spans.clear()  # a repeated key: the last one counts, as in json.loads
        for number, (cell_start, _) in enumerate(_elements(text, value_start), 1):
            if text[cell_start] != "{":
                continue
            for cell_key, source_start, source_end in _members(text, cell_start):
                if cell_key == "source":
                    spans[number] = (source_start, source_end)
    return spans


def _skip_ws(text: str, index: int) -> int:
    match = _WHITESPACE.match(text, index)
    assert match is not None  # (it matches the empty string too)
    return match.end()


def _members(text: str, index: int) -> Iterator[Tuple[str, int, int]]:
    """(key, value start, value end) of the object starting at ``index``."""
    index = _skip_ws(text, index + 1)
    if text[index] == "}":
        return
    while True:
        key, index = scanstring(text, index + 1)
        index = _skip_ws(text, _skip_ws(text, index) + 1)  # past the colon
        end = _value_end(text, index)
        yield key, index, end
        index = _skip_ws(text, end)
        if text[index] == "}":
            return
        index = _skip_ws(text, index + 1)  # past the comma


def _elements(text: str, index: int) -> Iterator[Tuple[int, int]]:
    """(start, end) of each element of the array starting at ``index``."""
    index = _skip_ws(text, index + 1)
    if text[index] == "]":
        return
    while True:
        end = _value_end(text, index)
        yield index, end
        index = _skip_ws(text, end)
        if text[index] == "]":
            return
        index = _skip_ws(text, index + 1)


def _value_end(text: str, index: int) -> int:
    char = text[index]
    if char == '"':
        return scanstring(text, index + 1)[1]
    if char == "{":
        end = index
        for _, _, end in _members(text, index):
            pass
        return text.index("}", _skip_ws(text, end if end > index else index + 1)) + 1
    if char == "[":
        end = index
        for _, end in _elements(text, index):
            pass
        return text.index("]", _skip_ws(text, end if end > index else index + 1)) + 1
    match = _SCALAR.match(text, index)
    if match is None:
        raise NotebookError("not a notebook: unexpected %r at offset %d" % (char, index))
    return match.end()
