"""Pull diagnostics carry every layer's findings: the jedi wave lands after the first pull,
so the server asks the client to pull again (``workspace/diagnostic/refresh``) and the next
pull, with the previous result id, is a full report with the findings only jedi makes. A
client that cannot be asked (Neovim 0.11) sees them at its next pull. No pull waits for the
jedi wave (issue 45: Neovim 0.11 showed a fixed finding until it ended, 12 s on a busy machine):
a server whose jedi wave is held (``held_jedi_server.py``) answers with the first wave.

Driven as current VS Code drives it (the 1.65 profile pytest-lsp ships, plus the pull and
refresh capabilities VS Code declares since 1.72) and as Neovim 0.11 does."""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from testkit.expectations import expected_findings
from lsp_helpers import (CONFIG, HELPER_MADE, NEOVIM, ROOT, SERVER_ENV, VSCODE, open_document, record_publishes,
                         replace_text, wait_for)
from torchlint.engine import check_source

JEDI_FIXTURE = ROOT / "tests" / "fixtures" / "jedi_project" / "models.py"
# Every finding the fixture expects hides behind another file or a helper's return value:
# the syntactic layer finds none of them, jedi finds them all.
JEDI_ONLY = expected_findings(JEDI_FIXTURE.read_text())
JEDI_WAVE_BOUND = 240  # seconds: a cold jedi (torch's stubs) on a loaded 2-core machine


def vscode_with_pull() -> types.ClientCapabilities:
    capabilities = client_capabilities(VSCODE)
    capabilities.text_document.diagnostic = types.DiagnosticClientCapabilities(
        dynamic_registration=True, related_document_support=False)
    capabilities.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    return capabilities


async def start(capabilities: types.ClientCapabilities, config: ClientServerConfig = CONFIG) -> LanguageClient:
    client = await config.start()
    record_publishes(client)
    client.init_result = await client.initialize_session(types.InitializeParams(
        capabilities=capabilities, root_uri=ROOT.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=ROOT.as_uri(), name=ROOT.name)]))
    return client


async def stop(client: LanguageClient) -> None:
    try:
        await asyncio.wait_for(client.shutdown_session(), 60)
    finally:
        await client.stop()


async def pull(client: LanguageClient, uri: str, previous=None):
    return await asyncio.wait_for(client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
        text_document=types.TextDocumentIdentifier(uri=uri), previous_result_id=previous)), JEDI_WAVE_BOUND)


def found(diagnostics):
    return {(d.range.start.line + 1, d.code) for d in diagnostics}


def test_the_fixture_is_jedi_only():
    text = JEDI_FIXTURE.read_text()
    assert check_source(text, str(JEDI_FIXTURE)).findings == []
    assert len(JEDI_ONLY) >= 5


async def test_the_jedi_wave_makes_the_client_pull_again():
    client = await start(vscode_with_pull())
    try:
        assert client.init_result.capabilities.diagnostic_provider is not None
        uri = JEDI_FIXTURE.as_uri()
        open_document(client, uri, JEDI_FIXTURE.read_text())
        first = await pull(client, uri)
        assert first.kind == "full" and list(first.items) == []  # the syntactic wave: nothing
        await wait_for(lambda: client.diagnostic_refresh_count > 0, JEDI_WAVE_BOUND, "workspace/diagnostic/refresh")
        second = await pull(client, uri, first.result_id)
        assert second.kind == "full"
        assert found(second.items) == JEDI_ONLY
        assert second.result_id != first.result_id
        # Nothing changed since: unchanged, and no more refreshes for this document.
        third = await pull(client, uri, second.result_id)
        assert third.kind == "unchanged" and third.result_id == second.result_id
        # An edit that changes the findings is never "unchanged", whichever id is sent.
        text = JEDI_FIXTURE.read_text()
        edited = "\n".join(line for line in text.splitlines() if "# expect:" not in line) + "\n"
        replace_text(client, uri, text, edited, version=2)
        for previous in (first.result_id, second.result_id):
            report = await pull(client, uri, previous)
            assert report.kind == "full"
        assert client.publishes == []  # a pull client is never pushed to
    finally:
        await stop(client)


