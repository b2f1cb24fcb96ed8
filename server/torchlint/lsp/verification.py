"""The editor side of runtime verification: the code lens above each Module class and the
``torchlint.verifyModule`` command (work-done progress, cancellable).

The command runs the module in a child process of the workspace's Python (verify.runner);
this process never imports torch. Its findings (source "torchlint-verify") are shown with
the document's other diagnostics until the document changes.

The lens says "Verify", and "Verify on cuda" only when the run will use CUDA: the
``verify.device`` setting names it, or it is ``auto`` and this machine has an NVIDIA driver
(/proc/driver/nvidia or /dev/nvidiactl: a cheap look, no torch). A class whose
``__init__`` requires arguments that no call site, factory or ``[tool.torchlint.verify]``
entry of its file supplies gets "Verify (needs dim, depth)" with ``needsArguments`` in the
command's argument: VS Code asks for them; other editors pass ``initKwargs``. Meanwhile the
project scan the run does (call sites and factories in the package's other files, tests
folders, other files' ``__main__`` blocks) runs on a thread of its own (:class:`ProjectScans`);
when it finds the arguments, the lens says "Verify" and the client is asked to refresh lenses.

A class whose last run in the editor skipped the gradient checks for want of example inputs
("partly verified") gets "Verify (needs inputs)" with ``needsInputs`` (the inputs forward
requires, by name) in the argument: VS Code asks for their shapes; other editors pass
``inputShapes`` or ``inputs``, which reach the runner as the command line's ``--input-shape``
and ``--input``. Only a run says so: whether the probe's guesses (the first layer forward
applies, every layer's stated size, the project's calls, hooks, factories, the inputs another
class of the file passes it) fit forward depends on the built module, which this process
never imports; a guess made from the text alone would ask for inputs the run does not need.
The document's record keeps those classes across edits (its next run of a class says again),
until it closes.

Nothing here holds the server: a lens is computed from the document's text and settings
(:func:`code_lenses`), and a run (:func:`verify_module`) gets what it reads as arguments and
what it needs of the server as :class:`VerifyServices`; its findings go back through
``VerifyServices.deliver``, which keeps them in the document's record (``lsp/state.py``).
"""
from __future__ import annotations

import ast
import asyncio
import json
import os
import threading
import time
import uuid
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Sequence, Set, Tuple, Union
from urllib.parse import unquote, urlparse

from lsprotocol import types

from ..analysis.context import FileContext
from ..analysis.parsing import parse
from ..environments import SERVER_HINT
from ..analysis.findings import Finding
from ..config import Config, VerifyConfig
from ..settings import Settings, editor_name, spec_of
from ..verify.findings import findings_by_class
from ..verify.report import CANCELLED, ERROR, PARTLY, VerifyReport, render_json, summary_line
from ..verify.targets import ImportPlan, candidate_files, find_constructors, import_plan, required_arguments
from ..verify.runner import (VerifyError, parse_init_kwargs, parse_input_exprs, parse_input_shapes, resolve_python,
                             verify_file)

VERIFY_COMMAND = "torchlint.verifyModule"


NVIDIA_DRIVER_FILES = ("/proc/driver/nvidia", "/dev/nvidiactl")
EDITOR_WAY = ("in VS Code the lens \"Verify (needs ...)\" asks for them; other editors pass initKwargs "
              "(\"dim=64, depth=2\") in the %s argument; on the command line, "
              "--init-kwargs 'dim=64, depth=2'" % VERIFY_COMMAND)
INPUTS_WAY = ("in VS Code the lens \"Verify (needs inputs)\" asks for their shapes; other editors pass inputShapes "
              "([\"2,16\"], one per input of forward) or inputs ([\"torch.randn(2, 16)\"]) in the "
              "%s argument; on the command line, --input-shape 2,16 or --input 'torch.randn(2, 16)'" % VERIFY_COMMAND)


