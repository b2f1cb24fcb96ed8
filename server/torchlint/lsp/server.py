"""The torchlint language server: short handlers that wire LSP requests to the feature modules.

Each handler is a module-level function marked ``@handles`` below, taking the server and the
request's params; :func:`create_server` registers them. A handler reads what its feature needs
from the server (the client's capabilities, the settings, the document's record, the current
result through a view) and calls the feature's module with exactly that, typed: the modules
never see the server. What each one does:

- ``publishing.py``: what a document shows for a result, pushed or pulled;
- ``notebooks.py``: a notebook's cells joined, analysed together, shown per cell;
- ``hover.py``, ``inlay_hints.py``, ``code_actions.py``: those requests, on a view (``views.py``);
- ``verification.py``: the code lens and the ``torchlint.verifyModule`` command.

What the server keeps about a document lives in its record (``state.py``): opening creates it,
closing drops it. :class:`TorchlintServer` holds the records and the services (scheduler,
settings, inference layers, messages to the client).

Every handler survives its own failure: the error is logged to the client
(``window/logMessage``) and the request gets an empty answer. Problems the user must act
on (configuration, environment, a document too large or out of sync) are also shown once
as ``window/showMessage``.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import sys
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Dict, Generator, List, Optional, Sequence, Set, Tuple, TypeVar
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from .. import __version__, collection
from ..analysis import parsing
from ..analysis.findings import CheckResult, Finding, ParseError, Position
from ..analysis.source import SourceText
from ..incremental import IncrementalChecker
from ..settings import editor_name, spec_of
from .code_actions import KINDS as CODE_ACTION_KINDS, code_actions
from .convert import Converter
from .documents import use_protocol_lines
from .framing import ResyncingReader, request_id
from .hover import hover as hover_card_at
from .inference_layers import InferenceLayers
from .inlay_hints import inlay_hints
from .messages import Messages
from .notebooks import SYNC_OPTIONS as NOTEBOOK_SYNC, JoinedNotebook, Notebooks, cell_diagnostics, cell_view, join, notebook_path
from .publishing import (Diagnostics, PullReport, changed_while_analysed, file_diagnostics, ask_to_pull, publish_cells,
                         publish_file, pull_report)
from .scheduler import Scheduler, Snapshot, Stale, Wave
from .state import ClientSupport, DocumentState, OpenDocuments, Verification
from .verification import (VERIFY_COMMAND, ProjectScans, VerifyRuns, VerifyServices, code_lenses, still_wanting,
                           verify_module)
from .views import DocumentView
from .workspace_settings import SECTION, OptionsResolver, parse_settings, unwrap

if TYPE_CHECKING:
    from pygls.server import ServerErrors  # (declared for type checkers only)

    from ..inference.layer import JediInference

log = logging.getLogger("torchlint.lsp")

# How long ``shutdown`` waits for the verifications it cancels: a probe is killed at once (no
# grace), so this bounds only a child that cannot be reaped.
SHUTDOWN_WAIT_SECONDS = 10.0


class Protocol(LanguageServerProtocol):
    def structure_message(self, data: Dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            # pygls drops a request whose params do not fit the protocol's types: answer it,
            # or the client waits forever.
            if "id" in data and "method" in data:
                self._send_response(data["id"], error=types.ResponseError(
                    code=error.code, message="%s: invalid params for %s" % (error.message, data["method"])))
            raise

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Generator[Any, Any, None]:
        """pygls' own, but for the loop that cancels the other requests: pygls iterates over the
        dict that a cancelled request's callback removes it from, so a request in flight (an
        executeCommand: a verification) made ``shutdown`` fail and the server never exit."""
        user_handler = self.fm.features.get(types.SHUTDOWN)
        if user_handler is not None:
            yield user_handler, args, None
        this_request = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != this_request and not future.done():
                future.cancel()
        self._shutdown = True

    def _check_handler_result(self, future: "Future[Any]") -> None:
        # pygls 2.1 keeps the future of each notification its generator, coroutine or thread
        # handlers ran (didChange's among them) under a fresh id and never drops it: a Future, a
        # Condition and an id per edit, for the whole session. Dropped here, once it is done.
        for msg_id, kept in list(self._request_futures.items()):
            if kept is future:
                self._request_futures.pop(msg_id, None)
        super()._check_handler_result(future)


class TorchlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("torchlint", __version__,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         notebook_document_sync=NOTEBOOK_SYNC, protocol_cls=Protocol)
        self.client = ClientSupport()  # what the client can do: set at initialize
        self.documents = OpenDocuments()  # one record per open document (lsp/state.py)
        self.notebooks = Notebooks(lambda: self.workspace)  # the open notebooks' cells, as pygls has them
        self.messages = Messages(self.window_log_message, self.window_show_message)
        self.loop: Optional[asyncio.AbstractEventLoop] = None  # set at initialize
        self.resolver = OptionsResolver(self.messages.config_problem)
        self.initial_settings: Dict[str, Any] = {}  # from initializationOptions
        self.executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="torchlint-check")
        # The code lens's search of the project, off the loop; a changed answer refreshes the lenses.
        self.lens_scans = ProjectScans(self.refresh_code_lenses,
                                       lambda message: self.messages.log(message, types.MessageType.Warning))
        self.inference = InferenceLayers(lambda message: self.messages.log(message, types.MessageType.Info),
                                         self.messages.warn_once)
        self.verify_runs = VerifyRuns()  # the verifications in flight (shutdown ends them)
        self.frames: Optional[ResyncingReader] = None  # stdin, once serving (main)
        # Two waves: names at once, then jedi refines the same snapshot.
        self.inference_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="torchlint-jedi")
        self.scheduler = Scheduler(self.document_state, self.analyse, self.publish, self.executor,
                                   waves=(Wave.NAMES, Wave.JEDI), wave_executors={Wave.JEDI: self.inference_executor},
                                   report=self.log_error, runs=self.documents.runs)
        # What closed documents held goes once the server is quiet (a full collection: seconds).
        self.closed_paths: Set[str] = set()  # closed since the last collection (release_closed)
        self.collection_after_closing = collection.CollectionAfterClosing(
            self.release_closed, self.report_collection, thaw=lambda: next(iter(self.documents), None) is None)

    def closed(self, path: Optional[str]) -> None:
        """A document or notebook at ``path`` closed: what it pinned goes before the next collection."""
        if path:
            self.closed_paths.add(path)
        self.collection_after_closing.closed()

    def release_closed(self) -> None:
        """Before the collection after closing (its thread): the closed documents' recent trees
        and jedi's parses of them."""
        while self.closed_paths:
            parsing.forget(self.closed_paths.pop())
        self.inference.release_closed()

    def report_collection(self, freed: int, seconds: float) -> None:
        self.messages.log("torchlint: full collection after closing: %d objects freed in %.2f s" % (freed, seconds),
                          types.MessageType.Log)

    def log_error(self, message: str) -> None:
        """An error in the log (``window/logMessage``): a failed handler, a torchlint bug."""
        self.messages.log_error(message)

    def report_server_error(self, error: Exception, source: ServerErrors) -> None:
        """Protocol-level failures (a malformed message): logged, not popped up in the editor. A
        body pygls's read loop could not decode (``source``: its JsonRpcException; not JSON, or
        nested deeper than the decoder's recursion limit) is answered with a parse error under its
        id where one can be read (else null, as JSON-RPC has it): the client would wait for ever."""
        self.log_error("%s: %s" % (getattr(source, "__name__", source), error))
        if source is JsonRpcException and isinstance(error, (ValueError, RecursionError)) \
                and self.frames is not None:  # (ValueError: JSONDecodeError, UnicodeDecodeError)
            why = "nested too deep to decode" if isinstance(error, RecursionError) else "not JSON (%s)" % error
            # (plain data: pygls's response types leave out an id that is None, JSON-RPC's null)
            self.protocol._send_data({"jsonrpc": "2.0", "id": request_id(self.frames.last_body), "error": {
                "code": types.ErrorCodes.ParseError.value, "message": "the message could not be read: %s" % why}})

    # -- requests to the client (publishing.DiagnosticsOut, and the lens and hint refreshes) ----
    def push(self, uri: str, version: Optional[int], diagnostics: Diagnostics) -> None:
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=diagnostics))

    def ask_to_pull(self) -> None:
        self.workspace_diagnostic_refresh(None)

    def refresh_code_lenses(self) -> None:
        """The lens scan's answer changed (its own thread): the client requests lenses again,
        when it said it can be asked."""
        def send() -> None:
            try:
                self.workspace_code_lens_refresh(None)
            except Exception:  # noqa: BLE001 - no connection any more: nobody to refresh
                pass

        if self.loop is not None and self.client.code_lens_refresh:
            self.loop.call_soon_threadsafe(send)

    def refresh_inlay_hints(self) -> None:
        if self.client.inlay_hint_refresh:
            self.workspace_inlay_hint_refresh(None)

    # -- documents ---------------------------------------------------------------------------
    def document(self, uri: str) -> Optional[TextDocument]:
        """The open document, or None (an unknown uri is never read from disk, and a document
        out of sync with the editor is as good as unknown: its text is not the user's)."""
        try:
            document: Optional[TextDocument] = self.workspace.text_documents.get(unquote(uri))
        except Exception:  # not initialized yet
            return None
        if document is None or getattr(document, "out_of_sync", None) or self.notebooks.is_cell(uri):
            return None  # a notebook's cell is analysed with its notebook (lsp/notebooks.py)
        return document

    def open_text(self, uri: str) -> Optional[Tuple[str, Optional[int]]]:
        """(text, version) of an open document."""
        document = self.document(uri)
        return (document.source, document.version) if document is not None else None

    def too_large(self, text: str) -> bool:
        return len(text) > self.resolver.settings.max_file_size

    def joined(self, uri: str) -> Optional[JoinedNotebook]:
        """A notebook's code cells joined, kept in its record until a cell's text changes."""
        notebook = self.notebooks.notebook(uri)
        if notebook is None:
            return None
        record = self.documents.get(uri)
        joined = join(uri, self.notebooks.code_cells(notebook), record.joined if record is not None else None)
        if record is not None:
            record.joined = joined
        return joined

    def current_joined(self, snap: Snapshot) -> Optional[JoinedNotebook]:
        """The notebook's cells joined, if they are still the text ``snap`` analysed."""
        joined = self.joined(snap.uri)
        return joined if joined is not None and joined.text == snap.text else None

    def document_state(self, uri: str) -> Optional[Tuple[Optional[int], str, str]]:
        """(version, text, path) of a document or notebook, for the scheduler."""
        notebook = self.notebooks.notebook(uri)
        if notebook is not None:
            joined = self.joined(uri)
            return (notebook.version, joined.text, notebook_path(uri)) if joined is not None else None
        document = self.document(uri)
        if document is None:
            return None
        return document.version, document.source, document.path or ""

    def converter(self, text: str) -> Converter:
        return Converter(SourceText(text), self.workspace.position_codec)

    async def view(self, uri: str) -> Optional[DocumentView]:
        """What a request on ``uri`` works on: a file's current result, or a cell's notebook's."""
        notebook = self.notebooks.notebook_of_cell(uri)
        if notebook is not None:
            snap, result = await self.scheduler.result(notebook.uri)
            joined = self.current_joined(snap)
            return cell_view(uri, snap, result, joined, self.workspace.position_codec) if joined is not None else None
        if self.document(uri) is None:
            return None
        snap, result = await self.scheduler.result(uri)
        return DocumentView(uri, snap, result, self.converter(snap.text))

    # -- analysis (runs in the executor) ----------------------------------------------------
    def analyse(self, snap: Snapshot, wave: Wave) -> CheckResult:
        """One wave of the snapshot's analysis (the scheduler calls this, in an executor)."""
        if self.too_large(snap.text):  # parsing alone would hold the GIL (and every answer) for seconds
            return CheckResult([], ParseError("too large to analyse", Position(1, 0)))
        options = self.resolver.options_for(snap.path)
        path = snap.path or "untitled.py"
        layer = self.inference_layer(snap.path) if wave is Wave.JEDI else None
        if layer is None:  # the first wave (or no jedi layer: the first wave's result again)
            result = self.checker(snap.uri, path, Wave.NAMES).check(snap.text, options)
        else:
            with self.inference.lock:
                result = self.checker(snap.uri, path, Wave.JEDI).check(snap.text, options, layer)
            # jedi leaves tens of thousands of cyclic objects per edit: collected here, in the wave
            # that has time to spare, rather than whenever the count runs over, often in the
            # middle of the next edit's first wave.
            collection.collect_young()
        for error in result.internal_errors:
            self.log_error("internal error (a torchlint bug), other rules still ran: %s" % error)
        return result

    def checker(self, uri: str, path: str, wave: Wave) -> IncrementalChecker:
        """The document's checker of one wave (kept in its record between versions); a document
        closed meanwhile gets one of its own, dropped with this check."""
        record = self.documents.get(uri)
        return record.checker(wave, path) if record is not None else IncrementalChecker(path)

    def inference_layer(self, path: str) -> Optional[JediInference]:
        if not path:
            return None
        config = self.resolver.config_for(path)
        settings = self.resolver.settings
        interpreter = self.inference.choose(settings.interpreter, config.python, config.path,
                                            settings.trust_workspace_interpreter, settings.interpreter_source)
        return self.inference.layer(str(config.root), interpreter)

    # -- diagnostics (publishing.py, notebooks.py) ------------------------------------------
    def over_size_limit(self, snap: Snapshot, record: Optional[DocumentState]) -> bool:
        """Whether the text is too large to analyse (the user is told, once)."""
        shown = record.problems if record is not None else {}
        if not self.too_large(snap.text):
            self.messages.clear_problem("too large", shown)
            return False
        self.messages.notify_problem(
            "too large", "torchlint: %s is larger than %s (%d characters): not analysed"
            % (unquote(snap.uri.rsplit("/", 1)[-1]), editor_name(spec_of("max_file_size")),
               self.resolver.settings.max_file_size), types.MessageType.Info, shown)
        return True

    def shown_in_file(self, snap: Snapshot, result: CheckResult) -> Diagnostics:
        """A file's diagnostics for a current result (its record keeps those of the last text that parsed)."""
        record = self.documents.get(snap.uri)
        if self.over_size_limit(snap, record):
            if record is not None:
                record.last_good = []
            return []
        verified: Sequence[Finding] = []
        if result.parse_error is None and record is not None:
            # Read even when they travel apart: reading drops them (and clears them) once the text moved on.
            verified = self.verified(record, snap.version)
            if self.client.verification_apart:
                verified = []
        shown = file_diagnostics(snap, result, self.converter(snap.text),
                                 record.last_good if record is not None else [], verified)
        if record is not None and shown.parsed is not None:
            record.last_good = shown.parsed
        return shown.items

    def shown_in_cells(self, snap: Snapshot, result: CheckResult,
                       notebook: JoinedNotebook) -> Dict[str, Tuple[Optional[int], Diagnostics]]:
        """cell uri -> (cell version, diagnostics) for a notebook's current result (each cell's
        record keeps those of its last text that parsed)."""
        if self.over_size_limit(snap, self.documents.get(snap.uri)):
            return {cell_uri: (document.version, []) for _, cell_uri, document in notebook.cells}
        records = {cell_uri: self.documents.get(cell_uri) for _, cell_uri, _ in notebook.cells}
        per_cell = cell_diagnostics(snap, result, notebook, self.workspace.position_codec,
                                    {uri: record.last_good for uri, record in records.items() if record is not None})
        out = {}
        for cell_uri, (version, shown) in per_cell.items():
            record = records.get(cell_uri)
            if record is not None and shown.parsed is not None:
                record.last_good = shown.parsed
            out[cell_uri] = (version, shown.items)
        return out

    def pulled(self, uri: str) -> Optional[str]:
        record = self.documents.get(uri)
        return record.pulled if record is not None else None

    def publish(self, snap: Snapshot, result: CheckResult) -> None:
        """A wave is in for the current text (the scheduler calls this): push it, or have a pull
        client pull it."""
        later_wave = self.scheduler.is_later_wave(snap.uri)
        if self.notebooks.notebook(snap.uri) is None:
            publish_file(snap, self.client, later_wave, self.pulled(snap.uri),
                         lambda: self.shown_in_file(snap, result), self)
            return
        record, notebook = self.documents.get(snap.uri), self.current_joined(snap)
        if notebook is None or record is None:
            return
        per_cell = self.shown_in_cells(snap, result, notebook)
        record.sent = publish_cells(snap, self.client, later_wave, per_cell,
                                    {cell_uri: self.pulled(cell_uri) for cell_uri in per_cell}, record.sent, self)

    def republish(self, uri: str) -> None:
        """Show a document's diagnostics again (new verification results joined them)."""
        if self.client.pull:
            ask_to_pull(self.client, self.pulled(uri), None, self)
        elif self.document(uri) is not None:
            self.scheduler.schedule(uri, delay=0)

    def forget_cell(self, notebook: Optional[DocumentState], uri: str) -> None:
        """A notebook's cell closed (or the notebook did): its record goes, and what it showed."""
        self.documents.close(uri)
        if notebook is not None:
            notebook.sent.pop(uri, None)
        if not self.client.pull:
            self.push(uri, None, [])

    # -- verification (verification.py) ----------------------------------------------------
    def verified(self, record: DocumentState, version: Optional[int]) -> List[Finding]:
        """The verification's findings of the document at ``version``: none once its text moved
        on (the lines may no longer match), and then they are dropped."""
        verification = record.verification
        if verification is None:
            return []
        if verification.version != version:
            self.forget_verification(record)
            return []
        return verification.findings

    def forget_verification(self, record: DocumentState) -> None:
        if record.verification is not None and record.verification.pushed_apart:
            self.push(record.uri, None, [])  # clears what was pushed on its own
        record.verification = None

    def deliver_verification(self, uri: str, version: Optional[int], text: str,
                             by_class: Dict[Optional[str], List[Finding]], whole_file: bool) -> None:
        """A run's findings of (uri, version), by class: kept in the document's record (a run of
        one class replaces only that class's findings of the same text) and shown, with the
        document's diagnostics (pushed again, or the client asked to pull again), or pushed on
        their own to a client that pulls but cannot be asked to (ClientSupport.verification_apart).
        Dropped when the text changed during the run: they would land on the wrong lines."""
        record = self.documents.get(uri)
        document = self.document(uri)
        if document is not None and document.version != version:
            if record is not None:
                self.forget_verification(record)
            return
        apart = self.client.verification_apart
        earlier = record.verification if record is not None else None
        verification = earlier.after(by_class, whole_file, version, apart) if earlier is not None \
            else Verification(version, dict(by_class), apart)
        if record is not None:  # (pushed apart: the push below replaces the earlier push too)
            record.verification = verification
        if not apart:
            self.republish(uri)
        else:
            findings = verification.findings
            self.push(uri, version, self.converter(text).lsp_diagnostics(findings, uri) if findings else [])

    def note_inputs(self, uri: str, wanted: Dict[str, bool]) -> None:
        """Which classes of the document the lens asks inputs for, after a run (verification.py)."""
        record = self.documents.get(uri)
        if record is None:
            return
        needing = still_wanting(record.needing_inputs, wanted)
        if needing != record.needing_inputs:
            record.needing_inputs = needing
            self.refresh_code_lenses()

    def verify_services(self) -> VerifyServices:
        return VerifyServices(log=self.messages.log, show=self.messages.show, warn_once=self.inference.warn_once,
                              progress=self.work_done_progress, deliver=self.deliver_verification,
                              workspace_folders=self.workspace_folders, note_inputs=self.note_inputs,
                              runs=self.verify_runs)

    def workspace_folders(self) -> List[str]:
        """The folders the client opened as the workspace, and its root, as paths."""
        folders = [to_fs_path(folder.uri) for folder in self.workspace.folders.values()] + [self.workspace.root_path]
        return [folder for folder in folders if folder]

    async def stop(self) -> None:
        """``shutdown``: end the verifications in flight (their probes are killed, their progress
        ends; ``SHUTDOWN_WAIT_SECONDS`` at most), then the analyses scheduled or waiting for a
        thread and the lens scans. A check already under way runs to its end on its thread."""
        await self.verify_runs.stop(SHUTDOWN_WAIT_SECONDS)
        for record in self.documents:
            record.runs.stop()
        self.scheduler.invalidate()  # what still finishes is stale: never published
        self.lens_scans.close()
        self.collection_after_closing.cancel()
        for executor in (self.executor, self.inference_executor):
            executor.shutdown(wait=False, cancel_futures=True)

    def refresh(self) -> None:
        """Settings changed: analyse every open document again."""
        self.scheduler.invalidate()
        self.refresh_inlay_hints()
        if self.client.pull and self.client.refresh_support:
            self.ask_to_pull()
        # For a pull client too: a pull takes the first wave only, so the jedi wave runs from here.
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
            self.messages.notify_problem("settings", "Fix these torchlint settings: " + "; ".join(errors))
        else:
            self.messages.clear_problem("settings")
        if settings == self.resolver.settings:
            return False
        self.resolver.update(settings)
        self.inference.configure(settings)  # inferenceCache, inferBudget
        return True

    async def fetch_settings(self) -> bool:
        """Ask the client for the ``torchlint`` section; True if the settings changed."""
        if not self.client.config_support:
            return False
        values = await self.workspace_configuration_async(
            types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)]))
        # A client that knows no such section answers null: keep what initialize brought.
        return bool(values) and values[0] is not None and self.apply_settings(values[0])


