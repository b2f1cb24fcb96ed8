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
    from torchlint.lsp.scheduler import Snapshot, Wave
    from torchlint.lsp.server import TorchlintServer
    from torchlint.rules import RULES_BY_CODE

    server = TorchlintServer()
    logged = []
    server.log_error = logged.append

    def crash(ctx):
        raise ValueError("rule bug")

    monkeypatch.setattr(RULES_BY_CODE["TL301"], "check", crash)
    text = "import torch\nfrom torch import nn\nclass M(nn.Module):\n" \
           "    def __init__(self):\n        super().__init__()\n        self.g = torch.cuda.FloatTensor([1.0])\n" \
           "    def forward(self, x):\n        return x * self.g\n"
    result = server.analyse(Snapshot("file:///m.py", 1, text, "/tmp/m.py", 0), Wave.NAMES)
    assert [f.code for f in result.findings] == ["TL101"]
    assert logged and "TL301" in logged[0]


def test_the_size_limit_setting():
    assert DEFAULT_SETTINGS.max_file_size == 1_000_000
    assert parse_settings({"maxFileSize": 5000})[0].max_file_size == 5000
    for bad in (0, -1, "1MB", True, 1.5):
        settings, errors = parse_settings({"maxFileSize": bad})
        assert settings.max_file_size == DEFAULT_SETTINGS.max_file_size
        assert len(errors) == 1 and "torchlint.maxFileSize" in errors[0]


# -- incremental edits as the protocol defines them ------------------------------------------
def edit(text, start, end, new_text, codec=UTF16):
    from torchlint.lsp.documents import apply_edit

    return apply_edit(text, types.Range(start=types.Position(line=start[0], character=start[1]),
                                        end=types.Position(line=end[0], character=end[1])), new_text, codec)


def test_edits_clamp_where_the_protocol_says_and_refuse_the_impossible():
    import pytest

    from torchlint.lsp.documents import OutOfRange

    text = "ab\r\ncd\x0cef\rgh"  # CRLF, a form feed inside a line, CR, no final break
    assert edit(text, (1, 3), (1, 3), "X") == "ab\r\ncd\x0cXef\rgh"  # \x0c is no line break
    assert edit(text, (0, 9), (0, 9), "X") == "abX\r\ncd\x0cef\rgh"  # past the end: the line's end
    assert edit(text, (2, 9), (2, 9), "X") == "ab\r\ncd\x0cef\rghX"  # the last line too
    assert edit(text, (0, 3), (1, 0), "") == "abcd\x0cef\rgh"  # one past the end, not into the break
    assert edit(text, (2, 0), (7, 0), "") == "ab\r\ncd\x0cef\r"  # an end past the document: its end
    assert edit("x\n", (1, 0), (1, 0), "y") == "x\ny"  # the empty last line exists
    assert edit("a\U0001F600b", (0, 3), (0, 3), "|") == "a\U0001F600|b"  # UTF-16 units
    for start, end in (((3, 0), (3, 0)), ((2, 0), (5, 0)), ((1, 2), (1, 1))):
        with pytest.raises(OutOfRange):
            edit("x\ny", start, end, "z")


def test_an_impossible_edit_puts_the_document_out_of_sync_until_sent_whole():
    from torchlint.lsp.documents import ProtocolLinesDocument

    document = ProtocolLinesDocument("file:///m.py", source="x = 1\n", version=1,
                                     sync_kind=types.TextDocumentSyncKind.Incremental)

    def partial(line, new_text):
        position = types.Position(line=line, character=0)
        return types.TextDocumentContentChangePartial(range=types.Range(start=position, end=position), text=new_text)

    document.apply_change(partial(0, "# a\n"))
    assert document.source == "# a\nx = 1\n" and not document.out_of_sync
    document.apply_change(partial(9, "y = 2\n"))
    assert "line 9" in document.out_of_sync
    document.apply_change(partial(0, "# b\n"))  # on an unknown text: ignored
    assert document.source == "# a\nx = 1\n" and document.out_of_sync
    document.apply_change(types.TextDocumentContentChangeWholeDocument(text="z = 3\n"))
    assert document.source == "z = 3\n" and not document.out_of_sync


