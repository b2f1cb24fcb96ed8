"""The language server over stdio, driven as VS Code (push diagnostics) and Neovim 0.11
(pull diagnostics) drive it."""
from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from make_big_model import make_model_source  # noqa: E402
from lsp_helpers import (CONFIG, EXAMPLES, HELPER_MADE, VSCODE, apply_text_edits, close_document, codes,
                         edits_of, initialize, new_uri, open_document, replace_text, settle,
                         utf16_len, wait_for, wait_for_publish)
from torchlint.engine import check_source

pytestmark = pytest.mark.asyncio(loop_scope="module")

SCALED_BLOCK = (EXAMPLES / "scaled_block.py").read_text()

MODEL = '''import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.mask = torch.tril(torch.ones(dim, dim))

    def forward(self, x):
        return self.proj(x) * self.mask
'''
MASK_LINE = 8  # 0-based line of `self.mask = ...`

CLEAN = MODEL.replace("        self.mask = torch.tril(torch.ones(dim, dim))\n", "")
BROKEN = MODEL.replace("def forward(self, x):", "def forward(self, x")


async def opened(client: LanguageClient, tmp_path, text: str):
    uri = new_uri(tmp_path)
    since = len(client.publishes)
    open_document(client, uri, text)
    published = await wait_for_publish(client, uri, version=1, since=since)
    return uri, published


async def code_actions(client, uri, rng, only=None, diagnostics=()):
    return await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=rng,
        context=types.CodeActionContext(diagnostics=list(diagnostics), only=only))) or []


def line_range(line: int) -> types.Range:
    return types.Range(start=types.Position(line=line, character=0), end=types.Position(line=line, character=0))


# -- push (VS Code 1.65 cannot pull) ----------------------------------------------------------
async def test_push_client_is_not_offered_pull(vscode: LanguageClient):
    client = vscode
    capabilities = client.init_result.capabilities
    assert capabilities.diagnostic_provider is None
    assert capabilities.text_document_sync.change == types.TextDocumentSyncKind.Incremental
    assert FIX_ALL in capabilities.code_action_provider.code_action_kinds


FIX_ALL = "source.fixAll.torchlint"


def menu_title(fix) -> str:
    """What the quick-fix menu must say: a fix that can change behaviour is labelled."""
    return fix.title if fix.is_safe else fix.title + " (unsafe)"


async def test_open_publishes_diagnostics_with_every_field(vscode: LanguageClient, tmp_path):
    client = vscode
    uri, published = await opened(client, tmp_path, SCALED_BLOCK)
    expected = check_source(SCALED_BLOCK, "scaled_block.py").findings
    assert codes(published.diagnostics) == [f.code for f in expected]
    assert "TL101" in codes(published.diagnostics)
    for diagnostic, finding in zip(published.diagnostics, expected):
        assert diagnostic.source == "torchlint"
        assert diagnostic.range.start.line == finding.range.start.line - 1
        assert diagnostic.range.start.character == finding.range.start.column
        assert diagnostic.code_description.href.startswith("file://")
        assert diagnostic.code_description.href.endswith("/%s.md" % finding.code)
        assert diagnostic.data["code"] == finding.code
        assert diagnostic.data["fixes"] == [menu_title(fix) for fix in finding.fixes]
        assert (list(diagnostic.tags or ()) == [types.DiagnosticTag.Deprecated]) == finding.deprecated
    severities = {d.severity for d in published.diagnostics if d.code == "TL101"}
    assert severities <= {types.DiagnosticSeverity.Error, types.DiagnosticSeverity.Warning}


async def test_change_republishes_and_close_clears(vscode: LanguageClient, tmp_path):
    client = vscode
    uri, published = await opened(client, tmp_path, MODEL)
    assert codes(published.diagnostics) == ["TL101"]
    since = len(client.publishes)
    replace_text(client, uri, MODEL, CLEAN, version=2)
    assert not (await wait_for_publish(client, uri, version=2, since=since)).diagnostics
    since = len(client.publishes)
    close_document(client, uri)
    cleared = await wait_for_publish(client, uri, since=since)
    assert not cleared.diagnostics


