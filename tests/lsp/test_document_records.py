"""What the server keeps about a document lives in one record (lsp/state.py): opening creates
it, closing drops it, and no other store of the server still knows the document after that.
In this process: the handlers are called directly on a server whose workspace pygls would
have filled in, the way it does before each notification reaches them."""
import asyncio

from lsprotocol import types
from pygls.workspace import Workspace

from torchlint.lsp import server as lsp_server
from torchlint.lsp.state import ClientSupport, OpenDocuments

URI = "untitled:Untitled-1"  # no path: the jedi wave has no project, so it starts no interpreter
TEXT = ("import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.w = torch.randn(3)\n")
BOUND = 30  # seconds any wait here may take


def stores_naming(value, uri, depth=2, seen=None):
    """Attribute paths under ``value`` (``depth`` attributes deep) of dicts and sets with ``uri``
    in a key (alone or in a tuple)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return []
    seen.add(id(value))
    found = []
    if isinstance(value, (dict, set)):
        for key in list(value):
            if key == uri or (isinstance(key, tuple) and uri in key):
                found.append("")
                break
    if depth and hasattr(value, "__dict__") and not isinstance(value, type):
        for name, attribute in vars(value).items():
            found += ["." + name + path for path in stores_naming(attribute, uri, depth - 1, seen)]
    return found


def test_opening_creates_the_record_and_closing_drops_it():
    documents = OpenDocuments()
    record = documents.open("file:///a%20b.py")
    assert documents.get("file:///a b.py") is record  # one record, however the uri is escaped
    assert documents.open("file:///a b.py") is record
    assert documents.close("file:///a%20b.py") is record
    assert documents.get("file:///a b.py") is None and list(documents) == []


def test_a_closed_document_leaves_nothing_behind():
    server = lsp_server.TorchlintServer()
    server.client = ClientSupport(pull=True)  # answers pulls; pushes nothing (there is no client here)
    server.protocol._workspace = Workspace(None)
    item = types.TextDocumentItem(uri=URI, language_id="python", version=1, text=TEXT)

    async def scenario():
        server.loop = server.messages.loop = asyncio.get_running_loop()
        server.workspace.put_text_document(item)
        lsp_server.did_open(server, types.DidOpenTextDocumentParams(text_document=item))
        report = await asyncio.wait_for(lsp_server.diagnostic(server, types.DocumentDiagnosticParams(
            text_document=types.TextDocumentIdentifier(uri=URI))), BOUND)
        record = server.documents.get(URI)
        kept = (record.pulled, record.runs.newest, dict(record.checkers), list(record.last_good))
        server.workspace.remove_text_document(URI)
        lsp_server.did_close(server, types.DidCloseTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=URI)))
        return report, kept

    try:
        report, (pulled, newest, checkers, last_good) = asyncio.run(scenario())
    finally:
        server.executor.shutdown(wait=True)
        server.inference_executor.shutdown(wait=True)
        server.lens_scans.close()
    assert [d.code for d in report.items] == ["TL101"]
    # While it was open, its record held what the server derived from it.
    assert pulled == report.result_id and newest is not None and checkers and last_good
    assert server.documents.get(URI) is None
    assert stores_naming(server, URI) == []
