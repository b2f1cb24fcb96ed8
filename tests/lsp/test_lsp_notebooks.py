"""Notebook documents over LSP 3.17 (notebookDocument/didOpen, didChange, didClose): the cells of a
notebook analysed together, diagnostics, hovers and quick fixes on the cells, pushed (VS Code)
and pulled (Neovim's capabilities)."""
from __future__ import annotations

import itertools

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from lsp_helpers import (CONFIG, NEOVIM, ROOT, VSCODE, apply_text_edits, codes, edits_of, record_publishes,
                         wait_for, whole_range)

pytestmark = pytest.mark.asyncio(loop_scope="module")

IMPORTS = "%matplotlib inline\nimport torch\nimport torch.nn as nn"
# The first seed article's bug, with its imports in another cell.
BLOCK = '''class LayerScaleBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.gamma_1 = torch.full((dim,), 1e-2)

    def forward(self, x):
        return x + self.gamma_1 * self.fc(x)
'''
GAMMA_LINE = 4  # 0-based, in the cell
FORWARD_LINE = 7
MARKDOWN = "# Layer scale"

_names = itertools.count()


async def initialize_with_notebooks(client: LanguageClient, profile: str) -> types.InitializeResult:
    """The profile's capabilities, plus notebook sync (what vscode-languageclient 8 declares;
    pytest-lsp's profiles leave it out)."""
    record_publishes(client)
    capabilities = client_capabilities(profile)
    capabilities.notebook_document = types.NotebookDocumentClientCapabilities(
        synchronization=types.NotebookDocumentSyncClientCapabilities(execution_summary_support=True))
    return await client.initialize_session(types.InitializeParams(
        capabilities=capabilities, root_uri=ROOT.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=ROOT.as_uri(), name=ROOT.name)]))


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def vscode(lsp_client: LanguageClient):
    lsp_client.init_result = await initialize_with_notebooks(lsp_client, VSCODE)
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def neovim(lsp_client: LanguageClient):
    lsp_client.init_result = await initialize_with_notebooks(lsp_client, NEOVIM)
    yield
    await lsp_client.shutdown_session()




class Notebook:
    """A notebook as VS Code's Jupyter sends it: a markdown cell, then code cells."""

    def __init__(self, client: LanguageClient, directory, sources):
        self.client = client
        path = directory / ("nb_%d.ipynb" % next(_names))
        self.uri = path.as_uri()
        # VS Code's cell uris: the notebook's path, the cell in the (quoted) fragment.
        self.cells = ["vscode-notebook-cell:%s#W%dsZmlsZQ%%3D%%3D" % (path, i) for i in range(len(sources) + 1)]
        self.texts = [MARKDOWN] + list(sources)
        self.versions = [1] * len(self.texts)
        self.version = 1

    def open(self) -> None:
        kinds = [types.NotebookCellKind.Markup] + [types.NotebookCellKind.Code] * (len(self.texts) - 1)
        self.client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=self.uri, notebook_type="jupyter-notebook", version=self.version,
                cells=[types.NotebookCell(kind=kind, document=cell) for kind, cell in zip(kinds, self.cells)]),
            cell_text_documents=[types.TextDocumentItem(uri=cell, language_id="markdown" if i == 0 else "python",
                                                        version=1, text=text)
                                 for i, (cell, text) in enumerate(zip(self.cells, self.texts))]))

    def edit(self, index: int, new_text: str) -> None:
        """Replace cell ``index``'s text (incrementally, as a paste over everything)."""
        old = self.texts[index]
        self.texts[index] = new_text
        self.versions[index] += 1
        self.version += 1
        self.client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(version=self.version, uri=self.uri),
            change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(
                text_content=[types.NotebookDocumentCellContentChanges(
                    document=types.VersionedTextDocumentIdentifier(uri=self.cells[index],
                                                                   version=self.versions[index]),
                    changes=[types.TextDocumentContentChangePartial(range=whole_range(old), text=new_text)])]))))

    def close(self) -> None:
        self.client.notebook_document_did_close(types.DidCloseNotebookDocumentParams(
            notebook_document=types.NotebookDocumentIdentifier(uri=self.uri),
            cell_text_documents=[types.TextDocumentIdentifier(uri=cell) for cell in self.cells]))