@pytest.mark.parametrize("page_break", ["", "# section two\x0c\n"])
async def test_incremental_edit_in_the_middle(vscode: LanguageClient, tmp_path, page_break):
    client = vscode
    # A form feed is no line break for LSP (str.splitlines would say it is).
    text = page_break + CLEAN
    shift = 1 if page_break else 0
    uri, _ = await opened(client, tmp_path, text)
    since = len(client.publishes)
    # Type a new unregistered tensor into __init__, after `self.proj = ...`.
    insert_at = types.Position(line=7 + shift, character=len("        self.proj = nn.Linear(dim, dim)"))
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=insert_at, end=insert_at), text="\n        self.mask = torch.randn(dim)")]))
    published = await wait_for_publish(client, uri, version=2, since=since)
    assert codes(published.diagnostics) == ["TL101"]
    assert published.diagnostics[0].range.start.line == 8 + shift
    assert published.diagnostics[0].range.start.character == 8


async def test_columns_are_utf16(vscode: LanguageClient, tmp_path):
    client = vscode
    text = MODEL.replace("torch.tril(torch.ones(dim, dim))", 'torch.ones(len("\U0001F600\U0001F600"), dim)')
    uri, published = await opened(client, tmp_path, text)
    (diagnostic,) = published.diagnostics
    line = text.splitlines()[MASK_LINE]
    assert diagnostic.range.end.character == utf16_len(line)
    assert diagnostic.range.end.character == len(line) + 2  # two astral characters: two units each


async def test_broken_code_keeps_the_last_good_findings(vscode: LanguageClient, tmp_path):
    client = vscode
    uri, published = await opened(client, tmp_path, MODEL)
    good = published.diagnostics
    since = len(client.publishes)
    replace_text(client, uri, MODEL, BROKEN, version=2)
    mid_typing = await wait_for_publish(client, uri, version=2, since=since)
    assert mid_typing.diagnostics == good
    since = len(client.publishes)
    replace_text(client, uri, BROKEN, CLEAN, version=3)
    assert not (await wait_for_publish(client, uri, version=3, since=since)).diagnostics
    # Code actions and hover on broken text answer, with nothing.
    replace_text(client, uri, CLEAN, BROKEN, version=4)
    assert await code_actions(client, uri, line_range(MASK_LINE)) == []


async def test_a_stale_version_is_never_published(vscode: LanguageClient, tmp_path):
    client = vscode
    uri, _ = await opened(client, tmp_path, MODEL)
    since = len(client.publishes)
    texts = [MODEL, CLEAN, BROKEN, MODEL + "\nx = torch.ones(1).cuda()\n", CLEAN, MODEL]
    previous = MODEL
    for version in range(2, 22):
        text = texts[version % len(texts)]
        replace_text(client, uri, previous, text, version)
        previous = text
        await asyncio.sleep(0.01 * (version % 3))
    await wait_for_publish(client, uri, version=21, since=since)
    await settle(client)
    ours = [p for p in client.publishes[since:] if p.uri == uri]
    assert ours[-1].version == 21
    versions = [p.version for p in ours]
    assert versions == sorted(versions)
    expected = check_source(previous, "m.py").findings
    assert codes(ours[-1].diagnostics) == [f.code for f in expected]


async def test_typing_in_a_costly_document_is_debounced(vscode: LanguageClient, tmp_path):
    """Whole-text replacements that change an import: each is a full check of 6,000 lines,
    so quick edits wait for a pause and most versions are never analysed."""
    client = vscode
    big = make_model_source(6000)
    other = big.replace("import math\n", "import math as maths\nmath = maths\n", 1)
    assert other != big
    uri, _ = await opened(client, tmp_path, big)
    since = len(client.publishes)
    previous = big
    for version in range(2, 22):
        text = other if version % 2 else big
        replace_text(client, uri, previous, text, version)
        previous = text
    await wait_for_publish(client, uri, version=21, since=since, timeout=120)
    await settle(client)
    ours = [p for p in client.publishes[since:] if p.uri == uri]
    assert ours[-1].version == 21
    assert len(ours) < 20  # debounced: most versions were never analysed


