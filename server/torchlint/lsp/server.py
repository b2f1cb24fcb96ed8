"""The torchlint language server: thin LSP handlers over the analysis core.

The server's state lives on one :class:`TorchlintServer`; the handlers are the module-level
functions marked ``@handles`` below, each taking the server and the request's params, and
:func:`create_server` registers them (and the notebook notifications, ``lsp/notebooks.py``).

Diagnostics go out one way per client, decided at ``initialize``: pulled
(``textDocument/diagnostic``) when the client can pull, pushed (``publishDiagnostics``)
otherwise. A pull's result id is the document's version and a digest of the diagnostics,
so it changes whenever any layer's findings do; when a later wave or a verification
changes what a client last pulled, the server asks it to pull again
(``workspace/diagnostic/refresh``). A client that pulls but cannot be asked again gets
every wave in its answer.

Every handler survives its own failure: the error is logged to the client
(``window/logMessage``) and the request gets an empty answer. Problems the user must act
on (configuration, environment, a document too large or out of sync) are also shown once
as ``window/showMessage``.
"""
from __future__ import annotations

import asyncio
import functools
import gc
import logging
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Hashable, List, Optional, Tuple
from urllib.parse import unquote

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path

from .. import __version__
from ..incremental import IncrementalChecker
from ..analysis.findings import CheckResult, ParseError, Position
from ..analysis.noqa import noqa_edit
from ..analysis.source import SourceText
from ..fixing import fix_text
from .convert import Converter, changed_while_analysed, fix_title, pull_report, result_id, shares_a_line
from .hover import hover as hover_at, inlay_hints, refresh_inlay_hints
from .notebooks import SYNC_OPTIONS as NOTEBOOK_SYNC, Notebooks, register as register_notebooks, view_of
from .documents import use_protocol_lines
from .framing import ResyncingReader
from .inference_layers import JEDI_WAVE, InferenceLayers
from .verification import VERIFY_COMMAND, ProjectScans, VerifiedFindings, code_lenses, verify_module
from .scheduler import Scheduler, Snapshot, Stale
from .views import DocumentView
from .workspace_settings import SECTION, OptionsResolver, parse_settings, unwrap

log = logging.getLogger("torchlint.lsp")

FIX_ALL_KIND = types.CodeActionKind.SourceFixAll + ".torchlint"


class Protocol(LanguageServerProtocol):
    def structure_message(self, data: Dict[str, Any]):
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            # pygls drops a request whose params do not fit the protocol's types: answer it,
            # or the client waits forever.
            if "id" in data and "method" in data:
                self._send_response(data["id"], error=types.ResponseError(
                    code=error.code, message="%s: invalid params for %s" % (error.message, data["method"])))
            raise