# -- pull result ids --------------------------------------------------------------------------
def test_the_result_id_follows_the_diagnostics():
    from torchlint.lsp.scheduler import Snapshot
    from torchlint.lsp.publishing import result_id

    convert = Converter(SourceText("x = 1\ny = 2\n"), UTF16)
    first = Finding("TL101", "one", Severity.WARNING, Range.of(1, 0, 1, 1))
    verified = Finding("TL901", "verified", Severity.WARNING, Range.of(2, 0, 2, 1), source="torchlint-verify")
    snap = Snapshot("file:///m.py", 3, "x = 1\ny = 2\n", "/m.py", 0)
    ids = {result_id(snap, convert.lsp_diagnostics(findings, snap.uri))
           for findings in ([], [first], [first, verified], [verified])}
    assert len(ids) == 4  # same version, different diagnostics: never the same id
    assert result_id(snap, convert.lsp_diagnostics([first], snap.uri)) == result_id(
        snap, convert.lsp_diagnostics([first], snap.uri))


# -- frames -----------------------------------------------------------------------------------
def test_the_reader_resynchronises_on_the_next_content_length(caplog):
    import io

    from torchlint.lsp.framing import ResyncingReader

    reader = ResyncingReader(io.BytesIO(b'{"junk": 1}Content-Length: 12\r\n\r\n{"body": 12}content-length:3\n\n'))
    assert reader.readline() == b"Content-Length: 12\r\n"
    assert reader.readline() == b"\r\n"
    assert reader.read(12) == b'{"body": 12}'
    assert reader.readline() == b"Content-Length: 3\r\n"
    assert reader.readline() == b"\n"
    assert reader.readline() == b""
    (record,) = caplog.records
    assert record.getMessage() == "skipped a malformed frame (no Content-Length header): b'{\"junk\": 1}'"


# -- a new version cancels stale work --------------------------------------------------------
def test_work_queued_for_an_old_version_is_skipped():
    import asyncio
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from torchlint.analysis.findings import CheckResult
    from torchlint.lsp.scheduler import Scheduler

    documents = {"file:///m.py": (1, "x = 1\n", "/m.py")}
    analysed, published = [], []
    gate = threading.Event()
    executor = ThreadPoolExecutor(max_workers=1)

    def analyse(snap, wave):
        analysed.append(snap.version)
        return CheckResult([], None)

    async def scenario():
        scheduler = Scheduler(documents.get, analyse, lambda snap, result: published.append(snap.version), executor)
        blocker = asyncio.get_running_loop().run_in_executor(executor, gate.wait, 60)  # the one thread is busy
        scheduler.schedule("file:///m.py", delay=0)
        await asyncio.sleep(0.05)  # version 1 is queued behind the blocker
        documents["file:///m.py"] = (2, "x = 2\n", "/m.py")
        scheduler.schedule("file:///m.py", delay=0)
        gate.set()
        await blocker
        for _ in range(500):  # bounded: 10 s at most
            if published:
                break
            await asyncio.sleep(0.02)

    try:
        asyncio.run(scenario())
    finally:
        gate.set()
        executor.shutdown(wait=True)
    assert published == [2]
    assert analysed == [2]  # version 1 never ran: superseded while it waited


