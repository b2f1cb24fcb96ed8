"""Random edit sequences (valid and broken Python) through one running server: it keeps
answering, its text stays in step with the client's, and no publish is ever for an old
version or inconsistent with the text of the version it names."""
from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_helpers import (apply_text_edits, close_document, new_uri,
                         open_document, utf16_len, wait_for_publish)
from torchlint.engine import check_source

pytestmark = pytest.mark.asyncio(loop_scope="module")

START = '''import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.w = torch.randn(dim)

    def forward(self, x):
        return x * self.w
'''

SNIPPETS = [
    "import torch\n",
    "import torch.nn as nn\n",
    "class M(nn.Module):\n",
    "    def __init__(self):\n",
    "        super().__init__()\n",
    "        self.w = torch.randn(3, requires_grad=True)\n",
    "        self.g = torch.cuda.FloatTensor([1.0])\n",
    "        self.p = nn.Parameter(torch.ones(2)).cuda()\n",
    "        self.layers = [nn.Linear(2, 2) for _ in range(3)]\n",
    "        self.mask = torch.tril(torch.ones(4, 4))  # noqa: TL101\n",
    "        self.s = '\U0001F600é'; self.t = torch.zeros(1)\n",
    "    def forward(self, x):\n",
    "        x.cuda()\n",
    "        return x\n",
    "model = M()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\nmodel.fc = nn.Linear(2, 2)\n",
    "model.fc.weight.data = torch.zeros(2, 2)\n",
    # broken mid-typing
    "def f(:\n",
    "        self.x = torch.ones(\n",
    "    )\n",
    "class \n",
    "\t  \n",
    "\r\n",
]

# (what, where, how much, snippet): where/how much are reduced modulo the text's size.
EDITS = st.tuples(st.sampled_from(["insert", "delete", "type"]), st.integers(0, 200),
                  st.integers(0, 40), st.sampled_from(SNIPPETS))
PAUSES = st.sampled_from([0, 0, 0, 0.01, 0.2])  # 0.2 s outlasts the 0.15 s debounce


def lines_of(text: str):
    import re
    return re.split(r"\r\n|\r|\n", text)


def change_for(text: str, edit) -> types.TextDocumentContentChangePartial:
    """An incremental change (UTF-16 range) built from an abstract edit."""
    what, where, amount, snippet = edit
    lines = lines_of(text)
    line = where % len(lines)
    if what == "insert":
        at = types.Position(line=line, character=0)
        return types.TextDocumentContentChangePartial(range=types.Range(start=at, end=at), text=snippet)
    if what == "delete":
        end_line = min(line + 1 + amount % 3, len(lines) - 1)
        end = types.Position(line=end_line, character=0) if end_line > line else \
            types.Position(line=line, character=utf16_len(lines[line]))
        return types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=line, character=0), end=end), text="")
    # type: replace a few characters inside one line with a piece of a snippet
    characters = list(lines[line])
    start = amount % (len(characters) + 1)
    stop = min(len(characters), start + amount % 5)
    units = lambda n: utf16_len("".join(characters[:n]))  # noqa: E731
    return types.TextDocumentContentChangePartial(
        range=types.Range(start=types.Position(line=line, character=units(start)),
                          end=types.Position(line=line, character=units(stop))),
        text=snippet[: 1 + amount % len(snippet)].rstrip("\r\n"))


def summary(diagnostics):
    return [(d.code, d.range.start.line) for d in diagnostics]


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=st.lists(st.tuples(EDITS, PAUSES), min_size=1, max_size=8),
       probe=st.tuples(st.integers(0, 200), st.integers(0, 60)))
async def test_random_edits_never_break_the_server(vscode: LanguageClient, tmp_path_factory, steps, probe):
    client = vscode
    uri = new_uri(tmp_path_factory.getbasetemp(), "random")
    since = len(client.publishes)
    texts = {1: START}
    open_document(client, uri, START)
    text, version = START, 1
    for edit, pause in steps:
        change = change_for(text, edit)
        text = apply_text_edits(text, [types.TextEdit(range=change.range, new_text=change.text)])
        version += 1
        texts[version] = text
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[change]))
        if pause:
            await asyncio.sleep(pause)

    # It keeps answering, whatever the text is now.
    lines = lines_of(text)
    line = probe[0] % len(lines)
    at = types.Position(line=line, character=min(probe[1], utf16_len(lines[line])))
    await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=at))
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=types.Range(start=at, end=at),
        context=types.CodeActionContext(diagnostics=[])))
    assert isinstance(actions, (list, tuple)) or actions is None

    last = await wait_for_publish(client, uri, version=version, since=since)
    close_document(client, uri)
    ours = [p for p in client.publishes[since:] if p.uri == uri and p.version is not None]
    versions = [p.version for p in ours]
    assert versions == sorted(versions), versions
    assert ours[-1].version == last.version  # each wave publishes the same version once more
    for published in ours:
        result = check_source(texts[published.version], "random.py")
        if result.parse_error is None:  # otherwise: the last good findings, by design
            expected = [(f.code, f.range.start.line - 1) for f in result.findings]
            assert summary(published.diagnostics) == expected, (published.version, texts[published.version])