async def published(client, uri, since, what=lambda diagnostics: True, timeout: float = 60):
    """The first publish for ``uri`` after ``since`` whose diagnostics satisfy ``what``."""
    def found():
        return next((p for p in client.publishes[since:] if p.uri == uri and what(p.diagnostics)), None)
    await wait_for(lambda: found() is not None, timeout=timeout, what="diagnostics for %s" % uri)
    return found()


def at(line: int, character: int = 0) -> types.Position:
    return types.Position(line=line, character=character)


# -- push (VS Code) ----------------------------------------------------------------------------------
async def test_notebook_sync_is_advertised_for_python_cells(vscode: LanguageClient):
    sync = vscode.init_result.capabilities.notebook_document_sync
    (selector,) = sync.notebook_selector
    assert [cell.language for cell in selector.cells] == ["python"]


async def test_a_class_in_one_cell_is_checked_with_the_imports_of_another(vscode: LanguageClient, tmp_path):
    client = vscode
    notebook = Notebook(client, tmp_path, [IMPORTS, BLOCK])
    since = len(client.publishes)
    notebook.open()
    block = await published(client, notebook.cells[2], since, lambda d: bool(d))
    (diagnostic,) = block.diagnostics
    assert diagnostic.code == "TL101" and diagnostic.range.start == at(GAMMA_LINE, 8)
    assert block.version == 1
    imports = await published(client, notebook.cells[1], since)
    assert not imports.diagnostics
    assert not [p for p in client.publishes[since:] if p.uri in (notebook.uri, notebook.cells[0])]

    # Without the imports of cell 1, nothing says that the class is a Module: the finding goes.
    since = len(client.publishes)
    notebook.edit(1, "%matplotlib inline\n")
    await published(client, notebook.cells[2], since, lambda d: not d)
    since = len(client.publishes)
    notebook.edit(1, IMPORTS)
    await published(client, notebook.cells[2], since, lambda d: codes(d) == ["TL101"])

    since = len(client.publishes)
    notebook.close()
    await published(client, notebook.cells[2], since, lambda d: not d)


async def test_the_classes_no_rule_checked_are_said_on_the_cell_of_the_first(vscode: LanguageClient, tmp_path):
    """A base from a package that is not installed: one information, on that class's cell and line."""
    client = vscode
    unread = "class Head(Module):\n    pass\n\n\nclass Tail(Module):\n    pass\n"
    notebook = Notebook(client, tmp_path, [IMPORTS + "\nfrom notinstalled.core import Module", BLOCK, unread])
    since = len(client.publishes)
    notebook.open()
    said = await published(client, notebook.cells[3], since, lambda d: any("not checked" in x.message for x in d),
                           timeout=180)  # the jedi wave's
    (information,) = said.diagnostics
    assert information.severity == types.DiagnosticSeverity.Information and information.range.start == at(0, 0)
    assert information.message.startswith("2 classes of this file not checked (Head, Tail)")
    assert not [d for p in client.publishes[since:] if p.uri != notebook.cells[3] for d in p.diagnostics
                if "not checked" in d.message]
    notebook.close()


