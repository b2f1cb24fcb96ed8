"""Pull diagnostics carry every layer's findings: the jedi wave lands after the first pull,
so the server asks the client to pull again (``workspace/diagnostic/refresh``) and the next
pull, with the previous result id, is a full report with the findings only jedi makes.

Driven as current VS Code drives it: the 1.65 profile pytest-lsp ships, plus the pull and
refresh capabilities VS Code declares since 1.72."""
from __future__ import annotations

import asyncio

from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from testkit.expectations import expected_findings
from lsp_helpers import CONFIG, NEOVIM, ROOT, VSCODE, open_document, record_publishes, replace_text, wait_for
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


async def start(capabilities: types.ClientCapabilities) -> LanguageClient:
    client = await CONFIG.start()
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


async def test_a_pull_client_that_cannot_refresh_gets_every_wave_at_once():
    """Neovim 0.11 pulls but takes no refresh request: its answer waits for the jedi wave."""
    capabilities = client_capabilities(NEOVIM)
    assert not (capabilities.workspace.diagnostics and capabilities.workspace.diagnostics.refresh_support)
    client = await start(capabilities)
    try:
        uri = JEDI_FIXTURE.as_uri()
        open_document(client, uri, JEDI_FIXTURE.read_text())
        report = await pull(client, uri)
        assert found(report.items) == JEDI_ONLY
        assert client.diagnostic_refresh_count == 0
    finally:
        await stop(client)
