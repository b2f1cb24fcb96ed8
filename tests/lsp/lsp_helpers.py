"""Shared by the language-server tests: starting the server, documents, edits, waiting."""
from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import sys
import time
from pathlib import Path
from typing import AsyncIterator, Callable, Dict, List, Optional

from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

ROOT = Path(__file__).resolve().parents[2]
SERVER_DIR = str(ROOT / "server")
EXAMPLES = ROOT / "examples"

SERVER_COMMAND = [sys.executable, "-m", "torchlint.lsp"]
SERVER_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(
    p for p in (SERVER_DIR, os.environ.get("PYTHONPATH")) if p))
CONFIG = ClientServerConfig(server_command=SERVER_COMMAND, server_env=SERVER_ENV)

VSCODE = "visual-studio-code"
NEOVIM = "neovim@v0.11.0"

_names = itertools.count()


def new_uri(directory: Path, name: str = "model") -> str:
    """A fresh document uri (tests sharing one server never share a document)."""
    return (directory / ("%s_%d.py" % (name, next(_names)))).as_uri()


def record_publishes(client: LanguageClient) -> None:
    """Keep every publishDiagnostics, in order, in ``client.publishes``."""
    client.publishes = []

    def publish(params: types.PublishDiagnosticsParams):
        client.publishes.append(params)
        client.diagnostics[params.uri] = params.diagnostics

    client.protocol.fm.features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = publish


async def initialize(client: LanguageClient, profile: str, initialization_options=None,
                     root: Path = ROOT) -> types.InitializeResult:
    record_publishes(client)
    return await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities(profile), root_uri=root.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
        initialization_options=initialization_options))


@contextlib.asynccontextmanager
async def serving(root: Path, server_env: Optional[Dict[str, str]] = None, options=None,
                  command: Optional[List[str]] = None) -> AsyncIterator[LanguageClient]:
    """A server of its own for ``root`` (``server_env``: its whole environment, else the tests'),
    initialized as VS Code does; shut down, and killed if it will not go, however the test ends."""
    config = ClientServerConfig(server_command=command or SERVER_COMMAND, server_env=server_env or SERVER_ENV)
    client = await config.start()
    try:
        await initialize(client, VSCODE, options, root=root)
        yield client
    finally:
        try:
            await asyncio.wait_for(client.shutdown_session(), timeout=20)
        except Exception:
            if client._server is not None and client._server.returncode is None:
                client._server.kill()
        await asyncio.wait_for(client.stop(), timeout=20)


def add_workspace_folder(client: LanguageClient, folder: Path) -> None:
    """Open ``folder`` as one more workspace folder (verify runs only files in one)."""
    client.workspace_did_change_workspace_folders(types.DidChangeWorkspaceFoldersParams(
        event=types.WorkspaceFoldersChangeEvent(
            added=[types.WorkspaceFolder(uri=folder.as_uri(), name=folder.name)], removed=[])))


def open_document(client: LanguageClient, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)))


def replace_text(client: LanguageClient, uri: str, old_text: str, new_text: str, version: int) -> None:
    """An incremental didChange that replaces the whole document (a paste over everything)."""
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangePartial(range=whole_range(old_text), text=new_text)]))


def close_document(client: LanguageClient, uri: str) -> None:
    client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))


# -- text in LSP coordinates (UTF-16) ---------------------------------------------------------
def _lines(text: str) -> List[str]:
    import re
    return re.split(r"\r\n|\r|\n", text)


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def whole_range(text: str) -> types.Range:
    lines = _lines(text)
    return types.Range(start=types.Position(line=0, character=0),
                       end=types.Position(line=len(lines) - 1, character=utf16_len(lines[-1])))


def offset(text: str, position: types.Position) -> int:
    import re
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    line_start = starts[position.line]
    units = 0
    index = line_start
    while units < position.character:
        units += utf16_len(text[index])
        index += 1
    return index


def apply_text_edits(text: str, edits: List[types.TextEdit]) -> str:
    spans = sorted(((offset(text, e.range.start), offset(text, e.range.end), e.new_text) for e in edits),
                   reverse=True)
    for start, end, new_text in spans:
        text = text[:start] + new_text + text[end:]
    return text


def edits_of(action: types.CodeAction, uri: str) -> List[types.TextEdit]:
    edit = action.edit
    if edit.document_changes:
        return [e for change in edit.document_changes if change.text_document.uri == uri for e in change.edits]
    return list(edit.changes[uri])


def codes(diagnostics) -> List[str]:
    return [d.code for d in diagnostics]


# -- waiting ----------------------------------------------------------------------------------
async def wait_for(predicate: Callable[[], bool], timeout: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for %s" % what)
        await asyncio.sleep(0.02)


async def wait_for_publish(client: LanguageClient, uri: str, version: Optional[int] = None,
                           since: int = 0, timeout: float = 60.0) -> types.PublishDiagnosticsParams:
    """The first publish for ``uri`` (at ``version`` if given) after the first ``since`` publishes."""
    def found():
        return next((p for p in client.publishes[since:]
                     if p.uri == uri and (version is None or p.version == version)), None)
    await wait_for(lambda: found() is not None, timeout, "diagnostics for %s v%s" % (uri, version))
    return found()


async def settle(client: LanguageClient, quiet: float = 0.4) -> None:
    """Wait until no publish has arrived for ``quiet`` seconds."""
    count = -1
    while count != len(client.publishes):
        count = len(client.publishes)
        await asyncio.sleep(quiet)


# Names alone cannot see that make_weight returns a tensor: only the jedi wave reports TL101.
# Only jedi finds TL101 here: names alone do not read a decorated helper (jedi reads through
# torch.no_grad()). The lines are those of the undecorated helper before it.
HELPER_MADE = '''import torch
from torch import nn

@torch.no_grad()
def make_weight(n):
    return torch.zeros(n, n)


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = make_weight(3)

    def forward(self, x):
        return x @ self.w
'''


async def lenses(client, uri: str):
    """The document's code lenses: class name -> its command."""
    found = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    return {lens.command.arguments[0]["className"]: lens.command for lens in found}