def test_the_waves_run_in_order_each_named_and_on_its_own_executor():
    import asyncio
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from torchlint.analysis.findings import CheckResult
    from torchlint.lsp.scheduler import Scheduler, Wave

    documents = {"file:///m.py": (1, "x = 1\n", "/m.py")}
    analysed, published = [], []
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="names")
    jedi_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jedi")

    def analyse(snap, wave):
        analysed.append((wave, threading.current_thread().name.split("_")[0]))
        return CheckResult([], None)

    async def scenario():
        scheduler = Scheduler(documents.get, analyse, lambda snap, result: published.append(
            scheduler.is_later_wave(snap.uri)), executor, waves=(Wave.JEDI, Wave.NAMES),
            wave_executors={Wave.JEDI: jedi_executor})
        scheduler.schedule("file:///m.py", delay=0)
        for _ in range(500):  # bounded: 10 s at most
            if len(published) == 2:
                break
            await asyncio.sleep(0.02)
        return scheduler.newest_wave("file:///m.py")

    try:
        newest = asyncio.run(scenario())
    finally:
        executor.shutdown(wait=True)
        jedi_executor.shutdown(wait=True)
    assert analysed == [(Wave.NAMES, "names"), (Wave.JEDI, "jedi")]
    assert published == [False, True] and newest is Wave.JEDI


def test_typing_waits_for_a_pause_only_when_the_first_wave_is_costly():
    """A document whose first wave costs little CPU is analysed at every edit; a costly one
    waits for a pause in typing. Cost is the analysing thread's CPU time, so a busy machine
    does not change the decision."""
    import asyncio
    import time
    from concurrent.futures import ThreadPoolExecutor

    from torchlint.analysis.findings import CheckResult
    from torchlint.lsp.scheduler import CHEAP_SECONDS, DEBOUNCE_SECONDS, Scheduler

    documents = {"file:///cheap.py": (1, "x = 1\n", "/cheap.py"), "file:///costly.py": (1, "y = 1\n", "/costly.py")}
    published = []
    executor = ThreadPoolExecutor(max_workers=1)

    def analyse(snap, wave):
        if "costly" in snap.uri:
            started = time.thread_time()
            while time.thread_time() - started < 2 * CHEAP_SECONDS:
                pass  # CPU, not sleep: what the scheduler measures
        return CheckResult([], None)

    async def scenario():
        scheduler = Scheduler(documents.get, analyse, lambda snap, result: published.append(snap.uri), executor)
        now = asyncio.get_running_loop().time()
        # Before any analysis the cost is unknown: a quick second edit waits, as it always did.
        for uri in documents:
            scheduler.schedule(uri, delay=0)
            assert scheduler.delay_for(uri, now) == DEBOUNCE_SECONDS
        async def published_count(count):
            for _ in range(500):  # bounded: 10 s at most
                if len(published) >= count:
                    return
                await asyncio.sleep(0.02)

        await published_count(2)
        for uri in documents:  # another edit to each, then the question for one right after it
            scheduler.schedule(uri, delay=0)
        now = asyncio.get_running_loop().time()
        delays = scheduler.delay_for("file:///cheap.py", now), scheduler.delay_for("file:///costly.py", now)
        await published_count(4)
        return delays

    try:
        cheap, costly = asyncio.run(scenario())
    finally:
        executor.shutdown(wait=True)
    assert sorted(published) == sorted(list(documents) * 2)
    assert cheap == 0
    assert costly == DEBOUNCE_SECONDS


def test_a_message_logged_from_a_thread_after_the_loop_closed_is_not_an_error():
    # The collection after closing runs on a timer thread; its report may come after the
    # server's loop closed at exit: stderr has it, and the thread does not die of it.
    import asyncio
    import threading

    from torchlint.lsp.messages import Messages

    sent = []
    messages = Messages(sent.append, sent.append)
    messages.loop = asyncio.new_event_loop()
    messages.loop.close()
    raised = []

    def log_from_a_thread():
        try:
            messages.log("torchlint: full collection after closing", types.MessageType.Log)
        except BaseException as exc:  # noqa: B902 - what the test looks for
            raised.append(exc)

    thread = threading.Thread(target=log_from_a_thread)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive() and raised == [] and sent == []