# A request's or a notification's handler: the server and the params in, the answer out.
Handler = Callable[..., Any]


def guarded(server: TorchlintServer, default: Any = None) -> Callable[[Handler], Handler]:
    """A handler that logs its own failure and answers ``default`` instead of dying."""

    def decorate(handler: Handler) -> Handler:
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
            async def run_async(*args: Any) -> Any:
                try:
                    return await handler(*args)
                except asyncio.CancelledError:
                    raise
                except Exception as error:
                    return report(error)
            return run_async

        @functools.wraps(handler)
        def run(*args: Any) -> Any:
            try:
                return handler(*args)
            except Exception as error:
                return report(error)
        return run

    return decorate



# -- the handlers: each takes the server (pygls passes it) and the request's params ----------------

HandlerT = TypeVar("HandlerT", bound=Handler)
HANDLERS: List[Tuple[str, Any, Handler, Any]] = []  # (method, options, handler, answer on failure)


def handles(method: str, options: Any = None, default: Any = None) -> Callable[[HandlerT], HandlerT]:
    """Marks a module-level function as the handler of ``method`` (see create_server)."""
    def record(handler: HandlerT) -> HandlerT:
        HANDLERS.append((method, options, handler, default))
        return handler
    return record


# -- lifecycle and settings ------------------------------------------------------------------------

