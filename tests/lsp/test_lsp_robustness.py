"""The server under load and odd input: a huge document never holds up the others, edits
out of range never make the server's text drift from the editor's, and problems the user
must fix are shown once (window/showMessage), not on every keystroke."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_helpers import (CONFIG, EXAMPLES, VSCODE, codes, initialize, new_uri, open_document, settle,
                         wait_for, wait_for_publish)

BOUND = 120  # seconds: any answer on a loaded 2-core machine

MODEL = (EXAMPLES / "scaled_block.py").read_text()
SMALL = '''import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.mask = torch.tril(torch.ones(dim, dim))

    def forward(self, x):
        return x * self.mask
'''
SMALL_MASK_LINE = 7


@pytest.fixture
async def client():
    client = await CONFIG.start()
    try:
        await initialize(client, VSCODE)
        yield client
        await asyncio.wait_for(client.shutdown_session(), BOUND)
    finally:
        await client.stop()


def change(client: LanguageClient, uri: str, version: int, start, end, text: str) -> None:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=start[0], character=start[1]),
                              end=types.Position(line=end[0], character=end[1])), text=text)]))


def shown(client: LanguageClient, *words: str):
    return [m for m in client.messages if all(w in m.message for w in words)]


# -- large documents --------------------------------------------------------------------------
async def test_a_huge_document_holds_up_no_other_request(client: LanguageClient, tmp_path):
    huge = MODEL * (8_000_000 // len(MODEL) + 1)  # 8 MB of Module classes
    big, small = new_uri(tmp_path, "huge"), new_uri(tmp_path)
    open_document(client, small, SMALL)
    await wait_for_publish(client, small, version=1, timeout=BOUND)
    open_document(client, big, huge)
    lens_params = types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=big))
    hover_params = types.HoverParams(text_document=types.TextDocumentIdentifier(uri=small),
                                     position=types.Position(line=SMALL_MASK_LINE, character=12))
    big_lenses, hover, small_lenses = await asyncio.wait_for(asyncio.gather(
        client.text_document_code_lens_async(lens_params),
        client.text_document_hover_async(hover_params),
        client.text_document_code_lens_async(types.CodeLensParams(
            text_document=types.TextDocumentIdentifier(uri=small)))), BOUND)
    assert not big_lenses  # above torchlint.maxFileSize: not parsed at all
    assert hover.contents.value.startswith("**TL101 unregistered-tensor**")
    assert [lens.command.arguments[0]["className"] for lens in small_lenses] == ["Block"]
    published = await wait_for_publish(client, big, version=1, timeout=BOUND)
    assert not published.diagnostics
    await wait_for(lambda: shown(client, "maxFileSize"), BOUND, "the too-large message")
    # One information message, however often the document changes.
    for version in (2, 3):
        change(client, big, version, (0, 0), (0, 0), "# edited\n")
        await wait_for_publish(client, big, version=version, timeout=BOUND)
    (message,) = shown(client, "maxFileSize")
    assert message.type == types.MessageType.Info and "huge_" in message.message


async def test_the_size_limit_is_a_setting(client: LanguageClient, tmp_path):
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"torchlint": {"maxFileSize": 100}}))
    uri = new_uri(tmp_path)
    open_document(client, uri, SMALL)
    assert not (await wait_for_publish(client, uri, version=1, timeout=BOUND)).diagnostics
    await wait_for(lambda: shown(client, "maxFileSize (100 characters)"), BOUND, "the too-large message")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"torchlint": {"maxFileSize": 10_000}}))
    await wait_for(lambda: codes(client.diagnostics.get(uri, [])) == ["TL101"], BOUND, "analysed again")


# -- edits out of range -----------------------------------------------------------------------
async def test_a_character_past_the_line_end_clamps_to_it(client: LanguageClient, tmp_path):
    text = "import torch\nt = torch.ones(1)\nt"  # the last line has no line break
    uri = new_uri(tmp_path)
    open_document(client, uri, text)
    await wait_for_publish(client, uri, version=1, timeout=BOUND)
    change(client, uri, 2, (2, 99), (2, 99), ".cuda()")  # LSP: past the end means the end
    published = await wait_for_publish(client, uri, version=2, timeout=BOUND)
    assert codes(published.diagnostics) == ["TL203"]  # `t.cuda()`: the edit landed after the `t`
    assert published.diagnostics[0].range.end.character == len("t.cuda()")


async def test_an_edit_past_the_end_puts_the_document_out_of_sync(client: LanguageClient, tmp_path):
    uri = new_uri(tmp_path)
    open_document(client, uri, SMALL)
    first = await wait_for_publish(client, uri, version=1, timeout=BOUND)
    assert codes(first.diagnostics) == ["TL101"]
    since = len(client.publishes)
    change(client, uri, 2, (40, 0), (40, 0), "x = 1\n")  # the document has 9 lines
    cleared = await wait_for_publish(client, uri, version=2, since=since, timeout=BOUND)
    assert not cleared.diagnostics  # findings on a text that is not the editor's would mislead
    await wait_for(lambda: shown(client, "out of sync"), BOUND, "the out-of-sync message")
    (message,) = shown(client, "out of sync")
    assert message.type == types.MessageType.Error and "reopen" in message.message
    # Further edits cannot be placed on an unknown text: nothing is offered, nothing analysed.
    change(client, uri, 3, (0, 0), (0, 0), "# more\n")
    actions = await asyncio.wait_for(client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(line=SMALL_MASK_LINE, character=0),
                          end=types.Position(line=SMALL_MASK_LINE, character=0)),
        context=types.CodeActionContext(diagnostics=[]))), BOUND)
    assert not actions
    await settle(client)
    assert not [p for p in client.publishes[since:] if p.uri == uri and p.diagnostics]
    assert len(shown(client, "out of sync")) == 1
    # The whole text again (a full change) puts it back in sync.
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=4),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=SMALL)]))
    back = await wait_for_publish(client, uri, version=4, timeout=BOUND)
    assert codes(back.diagnostics) == ["TL101"]


# -- problems shown once ----------------------------------------------------------------------
async def test_bad_settings_are_shown_once_naming_the_keys(client: LanguageClient, tmp_path):
    bad = {"torchlint": {"select": 42, "verify": {"timeout": -1}}}
    for _ in range(3):  # the same problem again: not shown again
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=bad))
    await wait_for(lambda: shown(client, "torchlint.select"), BOUND, "the settings message")
    uri = new_uri(tmp_path)
    open_document(client, uri, SMALL)
    await wait_for_publish(client, uri, version=1, timeout=BOUND)
    (message,) = shown(client, "torchlint.select")
    assert message.type == types.MessageType.Warning and "torchlint.verify.timeout" in message.message
    # Another problem is news.
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"torchlint": {"codeLens": "yes"}}))
    await wait_for(lambda: shown(client, "torchlint.codeLens"), BOUND, "the new settings message")


async def test_a_bad_pyproject_key_is_shown_once(client: LanguageClient, tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nselectt = ["TL1"]\n')
    uris = [new_uri(tmp_path) for _ in range(2)]
    for uri in uris:
        open_document(client, uri, SMALL)
        await wait_for_publish(client, uri, version=1, timeout=BOUND)
    for version in (2, 3):
        change(client, uris[0], version, (0, 0), (0, 0), "# typing\n")
        await wait_for_publish(client, uris[0], version=version, timeout=BOUND)
    await wait_for(lambda: shown(client, "selectt"), BOUND, "the config message")
    (message,) = shown(client, "selectt")
    assert message.type == types.MessageType.Error and "pyproject.toml" in message.message


async def test_a_pyproject_nested_too_deeply_is_shown_and_the_defaults_used(client: LanguageClient, tmp_path: Path):
    # tomllib reads nested arrays by recursion: 100,000 `[` raised RecursionError, not a config error.
    deep = '[tool.torchlint]\nignore = ["TL1"]\n\n[other]\na = ' + "[" * 100_000 + "\n"
    (tmp_path / "pyproject.toml").write_text(deep)
    uri = new_uri(tmp_path)
    open_document(client, uri, SMALL)
    await wait_for(lambda: codes(client.diagnostics.get(uri, [])) == ["TL101"], BOUND, "checked with the defaults")
    await wait_for(lambda: shown(client, "nested too deeply"), BOUND, "the config message")
    (message,) = shown(client, "nested too deeply")
    assert message.type == types.MessageType.Error and "pyproject.toml: invalid TOML" in message.message


async def test_a_rule_stopped_by_the_recursion_limit_is_shown_not_passed(client: LanguageClient, tmp_path):
    """A 1,000-deep conditional expression: TL101's walk of it reaches Python's recursion limit
    and its findings in the file are lost. The editor says so (the CLI exits 2 and says it on
    stderr) instead of showing a file with no problem."""
    deep = " ".join(["a if c else"] * 1000) + " x"
    uri = new_uri(tmp_path)
    open_document(client, uri, SMALL.replace("    def forward", "        self.v = %s\n\n    def forward" % deep))
    published = await wait_for_publish(client, uri, version=1, timeout=BOUND)
    said = [d for d in published.diagnostics if "recursion limit" in d.message]
    assert len(said) == 1 and said[0].message.startswith("TL101 could not check this file"), published.diagnostics
    assert said[0].severity == types.DiagnosticSeverity.Information and said[0].range.start.line == 0