class TorchlintServer(LanguageServer):
    def __init__(self):
        super().__init__("torchlint", __version__,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         notebook_document_sync=NOTEBOOK_SYNC, protocol_cls=Protocol)
        self.notebooks = Notebooks(self)  # notebook documents: their cells analysed together
        self.loop: Optional[asyncio.AbstractEventLoop] = None  # set at initialize
        self.pull = False  # the client pulls diagnostics; never push to it then
        self.config_support = False
        self.refresh_support = False
        self.document_changes = False
        self.inlay_hint_refresh = False  # the client can be asked to request inlay hints again
        self.markdown = True
        self.resolver = OptionsResolver(self.config_problem)
        self.initial_settings: Dict[str, Any] = {}  # from initializationOptions
        self.last_good: Dict[str, List[types.Diagnostic]] = {}  # uri -> diagnostics of the last text that parsed
        self.pulled: Dict[str, str] = {}  # uri -> the result id the client pulled last
        # (uri, wave) -> its checker (torchlint.incremental): an edit re-checks what it touched
        self.incremental: Dict[Tuple[str, Any], IncrementalChecker] = {}
        self.problems: Dict[Hashable, str] = {}  # key -> the message shown for it (see notify_problem)
        self.executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="torchlint-check")
        self.verified = VerifiedFindings()  # torchlint.verifyModule results, per document version
        self.lens_scans = ProjectScans.for_server(self)  # the code lens's search of the project, off the loop
        self.inference = InferenceLayers(lambda message: self.log_message(message, types.MessageType.Info),
                                         self.show_warning)
        # Two waves: names at once, then jedi refines the same snapshot.
        self.inference_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="torchlint-jedi")
        self.scheduler = Scheduler(self.document_state, self.analyse, self.publish, self.executor,
                                   waves=(None, JEDI_WAVE), wave_executors={1: self.inference_executor},
                                   report=self.log_error)

    # -- messages to the client ------------------------------------------------------------
    def log_message(self, message: str, kind: types.MessageType) -> None:
        """Log to stderr and to the client; safe to call from the analysis threads."""
        log.log(logging.ERROR if kind == types.MessageType.Error else logging.INFO, "%s", message)
        params = types.LogMessageParams(type=kind, message=message)
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # an executor thread: frames are written from the event loop only
            if self.loop is not None:
                self.loop.call_soon_threadsafe(self._send_log, params)
            return
        self._send_log(params)

    def _send_log(self, params: types.LogMessageParams) -> None:
        try:
            self.window_log_message(params)
        except Exception:  # no connection (yet): stderr has it
            pass

    def log_error(self, message: str) -> None:
        self.log_message(message, types.MessageType.Error)

    def notify_problem(self, key: Hashable, text: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        """Show the user a problem they can act on (``window/showMessage``), once: again only
        when ``text`` changes for the same ``key`` (or after ``clear_problem(key)``), and
        logged when shown. Safe to call from any thread."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            if self.loop is not None:
                self.loop.call_soon_threadsafe(self.notify_problem, key, text, kind)
            else:
                log.warning("%s", text)
            return
        if self.problems.get(key) == text:
            return
        self.problems[key] = text
        self.log_message(text, kind)
        try:
            self.window_show_message(types.ShowMessageParams(type=kind, message=text))
        except Exception:  # no connection (yet): the log has it
            pass

    def clear_problem(self, key: Hashable) -> None:
        """The problem is gone: show it again if it comes back. Safe to call from any thread."""
        self.problems.pop(key, None)

    def config_problem(self, message: str) -> None:
        """A pyproject.toml the settings cannot be read from (reported by the resolver)."""
        self.notify_problem(("config", message), "torchlint: %s" % message, types.MessageType.Error)

    def show_warning(self, message: str) -> None:
        """A warning the user must see (an environment problem): shown once per text."""
        self.notify_problem(("warning", message), message, types.MessageType.Warning)

    def report_server_error(self, error: Exception, source) -> None:
        """Protocol-level failures (a malformed message): logged, not popped up in the editor."""
        self.log_error("%s: %s" % (getattr(source, "__name__", source), error))

    # -- documents ---------------------------------------------------------------------------
    def document(self, uri: str):
        """The open document, or None (an unknown uri is never read from disk, and a document
        out of sync with the editor is as good as unknown: its text is not the user's)."""
        try:
            document = self.workspace.text_documents.get(unquote(uri))
        except Exception:  # not initialized yet
            return None
        if document is None or getattr(document, "out_of_sync", None) or self.notebooks.is_cell(uri):
            return None  # a notebook's cell is analysed with its notebook (lsp/notebooks.py)
        return document

    def too_large(self, text: str) -> bool:
        return len(text) > self.resolver.settings.max_file_size

    def document_state(self, uri: str) -> Optional[Tuple[Optional[int], str, str]]:
        if self.notebooks.notebook(uri) is not None:
            return self.notebooks.state(uri)
        document = self.document(uri)
        if document is None:
            return None
        return document.version, document.source, document.path or ""

    def converter(self, text: str) -> Converter:
        return Converter(SourceText(text), self.workspace.position_codec)

    # -- analysis (runs in the executor) ----------------------------------------------------
    def analyse(self, snap: Snapshot, inference: Any) -> CheckResult:
        if self.too_large(snap.text):  # parsing alone would hold the GIL (and every answer) for seconds
            return CheckResult([], ParseError("too large to analyse", Position(1, 0)))
        options = self.resolver.options_for(snap.path)
        path = snap.path or "untitled.py"
        layer = self.inference_layer(snap.path) if inference == JEDI_WAVE else None
        if layer is None:  # the first wave (or no jedi layer: the first wave's result again)
            result = self.incremental_check(snap.uri, path, None).check(snap.text, options)
        else:
            with self.inference.lock:
                result = self.incremental_check(snap.uri, path, JEDI_WAVE).check(snap.text, options, layer)
            # jedi leaves tens of thousands of cyclic objects per edit (parso's trees point back
            # to their parents): collected here, in the wave that has time to spare, rather than
            # whenever the count runs over, often in the middle of the next edit's first wave.
            gc.collect(1)
        for error in result.internal_errors:
            self.log_error("internal error (a torchlint bug), other rules still ran: %s" % error)
        return result

    def incremental_check(self, uri: str, path: str, wave: Any) -> IncrementalChecker:
        """The checker of one wave of a document, which keeps what it found between versions."""
        checker = self.incremental.get((uri, wave))
        if checker is None or checker.path != path:
            checker = self.incremental[(uri, wave)] = IncrementalChecker(path)
        return checker

    def forget_checks(self, uri: Optional[str] = None, jedi_only: bool = False) -> None:
        """Drop what the checkers of ``uri`` (or of every document) kept between versions."""
        for key in list(self.incremental):
            if (uri is None or key[0] == uri) and (key[1] == JEDI_WAVE or not jedi_only):
                self.incremental.pop(key, None)

    def inference_layer(self, path: str):
        if not path:
            return None
        config = self.resolver.config_for(path)
        settings = self.resolver.settings
        interpreter = self.inference.choose(settings.interpreter, config.python, config.path,
                                            settings.trust_workspace_interpreter)
        return self.inference.layer(str(config.root), interpreter)

    def diagnostics(self, snap: Snapshot, result: CheckResult) -> List[types.Diagnostic]:
        """Diagnostics for a current result. While the text does not parse (mid-typing),
        the last findings of the text that did parse stay up, unchanged."""
        if self.too_large(snap.text):
            self.notify_problem(("too large", snap.uri), "torchlint: %s is larger than torchlint.maxFileSize "
                                "(%d characters): not analysed" % (unquote(snap.uri.rsplit("/", 1)[-1]),
                                                                   self.resolver.settings.max_file_size),
                                types.MessageType.Info)
            self.last_good.pop(snap.uri, None)
            return []
        self.clear_problem(("too large", snap.uri))
        if result.parse_error is not None:
            return self.last_good.get(snap.uri, [])
        diagnostics = self.converter(snap.text).diagnostics(result.findings, snap.uri)
        self.last_good[snap.uri] = diagnostics
        verified = self.verified.in_diagnostics(snap.uri, snap.version)  # a pull client without refresh: pushed
        return diagnostics + self.converter(snap.text).diagnostics(verified, snap.uri) if verified else diagnostics

    def publish(self, snap: Snapshot, result: CheckResult) -> None:
        """A wave is in for the current text: push it, or have a pull client pull it."""
        if self.notebooks.notebook(snap.uri) is not None:
            self.notebooks.publish(snap, result)
        elif not self.pull:
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=snap.uri, version=snap.version, diagnostics=self.diagnostics(snap, result)))
        elif self.scheduler.newest_wave(snap.uri) and snap.uri in self.pulled:
            # A later wave (the client pulls the first itself) of a document the client has pulled.
            self.ask_to_pull(snap.uri, result_id(snap, self.diagnostics(snap, result)))

    def ask_to_pull(self, uri: str, current: Optional[str]) -> None:
        """Ask the client to pull again if what it pulled last for ``uri`` is not ``current``."""
        if self.refresh_support and uri in self.pulled and self.pulled[uri] != current:
            self.workspace_diagnostic_refresh(None)

    def republish(self, uri: str) -> None:
        """Show a document's diagnostics again (new verification results joined them)."""
        if self.pull:
            self.ask_to_pull(uri, None)
        elif self.document(uri) is not None:
            self.scheduler.schedule(uri, delay=0)

    def show_error(self, message: str) -> None:
        self.log_error(message)
        try:
            self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=message))
        except Exception:
            pass

    def refresh(self) -> None:
        """Settings changed: analyse every open document again."""
        self.scheduler.invalidate()
        refresh_inlay_hints(self)
        if self.pull:
            if self.refresh_support:
                self.workspace_diagnostic_refresh(None)
            return
        for uri in list(self.workspace.text_documents) + self.notebooks.uris():
            self.scheduler.schedule(uri, delay=0)

    # -- settings ---------------------------------------------------------------------------
    def apply_settings(self, raw: Any) -> bool:
        """Take new settings over initializationOptions (bad values are logged and keep their
        defaults); True if they changed."""
        merged = dict(self.initial_settings)
        raw = unwrap(raw)
        errors: List[str] = []
        if isinstance(raw, dict):
            merged.update(raw)
        elif raw is not None:
            errors.append("torchlint settings: expected an object, got %r; ignored" % (raw,))
        settings, value_errors = parse_settings(merged)
        errors += value_errors
        for error in errors:
            self.log_error(error)
        if errors:  # one message for the lot, shown until the settings change
            self.notify_problem("settings", "Fix these torchlint settings: " + "; ".join(errors))
        else:
            self.clear_problem("settings")
        if settings == self.resolver.settings:
            return False
        self.resolver.update(settings)
        self.inference.configure(settings)  # inferenceCache, inferBudget
        return True

    async def fetch_settings(self) -> bool:
        """Ask the client for the ``torchlint`` section; True if the settings changed."""
        if not self.config_support:
            return False
        values = await self.workspace_configuration_async(
            types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)]))
        # A client that knows no such section answers null: keep what initialize brought.
        return bool(values) and values[0] is not None and self.apply_settings(values[0])


