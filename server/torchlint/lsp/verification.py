"""The editor side of runtime verification: the code lens above each Module class and the
``torchlint.verifyModule`` command (work-done progress, cancellable).

The command runs the module in a child process of the workspace's Python (verify.runner);
this process never imports torch. Its findings (source "torchlint-verify") are shown with
the document's other diagnostics until the document changes.
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
from ..analysis.engine import parse
from ..analysis.environments import SERVER_HINT
from ..analysis.findings import Finding
from ..verify.findings import report_to_findings
from ..verify.report import render_json, summary_line
from ..verify.runner import VerifyError, resolve_python, verify_file

VERIFY_COMMAND = "torchlint.verifyModule"


def module_classes(text: str, path: str) -> List[Tuple[str, int, int]]:
    """(name, 1-based line, column of the name) of every nn.Module class the file defines."""
    tree, _ = parse(text, path or "untitled.py")
    if tree is None:
        return []
    ctx = FileContext(text, path or "untitled.py", tree)
    classes = []
    for info in ctx.module_classes:
        line = info.node.lineno
        column = max(ctx.source.line(line).find(info.name), 0)
        classes.append((info.name, line, column))
    return classes


def code_lenses(server, uri: str) -> List[types.CodeLens]:
    document = server.document(uri)
    if document is None or not server.resolver.settings.code_lens:
        return []
    device = server.resolver.settings.verify_device
    title = "Verify on GPU" if device in ("auto", "cuda") or device.startswith("cuda:") else "Verify on CPU"
    lenses = []
    for name, line, column in module_classes(document.source, document.path or ""):
        position = types.Position(line=line - 1, character=column)
        lenses.append(types.CodeLens(
            range=types.Range(start=position, end=types.Position(line=line - 1, character=column + len(name))),
            command=types.Command(title=title, command=VERIFY_COMMAND, arguments=[{"uri": uri, "className": name}])))
    return lenses


def parse_arguments(args: Tuple[Any, ...]) -> Dict[str, Any]:
    """`{uri, className?, device?}` (or the three positionally); ValueError says what is wrong."""
    if len(args) == 1 and isinstance(args[0], dict):
        raw = args[0]
    elif args and all(isinstance(a, (str, type(None))) for a in args) and len(args) <= 3:
        raw = dict(zip(("uri", "className", "device"), args))
    else:
        raise ValueError("expected one argument {uri, className?, device?}, got %r" % (args,))
    uri, class_name, device = raw.get("uri"), raw.get("className"), raw.get("device")
    if not isinstance(uri, str) or not uri:
        raise ValueError("`uri` must be a document uri")
    if class_name is not None and (not isinstance(class_name, str) or not class_name.isidentifier()):
        raise ValueError("`className` must be a class name, got %r" % (class_name,))
    if device is not None and not isinstance(device, str):
        raise ValueError("`device` must be auto, cpu, cuda or cuda:N")
    return {"uri": uri, "class_name": class_name, "device": device}


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
    except ValueError as err:
        server.log_error("%s: %s" % (VERIFY_COMMAND, err))
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
            path, request["class_name"], device, settings.verify_timeout,
            python=python, cancel_event=cancel, cwd=str(config.root)))
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
    return json.loads(render_json(report))