async def test_quick_fix_edits_the_cell_and_the_finding_goes(vscode: LanguageClient, tmp_path):
    client = vscode
    notebook = Notebook(client, tmp_path, [IMPORTS, BLOCK])
    since = len(client.publishes)
    notebook.open()
    block = await published(client, notebook.cells[2], since, lambda d: bool(d))
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=notebook.cells[2]),
        range=types.Range(start=at(GAMMA_LINE), end=at(GAMMA_LINE)),
        context=types.CodeActionContext(diagnostics=block.diagnostics)))
    titles = [a.title for a in actions]
    parameter = next(a for a in actions if "nn.Parameter" in a.title)
    assert "Disable TL101 for this line" in titles
    assert parameter.diagnostics[0].range == block.diagnostics[0].range
    edits = edits_of(parameter, notebook.cells[2])
    assert edits and all(e.range.start.line == GAMMA_LINE for e in edits)
    fixed = apply_text_edits(notebook.texts[2], edits)
    assert "        self.gamma_1 = nn.Parameter(torch.full((dim,), 1e-2))\n" in fixed
    since = len(client.publishes)
    notebook.edit(2, fixed)
    await published(client, notebook.cells[2], since, lambda d: not d)
    notebook.close()


async def test_hover_on_a_cell(vscode: LanguageClient, tmp_path):
    client = vscode
    notebook = Notebook(client, tmp_path, [IMPORTS, BLOCK])
    since = len(client.publishes)
    notebook.open()
    await published(client, notebook.cells[2], since, lambda d: bool(d))
    card = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=notebook.cells[2]), position=at(GAMMA_LINE, 14)))
    assert card.contents.value.startswith("**TL101 unregistered-tensor**") and card.range.start == at(GAMMA_LINE, 8)
    column = BLOCK.splitlines()[FORWARD_LINE].index("self.fc") + 6
    status = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=notebook.cells[2]), position=at(FORWARD_LINE, column)))
    assert "**submodule** (nn.Linear)" in status.contents.value
    assert "line 4" in status.contents.value  # the cell's line 4 holds `self.fc = nn.Linear(dim, dim)`
    assert status.range.start.line == FORWARD_LINE
    notebook.close()


async def test_a_cell_that_does_not_parse_keeps_its_diagnostics_and_the_others_go_on(vscode: LanguageClient,
                                                                                     tmp_path):
    client = vscode
    other = BLOCK.replace("LayerScaleBlock", "Other").replace("gamma_1", "beta")
    notebook = Notebook(client, tmp_path, [IMPORTS, BLOCK, other])
    since = len(client.publishes)
    notebook.open()
    await published(client, notebook.cells[3], since, lambda d: codes(d) == ["TL101"])
    since = len(client.publishes)
    notebook.edit(2, BLOCK.replace("def forward(self, x):", "def forward(self, x"))  # mid-typing
    notebook.edit(3, other.replace("self.beta = torch.full((dim,), 1e-2)",
                                   "self.beta = nn.Parameter(torch.full((dim,), 1e-2))"))
    await published(client, notebook.cells[3], since, lambda d: not d)
    assert all(codes(p.diagnostics) == ["TL101"] for p in client.publishes[since:] if p.uri == notebook.cells[2])
    notebook.close()


LEGACY_IMPORTS = "%matplotlib inline\nimport torch\nfrom torch.autograd import Variable"
LEGACY = "w = torch.FloatTensor([1.0, 2.0])\nv = Variable(w)\n"


async def test_fix_all_rewrites_the_cells_it_fixes_and_keeps_ipython_lines(vscode: LanguageClient, tmp_path):
    client = vscode
    notebook = Notebook(client, tmp_path, [LEGACY_IMPORTS, LEGACY, "print(w)"])
    since = len(client.publishes)
    notebook.open()
    await published(client, notebook.cells[2], since, lambda d: codes(d) == ["TL301", "TL301"])
    (action,) = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=notebook.cells[2]), range=whole_range(LEGACY),
        context=types.CodeActionContext(diagnostics=[], only=["source.fixAll"])))
    fixed = [apply_text_edits(text, edits_of(action, cell)) if i in (1, 2) else None
             for i, (cell, text) in enumerate(zip(notebook.cells, notebook.texts))]
    # The fixes are in cell 2; the import they leave unused goes from cell 1, its magic stays.
    assert fixed[2] == "w = torch.tensor([1.0, 2.0], dtype=torch.float32)\nv = w.detach()\n"
    assert fixed[1] == "%matplotlib inline\nimport torch"
    assert len(action.edit.document_changes or action.edit.changes) == 2  # cell 3 is not touched
    notebook.close()