def guarded(server: TorchlintServer, default: Any = None):
    """A handler that logs its own failure and answers ``default`` instead of dying."""

    def decorate(handler):
        def report(error: Exception) -> Any:
            if isinstance(error, JsonRpcException):
                raise error  # a deliberate protocol answer (ServerCancelled)
            server.log_error("%s failed: %s" % (handler.__name__, "".join(
                traceback.format_exception(type(error), error, error.__traceback__))))
            return default

        # functools.wraps keeps the handler's signature: pygls passes the server to a handler
        # whose first parameter is annotated with the server's class.
        if asyncio.iscoroutinefunction(handler):
            @functools.wraps(handler)
            async def run_async(*args):
                try:
                    return await handler(*args)
                except asyncio.CancelledError:
                    raise
                except Exception as error:
                    return report(error)
            return run_async

        @functools.wraps(handler)
        def run(*args):
            try:
                return handler(*args)
            except Exception as error:
                return report(error)
        return run

    return decorate


def wanted(only: Optional[List[str]], kind: str) -> bool:
    """Whether ``context.only`` asks for code actions of ``kind``."""
    if not only:
        return True
    return any(o == "" or kind == o or kind.startswith(o + ".") for o in only)


# -- the handlers: each takes the server (pygls passes it) and the request's params ----------------