def module_classes(text: str, path: str) -> List[Tuple[str, int, int]]:
    """(name, 1-based line, column of the name) of every nn.Module class the file defines."""
    return [(name, line, column) for name, line, column, _, _ in _classes(text, path)]


# A Module class of a file: (name, line, column, required __init__ arguments or None when unknown,
# forward's inputs).
ModuleClass = Tuple[str, int, int, Optional[List[str]], List[str]]


def _classes(text: str, path: str) -> List[ModuleClass]:
    """(name, line, column, required __init__ arguments or None when unknown, forward's inputs)
    per Module class."""
    tree, _ = parse(text, path or "untitled.py")
    if tree is None:
        return []
    ctx = FileContext(text, path or "untitled.py", tree)
    classes: List[ModuleClass] = []
    for info in ctx.module_classes:
        line = info.node.lineno
        column = max(ctx.source.line(line).find(info.name), 0)
        classes.append((info.name, line, column, required_arguments(ctx, info), forward_inputs(info.node)))
    return classes


def forward_inputs(node: ast.ClassDef) -> List[str]:
    """The names of the inputs the class's own ``forward`` requires (positional, without a
    default), one box each for the editor to ask; ``["input"]`` when nothing names them
    (``forward(self, *args)``, an inherited forward)."""
    for statement in node.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name == "forward":
            positional = statement.args.posonlyargs + statement.args.args
            required = positional[:len(positional) - len(statement.args.defaults)]
            names = [argument.arg for argument in required[1:]]  # after self
            return names or ["input"]
    return ["input"]


def lens_device(device: str) -> Optional[str]:
    """The CUDA device a verification will use, or None (the CPU, or not known to be CUDA)."""
    if device.startswith("cuda"):
        return device
    if device == "auto" and any(os.path.exists(p) for p in NVIDIA_DRIVER_FILES):
        return "cuda"
    return None


LENS_SCAN_SECONDS = 10.0  # one project scan's reading: a huge workspace gets a partial answer, never a hang
LENS_SCAN_ANSWERS = 256  # kept per server, the least recently asked dropped first


@dataclass(frozen=True)
class _ScanAnswer:
    fingerprint: Tuple[Any, ...]  # the import plan, and (path, mtime, size) of every file the scan read
    needing: FrozenSet[str]  # the classes it found no way to build


def _fingerprint(plan: ImportPlan, paths: Sequence[str]) -> Tuple[Any, ...]:
    stats: List[Tuple[str, Optional[int], Optional[int]]] = []
    for path in paths:
        try:
            status = os.stat(path)
            stats.append((path, status.st_mtime_ns, status.st_size))
        except OSError:
            stats.append((path, None, None))
    return (plan, tuple(stats))


# What a lens scan answers for: (workspace root, file, classes, the [tool.torchlint.verify] table).
_ScanKey = Tuple[str, str, FrozenSet[str], VerifyConfig]


