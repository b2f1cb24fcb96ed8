"""One open document as the request handlers see it: a file, or one cell of a notebook.

A file is analysed as it is. A notebook cell is analysed with the other cells of its notebook
(``analysis.notebook`` joins them), under the notebook's uri: its view converts between the
cell's own positions and the joined text's, and says where in which cell an edit lands. The
hover, inlay-hint and code-action modules work in the analysed text's positions through a
view, the same way for both. A view is read-only (frozen): what those modules get instead of
the server.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional, Tuple

from lsprotocol import types

from ..analysis.findings import CheckResult, Edit, Finding, Position, Range
from ..analysis.notebook import CellsChanged, CellSpan, JoinedCells, split_cells
from ..analysis.source import SourceText
from ..fixing import edit_with_newline  # keeps a CRLF document CRLF
from .convert import Converter, documents_edit
from .scheduler import Snapshot


@dataclass(frozen=True)
class DocumentView:
    """A file: the analysed text is the document's text."""

    uri: str
    snap: Snapshot
    result: CheckResult
    converter: Converter  # the document's own positions

    @property
    def source(self) -> SourceText:
        """The analysed text."""
        return self.converter.source

    def core_position(self, position: types.Position) -> Position:
        return self.converter.core_position(position)

    def core_range(self, rng: types.Range) -> Range:
        return Range(self.core_position(rng.start), self.core_position(rng.end))

    def lsp_range(self, rng: Range) -> Optional[types.Range]:
        """A range of the analysed text in this document's positions (None: not in this document)."""
        return self.converter.range(rng)

    def diagnostic(self, finding: Finding) -> Optional[types.Diagnostic]:
        return self.converter.diagnostic(finding, self.uri)

    def line_name(self, line: int) -> str:
        """How a message names a line of the analysed text."""
        return "line %d" % line

    def relabel(self, finding: Finding) -> Finding:
        """The finding with its message and fix titles naming lines as this document's user sees them."""
        return finding

    def workspace_edit(self, edits: List[Edit], document_changes: bool) -> Optional[types.WorkspaceEdit]:
        """The edits (analysed-text positions) as a workspace edit, or None when one cannot be placed."""
        newline = self.source.newline()
        text_edits = [self.converter.text_edit(edit_with_newline(edit, newline)) for edit in edits]
        return documents_edit({self.uri: (self.snap.version, text_edits)}, document_changes)

    def whole_edit(self, new_text: str, document_changes: bool) -> Optional[types.WorkspaceEdit]:
        """The analysed text replaced by ``new_text`` (fix all)."""
        edit = types.TextEdit(range=self.converter.whole_text(), new_text=new_text)
        return documents_edit({self.uri: (self.snap.version, [edit])}, document_changes)


@dataclass(frozen=True)
class CellView(DocumentView):
    """A notebook cell: the analysed text is its notebook's joined cells."""

    joined: JoinedCells = None  # type: ignore[assignment]  # always given (the fields above have defaults)
    number: int = 0  # the cell's number in the notebook
    cells: Dict[int, Tuple[str, Optional[int], Converter]] = field(default_factory=dict)  # number -> uri, version, converter
    joined_source: SourceText = None  # type: ignore[assignment]  # always given, as joined

    @property
    def source(self) -> SourceText:
        return self.joined_source

    def core_position(self, position: types.Position) -> Position:
        in_cell = self.converter.core_position(position)
        return self.joined.cells.joined_position(self.number, in_cell) or Position(1, 0)

    def _in_cell(self, rng: Range) -> Tuple[int, Range]:
        number, start = self.joined.cells.locate(rng.start)
        end_number, end = self.joined.cells.locate(rng.end)
        if end_number != number:  # ends in a later cell: up to the end of its first line
            end = Position(start.line, len(self.cells[number][2].source.line(start.line))) \
                if number in self.cells else start
        return number, Range(start, end)

    def lsp_range(self, rng: Range) -> Optional[types.Range]:
        number, in_cell = self._in_cell(rng)
        return self.converter.range(in_cell) if number == self.number else None

    def line_name(self, line: int) -> str:
        """``line 4`` in this cell, ``cell 2, line 4`` in another."""
        number, position = self.joined.cells.locate(Position(line, 0))
        return "line %d" % position.line if number == self.number else "cell %d, line %d" % (number, position.line)

    def relabel(self, finding: Finding) -> Finding:
        return self.joined.cells.relabel(finding)

    def location(self, rng: Range) -> Optional[types.Location]:
        number, in_cell = self._in_cell(rng)
        cell = self.cells.get(number)
        return types.Location(uri=cell[0], range=cell[2].range(in_cell)) if cell is not None else None

    def diagnostic(self, finding: Finding) -> Optional[types.Diagnostic]:
        """The finding as a diagnostic of this cell (None when it is in another cell)."""
        number, in_cell = self._in_cell(finding.range)
        if number != self.number:
            return None
        diagnostic = self.converter.diagnostic(replace(self.relabel(finding), range=in_cell, related=()), self.uri)
        related = [(self.location(r.range), r.message) for r in finding.related]
        diagnostic.related_information = [types.DiagnosticRelatedInformation(location=location, message=message)
                                          for location, message in related if location is not None] or None
        return diagnostic

    def workspace_edit(self, edits: List[Edit], document_changes: bool) -> Optional[types.WorkspaceEdit]:
        """Edits that land in cells (this one or others: an import goes to the first cell), or None
        when one does not: across cells, on an IPython line, in a cell that is not analysed."""
        per_cell: Dict[int, List[types.TextEdit]] = {}
        for edit in edits:
            placed = self._place(edit)
            if placed is None:
                return None
            number, in_cell = placed
            _, _, converter = self.cells[number]
            text = edit_with_newline(Edit(in_cell, edit.new_text), converter.source.newline())
            per_cell.setdefault(number, []).append(converter.text_edit(text))
        return documents_edit({self.cells[n][0]: (self.cells[n][1], e) for n, e in per_cell.items()},
                              document_changes)

    def _place(self, edit: Edit) -> Optional[Tuple[int, Range]]:
        cells = self.joined.cells
        start = cells.cell_position(edit.range.start)
        if start is None or start[0] not in self.cells:
            return None
        if edit.range.end == edit.range.start:
            return start[0], Range(start[1], start[1])
        end = cells.cell_position(edit.range.end, end=True)
        if end is None or end[0] != start[0] or _touches_placeholder(cells.span(start[0]), start[1], end[1]):
            return None
        return start[0], Range(start[1], end[1])

    def whole_edit(self, new_text: str, document_changes: bool) -> Optional[types.WorkspaceEdit]:
        """The joined text replaced by ``new_text``: each cell it changes, whole (None when the
        change does not cut back into the same cells)."""
        try:
            sources = split_cells(self.joined, new_text)
        except CellsChanged:
            return None
        per_uri = {}
        for number, source in sources.items():
            if number not in self.cells:
                return None
            uri, version, converter = self.cells[number]
            per_uri[uri] = (version, [types.TextEdit(range=converter.whole_text(), new_text=source)])
        return documents_edit(per_uri, document_changes)


def _touches_placeholder(span: Optional[CellSpan], start: Position, end: Position) -> bool:
    """Whether an edit's lines hold an IPython line's placeholder (its text is not the cell's)."""
    return span is not None and any(start.line <= line <= end.line for line in span.placeholder_lines)
