"""Notebook documents (LSP 3.17 ``notebookDocument/sync``): a notebook's Python cells analysed
together, in order, so that a class defined in one cell is seen from another.

pygls keeps the notebook and its cells' text documents in the workspace. The scheduler analyses
the notebook under the notebook's own uri, as the one text ``analysis.notebook`` joins from its
code cells; diagnostics go out per cell uri (pushed, or pulled per cell), and hovers and code
actions on a cell are answered from the notebook's result through a :class:`CellView`, in the
cell's coordinates. A cell on its own is never analysed (the server's ``document`` does not
return it), so nothing is reported twice.

What this module reads comes in as arguments: the workspace (through :class:`Notebooks`), the
notebook's joined cells as its record keeps them, each cell's last diagnostics. What it
answers (the cells joined, each cell's diagnostics) the handlers store in the records.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Mapping, Optional, Tuple
from urllib.parse import unquote

from lsprotocol import types
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument, Workspace
from pygls.workspace.position_codec import PositionCodec

from ..analysis.findings import CheckResult, Finding
from ..analysis.notebook import CodeCell, JoinedCells, join_cells
from ..analysis.source import SourceText
from .convert import Converter
from .publishing import Diagnostics, Shown
from .scheduler import Snapshot
from .views import CellView

# Every notebook whose cells include Python ones (VS Code's Jupyter notebooks among them).
SYNC_OPTIONS = types.NotebookDocumentSyncOptions(notebook_selector=[
    types.NotebookDocumentFilterWithCells(cells=[types.NotebookCellLanguage(language="python")], notebook="*")])

Cells = List[Tuple[int, str, TextDocument]]  # (cell number, cell uri, its text document), code cells in order
Converters = Dict[int, Tuple[str, Optional[int], Converter]]  # cell number -> (cell uri, version, converter)


@dataclass(frozen=True)
class JoinedNotebook:
    """A notebook's code cells joined into the one text that is analysed."""

    key: Tuple[Tuple[int, str], ...]  # (cell number, text) of every code cell: the same key, the same joined text
    joined: JoinedCells
    cells: Cells

    @property
    def text(self) -> str:
        return self.joined.text


class Notebooks:
    """The open notebooks and their cells, as pygls' workspace has them."""

    def __init__(self, workspace: Callable[[], Workspace]):
        self._workspace = workspace  # raises until the server is initialized

    def _documents(self) -> Optional[Workspace]:
        try:
            return self._workspace()
        except Exception:  # not initialized yet
            return None

    def notebook(self, uri: str) -> Optional[types.NotebookDocument]:
        workspace = self._documents()
        return workspace.get_notebook_document(notebook_uri=uri) if workspace is not None else None

    def notebook_of_cell(self, uri: str) -> Optional[types.NotebookDocument]:
        workspace = self._documents()
        return workspace.get_notebook_document(cell_uri=uri) if workspace is not None else None

    def is_cell(self, uri: str) -> bool:
        return self.notebook_of_cell(uri) is not None

    def uris(self) -> List[str]:
        workspace = self._documents()
        return [notebook.uri for notebook in workspace.notebook_documents.values()] if workspace is not None else []

    def code_cells(self, notebook: types.NotebookDocument) -> Cells:
        documents = self._workspace().text_documents
        cells = []
        for index, cell in enumerate(notebook.cells):
            document = documents.get(unquote(cell.document))
            if cell.kind != types.NotebookCellKind.Code or document is None:
                continue
            if document.language_id not in (None, "python"):
                continue
            cells.append((index + 1, cell.document, document))
        return cells


def notebook_path(uri: str) -> str:
    try:
        return to_fs_path(uri) or ""
    except Exception:
        return ""


def join(uri: str, cells: Cells, cached: Optional[JoinedNotebook]) -> JoinedNotebook:
    """The notebook's code cells joined (``cached`` when their texts are the same)."""
    # A cell the server lost track of (see documents.py) counts as empty until it is sent whole.
    sources = [(number, "" if getattr(document, "out_of_sync", None) else document.source)
               for number, _, document in cells]
    key = tuple(sources)
    if cached is not None and cached.key == key:
        return JoinedNotebook(key, cached.joined, cells)
    return JoinedNotebook(key, join_cells([CodeCell(number, source) for number, source in sources],
                                          notebook_path(uri)), cells)


def converters(cells: Cells, codec: PositionCodec) -> Converters:
    return {number: (cell_uri, document.version, Converter(SourceText(document.source), codec))
            for number, cell_uri, document in cells}


def cell_view(uri: str, snap: Snapshot, result: CheckResult, notebook: JoinedNotebook, codec: PositionCodec,
              cell_converters: Optional[Converters] = None,
              joined_source: Optional[SourceText] = None) -> Optional[CellView]:
    """The notebook's result seen from one of its cells (None: not one of its code cells)."""
    joined, cells = notebook.joined, notebook.cells
    cell_converters = cell_converters if cell_converters is not None else converters(cells, codec)
    number = next((n for n, cell_uri, _ in cells if unquote(cell_uri) == unquote(uri)), None)
    if number is None or joined.cells.span(number) is None:
        return None
    return CellView(uri, snap, result, cell_converters[number][2], joined=joined, number=number,
                    cells=cell_converters, joined_source=joined_source or SourceText(joined.text))


def cell_diagnostics(snap: Snapshot, result: CheckResult, notebook: JoinedNotebook, codec: PositionCodec,
                     last_good: Mapping[str, Diagnostics]) -> Dict[str, Tuple[Optional[int], Shown]]:
    """cell uri -> (cell version, what it shows). A cell that does not parse (mid-typing) keeps
    the diagnostics of its last text that did (``last_good``, per cell uri)."""
    joined = notebook.joined
    broken = {joined.cells.locate(error.position)[0] for error in joined.errors}
    by_cell: Dict[int, List[Finding]] = {}
    for finding in result.findings:
        by_cell.setdefault(joined.cells.locate(finding.range.start)[0], []).append(finding)
    out = {}
    cell_converters, joined_source = converters(notebook.cells, codec), SourceText(joined.text)  # once for every cell
    for number, cell_uri, document in notebook.cells:
        if result.parse_error is not None or number in broken:
            out[cell_uri] = (document.version, Shown(list(last_good.get(cell_uri, [])), None))
            continue
        view = cell_view(cell_uri, snap, result, notebook, codec, cell_converters, joined_source)
        items = [] if view is None else [d for d in map(view.diagnostic, by_cell.get(number, ())) if d]
        if result.unchecked and view is not None:
            cell, at = joined.cells.locate(result.unchecked[0].position)
            if cell == number:  # the information about the notebook's unchecked classes: on the first one
                unchecked = [replace(result.unchecked[0], position=at)] + result.unchecked[1:]
                items.append(cell_converters[number][2].unchecked_diagnostic(unchecked))
        if result.cut_short and view is not None and number == notebook.cells[0][0]:
            items.append(cell_converters[number][2].cut_short_diagnostic(result.cut_short))  # (on the first cell)
        out[cell_uri] = (document.version, Shown(items, items))
    return out