# -- code actions -----------------------------------------------------------------------------
async def test_each_quick_fix_fixes_its_finding(vscode: LanguageClient, tmp_path):
    client = vscode
    uri, published = await opened(client, tmp_path, SCALED_BLOCK)
    findings = check_source(SCALED_BLOCK, "scaled_block.py").findings
    checked = 0
    for diagnostic, finding in zip(published.diagnostics, findings):
        actions = await code_actions(client, uri, diagnostic.range, only=["quickfix"],
                                     diagnostics=[diagnostic])
        ours = [a for a in actions if any(d.code == finding.code and d.range == diagnostic.range
                                          for d in a.diagnostics or ())]
        titles = [a.title for a in ours]
        # The safe fixes first, each title naming its finding; only a safe fix is preferred.
        in_order = sorted(finding.fixes, key=lambda fix: (not fix.is_safe, not fix.preferred))
        assert titles == (["%s: %s" % (finding.code, menu_title(fix)) for fix in in_order]
                          + ["Disable %s for this line" % finding.code])
        assert [bool(a.is_preferred) for a in ours[:-1]] == [fix is in_order[0] and fix.is_safe for fix in in_order]
        for action in ours:
            assert action.kind == types.CodeActionKind.QuickFix
            fixed = apply_text_edits(SCALED_BLOCK, edits_of(action, uri))
            after = check_source(fixed, "scaled_block.py")
            assert after.parse_error is None, (action.title, fixed)
            same_place = [f for f in after.findings if f.code == finding.code
                          and f.range.start.line == finding.range.start.line]
            assert not same_place, (action.title, fixed)
            checked += 1
    assert checked >= 8
    # One fix round-trips through the server: the document is re-checked and the finding is gone.
    first = published.diagnostics[0]
    (first_fix, *_) = await code_actions(client, uri, first.range, only=["quickfix"], diagnostics=[first])
    fixed = apply_text_edits(SCALED_BLOCK, edits_of(first_fix, uri))
    since = len(client.publishes)
    replace_text(client, uri, SCALED_BLOCK, fixed, version=2)
    after = await wait_for_publish(client, uri, version=2, since=since)
    assert len(after.diagnostics) == len(published.diagnostics) - 1


async def test_noqa_action_silences_the_line(vscode: LanguageClient, tmp_path):
    client = vscode
    uri, published = await opened(client, tmp_path, MODEL)
    actions = await code_actions(client, uri, line_range(MASK_LINE), only=["quickfix"])
    (noqa,) = [a for a in actions if a.title == "Disable TL101 for this line"]
    fixed = apply_text_edits(MODEL, edits_of(noqa, uri))
    assert fixed.splitlines()[MASK_LINE].endswith("  # noqa: TL101")
    since = len(client.publishes)
    replace_text(client, uri, MODEL, fixed, version=2)
    assert not (await wait_for_publish(client, uri, version=2, since=since)).diagnostics
    assert [a for a in await code_actions(client, uri, line_range(MASK_LINE))
            if a.title.startswith("Disable")] == []


async def test_fix_all_applies_the_safe_fixes(vscode: LanguageClient, tmp_path):
    client = vscode
    uri, _ = await opened(client, tmp_path, SCALED_BLOCK)
    everything = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0))
    (fix_all,) = await code_actions(client, uri, everything, only=["source.fixAll"])
    assert fix_all.kind == FIX_ALL
    fixed = apply_text_edits(SCALED_BLOCK, edits_of(fix_all, uri))
    after = check_source(fixed, "scaled_block.py")
    assert after.parse_error is None
    assert not [fix for f in after.findings for fix in f.fixes if fix.is_safe]
    assert len(after.findings) < len(check_source(SCALED_BLOCK, "scaled_block.py").findings)
    # context.only is honoured both ways.
    quick = await code_actions(client, uri, line_range(14), only=["quickfix"])
    assert quick and all(a.kind == types.CodeActionKind.QuickFix for a in quick)
    assert await code_actions(client, uri, everything, only=["source.organizeImports"]) == []
    # Asked for nothing in particular: the line's quick fixes, never the fix-all with them.
    plain = await code_actions(client, uri, line_range(14))
    assert plain and {a.kind for a in plain} == {types.CodeActionKind.QuickFix}
    # Nothing safe left: no fix-all on offer.
    replace_text(client, uri, SCALED_BLOCK, fixed, version=2)
    assert await code_actions(client, uri, everything, only=["source.fixAll"]) == []