class ProjectScans:
    """The project scan behind the code lens (``find_constructors`` over the package, its tests
    and other files' ``__main__`` blocks), never on the event loop nor on the threads that
    compute diagnostics: one thread of its own. An answer is kept per workspace, file and
    classes, and reused until a file it read changes size or modification time, or a file
    appears or goes (each request queues a cheap check of that: a walk and a stat per file;
    a new scan only when they differ). ``on_change`` is called, from that thread, when an
    answer differs from what the lens showed before it (the server then asks the client to
    request lenses again, when it can be asked)."""

    def __init__(self, on_change: Callable[[], None], report: Callable[[str], None] = lambda message: None,
                 seconds: float = LENS_SCAN_SECONDS):
        self._on_change = on_change
        self._report = report
        self._seconds = seconds
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="torchlint-lens-scan")
        self._lock = threading.Lock()  # lenses are computed on several threads
        self._answers: "OrderedDict[_ScanKey, _ScanAnswer]" = OrderedDict()
        self._queued: Set[_ScanKey] = set()

    def close(self) -> None:
        """Drop the checks not started; the one under way ends within its time limit."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    def needing(self, path: str, names: Sequence[str], workspace_root: str,
                verify_config: VerifyConfig) -> Optional[FrozenSet[str]]:
        """Which of ``names`` the last scan found no way to build (None: no answer yet, the
        lens shows what the file alone says), and a check queued."""
        key = (workspace_root, path, frozenset(names), verify_config)
        with self._lock:
            answer = self._answers.get(key)
            if answer is not None:
                self._answers.move_to_end(key)
            if key not in self._queued:
                try:
                    self._executor.submit(self._check, key)
                except RuntimeError:  # closed: the server is shutting down
                    return None if answer is None else answer.needing
                self._queued.add(key)
        return None if answer is None else answer.needing

    def _check(self, key: _ScanKey) -> None:
        workspace_root, path, names, verify_config = key
        with self._lock:  # from now on a request queues the next check (a file may change under this one)
            self._queued.discard(key)
        fingerprint = None
        try:
            deadline = time.monotonic() + self._seconds
            plan = import_plan(path, workspace_root, verify_config.import_roots, verify_config.extra_paths)
            sites = candidate_files(path, plan, workspace_root, deadline)
            # Taken before reading: a file changed during the scan makes the next check scan again.
            fingerprint = _fingerprint(plan, [path] + [site for site, _ in sites])
            with self._lock:
                previous = self._answers.get(key)
            if previous is not None and previous.fingerprint == fingerprint:
                return
            found = find_constructors(path, sorted(names), plan, workspace_root, verify_config,
                                      sites=sites, deadline=deadline)
            if time.monotonic() > deadline:
                self._report("torchlint: the code lens's search for %s's constructor arguments stopped after "
                             "%g s; files it did not reach are left out" % (", ".join(sorted(names)), self._seconds))
            needing = frozenset(name for name in names if not found.get(name))
        except Exception as err:  # noqa: BLE001 - the lens keeps what the file alone says
            self._report("torchlint: searching the project for %s's constructor arguments failed: %r"
                         % (", ".join(sorted(names)), err))
            if fingerprint is None:
                return
            needing = names  # kept as an answer: not tried again until a file it read changes
        with self._lock:
            self._answers[key] = _ScanAnswer(fingerprint, needing)
            self._answers.move_to_end(key)
            while len(self._answers) > LENS_SCAN_ANSWERS:
                self._answers.popitem(last=False)
        if needing != (previous.needing if previous is not None else names):  # what the lens showed
            self._on_change()


def _needing_arguments(classes: Sequence[ModuleClass], path: str, config: Config,
                       scans: Optional[ProjectScans] = None) -> Dict[str, List[str]]:
    """Class -> the arguments it still needs: required, and nothing in its own file, the
    configuration or (once ``scans`` has answered) the rest of the project supplies them."""
    waiting = {name: required for name, _, _, required, _ in classes if required}
    if not waiting or not path or not os.path.isfile(path):
        return waiting
    verify_config = config.verify
    try:
        plan = import_plan(path, str(config.root), verify_config.import_roots, verify_config.extra_paths)
        found = find_constructors(path, list(waiting), plan, workspace_root=str(config.root), recipes=verify_config,
                                  scan_project=False)
    except (RecursionError, MemoryError, OSError, ValueError):
        return waiting
    waiting = {name: required for name, required in waiting.items() if not found.get(name)}
    if waiting and scans is not None:
        needing = scans.needing(os.path.abspath(path), sorted(waiting), str(config.root), verify_config)
        if needing is not None:
            waiting = {name: required for name, required in waiting.items() if name in needing}
    return waiting


def code_lenses(uri: str, text: str, path: str, verify_device: str, config_for: Callable[[str], Config],
                scans: Optional[ProjectScans], needing_inputs: FrozenSet[str] = frozenset()) -> List[types.CodeLens]:
    """A lens above each Module class of the document (``text``, at ``path`` on disk or ""):
    ``verify_device`` is the setting, ``config_for`` the configuration of a path,
    ``needing_inputs`` the classes whose last run wanted example inputs (the document's record).
    Off the loop: it parses the text."""
    cuda = lens_device(verify_device)
    title = "Verify on %s" % cuda if cuda else "Verify"
    classes = _classes(text, path)
    waiting = _needing_arguments(classes, path, config_for(path), scans) if classes else {}
    return [_lens(uri, title, name, line, column, waiting.get(name), inputs if name in needing_inputs else None)
            for name, line, column, _, inputs in classes]


def _lens(uri: str, title: str, name: str, line: int, column: int, needs: Optional[List[str]],
          inputs: Optional[List[str]] = None) -> types.CodeLens:
    """The lens of one class (1-based ``line``), on its name: ``needs``, the ``__init__`` arguments
    nothing supplies, and ``inputs``, forward's inputs when the last run found none that fit;
    the command's argument carries them for the editor to ask for."""
    position = types.Position(line=line - 1, character=column)
    argument: Dict[str, Any] = {"uri": uri, "className": name}
    wanted = list(needs or [])
    if needs:
        argument["needsArguments"] = needs
    if inputs:
        argument["needsInputs"] = inputs
        wanted.append("inputs")
    text = "%s (needs %s)" % (title, ", ".join(wanted)) if wanted else title
    return types.CodeLens(
        range=types.Range(start=position, end=types.Position(line=line - 1, character=column + len(name))),
        command=types.Command(title=text, command=VERIFY_COMMAND, arguments=[argument]))


def parse_arguments(args: Tuple[Any, ...]) -> Dict[str, Any]:
    """`{uri, className?, device?, initKwargs?, inputShapes?, inputs?}` (or uri, className, device
    positionally); ValueError says what is wrong. ``initKwargs``: an object, or Python keyword
    arguments of literals as text (``"dim=64, depth=2"``, read with ast.literal_eval, never
    evaluated). forward's inputs, as the command line's flags take them: ``inputShapes``, one
    shape per input (``["2,3,32,32", "2,8:long"]``, or one text with ``;`` between them:
    --input-shape), or ``inputs``, one Python expression per input (``["torch.randn(2, 16)"]``:
    --input; checked for syntax here, evaluated in the child only)."""
    if len(args) == 1 and isinstance(args[0], dict):
        raw = args[0]
    elif args and all(isinstance(a, (str, type(None))) for a in args) and len(args) <= 3:
        raw = dict(zip(("uri", "className", "device"), args))
    else:
        raise ValueError("expected one argument {uri, className?, device?, initKwargs?, inputShapes?, inputs?}, "
                         "got %r" % (args,))
    uri, class_name, device = raw.get("uri"), raw.get("className"), raw.get("device")
    if not isinstance(uri, str) or not uri:
        raise ValueError("`uri` must be a document uri")
    if class_name is not None and (not isinstance(class_name, str) or not class_name.isidentifier()):
        raise ValueError("`className` must be a class name, got %r" % (class_name,))
    if device is not None and not isinstance(device, str):
        raise ValueError("`device` must be auto, cpu, cuda or cuda:N")
    init_kwargs = raw.get("initKwargs")
    if init_kwargs is not None:
        if not isinstance(init_kwargs, (str, dict)) or (
                isinstance(init_kwargs, dict) and not all(isinstance(k, str) and k.isidentifier()
                                                          for k in init_kwargs)):
            raise ValueError("`initKwargs` must be an object of argument names, or text like \"dim=64, depth=2\"")
        try:
            init_kwargs = parse_init_kwargs(init_kwargs)
        except VerifyError as err:
            raise ValueError("`initKwargs`: %s" % err) from None
    shapes, expressions = raw.get("inputShapes"), raw.get("inputs")
    if shapes is not None and expressions is not None:
        raise ValueError("give `inputShapes` or `inputs`, not both (an input's shape can be written as "
                         "an expression: torch.randn(2, 16))")
    if shapes is not None:
        if not (isinstance(shapes, str) or _texts(shapes)):
            raise ValueError("`inputShapes` must be a list of shapes, one per input of forward, like [\"2,16\"]")
        try:
            parse_input_shapes(shapes)  # checked here; the runner reads them
        except VerifyError as err:
            raise ValueError("`inputShapes`: %s" % err) from None
    if expressions is not None:
        if not _texts(expressions):
            raise ValueError("`inputs` must be a list of Python expressions, one per input of forward, "
                             "like [\"torch.randn(2, 16)\"]")
        try:
            expressions = parse_input_exprs(expressions)
        except VerifyError as err:
            raise ValueError("`inputs`: %s" % err) from None
    return {"uri": uri, "class_name": class_name, "device": device, "init_kwargs": init_kwargs,
            "input_shapes": shapes, "input_exprs": expressions}


def _texts(value: Any) -> bool:
    """A non-empty list of strings."""
    return isinstance(value, list) and bool(value) and all(isinstance(item, str) for item in value)


def path_of(uri: str) -> Optional[str]:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else None


class VerifyRuns:
    """The verifications in flight, so that the server's ``shutdown`` ends them (their probes,
    their progress) instead of waiting for their timeouts; once stopped, a run is cancelled as it
    starts. Used on the event loop."""

    def __init__(self) -> None:
        self._running: Dict[threading.Event, "asyncio.Future[None]"] = {}  # a run's cancel -> its end
        self.stopped = False

    def track(self, cancel: threading.Event) -> None:
        """A run starts; ``cancel`` ends it (set at once when the server is stopping)."""
        if self.stopped:
            cancel.set()
        self._running[cancel] = asyncio.get_running_loop().create_future()

    def ended(self, cancel: threading.Event) -> None:
        """The run is over: its child reaped, its progress ended."""
        end = self._running.pop(cancel, None)
        if end is not None and not end.done():
            end.set_result(None)

    async def stop(self, seconds: float) -> None:
        """Cancel every run and wait, ``seconds`` at most, for them to be over."""
        self.stopped = True
        for cancel in self._running:
            cancel.set()
        if self._running:
            await asyncio.wait(list(self._running.values()), timeout=seconds)


@dataclass(frozen=True)
class VerifyServices:
    """What a run needs of the server."""

    log: Callable[[str, types.MessageType], None]  # window/logMessage
    show: Callable[[str, types.MessageType], None]  # window/showMessage, and logged
    warn_once: Callable[[str], None]  # a warning the user sees once per text
    progress: Any  # pygls' work-done progress (create_async, begin, end, tokens)
    # Shows a run's findings of (uri, version, text) with the document's diagnostics and keeps
    # them for that version (dropped as stale when the document is no longer at it).
    # (uri, version, text, findings by class, whether the run was of the whole file)
    deliver: Callable[[str, Optional[int], str, Dict[Optional[str], List[Finding]], bool], None]
    # The folders open as the workspace (and its root): the only places a run's file may be in.
    workspace_folders: Callable[[], List[str]]
    # Keeps, for the lens of the document at uri, which of a run's classes want example inputs
    # (class -> True) and which got them (False).
    note_inputs: Callable[[str, Dict[str, bool]], None] = lambda uri, wanted: None
    runs: VerifyRuns = field(default_factory=VerifyRuns)  # the server's runs in flight


def in_workspace(path: str, folders: Sequence[str]) -> bool:
    """Whether ``path``, its links followed, is in one of ``folders`` (theirs followed too)."""
    real = os.path.realpath(path)
    return any(real == folder or real.startswith(os.path.join(folder, ""))
               for folder in (os.path.realpath(f) for f in folders if f))


async def verify_module(args: Tuple[Any, ...], open_text: Callable[[str], Optional[Tuple[str, Optional[int]]]],
                        settings: Settings, config_for: Callable[[str], Config],
                        services: VerifyServices) -> Dict[str, Any]:
    """Run the verification the command's ``args`` ask for; answers the report as JSON-ready data
    (or {"error": ...}). ``open_text``: (text, version) of an open document, None for one that is
    not open (its file is read)."""
    try:
        request = parse_arguments(args)
    except ValueError as err:  # shown: the user may have typed it (the arguments prompt)
        services.show("torchlint verify: %s" % err, types.MessageType.Error)
        return {"error": str(err)}
    uri = request["uri"]
    document = _document(uri, open_text, services.workspace_folders)
    if isinstance(document, str):
        services.show(document, types.MessageType.Error)
        return {"error": document}
    path, text = document.path, document.text
    config = config_for(path)
    device = request["device"] or settings.verify_device
    target = request["class_name"] or os.path.basename(path)

    cancel = threading.Event()
    try:  # a repository-named interpreter runs only with the user's trustWorkspaceInterpreter
        python = resolve_python(settings.interpreter, config.python, config.path,
                                settings.trust_workspace_interpreter, SERVER_HINT,
                                warn=lambda message: services.warn_once("torchlint verify: %s" % message))
    except VerifyError as err:
        services.show("torchlint verify: %s" % err, types.MessageType.Error)
        return {"error": str(err)}
    token = await _begin_progress(services.progress, target, python, cancel)
    try:
        report = await _run_tracked(services, token, cancel, lambda: verify_file(
            path, request["class_name"], device, settings.verify_timeout, init_kwargs=request["init_kwargs"],
            input_shapes=request["input_shapes"], input_exprs=request["input_exprs"], python=python,
            cancel_event=cancel, cwd=str(config.root), workspace_root=str(config.root),
            verify_config=config.verify, memory_share=settings.verify_memory_share))
    except VerifyError as err:  # shown by _run_tracked
        return {"error": str(err)}
    services.deliver(uri, document.version, text, findings_by_class(report, text, path), request["class_name"] is None)
    services.note_inputs(uri, inputs_wanted(report))
    services.log("torchlint verify %s: %s" % (target, summary_line(report)), types.MessageType.Info)
    _tell_what_to_do(services, report, target, python,
                     given_inputs=bool(request["input_shapes"] or request["input_exprs"]))
    answer: Dict[str, Any] = json.loads(render_json(report))
    return answer


@dataclass(frozen=True)
class _Document:
    """The file a run verifies, and the text (and version) its findings are shown for."""
    path: str
    text: str
    version: Optional[int]  # None: the file on disk, not an open document


def _document(uri: str, open_text: Callable[[str], Optional[Tuple[str, Optional[int]]]],
              workspace_folders: Callable[[], List[str]]) -> Union[_Document, str]:
    """The file ``uri`` names, with the open document's text (else the file's); or why it is not
    run (a message for the user)."""
    path = path_of(uri)
    if path is not None and not in_workspace(path, workspace_folders()):
        # A run imports the file: only a file in the workspace the user opened (and, in VS Code,
        # trusted: the extension disables the command in an untrusted one) is ever run.
        return ("%s refused: %s is not in the workspace's folders (%s); verification runs the file's code, "
                "so it runs only files in a folder open as the workspace" % (
                    VERIFY_COMMAND, path, ", ".join(workspace_folders()) or "none is open"))
    opened = open_text(uri)
    if path is None or not os.path.isfile(path):
        return "%s: %s is not a file on disk (save it first)" % (VERIFY_COMMAND, uri)
    if opened is not None:
        text, version = opened
    else:
        with open(path, "rb") as handle:
            text, version = handle.read().decode("utf-8", "replace"), None
    return _Document(path, text, version)


async def _begin_progress(progress: Any, target: str, python: str, cancel: threading.Event) -> Optional[str]:
    """The run's work-done progress, begun; cancelling it sets ``cancel``. Its token, or None for a
    client without work-done progress (the run goes without)."""
    token = str(uuid.uuid4())
    try:
        await progress.create_async(token)
        progress.begin(token, types.WorkDoneProgressBegin(
            title="torchlint: verifying %s" % target, message="running it in %s" % python,
            cancellable=True))
        future = progress.tokens.get(token)
        if future is not None:
            future.add_done_callback(lambda f: cancel.set() if f.cancelled() else None)
    except Exception:  # a client without work-done progress: run without it
        return None
    return token


async def _run_tracked(services: VerifyServices, token: Optional[str], cancel: threading.Event,
                       run: Callable[[], VerifyReport]) -> VerifyReport:
    """``run`` on an executor's thread, among the server's runs in flight (``cancel`` ends it);
    its progress (``token``) ends with the report's summary line, or what stopped it. A
    VerifyError is shown to the user before the progress ends, then raised."""
    loop = asyncio.get_running_loop()
    ended = "stopped"  # what the progress says at its end, whatever ends the run
    services.runs.track(cancel)
    try:
        report = await loop.run_in_executor(None, run)
        ended = summary_line(report)
    except VerifyError as err:
        ended = str(err)
        services.show("torchlint verify: %s" % err, types.MessageType.Error)
        raise
    except asyncio.CancelledError:  # the request was cancelled or the server is stopping: end the probe too
        cancel.set()
        raise
    finally:
        if token is not None:
            services.progress.end(token, types.WorkDoneProgressEnd(message=ended))
        services.runs.ended(cancel)
    return report


def _tell_what_to_do(services: VerifyServices, report: VerifyReport, target: str, python: str,
                     given_inputs: bool = False) -> None:
    """What the user can act on, as a visible message (a log line goes unseen; an answer with an
    error is one the client shows nothing more of). ``given_inputs``: the command carried forward's
    inputs (VS Code sends the remembered ones without asking)."""
    if report.outcome == ERROR and report.error_kind == "no_torch":
        services.show("torchlint verify: %s has no torch, so it cannot run your module. Pick an interpreter "
                      "that has torch: the \"%s\" setting (in VS Code also the Python extension's \"Python: "
                      "Select Interpreter\"), or install torch there (%s -m pip install torch)."
                      % (python, editor_name(spec_of("interpreter")), python), types.MessageType.Error)
        return
    if report.error and report.outcome != CANCELLED:  # (the user cancelled it: nothing to say)
        services.show("torchlint verify %s: %s" % (target, report.error), types.MessageType.Error)
        return
    skipped = [cls for cls in report.skipped if cls.skip_reason and "argument" in cls.skip_reason]
    if skipped:
        names = ", ".join(cls.name for cls in skipped)
        message = "torchlint verify: %s not built: %s (%s)." % (names, skipped[0].skip_reason, EDITOR_WAY)
        services.show(message, types.MessageType.Warning)
    partly = report.partly_verified
    if partly:
        names = ", ".join(cls.name for cls in partly)
        message = "torchlint verify: %s partly verified: %s; give forward's inputs to run them (%s)." % (
            names, partly[0].partial_reason or "gradients skipped", INPUTS_WAY)
        services.show(message, types.MessageType.Warning)
    failed = [cls for cls in report.classes if cls.status == "failed" and cls.inputs]
    if given_inputs and failed:
        message = "torchlint verify: %s failed with the inputs given: %s (in VS Code, \"torchlint: Forget " \
                  "remembered verify inputs\" makes the lens ask for them again)." % (
                      ", ".join(cls.name for cls in failed), failed[0].inputs)
        services.show(message, types.MessageType.Warning)


def inputs_wanted(report: VerifyReport) -> Dict[str, bool]:
    """Class -> whether its gradient checks were skipped for want of inputs that fit forward
    (only the classes the run built: one it could not build says nothing of its inputs)."""
    return {cls.name: cls.status == PARTLY for cls in report.verified}


def still_wanting(before: FrozenSet[str], wanted: Dict[str, bool]) -> FrozenSet[str]:
    """The classes that want inputs after a run: ``before``, updated with what the run said."""
    return frozenset(name for name in set(before) | set(wanted) if wanted.get(name, name in before))
