"""Notebook documents (LSP 3.17 ``notebookDocument/sync``): a notebook's Python cells analysed
together, in order, so that a class defined in one cell is seen from another.

pygls keeps the notebook and its cells' text documents in the workspace. The scheduler analyses
the notebook under the notebook's own uri, as the one text ``analysis.notebook`` joins from its
code cells; diagnostics go out per cell uri (pushed, or pulled per cell), and hovers and code
actions on a cell are answered from the notebook's result through a :class:`CellView`, in the
cell's coordinates. A cell on its own is never analysed (the server's ``document`` does not
return it), so nothing is reported twice.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple
from urllib.parse import unquote

from lsprotocol import types
from pygls.uris import to_fs_path

from ..analysis.findings import CheckResult
from ..analysis.notebook import CodeCell, JoinedCells, join_cells
from ..analysis.source import SourceText
from .convert import Converter, changed_while_analysed, pull_report, result_id
from .scheduler import Snapshot, Stale
from .views import CellView, DocumentView

# Every notebook whose cells include Python ones (VS Code's Jupyter notebooks among them).
SYNC_OPTIONS = types.NotebookDocumentSyncOptions(notebook_selector=[
    types.NotebookDocumentFilterWithCells(cells=[types.NotebookCellLanguage(language="python")], notebook="*")])

Cells = List[Tuple[int, str, object]]  # (cell number, cell uri, its text document), code cells in order


class Notebooks:
    def __init__(self, server):
        self.server = server
        self._joined: Dict[str, Tuple[tuple, JoinedCells, Cells]] = {}  # notebook uri -> (key, joined, cells)
        self._sent: Dict[str, Dict[str, list]] = {}  # notebook uri -> cell uri -> diagnostics pushed last

    # -- what is open ------------------------------------------------------------------------------
    def _documents(self):
        try:
            return self.server.workspace
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

    def _code_cells(self, notebook: types.NotebookDocument) -> Cells:
        documents = self.server.workspace.text_documents
        cells = []
        for index, cell in enumerate(notebook.cells):
            document = documents.get(unquote(cell.document))
            if cell.kind != types.NotebookCellKind.Code or document is None:
                continue
            if document.language_id not in (None, "python"):
                continue
            cells.append((index + 1, cell.document, document))
        return cells

    def joined(self, uri: str) -> Optional[Tuple[JoinedCells, Cells]]:
        """The notebook's code cells joined (computed once per set of cell texts)."""
        notebook = self.notebook(uri)
        if notebook is None:
            return None
        cells = self._code_cells(notebook)
        # A cell the server lost track of (see documents.py) counts as empty until it is sent whole.
        sources = [(number, "" if getattr(document, "out_of_sync", None) else document.source)
                   for number, _, document in cells]
        key = tuple(sources)
        cached = self._joined.get(uri)
        if cached is not None and cached[0] == key:
            return cached[1], cells
        joined = join_cells([CodeCell(number, source) for number, source in sources], self.path(uri))
        self._joined[uri] = (key, joined, cells)
        return joined, cells

    @staticmethod
    def path(uri: str) -> str:
        try:
            return to_fs_path(uri) or ""
        except Exception:
            return ""

    def state(self, uri: str) -> Optional[Tuple[Optional[int], str, str]]:
        """(version, text, path) of a notebook, for the scheduler."""
        notebook = self.notebook(uri)
        current = self.joined(uri)
        if notebook is None or current is None:
            return None
        return notebook.version, current[0].text, self.path(uri)

    def _current(self, snap: Snapshot) -> Optional[Tuple[JoinedCells, Cells]]:
        current = self.joined(snap.uri)
        return current if current is not None and current[0].text == snap.text else None

    # -- views -------------------------------------------------------------------------------------
    def converters(self, cells: Cells) -> Dict[int, Tuple[str, Optional[int], Converter]]:
        codec = self.server.workspace.position_codec
        return {number: (cell_uri, document.version, Converter(SourceText(document.source), codec))
                for number, cell_uri, document in cells}

    def cell_view(self, uri: str, snap: Snapshot, result: CheckResult, joined: JoinedCells,
                  cells: Cells, converters=None, joined_source: Optional[SourceText] = None) -> Optional[CellView]:
        converters = converters if converters is not None else self.converters(cells)
        number = next((n for n, cell_uri, _ in cells if unquote(cell_uri) == unquote(uri)), None)
        if number is None or joined.cells.span(number) is None:
            return None
        return CellView(uri, snap, result, converters[number][2], joined=joined, number=number, cells=converters,
                        joined_source=joined_source or SourceText(joined.text))

    async def view(self, uri: str) -> Optional[CellView]:
        """The current result of a cell's notebook, seen from the cell."""
        notebook = self.notebook_of_cell(uri)
        if notebook is None:
            return None
        snap, result = await self.server.scheduler.result(notebook.uri)
        current = self._current(snap)
        return self.cell_view(uri, snap, result, *current) if current is not None else None

    # -- diagnostics -------------------------------------------------------------------------------
    def diagnostics(self, snap: Snapshot, result: CheckResult, joined: JoinedCells,
                    cells: Cells) -> Dict[str, Tuple[Optional[int], List[types.Diagnostic]]]:
        """cell uri -> (cell version, diagnostics). A cell that does not parse (mid-typing) keeps
        the diagnostics of its last text that did."""
        server = self.server
        if server.too_large(snap.text):
            server.diagnostics(snap, result)  # says so, once
            return {cell_uri: (document.version, []) for _, cell_uri, document in cells}
        broken = {joined.cells.locate(error.position)[0] for error in joined.errors}
        by_cell: Dict[int, list] = {}
        for finding in result.findings:
            by_cell.setdefault(joined.cells.locate(finding.range.start)[0], []).append(finding)
        out = {}
        converters, joined_source = self.converters(cells), SourceText(joined.text)  # once for every cell's view
        for number, cell_uri, document in cells:
            if result.parse_error is not None or number in broken:
                out[cell_uri] = (document.version, server.last_good.get(cell_uri, []))
                continue
            view = self.cell_view(cell_uri, snap, result, joined, cells, converters, joined_source)
            items = [] if view is None else [d for d in map(view.diagnostic, by_cell.get(number, ())) if d]
            server.last_good[cell_uri] = items
            out[cell_uri] = (document.version, items)
        return out

    def publish(self, snap: Snapshot, result: CheckResult) -> None:
        """A wave is in for the notebook's current cells: push each cell's diagnostics (those that
        changed), or have a pull client pull again."""
        current = self._current(snap)
        if current is None:
            return
        server = self.server
        per_cell = self.diagnostics(snap, result, *current)
        if server.pull:
            if server.scheduler.newest_wave(snap.uri) and server.refresh_support and any(
                    cell_uri in server.pulled and server.pulled[cell_uri] != result_id(snap, items)
                    for cell_uri, (_, items) in per_cell.items()):
                server.workspace_diagnostic_refresh(None)
            return
        sent = self._sent.setdefault(snap.uri, {})
        for cell_uri in [uri for uri in sent if uri not in per_cell]:  # cells deleted since
            del sent[cell_uri]
            self._push(cell_uri, None, [])
        for cell_uri, (version, items) in per_cell.items():
            if sent.get(cell_uri) != items:
                sent[cell_uri] = items
                self._push(cell_uri, version, items)

    def _push(self, uri: str, version: Optional[int], items: List[types.Diagnostic]) -> None:
        self.server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=items))

    async def pull(self, params: types.DocumentDiagnosticParams):
        """``textDocument/diagnostic`` for a cell: its part of the notebook's result."""
        server = self.server
        uri = params.text_document.uri
        notebook = self.notebook_of_cell(uri)
        try:
            # A client that cannot be asked to pull again gets every wave now.
            snap, result = await server.scheduler.result(notebook.uri, final=not server.refresh_support)
        except Stale:
            raise changed_while_analysed("notebook")
        current = self._current(snap)
        if current is None:
            raise changed_while_analysed("notebook")
        per_cell = self.diagnostics(snap, result, *current)
        items = next((cell[1] for cell_uri, cell in per_cell.items() if unquote(cell_uri) == unquote(uri)), [])
        return pull_report(server.pulled, uri, snap, items, params.previous_result_id)

    # -- notifications -----------------------------------------------------------------------------
    def opened(self, params: types.DidOpenNotebookDocumentParams) -> None:
        server = self.server
        if not server.pull or server.refresh_support:
            server.scheduler.schedule(params.notebook_document.uri, delay=0)

    def changed(self, params: types.DidChangeNotebookDocumentParams) -> None:
        server = self.server
        uri = params.notebook_document.uri
        structure = params.change.cells.structure if params.change.cells is not None else None
        for closed in (structure.did_close or []) if structure is not None else []:
            self._forget_cell(closed.uri)
        if not server.pull or server.refresh_support:
            server.scheduler.schedule(uri)

    def closed(self, params: types.DidCloseNotebookDocumentParams) -> None:
        uri = params.notebook_document.uri
        self.server.scheduler.forget(uri)
        self._joined.pop(uri, None)
        sent = self._sent.pop(uri, {})
        for cell in params.cell_text_documents:
            self._forget_cell(cell.uri, clear=cell.uri in sent or not self.server.pull)

    def _forget_cell(self, uri: str, clear: bool = True) -> None:
        server = self.server
        server.last_good.pop(uri, None)
        server.pulled.pop(uri, None)
        for sent in self._sent.values():
            sent.pop(uri, None)
        if clear and not server.pull:
            self._push(uri, None, [])


async def view_of(server, uri: str) -> Optional[DocumentView]:
    """What a request on ``uri`` works on: a file's current result, or a cell's notebook's."""
    if server.notebooks.is_cell(uri):
        return await server.notebooks.view(uri)
    if server.document(uri) is None:
        return None
    snap, result = await server.scheduler.result(uri)
    return DocumentView(uri, snap, result, server.converter(snap.text))


def register(server, guarded) -> None:
    """The notebook notifications (pygls updates its workspace first, then calls these)."""
    notebooks = server.notebooks

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    @guarded(server)
    def did_open_notebook(params: types.DidOpenNotebookDocumentParams):
        notebooks.opened(params)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    @guarded(server)
    def did_change_notebook(params: types.DidChangeNotebookDocumentParams):
        notebooks.changed(params)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    @guarded(server)
    def did_close_notebook(params: types.DidCloseNotebookDocumentParams):
        notebooks.closed(params)
