"""Code actions answer what was asked (issue 45): Kate asks for the whole file with the
diagnostic under the cursor in ``context.diagnostics``, and applied a "Fix all" that changed a
line the user was not on. The quick fixes are the named diagnostics' own (or, with none named,
the first line of the range's); fix-all comes only when ``context.only`` asks for it, and alone;
each title names its finding; the first action, and the only preferred one, is a safe fix.

Driven as Kate 22.12 drives it: its declared capabilities (push diagnostics, code action
literals of the kinds it shows), and the requests it sends."""
from __future__ import annotations

import re

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_helpers import (CONFIG, EXAMPLES, ROOT, apply_text_edits, edits_of, new_uri, open_document,
                         record_publishes, wait_for_publish, whole_range)
from torchlint.engine import check_source

pytestmark = pytest.mark.asyncio(loop_scope="module")

FIX_ALL = "source.fixAll.torchlint"
SCALED_BLOCK = (EXAMPLES / "scaled_block.py").read_text()
# 0-based lines of examples/scaled_block.py: TL101 and TL301 on one expression (only TL301's fix
# is safe), a TL101 with unsafe fixes only, and a bias forward adds like a weight (unsafe fixes only).
GAMMA_LINE, WEIGHT_LINE, BIAS_LINE = 13, 26, 27
TITLE = re.compile(r"^(TL\d{3}: .+|Disable TL\d{3} for this line)$")


def kate_capabilities() -> types.ClientCapabilities:
    """What Kate 22.12 declares, as far as diagnostics and code actions go."""
    return types.ClientCapabilities(
        text_document=types.TextDocumentClientCapabilities(
            synchronization=types.TextDocumentSyncClientCapabilities(did_save=True),
            publish_diagnostics=types.PublishDiagnosticsClientCapabilities(related_information=True),
            hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.Markdown, types.MarkupKind.PlainText]),
            code_action=types.CodeActionClientCapabilities(
                code_action_literal_support=types.ClientCodeActionLiteralOptions(
                    code_action_kind=types.ClientCodeActionKindOptions(value_set=["quickfix", "refactor", "source"])))),
        window=types.WindowClientCapabilities(work_done_progress=True),
        workspace=types.WorkspaceClientCapabilities(workspace_folders=True))


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def kate(lsp_client: LanguageClient):
    record_publishes(lsp_client)
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=kate_capabilities(), root_uri=ROOT.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=ROOT.as_uri(), name=ROOT.name)]))
    yield
    await lsp_client.shutdown_session()


async def opened(client: LanguageClient, tmp_path):
    uri = new_uri(tmp_path)
    since = len(client.publishes)
    open_document(client, uri, SCALED_BLOCK)
    published = await wait_for_publish(client, uri, version=1, since=since)
    return uri, published.diagnostics


async def actions_for(client, uri, rng, diagnostics=(), only=None):
    return await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=rng,
        context=types.CodeActionContext(diagnostics=list(diagnostics), only=only))) or []


def on_line(diagnostics, line, code="TL101"):
    (diagnostic,) = [d for d in diagnostics if d.range.start.line == line and d.code == code]
    return diagnostic


def cursor(line: int) -> types.Range:
    return types.Range(start=types.Position(line=line, character=10), end=types.Position(line=line, character=10))


def lines_edited(action, uri):
    return {line for e in edits_of(action, uri) for line in (e.range.start.line, e.range.end.line)}


async def test_a_whole_file_request_naming_one_diagnostic_gets_its_fixes_only(kate: LanguageClient, tmp_path):
    client = kate
    uri, diagnostics = await opened(client, tmp_path)
    weight = on_line(diagnostics, WEIGHT_LINE)
    actions = await actions_for(client, uri, whole_range(SCALED_BLOCK), [weight])
    assert actions
    assert all(a.kind == types.CodeActionKind.QuickFix for a in actions), [a.title for a in actions]
    for action in actions:
        assert list(action.diagnostics) == [weight], action.title
        assert lines_edited(action, uri) == {WEIGHT_LINE}, action.title
    (finding,) = [f for f in check_source(SCALED_BLOCK, "s.py").findings if f.range.start.line == WEIGHT_LINE + 1]
    assert len(actions) == len(finding.fixes) + 1  # each fix, and the # noqa
    # A diagnostic named with a range of the client's making (a script's: the cursor) is the
    # finding it starts in.
    made = types.Diagnostic(range=cursor(WEIGHT_LINE), message=weight.message, code="TL101", source="torchlint")
    assert [a.title for a in await actions_for(client, uri, whole_range(SCALED_BLOCK), [made])] == \
        [a.title for a in actions]