@handles(types.INITIALIZE)
def initialize(server: TorchlintServer, params: types.InitializeParams) -> None:
    server.loop = server.messages.loop = asyncio.get_running_loop()
    use_protocol_lines(server.workspace)
    server.client = ClientSupport.of(params.capabilities)
    if not server.client.pull:  # advertise pull diagnostics only to clients that pull
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


@handles(types.SHUTDOWN)
async def shutdown(server: TorchlintServer, params: None) -> None:
    await server.stop()


@handles(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def did_change_configuration(server: TorchlintServer, params: types.DidChangeConfigurationParams) -> None:
    # Clients send the new values, or nothing and expect the server to ask for them.
    settings = params.settings
    if isinstance(settings, dict) and isinstance(settings.get(SECTION), dict):
        server.apply_settings(settings[SECTION])
    elif server.client.config_support:
        await server.fetch_settings()
    elif settings is not None:
        server.apply_settings(settings)
    server.resolver.forget()  # pyproject.toml may have changed too
    server.refresh()


# -- text documents: pygls has applied the notification to its workspace before these run ---------

@handles(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(server: TorchlintServer, params: types.DidOpenTextDocumentParams) -> None:
    server.documents.open(params.text_document.uri)
    server.scheduler.schedule(params.text_document.uri, delay=0)


@handles(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(server: TorchlintServer, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    if server.document(uri) is None:
        lost_sync(server, uri)
    else:  # analysed as it comes for every client: a pull takes the first wave, the jedi wave follows
        record = server.documents.get(uri)
        if record is not None:
            server.messages.clear_problem("out of sync", record.problems)
        server.collection_after_closing.edited()
        server.scheduler.schedule(uri)


def lost_sync(server: TorchlintServer, uri: str) -> None:
    """An edit the document could not take: what the server has is not the editor's text,
    so nothing computed from it is shown (or offered as a fix) until it is sent whole."""
    document = server.workspace.text_documents.get(unquote(uri))
    record = server.documents.get(uri)
    if document is None or record is None or not getattr(document, "out_of_sync", None):
        return
    record.drop_results()
    server.forget_verification(record)
    server.messages.notify_problem(
        "out of sync", "torchlint lost track of %s (%s): its copy is out of sync with the editor's, so its "
        "diagnostics are cleared. Close and reopen the file." % (unquote(uri.rsplit("/", 1)[-1]), document.out_of_sync),
        types.MessageType.Error, record.problems)
    if server.client.pull:
        ask_to_pull(server.client, record.pulled, None, server)
    else:
        server.push(uri, document.version, [])


@handles(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(server: TorchlintServer, params: types.DidSaveTextDocumentParams) -> None:
    # jedi reads other modules from disk: what it told about any open document may change now.
    saved = params.text_document.uri
    # The documents whose classes' bases, or whose TL106 answers, were read from other files as
    # they were on disk: checked again, at their unchanged versions (their results dropped).
    saved_path = to_fs_path(saved) if saved.endswith(".py") else None
    dependents = server.inference.checks_reading(saved_path) if saved_path else set()
    for record in server.documents:
        record.checkers.pop(Wave.JEDI, None)
        if record.uri != saved and to_fs_path(record.uri) in dependents:
            record.runs.newest = None
            server.scheduler.schedule(record.uri, delay=0)
    if saved.endswith("/pyproject.toml"):
        server.resolver.forget()
        server.refresh()
    elif not server.client.pull:
        server.scheduler.schedule(saved, delay=0)


@handles(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(server: TorchlintServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    record = server.documents.close(uri)  # everything torchlint kept about it
    server.inference.forget(to_fs_path(uri))  # jedi's parse of its text
    server.closed(to_fs_path(uri))
    if record is not None:
        server.forget_verification(record)
    if not server.client.pull:
        server.push(uri, None, [])


# -- notebooks (notebooks.py) ----------------------------------------------------------------------

@handles(types.NOTEBOOK_DOCUMENT_DID_OPEN)
def did_open_notebook(server: TorchlintServer, params: types.DidOpenNotebookDocumentParams) -> None:
    server.documents.open(params.notebook_document.uri)
    for cell in params.cell_text_documents:
        server.documents.open(cell.uri)
    server.scheduler.schedule(params.notebook_document.uri, delay=0)


@handles(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
def did_change_notebook(server: TorchlintServer, params: types.DidChangeNotebookDocumentParams) -> None:
    uri = params.notebook_document.uri
    structure = params.change.cells.structure if params.change.cells is not None else None
    if structure is not None:
        for closed in structure.did_close or []:
            server.forget_cell(server.documents.get(uri), closed.uri)
        for opened in structure.did_open or []:
            server.documents.open(opened.uri)
    server.collection_after_closing.edited()
    server.scheduler.schedule(uri)


@handles(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
def did_close_notebook(server: TorchlintServer, params: types.DidCloseNotebookDocumentParams) -> None:
    notebook = server.documents.close(params.notebook_document.uri)
    for cell in params.cell_text_documents:
        server.forget_cell(notebook, cell.uri)
    server.closed(notebook_path(params.notebook_document.uri))


# -- diagnostics (publishing.py) -------------------------------------------------------------------

@handles(types.TEXT_DOCUMENT_DIAGNOSTIC,
         types.DiagnosticOptions(identifier="torchlint", inter_file_dependencies=False, workspace_diagnostics=False),
         types.RelatedFullDocumentDiagnosticReport(items=[]))
async def diagnostic(server: TorchlintServer, params: types.DocumentDiagnosticParams) -> PullReport:
    uri = params.text_document.uri
    notebook = server.notebooks.notebook_of_cell(uri)
    if notebook is None and server.document(uri) is None:
        return types.RelatedFullDocumentDiagnosticReport(items=[])
    what = "document" if notebook is None else "notebook"
    try:
        # The freshest result of this version, never held for the jedi wave: that one reaches a
        # client by refresh, or at its next pull (a result id that changes with it).
        snap, result = await server.scheduler.result(uri if notebook is None else notebook.uri)
    except Stale:
        raise changed_while_analysed(what)
    if notebook is None:
        items = server.shown_in_file(snap, result)
    else:  # a cell: its part of the notebook's result
        joined = server.current_joined(snap)
        if joined is None:
            raise changed_while_analysed(what)
        items = next((items for cell_uri, (_, items) in server.shown_in_cells(snap, result, joined).items()
                      if unquote(cell_uri) == unquote(uri)), [])
    report, identifier = pull_report(snap, items, params.previous_result_id)
    record = server.documents.get(uri)
    if record is not None:
        record.pulled = identifier
    return report


# -- requests on a position or range: answered from the current result, through a view -------------

@handles(types.TEXT_DOCUMENT_HOVER)
async def hover(server: TorchlintServer, params: types.HoverParams) -> Optional[types.Hover]:
    view = await server.view(params.text_document.uri)
    if view is None:
        return None
    record = server.documents.get(view.snap.uri)
    # Verification results belong to files, not to a notebook's cells.
    verified = server.verified(record, view.snap.version) if record is not None and view.uri == view.snap.uri else []
    return await hover_card_at(view, params.position, verified, server.client.markdown, server.scheduler.run)


@handles(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(), [])
async def inlay_hint(server: TorchlintServer, params: types.InlayHintParams) -> List[types.InlayHint]:
    if not server.resolver.settings.inlay_hints:
        return []
    view = await server.view(params.text_document.uri)
    if view is None:
        return []
    return await inlay_hints(view, params.range, server.client.markdown, server.scheduler.run)


@handles(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(code_action_kinds=CODE_ACTION_KINDS), [])
async def code_action(server: TorchlintServer, params: types.CodeActionParams) -> List[types.CodeAction]:
    view = await server.view(params.text_document.uri)
    if view is None:
        return []
    return await code_actions(view, params.range, params.context.diagnostics, params.context.only,
                              server.client.document_changes,
                              server.resolver.options_for(view.snap.path), server.scheduler.run,
                              server.scheduler.is_current, server.log_error)


# -- verification (verification.py) ----------------------------------------------------------------

@handles(types.TEXT_DOCUMENT_CODE_LENS, None, [])
async def code_lens(server: TorchlintServer, params: types.CodeLensParams) -> List[types.CodeLens]:
    uri = params.text_document.uri
    document = server.document(uri)
    settings = server.resolver.settings
    if document is None or server.too_large(document.source) or not settings.code_lens:
        return []
    record = server.documents.get(uri)
    needing_inputs = record.needing_inputs if record is not None else frozenset()
    # Finding the Module classes parses the text: never on the event loop.
    return await server.scheduler.run(code_lenses, uri, document.source, document.path or "", settings.verify_device,
                                      server.resolver.config_for, server.lens_scans, needing_inputs)


async def verify(server: TorchlintServer, *args: Any) -> Dict[str, Any]:
    """``torchlint.verifyModule``: not guarded, commands take their arguments spread out."""
    try:
        return await verify_module(args, server.open_text, server.resolver.settings, server.resolver.config_for,
                                   server.verify_services())
    except Exception:
        server.log_error("%s failed: %s" % (VERIFY_COMMAND, traceback.format_exc()))
        return {"error": "internal error: see the torchlint log"}


def create_server() -> TorchlintServer:
    """A server with every handler of this module on it."""
    server = TorchlintServer()
    for method, options, handler, default in HANDLERS:
        server.feature(method, options)(guarded(server, default)(handler))
    server.command(VERIFY_COMMAND)(verify)
    return server


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Serve LSP on stdio. stdout carries LSP frames only: anything else printed goes to stderr."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="torchlint-lsp %(levelname)s %(message)s")
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr
    server = create_server()
    server.frames = ResyncingReader(stdin)
    server.start_io(server.frames, stdout)  # type: ignore[arg-type]  # (pygls only reads lines and bytes)
    return 0