HANDLERS: List[Tuple[str, Any, Callable, Any]] = []  # (method, options, handler, answer on failure)


def handles(method: str, options: Any = None, default: Any = None):
    """Marks a module-level function as the handler of ``method`` (see create_server)."""
    def record(handler: Callable) -> Callable:
        HANDLERS.append((method, options, handler, default))
        return handler
    return record


@handles(types.INITIALIZE)
def initialize(server: TorchlintServer, params: types.InitializeParams) -> None:
    server.loop = asyncio.get_running_loop()
    use_protocol_lines(server.workspace)
    caps = params.capabilities
    server.pull = get_capability(caps, "text_document.diagnostic", None) is not None
    server.config_support = bool(get_capability(caps, "workspace.configuration", False))
    server.refresh_support = bool(get_capability(caps, "workspace.diagnostics.refresh_support", False))
    server.document_changes = bool(get_capability(caps, "workspace.workspace_edit.document_changes", False))
    server.inlay_hint_refresh = bool(get_capability(caps, "workspace.inlay_hint.refresh_support", False))
    formats = get_capability(caps, "text_document.hover.content_format", None)
    server.markdown = not formats or types.MarkupKind.Markdown in formats
    if not server.pull:  # advertise pull diagnostics only to clients that pull
        server.protocol.fm.features.pop(types.TEXT_DOCUMENT_DIAGNOSTIC, None)
    # Settings that come with initialize are there before the first didOpen.
    options = unwrap(params.initialization_options)
    if isinstance(options, dict):
        server.initial_settings = dict(options)
    server.apply_settings(None)