# -- hover ------------------------------------------------------------------------------------
async def test_hover_is_one_short_card(vscode: LanguageClient, tmp_path):
    """What the diagnostic does not say, never its sentence again (the editor shows it above the
    card): the rule's code and name, what the attribute is to torch, one line of why, every fix
    with whether it is safe (in the menu's order), the rule's page."""
    client = vscode
    uri, published = await opened(client, tmp_path, MODEL)
    (diagnostic,) = published.diagnostics
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=MASK_LINE, character=12)))
    card = hover.contents.value
    assert hover.contents.kind == types.MarkupKind.Markdown
    assert diagnostic.message not in card
    (finding,) = check_source(MODEL, "m.py").findings
    paragraphs = card.split("\n\n")
    assert len(paragraphs) == 5, card
    assert paragraphs[0] == "**TL101 unregistered-tensor**"
    assert paragraphs[1] == ("`self.mask` is a **plain tensor, not registered**: never trained, not saved by "
                             "state_dict(), left behind by .to(). Assigned on line %d." % (MASK_LINE + 1))
    assert paragraphs[2].startswith("*Why:* ") and "\n" not in paragraphs[2]
    assert paragraphs[2] != "*Why:* " + diagnostic.message
    # The menu's order: safe ones first, the rule's preferred one first among its kind.
    in_order = sorted(finding.fixes, key=lambda fix: (not fix.is_safe, not fix.preferred))
    assert len(in_order) >= 2
    assert paragraphs[3].splitlines() == ["*Fixes:*"] + [
        "- " + fix.title + (" (safe)" if fix.is_safe else " (unsafe)") for fix in in_order]
    assert diagnostic.code_description.href in card
    assert paragraphs[4] == "[Rule page: TL101](%s)" % diagnostic.code_description.href
    assert "## " not in card
    assert hover.range == diagnostic.range
    nothing = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=0, character=3)))
    assert nothing is None


async def test_hover_over_two_findings_names_the_other_without_its_sentence(vscode: LanguageClient, tmp_path):
    """The innermost finding's card; the finding around it is named (code and rule), its
    sentence left to its own diagnostic."""
    text = MODEL.replace("torch.tril(torch.ones(dim, dim))", "torch.FloatTensor([1.0, 2.0])")
    client = vscode
    uri, published = await opened(client, tmp_path, text)
    assert sorted(codes(published.diagnostics)) == ["TL101", "TL301"]
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=MASK_LINE, character=text.splitlines()[MASK_LINE].index("FloatTensor"))))
    card = hover.contents.value
    assert card.startswith("**TL301 legacy-constructor**\n\n")
    assert card.endswith("\n\nAlso here: TL101 unregistered-tensor")
    assert not [d.message for d in published.diagnostics if d.message in card]


# -- settings ---------------------------------------------------------------------------------
async def test_settings_change_is_reread(vscode: LanguageClient, tmp_path):
    client = vscode
    uri, published = await opened(client, tmp_path, SCALED_BLOCK)
    assert "TL101" in codes(published.diagnostics)
    try:
        client.set_configuration({"ignore": ["TL101"], "severity": {"TL301": "hint"}}, section="torchlint")
        since = len(client.publishes)
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
        await wait_for(lambda: any(p.uri == uri for p in client.publishes[since:]), what="republish")
        republished = [p for p in client.publishes[since:] if p.uri == uri][-1]
        assert "TL101" not in codes(republished.diagnostics)
        assert {d.severity for d in republished.diagnostics if d.code == "TL301"} == {types.DiagnosticSeverity.Hint}
    finally:
        client.set_configuration({}, section="torchlint")
        since = len(client.publishes)
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
        await wait_for(lambda: any(p.uri == uri and "TL101" in codes(p.diagnostics)
                                   for p in client.publishes[since:]), what="defaults back")


async def test_bad_settings_are_logged_and_ignored(vscode: LanguageClient, tmp_path):
    client = vscode
    try:
        logged = len(client.log_messages)
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
            settings={"torchlint": {"select": 42, "ignore": ["TL999"], "severity": {"TL101": "loud"},
                                    "codeLens": "yes", "verify": {"timeout": -1}}}))
        await wait_for(lambda: len(client.log_messages) >= logged + 5, what="five logged errors")
        errors = [m.message for m in client.log_messages[logged:] if m.type == types.MessageType.Error]
        for key in ("torchlint.select", "torchlint.ignore", "torchlint.severity", "torchlint.codeLens",
                    "torchlint.verify.timeout"):
            assert any(key in e for e in errors), (key, errors)
        uri, published = await opened(client, tmp_path, MODEL)
        assert codes(published.diagnostics) == ["TL101"]
    finally:
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
            settings={"torchlint": {}}))


