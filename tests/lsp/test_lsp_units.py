"""The server's parts without a client: conversion, settings, handler guards."""
from __future__ import annotations

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from torchlint.analysis.findings import (Applicability, Edit, Finding, Fix, Position, Range, Related,
                                         Severity)
from torchlint.analysis.source import SourceText
from torchlint.lsp.convert import Converter, workspace_edit
from torchlint.lsp.workspace_settings import DEFAULT_SETTINGS, parse_settings

TEXT = 'a = "\U0001F600é"; b = 1\r\nc = 2\n\x0cd = 3\n'
UTF16 = PositionCodec(types.PositionEncodingKind.Utf16)


def test_columns_round_trip_in_utf16():
    convert = Converter(SourceText(TEXT), UTF16)
    after_emoji = Position(1, 6)  # code points: a = "😀 -> the 'é'
    lsp = convert.position(after_emoji)
    assert (lsp.line, lsp.character) == (0, 7)  # the emoji is two UTF-16 units
    assert convert.core_position(lsp) == after_emoji
    # Form feeds do not split lines (str.splitlines would): line 3 is "\x0cd = 3".
    assert convert.position(Position(3, 1)) == types.Position(line=2, character=1)
    # Past the end of the text: clamped, never an exception.
    assert convert.position(Position(40, 3)) == types.Position(line=3, character=0)
    assert convert.core_position(types.Position(line=40, character=0)) == Position(4, 0)
    assert convert.core_position(types.Position(line=0, character=400)) == Position(1, len('a = "\U0001F600é"; b = 1'))


def test_utf8_clients_get_bytes():
    convert = Converter(SourceText(TEXT), PositionCodec(types.PositionEncodingKind.Utf8))
    assert convert.position(Position(1, 6)).character == 9


def test_diagnostic_fields():
    finding = Finding(
        "TL101", "message", Severity.ERROR, Range.of(2, 0, 2, 5),
        fixes=(Fix("wrap", Applicability.SAFE, (Edit(Range.of(2, 0, 2, 0), "x"),), preferred=True),),
        related=(Related(Range.of(1, 0, 1, 1), "built here"),), deprecated=True)
    diagnostic = Converter(SourceText(TEXT), UTF16).diagnostic(finding, "file:///m.py")
    assert diagnostic.code == "TL101" and diagnostic.source == "torchlint"
    assert diagnostic.severity == types.DiagnosticSeverity.Error
    assert diagnostic.code_description.href.endswith("/TL101.md")
    assert diagnostic.tags == [types.DiagnosticTag.Deprecated]
    (related,) = diagnostic.related_information
    assert related.location.uri == "file:///m.py" and related.message == "built here"
    assert diagnostic.data == {"code": "TL101", "fixes": ["wrap"]}


def test_workspace_edit_shapes():
    edit = types.TextEdit(range=types.Range(start=types.Position(line=0, character=0),
                                            end=types.Position(line=0, character=0)), new_text="x")
    versioned = workspace_edit("file:///m.py", [edit], 3, document_changes=True)
    assert versioned.document_changes[0].text_document.version == 3
    assert workspace_edit("file:///m.py", [edit], 3, document_changes=False).changes == {"file:///m.py": [edit]}


def test_settings_parse_and_reject_per_key():
    settings, errors = parse_settings({"torchlint": {
        "select": ["TL1"], "ignore": "TL101", "severity": {"TL203": "error"}, "codeLens": False,
        "verify": {"device": "cuda:1", "timeout": 30}, "interpreter": "/usr/bin/python3"}})
    assert settings.select == ("TL1",)
    assert settings.ignore == ()  # a string, not a list: rejected
    assert settings.severity == (("TL203", "error"),)
    assert settings.code_lens is False
    assert (settings.verify_device, settings.verify_timeout) == ("cuda:1", 30.0)
    assert settings.interpreter == "/usr/bin/python3"
    assert len(errors) == 1 and "torchlint.ignore" in errors[0]
    assert parse_settings(None) == (DEFAULT_SETTINGS, [])
    assert parse_settings([1])[0] == DEFAULT_SETTINGS


def test_a_failing_handler_logs_and_answers_empty():
    import asyncio

    from torchlint.lsp.server import TorchlintServer, guarded

    server = TorchlintServer()
    logged = []
    server.log_error = logged.append

    @guarded(server, [])
    def broken(params):
        raise RuntimeError("boom")

    @guarded(server, None)
    async def broken_async(params):
        raise KeyError("gone")

    assert broken(None) == []
    assert asyncio.run(broken_async(None)) is None
    assert "boom" in logged[0] and "broken failed" in logged[0]
    assert "gone" in logged[1]


def test_a_crashing_rule_costs_only_its_own_findings(monkeypatch):
    from torchlint.lsp.scheduler import Snapshot
    from torchlint.lsp.server import TorchlintServer
    from torchlint.rules import RULES_BY_CODE

    server = TorchlintServer()
    logged = []
    server.log_error = logged.append

    def crash(ctx):
        raise ValueError("rule bug")

    monkeypatch.setattr(RULES_BY_CODE["TL301"], "check", crash)
    text = "import torch\nfrom torch import nn\nclass M(nn.Module):\n" \
           "    def __init__(self):\n        super().__init__()\n        self.g = torch.cuda.FloatTensor([1.0])\n"
    result = server.analyse(Snapshot("file:///m.py", 1, text, "/tmp/m.py", 0), None)
    assert [f.code for f in result.findings] == ["TL101"]
    assert logged and "TL301" in logged[0]