@handles(types.INITIALIZED)
async def initialized(server: TorchlintServer, params: types.InitializedParams) -> None:
    if await server.fetch_settings():
        server.refresh()


@handles(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def did_change_configuration(server: TorchlintServer, params: types.DidChangeConfigurationParams) -> None:
    # Clients send the new values, or nothing and expect the server to ask for them.
    settings = params.settings
    if isinstance(settings, dict) and isinstance(settings.get(SECTION), dict):
        server.apply_settings(settings[SECTION])
    elif server.config_support:
        await server.fetch_settings()
    elif settings is not None:
        server.apply_settings(settings)
    server.resolver.forget()  # pyproject.toml may have changed too
    server.refresh()


@handles(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(server: TorchlintServer, params: types.DidOpenTextDocumentParams) -> None:
    if not server.pull or server.refresh_support:
        server.scheduler.schedule(params.text_document.uri, delay=0)


@handles(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(server: TorchlintServer, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    if server.document(uri) is None:
        lost_sync(server, uri)
    elif not server.pull or server.refresh_support:
        server.clear_problem(("out of sync", uri))
        server.scheduler.schedule(uri)


def lost_sync(server: TorchlintServer, uri: str) -> None:
    """An edit the document could not take: what the server has is not the editor's text,
    so nothing computed from it is shown (or offered as a fix) until it is sent whole."""
    document = server.workspace.text_documents.get(unquote(uri))
    if document is None or not getattr(document, "out_of_sync", None):
        return
    server.scheduler.forget(uri)
    server.forget_checks(uri)
    server.last_good.pop(uri, None)
    server.verified.forget(uri)
    server.notify_problem(("out of sync", uri), "torchlint lost track of %s (%s): its copy is out of sync "
                          "with the editor's, so its diagnostics are cleared. Close and reopen the file."
                          % (unquote(uri.rsplit("/", 1)[-1]), document.out_of_sync), types.MessageType.Error)
    if server.pull:
        server.ask_to_pull(uri, None)
    else:
        server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
            uri=uri, version=document.version, diagnostics=[]))


@handles(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(server: TorchlintServer, params: types.DidSaveTextDocumentParams) -> None:
    # jedi reads other modules from disk: what it told about any open document may change now.
    server.forget_checks(jedi_only=True)
    if params.text_document.uri.endswith("/pyproject.toml"):
        server.resolver.forget()
        server.refresh()
    elif not server.pull:
        server.scheduler.schedule(params.text_document.uri, delay=0)


@handles(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(server: TorchlintServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    server.scheduler.forget(uri)
    server.forget_checks(uri)
    server.inference.forget(to_fs_path(uri))  # jedi's parse of its text
    server.verified.forget(uri)
    server.last_good.pop(uri, None)
    server.pulled.pop(uri, None)
    server.clear_problem(("too large", uri))
    server.clear_problem(("out of sync", uri))
    if not server.pull:
        server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


@handles(types.TEXT_DOCUMENT_DIAGNOSTIC,
         types.DiagnosticOptions(identifier="torchlint", inter_file_dependencies=False, workspace_diagnostics=False),
         types.RelatedFullDocumentDiagnosticReport(items=[]))
async def diagnostic(server: TorchlintServer, params: types.DocumentDiagnosticParams):
    uri = params.text_document.uri
    if server.notebooks.is_cell(uri):
        return await server.notebooks.pull(params)
    if server.document(uri) is None:
        return types.RelatedFullDocumentDiagnosticReport(items=[])
    try:
        # A client that cannot be asked to pull again gets every wave now.
        snap, result = await server.scheduler.result(uri, final=not server.refresh_support)
    except Stale:
        raise changed_while_analysed("document")
    return pull_report(server.pulled, uri, snap, server.diagnostics(snap, result), params.previous_result_id)


@handles(types.TEXT_DOCUMENT_HOVER)
async def hover(server: TorchlintServer, params: types.HoverParams):
    return await hover_at(server, params)  # lsp/hover.py: a finding's card, or what self.<name> is


@handles(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(), [])
async def inlay_hint(server: TorchlintServer, params: types.InlayHintParams):
    return await inlay_hints(server, params)  # lsp/hover.py: what self.<name> is, after __init__'s assignments


@handles(types.TEXT_DOCUMENT_CODE_ACTION,
         types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND]), [])
async def code_action(server: TorchlintServer, params: types.CodeActionParams):
    # Findings of the current text (cached per version), never the published ones; a
    # notebook cell's are its notebook's (lsp/views.py).
    view = await view_of(server, params.text_document.uri)
    if view is None or view.result.parse_error is not None:
        return []
    only = params.context.only
    actions: List[types.CodeAction] = []
    if wanted(only, types.CodeActionKind.QuickFix):
        actions.extend(quick_fixes(server, view, params.range))
    if wanted(only, FIX_ALL_KIND) and any(fix.is_safe for f in view.result.findings for fix in f.fixes):
        action = await fix_all(server, view)
        if action is not None:
            actions.append(action)
    return actions


@handles(types.TEXT_DOCUMENT_CODE_LENS, None, [])
async def code_lens(server: TorchlintServer, params: types.CodeLensParams):
    document = server.document(params.text_document.uri)
    if document is None or server.too_large(document.source):
        return []
    # Finding the Module classes parses the text: never on the event loop.
    return await server.scheduler.run(code_lenses, server, params.text_document.uri)


async def verify(server: TorchlintServer, *args):
    """``torchlint.verifyModule``: not guarded, commands take their arguments spread out."""
    try:
        return await verify_module(server, *args)
    except Exception:
        server.log_error("%s failed: %s" % (VERIFY_COMMAND, traceback.format_exc()))
        return {"error": "internal error: see the torchlint log"}


def create_server() -> TorchlintServer:
    """A server with every handler of this module (and the notebook notifications) on it."""
    server = TorchlintServer()
    for method, options, handler, default in HANDLERS:
        server.feature(method, options)(guarded(server, default)(handler))
    register_notebooks(server, guarded)
    server.command(VERIFY_COMMAND)(verify)
    return server


def quick_fixes(server: TorchlintServer, view: DocumentView, lsp_range: types.Range) -> List[types.CodeAction]:
    if not view.result.findings:
        return []
    wanted_range = view.core_range(lsp_range)
    actions: List[types.CodeAction] = []
    silenced = set()
    for finding in view.result.findings:
        if not shares_a_line(finding.range, wanted_range):
            continue
        diagnostic = view.diagnostic(finding)
        if diagnostic is None:
            continue
        # shown: the titles as the user's lines are numbered (a notebook's cells)
        for fix, shown in zip(finding.fixes, view.relabel(finding).fixes):
            edit = view.workspace_edit(list(fix.edits), server.document_changes)
            if edit is not None:  # None: a notebook fix that would cross cells
                actions.append(types.CodeAction(
                    title=fix_title(shown), kind=types.CodeActionKind.QuickFix, diagnostics=[diagnostic],
                    is_preferred=fix.preferred or None, edit=edit))
        key = (finding.noqa_line, finding.code)
        noqa = noqa_edit(view.source, finding.noqa_line, finding.code) if key not in silenced else None
        edit = view.workspace_edit([noqa], server.document_changes) if noqa is not None else None
        if edit is not None:
            silenced.add(key)
            actions.append(types.CodeAction(
                title="Disable %s for this line" % finding.code, kind=types.CodeActionKind.QuickFix,
                diagnostics=[diagnostic], edit=edit))
    return actions


async def fix_all(server: TorchlintServer, view: DocumentView) -> Optional[types.CodeAction]:
    """The document (a notebook: its cells) with every safe fix applied, pass after pass like ``--fix``."""
    snap = view.snap
    options = server.resolver.options_for(snap.path)
    outcome = await server.scheduler.run(fix_text, snap.text, snap.path or "untitled.py", options)
    for error in outcome.errors:
        server.log_error(error)
    if outcome.text == snap.text or not server.scheduler.is_current(snap):
        return None
    edit = view.whole_edit(outcome.text, server.document_changes)
    if edit is None:
        return None
    return types.CodeAction(title="Fix all safe torchlint problems", kind=FIX_ALL_KIND, edit=edit)


def main(argv=None) -> int:
    """Serve LSP on stdio. stdout carries LSP frames only: anything else printed goes to stderr."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="torchlint-lsp %(levelname)s %(message)s")
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr
    server = create_server()
    server.start_io(ResyncingReader(stdin), stdout)
    return 0