# -- bad input --------------------------------------------------------------------------------
async def test_survives_bad_input(vscode: LanguageClient, tmp_path):
    client = vscode
    unknown = (tmp_path / "never_opened.py").as_uri()
    position = types.Position(line=3, character=4)
    assert await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=unknown), position=position)) is None
    assert await code_actions(client, unknown, line_range(3)) == []
    # Lone surrogates, NUL bytes, a range far past the end.
    for text in ("x = '\udcff'\n", "import torch\x00\n", "\ufeffimport torch\r\nx = torch.ones(1).cuda()\r\n"):
        uri, _ = await opened(client, tmp_path, text)
        far = types.Range(start=types.Position(line=99, character=99), end=types.Position(line=120, character=0))
        assert isinstance(await code_actions(client, uri, far), list)
        await client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=50, character=7)))
    huge = MODEL + "x = 1\n" * 400_000
    uri, published = await opened(client, tmp_path, huge)
    assert not published.diagnostics
    errors = [m for m in client.log_messages if m.type == types.MessageType.Error
              and "failed" in m.message]
    assert errors == []


async def test_initialization_options_apply_before_the_first_publish(tmp_path):
    client = await CONFIG.start()
    try:
        await initialize(client, VSCODE, initialization_options={"torchlint": {"ignore": ["TL101"]}})
        # The client's workspace/configuration answer (no settings) must not undo them either.
        uri = new_uri(tmp_path)
        open_document(client, uri, SCALED_BLOCK)
        first = await wait_for_publish(client, uri, version=1)
        assert "TL101" not in codes(first.diagnostics) and first.diagnostics
        await settle(client)
        assert "TL101" not in codes(client.diagnostics[uri])
        await client.shutdown_session()
    finally:
        await client.stop()


# -- pull (Neovim 0.11) -----------------------------------------------------------------------
async def pull(client, uri, previous=None):
    return await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
        text_document=types.TextDocumentIdentifier(uri=uri), previous_result_id=previous))


async def test_pull_client_pulls_and_is_never_pushed_to(neovim: LanguageClient, tmp_path):
    client = neovim
    assert client.init_result.capabilities.diagnostic_provider is not None
    uri = new_uri(tmp_path)
    open_document(client, uri, SCALED_BLOCK)
    report = await pull(client, uri)
    assert report.kind == "full"
    assert codes(report.items) == [f.code for f in check_source(SCALED_BLOCK, "s.py").findings]
    assert all(d.source == "torchlint" for d in report.items)
    unchanged = await pull(client, uri, report.result_id)
    assert unchanged.kind == "unchanged"
    replace_text(client, uri, SCALED_BLOCK, CLEAN, version=2)
    changed = await pull(client, uri, report.result_id)
    assert changed.kind == "full" and not changed.items
    replace_text(client, uri, CLEAN, BROKEN, version=3)
    assert not (await pull(client, uri)).items  # last good findings: none
    close_document(client, uri)
    assert not (await pull(client, uri)).items
    await asyncio.sleep(0.5)
    assert client.publishes == []


async def test_pull_client_gets_code_actions_and_hover(neovim: LanguageClient, tmp_path):
    client = neovim
    uri = new_uri(tmp_path)
    open_document(client, uri, MODEL)
    (diagnostic,) = (await pull(client, uri)).items
    actions = await code_actions(client, uri, diagnostic.range, diagnostics=[diagnostic])
    assert [a.title for a in actions if a.title.startswith("TL101: ")]
    # A causal mask multiplied in: its buffer fix is safe (issue 43), and the one preferred.
    assert [a.title for a in actions if a.is_preferred] == [
        "TL101: Register as a non-persistent buffer (moved by .to(), not saved)"]
    assert "Disable TL101 for this line" in [a.title for a in actions]
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=diagnostic.range.start))
    assert re.search(r"TL101", hover.contents.value)
    assert client.publishes == []


async def test_jedi_wave_refines_the_first(vscode: LanguageClient, tmp_path):
    """Names alone cannot see that make_weight returns a tensor; the second (jedi) wave can,
    and publishes the same version again with the finding."""
    client = vscode
    uri, first = await opened(client, tmp_path, HELPER_MADE)
    assert codes(first.diagnostics) == []
    since = client.publishes.index(first) + 1

    def refined():
        return next((p for p in client.publishes[since:] if p.uri == uri and codes(p.diagnostics)), None)
    await wait_for(lambda: refined() is not None, timeout=240, what="the jedi wave")
    published = refined()
    assert published.version == 1
    assert codes(published.diagnostics) == ["TL101"]
    assert published.diagnostics[0].range.start.line == 11