async def test_a_cell_added_later_is_checked_with_the_others(vscode: LanguageClient, tmp_path):
    client = vscode
    notebook = Notebook(client, tmp_path, [IMPORTS])
    notebook.open()
    since = len(client.publishes)
    cell = "vscode-notebook-cell:%s#added" % notebook.uri[len("file://"):]
    notebook.cells.append(cell)
    notebook.texts.append(BLOCK)
    notebook.versions.append(1)
    notebook.version += 1
    client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
        notebook_document=types.VersionedNotebookDocumentIdentifier(version=notebook.version, uri=notebook.uri),
        change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(
            structure=types.NotebookDocumentCellChangeStructure(
                array=types.NotebookCellArrayChange(start=2, delete_count=0, cells=[
                    types.NotebookCell(kind=types.NotebookCellKind.Code, document=cell)]),
                did_open=[types.TextDocumentItem(uri=cell, language_id="python", version=1, text=BLOCK)])))))
    added = await published(client, cell, since, lambda d: bool(d))
    assert codes(added.diagnostics) == ["TL101"] and added.diagnostics[0].range.start == at(GAMMA_LINE, 8)
    notebook.close()


async def test_bad_notebook_messages_do_not_hurt_the_server(vscode: LanguageClient, tmp_path):
    client = vscode
    stranger = (tmp_path / "never_opened.ipynb").as_uri()
    client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
        notebook_document=types.VersionedNotebookDocumentIdentifier(version=2, uri=stranger),
        change=types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges())))
    client.notebook_document_did_close(types.DidCloseNotebookDocumentParams(
        notebook_document=types.NotebookDocumentIdentifier(uri=stranger), cell_text_documents=[]))
    unknown_cell = types.TextDocumentIdentifier(uri="vscode-notebook-cell:%s#nothing" % stranger[len("file://"):])
    assert await client.text_document_hover_async(types.HoverParams(text_document=unknown_cell,
                                                                    position=at(0))) is None
    # A notebook whose cell list names a cell it never sent: the others are still checked.
    notebook = Notebook(client, tmp_path, [IMPORTS, BLOCK])
    since = len(client.publishes)
    client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
        notebook_document=types.NotebookDocument(
            uri=notebook.uri, notebook_type="jupyter-notebook", version=1,
            cells=[types.NotebookCell(kind=types.NotebookCellKind.Code, document=cell) for cell in notebook.cells]),
        cell_text_documents=[types.TextDocumentItem(uri=cell, language_id="python", version=1, text=text)
                             for cell, text in zip(notebook.cells[1:], notebook.texts[1:])]))
    await published(client, notebook.cells[2], since, lambda d: codes(d) == ["TL101"])
    notebook.close()


# -- pull (Neovim's capabilities) --------------------------------------------------------------------
async def test_pull_diagnostics_for_a_cell(neovim: LanguageClient, tmp_path):
    client = neovim
    notebook = Notebook(client, tmp_path, [IMPORTS, BLOCK])
    notebook.open()

    async def pull(index, previous=None):
        return await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
            text_document=types.TextDocumentIdentifier(uri=notebook.cells[index]), previous_result_id=previous))

    report = await pull(2)
    assert codes(report.items) == ["TL101"] and report.items[0].range.start == at(GAMMA_LINE, 8)
    assert not (await pull(1)).items
    again = await pull(2, report.result_id)
    assert again.kind == "unchanged"
    assert not client.publishes or all(p.uri not in notebook.cells for p in client.publishes)
    notebook.close()
