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
command's argument: VS Code asks for them; other editors pass ``initKwargs``.
"""
from __future__ import annotations

import asyncio
import json
import os
import threading
import uuid
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import unquote, urlparse

from lsprotocol import types

from ..analysis.context import FileContext
from ..analysis.parsing import parse
from ..analysis.environments import SERVER_HINT
from ..analysis.findings import Finding
from ..verify.findings import report_to_findings
from ..verify.report import ERROR, render_json, summary_line
from ..verify.targets import find_constructors, required_arguments
from ..verify.runner import VerifyError, parse_init_kwargs, resolve_python, verify_file

VERIFY_COMMAND = "torchlint.verifyModule"


NVIDIA_DRIVER_FILES = ("/proc/driver/nvidia", "/dev/nvidiactl")
EDITOR_WAY = ("in VS Code the lens \"Verify (needs ...)\" asks for them; other editors pass initKwargs "
              "(\"dim=64, depth=2\") in the torchlint.verifyModule argument; on the command line, "
              "--init-kwargs 'dim=64, depth=2'")


def module_classes(text: str, path: str) -> List[Tuple[str, int, int]]:
    """(name, 1-based line, column of the name) of every nn.Module class the file defines."""
    return [(name, line, column) for name, line, column, _ in _classes(text, path)]


def _classes(text: str, path: str):
    """(name, line, column, required __init__ arguments or None when unknown) per Module class."""
    tree, _ = parse(text, path or "untitled.py")
    if tree is None:
        return []
    ctx = FileContext(text, path or "untitled.py", tree)
    classes = []
    for info in ctx.module_classes:
        line = info.node.lineno
        column = max(ctx.source.line(line).find(info.name), 0)
        classes.append((info.name, line, column, required_arguments(ctx, info)))
    return classes


def lens_device(device: str) -> Optional[str]:
    """The CUDA device a verification will use, or None (the CPU, or not known to be CUDA)."""
    if device.startswith("cuda"):
        return device
    if device == "auto" and any(os.path.exists(p) for p in NVIDIA_DRIVER_FILES):
        return "cuda"
    return None


def _needing_arguments(classes, path: str, config) -> Dict[str, List[str]]:
    """Class -> the arguments it still needs: required, and nothing in its own file or the
    configuration supplies them (the package scan is left to the run: too slow per lens)."""
    waiting = {name: required for name, _, _, required in classes if required}
    if not waiting or not path or not os.path.isfile(path):
        return waiting
    try:
        found = find_constructors(path, list(waiting), workspace_root=str(config.root), recipes=config.verify,
                                  scan_project=False)
    except (RecursionError, MemoryError, OSError, ValueError):
        return waiting
    return {name: required for name, required in waiting.items() if not found.get(name)}


def code_lenses(server, uri: str) -> List[types.CodeLens]:
    document = server.document(uri)
    if document is None or not server.resolver.settings.code_lens:
        return []
    cuda = lens_device(server.resolver.settings.verify_device)
    title = "Verify on %s" % cuda if cuda else "Verify"
    path = document.path or ""
    classes = _classes(document.source, path)
    waiting = _needing_arguments(classes, path, server.resolver.config_for(path)) if classes else {}
    lenses = []
    for name, line, column, _ in classes:
        position = types.Position(line=line - 1, character=column)
        argument: Dict[str, Any] = {"uri": uri, "className": name}
        text = title
        if name in waiting:
            argument["needsArguments"] = waiting[name]
            text = "%s (needs %s)" % (title, ", ".join(waiting[name]))
        lenses.append(types.CodeLens(
            range=types.Range(start=position, end=types.Position(line=line - 1, character=column + len(name))),
            command=types.Command(title=text, command=VERIFY_COMMAND, arguments=[argument])))
    return lenses


def parse_arguments(args: Tuple[Any, ...]) -> Dict[str, Any]:
    """`{uri, className?, device?, initKwargs?}` (or uri, className, device positionally);
    ValueError says what is wrong. ``initKwargs``: an object, or Python keyword arguments of
    literals as text (``"dim=64, depth=2"``, read with ast.literal_eval, never evaluated)."""
    if len(args) == 1 and isinstance(args[0], dict):
        raw = args[0]
    elif args and all(isinstance(a, (str, type(None))) for a in args) and len(args) <= 3:
        raw = dict(zip(("uri", "className", "device"), args))
    else:
        raise ValueError("expected one argument {uri, className?, device?, initKwargs?}, got %r" % (args,))
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
    return {"uri": uri, "class_name": class_name, "device": device, "init_kwargs": init_kwargs}


def path_of(uri: str) -> Optional[str]:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else None


class VerifiedFindings:
    """Verification findings per document, valid for the version they were computed on."""

    def __init__(self):
        self._by_uri: Dict[str, Tuple[Optional[int], List[Finding]]] = {}
        # Part of pull diagnostics' result ids: a verification changes a document's
        # diagnostics without changing its version.
        self.stamp = 0

    def put(self, uri: str, version: Optional[int], findings: List[Finding]) -> None:
        self._by_uri[uri] = (version, findings)
        self.stamp += 1

    def get(self, uri: str, version: Optional[int]) -> List[Finding]:
        entry = self._by_uri.get(uri)
        if entry is None:
            return []
        if entry[0] != version:  # the text moved on: the lines may no longer match
            del self._by_uri[uri]
            return []
        return entry[1]

    def forget(self, uri: str) -> None:
        self._by_uri.pop(uri, None)


async def verify_module(server, *args) -> Dict[str, Any]:
    """Run the verification; answers the report as JSON-ready data (or {"error": ...})."""
    try:
        request = parse_arguments(args)
    except ValueError as err:  # shown: the user may have typed it (the arguments prompt)
        server.show_error("torchlint verify: %s" % err)
        return {"error": str(err)}
    uri = request["uri"]
    path = path_of(uri)
    document = server.document(uri)
    if path is None or not os.path.isfile(path):
        message = "%s: %s is not a file on disk (save it first)" % (VERIFY_COMMAND, uri)
        server.log_error(message)
        return {"error": message}
    if document is not None:
        text, version = document.source, document.version
    else:
        with open(path, "rb") as handle:
            text, version = handle.read().decode("utf-8", "replace"), None
    settings = server.resolver.settings
    config = server.resolver.config_for(path)
    device = request["device"] or settings.verify_device
    target = request["class_name"] or os.path.basename(path)

    token = str(uuid.uuid4())
    cancel = threading.Event()
    progress = server.work_done_progress
    try:  # a repository-named interpreter runs only with the user's trustWorkspaceInterpreter
        python = resolve_python(settings.interpreter, config.python, config.path,
                                settings.trust_workspace_interpreter, SERVER_HINT,
                                warn=lambda message: server.inference.warn_once("torchlint verify: %s" % message))
    except VerifyError as err:
        server.show_error("torchlint verify: %s" % err)
        return {"error": str(err)}
    try:
        await progress.create_async(token)
        progress.begin(token, types.WorkDoneProgressBegin(
            title="torchlint: verifying %s" % target, message="running it in %s" % python,
            cancellable=True))
        future = progress.tokens.get(token)
        if future is not None:
            future.add_done_callback(lambda f: cancel.set() if f.cancelled() else None)
    except Exception:  # a client without work-done progress: run without it
        token = None

    loop = asyncio.get_running_loop()
    try:
        report = await loop.run_in_executor(None, lambda: verify_file(
            path, request["class_name"], device, settings.verify_timeout, init_kwargs=request["init_kwargs"],
            python=python, cancel_event=cancel, cwd=str(config.root), workspace_root=str(config.root),
            verify_config=config.verify))
    except VerifyError as err:
        if token is not None:
            progress.end(token, types.WorkDoneProgressEnd(message=str(err)))
        server.show_error("torchlint verify: %s" % err)
        return {"error": str(err)}
    summary = summary_line(report)
    if token is not None:
        progress.end(token, types.WorkDoneProgressEnd(message=summary))
    server.verified.put(uri, version, report_to_findings(report, text, path))
    server.republish(uri)
    server.log_message("torchlint verify %s: %s" % (target, summary), types.MessageType.Info)
    _tell_what_to_do(server, report, python)
    return json.loads(render_json(report))


def _tell_what_to_do(server, report, python: str) -> None:
    """What the user can act on, as a visible message (a log line goes unseen)."""
    if report.outcome == ERROR and report.error_kind == "no_torch":
        server.show_error("torchlint verify: %s has no torch, so it cannot run your module. Pick an interpreter "
                          "that has torch: the \"torchlint.interpreter\" setting (in VS Code also the Python "
                          "extension's \"Python: Select Interpreter\"), or install torch there (%s -m pip "
                          "install torch)." % (python, python))
        return
    skipped = [cls for cls in report.skipped if cls.skip_reason and "argument" in cls.skip_reason]
    if skipped:
        names = ", ".join(cls.name for cls in skipped)
        message = "torchlint verify: %s not built: %s (%s)." % (names, skipped[0].skip_reason, EDITOR_WAY)
        server.log_message(message, types.MessageType.Warning)
        try:
            server.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=message))
        except Exception:  # noqa: BLE001 - a closed connection: the log has it
            pass