async def pull_until(client: LanguageClient, uri: str, wanted, first):
    """Pull again and again (with the last result id, as an editor pulls at each edit) until what
    the client holds, the items of the last full report, are ``wanted``; answers those."""
    held, previous = list(first.items), first.result_id
    for _ in range(JEDI_WAVE_BOUND * 10):
        if wanted(held):
            return held
        await asyncio.sleep(0.1)
        report = await pull(client, uri, previous)
        if report.kind == "full":
            held = list(report.items)
        previous = report.result_id
    raise AssertionError("the client did not get what was wanted within %d s" % JEDI_WAVE_BOUND)


def neovim(refresh_support: bool) -> types.ClientCapabilities:
    """Neovim 0.11's capabilities: it pulls, and takes refresh requests only if ``refresh_support``."""
    capabilities = client_capabilities(NEOVIM)
    assert not (capabilities.workspace.diagnostics and capabilities.workspace.diagnostics.refresh_support)
    if refresh_support:
        capabilities.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    return capabilities


async def test_a_pull_client_that_cannot_refresh_gets_the_jedi_wave_at_its_next_pull():
    client = await start(neovim(refresh_support=False))
    try:
        uri = JEDI_FIXTURE.as_uri()
        open_document(client, uri, JEDI_FIXTURE.read_text())
        first = await pull(client, uri)  # the first wave's (nothing), or more if jedi was quicker
        await pull_until(client, uri, lambda held: found(held) == JEDI_ONLY, first)
        assert client.diagnostic_refresh_count == 0 and client.publishes == []
    finally:
        await stop(client)


# A plain tensor names alone see, beside a tensor only jedi sees. The fix registers it.
MASK_LINE = "        self.mask = torch.ones(3)"
REGISTERED = "        self.register_buffer(\"mask\", torch.ones(3))"
WITH_MASK = HELPER_MADE.replace("        self.w = make_weight(3)\n", "        self.w = make_weight(3)\n" + MASK_LINE + "\n") \
    .replace("return x @ self.w", "return x @ self.w * self.mask")
FIXED = WITH_MASK.replace(MASK_LINE, REGISTERED)
HELD_SERVER = [sys.executable, str(Path(__file__).with_name("held_jedi_server.py"))]
HELD_BOUND = 60  # seconds a pull may take with the jedi wave held: the first wave, on a loaded machine


@pytest.mark.parametrize("refresh_support", [False, True], ids=["no refresh (Neovim 0.11)", "refresh"])
async def test_a_fix_is_seen_at_the_next_pull_while_the_jedi_wave_runs(tmp_path, refresh_support):
    gate = tmp_path / "let-jedi-go"
    config = ClientServerConfig(server_command=HELD_SERVER,
                                server_env=dict(SERVER_ENV, TORCHLINT_TEST_JEDI_GATE=str(gate)))
    client = await start(neovim(refresh_support), config)
    try:
        path = tmp_path / "model.py"
        path.write_text(WITH_MASK)
        uri = path.as_uri()
        mask_line = WITH_MASK.splitlines().index(MASK_LINE) + 1
        open_document(client, uri, WITH_MASK)
        try:
            opened = await asyncio.wait_for(pull(client, uri), HELD_BOUND)
        except asyncio.TimeoutError:
            raise AssertionError("the pull waited for the jedi wave")
        assert found(opened.items) == {(mask_line, "TL101")}
        replace_text(client, uri, WITH_MASK, FIXED, version=2)
        try:
            fixed = await asyncio.wait_for(pull(client, uri, opened.result_id), HELD_BOUND)
        except asyncio.TimeoutError:
            raise AssertionError("the pull after the fix waited for the jedi wave")
        assert fixed.kind == "full" and found(fixed.items) == set()  # the jedi wave is still held
        assert client.diagnostic_refresh_count == 0
        gate.touch()
        jedi_only = {(12, "TL101")}  # self.w = make_weight(3)
        if refresh_support:
            await wait_for(lambda: client.diagnostic_refresh_count > 0, JEDI_WAVE_BOUND, "workspace/diagnostic/refresh")
            refined = await pull(client, uri, fixed.result_id)
            assert refined.kind == "full" and found(refined.items) == jedi_only
            assert refined.result_id != fixed.result_id
        else:
            await pull_until(client, uri, lambda held: found(held) == jedi_only, fixed)
            assert client.diagnostic_refresh_count == 0
        assert client.publishes == []
    finally:
        gate.touch()  # a held wave would hold the server's exit
        await stop(client)