async def test_fix_all_comes_only_when_asked_for_and_alone(kate: LanguageClient, tmp_path):
    client = kate
    uri, diagnostics = await opened(client, tmp_path)
    everything = whole_range(SCALED_BLOCK)
    for only in (None, [types.CodeActionKind.QuickFix]):
        offered = await actions_for(client, uri, everything, diagnostics, only)
        assert FIX_ALL not in {a.kind for a in offered}
        offered = await actions_for(client, uri, cursor(BIAS_LINE), [], only)
        assert offered and FIX_ALL not in {a.kind for a in offered}
    # VS Code on save (codeActionsOnSave), its Source Action menu, and a prefix of the kind.
    for only in ([FIX_ALL], ["source.fixAll"], ["source"]):
        (fix_all,) = await actions_for(client, uri, everything, diagnostics, only)
        assert fix_all.kind == FIX_ALL
        fixed = apply_text_edits(SCALED_BLOCK, edits_of(fix_all, uri))
        assert not [fix for f in check_source(fixed, "s.py").findings for fix in f.fixes if fix.is_safe]
    assert await actions_for(client, uri, everything, diagnostics, ["refactor"]) == []


async def test_with_nothing_named_the_fixes_are_the_cursor_lines(kate: LanguageClient, tmp_path):
    client = kate
    uri, diagnostics = await opened(client, tmp_path)
    bias = on_line(diagnostics, BIAS_LINE)
    actions = await actions_for(client, uri, cursor(BIAS_LINE))
    assert actions
    for action in actions:
        assert list(action.diagnostics) == [bias], action.title
        assert lines_edited(action, uri) == {BIAS_LINE}, action.title
    # The whole file with nothing named: the first line's fixes (it has none), not every fix.
    assert await actions_for(client, uri, whole_range(SCALED_BLOCK)) == []
    # Diagnostics of another server named: as if none were.
    other = types.Diagnostic(range=bias.range, message="something else", source="pyright", code="reportFoo")
    assert [a.title for a in await actions_for(client, uri, cursor(BIAS_LINE), [other])] == [a.title for a in actions]


async def test_each_title_names_its_finding(kate: LanguageClient, tmp_path):
    client = kate
    uri, diagnostics = await opened(client, tmp_path)
    for diagnostic in diagnostics:
        actions = await actions_for(client, uri, diagnostic.range, [diagnostic])
        assert actions
        for action in actions:
            assert TITLE.match(action.title), action.title
            assert diagnostic.code in action.title, action.title


async def test_the_first_action_and_the_only_preferred_one_is_safe(kate: LanguageClient, tmp_path):
    client = kate
    uri, diagnostics = await opened(client, tmp_path)
    # The bias: forward adds it like a weight, so no fix of it is safe (issue 43): none preferred.
    actions = await actions_for(client, uri, cursor(BIAS_LINE), [on_line(diagnostics, BIAS_LINE)])
    assert actions and all(a.title.endswith("(unsafe)") or a.title.startswith("Disable") for a in actions)
    assert not [a for a in actions if a.is_preferred]
    # gamma_1: TL101 (unsafe fixes only) and TL301 (a safe fix) on one expression, both named.
    both = [on_line(diagnostics, GAMMA_LINE, "TL101"), on_line(diagnostics, GAMMA_LINE, "TL301")]
    actions = await actions_for(client, uri, both[0].range, both)
    assert actions[0].title.startswith("TL301: ") and not actions[0].title.endswith("(unsafe)")
    assert [a.title for a in actions if a.is_preferred] == [actions[0].title]
    # The weight: no safe fix, so nothing a client would apply unasked.
    actions = await actions_for(client, uri, cursor(WEIGHT_LINE), [on_line(diagnostics, WEIGHT_LINE)])
    assert actions and not [a for a in actions if a.is_preferred]
