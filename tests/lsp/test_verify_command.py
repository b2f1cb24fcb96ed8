"""torchlint.verifyModule over LSP: code lens, work-done progress, verified diagnostics."""
from __future__ import annotations

import asyncio
import os
import shutil
import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from torchlint.lsp.verification import NVIDIA_DRIVER_FILES

from lsp_helpers import (CONFIG, EXAMPLES, ROOT, VSCODE, add_workspace_folder, initialize, open_document,
                         record_publishes, replace_text, wait_for, wait_for_publish)

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def opened_demo(client, tmp_path):
    path = tmp_path / "verify_demo.py"
    shutil.copy(EXAMPLES / "verify_demo.py", path)
    add_workspace_folder(client, tmp_path)
    uri = path.as_uri()
    since = len(client.publishes)
    open_document(client, uri, path.read_text())
    await wait_for_publish(client, uri, version=1, since=since)
    return uri


async def test_code_lens_above_each_module_class(vscode: LanguageClient, tmp_path):
    client = vscode
    assert client.init_result.capabilities.code_lens_provider is not None
    uri = await opened_demo(client, tmp_path)
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    names = [lens.command.arguments[0]["className"] for lens in lenses]
    assert names == ["LayerScaleBlock", "FixedLayerScaleBlock"]
    assert all(lens.command.command == "torchlint.verifyModule" for lens in lenses)
    assert lenses[0].range.start.line == 16  # `class LayerScaleBlock(nn.Module):`
    # "Verify" names a device only when the run will use CUDA (device "auto": an NVIDIA driver here).
    expected = "Verify on cuda" if any(os.path.exists(p) for p in NVIDIA_DRIVER_FILES) else "Verify"
    assert [lens.command.title for lens in lenses] == [expected, expected]


NEEDS = '''import torch.nn as nn


class Needs(nn.Module):
    # (A `spec` table nothing can make up: the class needs arguments from the user.)
    def __init__(self, spec, depth, scale=1.0):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(spec["dim"], spec["dim"]) for _ in range(depth)])

    def forward(self, x):
        return self.layers(x)


class Called(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return self.fc(x)


if __name__ == "__main__":
    Called(dim=3)
'''


async def test_a_class_that_needs_arguments_asks_for_them(vscode: LanguageClient, tmp_path):
    client = vscode
    path = tmp_path / "needs.py"
    path.write_text(NEEDS)
    add_workspace_folder(client, tmp_path)
    uri = path.as_uri()
    open_document(client, uri, NEEDS)
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    by_class = {lens.command.arguments[0]["className"]: lens.command for lens in lenses}
    assert by_class["Needs"].arguments[0]["needsArguments"] == ["spec", "depth"]
    assert by_class["Needs"].title.endswith("(needs spec, depth)")
    assert "needsArguments" not in by_class["Called"].arguments[0]  # its __main__ block says how

    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="torchlint.verifyModule", arguments=[{"uri": uri, "className": "Needs", "device": "cpu"}]))
    assert result["classes"][0]["status"] == "skipped"
    await wait_for(lambda: any("Needs not built" in m.message for m in client.messages), timeout=60,
                   what="the skip shown")
    shown = next(m.message for m in client.messages if "Needs not built" in m.message)
    assert "initKwargs" in shown and "--init-kwargs" in shown  # the editor way and the command-line way

    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="torchlint.verifyModule",
        arguments=[{"uri": uri, "className": "Needs", "device": "cpu", "initKwargs": "spec={'dim': 4}, depth=2"}]))
    assert result["outcome"] == "completed", result
    (needs,) = result["classes"]
    assert needs["status"] == "verified" and needs["constructed_with"]["origin"] == "--init-kwargs"

    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="torchlint.verifyModule",
        arguments=[{"uri": uri, "className": "Needs", "initKwargs": "spec=__import__('os')"}]))
    assert "not a Python literal" in result["error"]


async def test_verify_module_reports_progress_and_publishes_verified_findings(vscode: LanguageClient, tmp_path):
    client = vscode
    uri = await opened_demo(client, tmp_path)
    since = len(client.publishes)
    tokens_before = set(client.progress_reports)
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="torchlint.verifyModule", arguments=[{"uri": uri, "className": "LayerScaleBlock", "device": "cpu"}]))
    assert result["error"] is None and result["outcome"] == "completed", result
    assert result["device"].startswith("cpu")
    codes = sorted({issue["code"] for cls in result["classes"] for issue in cls["issues"]})
    assert "TL901" in codes and "TL903" in codes

    (token,) = set(client.progress_reports) - tokens_before
    kinds = [report.kind for report in client.progress_reports[token]]
    assert kinds[0] == "begin" and kinds[-1] == "end"

    def verified():
        return next((p for p in client.publishes[since:] if p.uri == uri
                     and any(d.source == "torchlint-verify" for d in p.diagnostics)), None)
    await wait_for(lambda: verified() is not None, timeout=300, what="verified diagnostics")
    lines = {d.range.start.line for d in verified().diagnostics if d.source == "torchlint-verify"}
    assert lines == {23}  # `self.gamma_1 = torch.full(...)`: where the attribute was assigned


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def broken_python(lsp_client: LanguageClient, tmp_path_factory):
    """A server whose `interpreter` setting names a "Python" that exits at once, printing nothing."""
    folder = tmp_path_factory.mktemp("broken-python")
    python = folder / "python-that-exits"
    python.write_text("#!/bin/sh\nexit 3\n")
    python.chmod(0o755)
    lsp_client.init_result = await initialize(lsp_client, VSCODE, {"interpreter": str(python)})
    yield
    await lsp_client.shutdown_session()


async def test_a_run_that_fails_says_so_to_the_user(broken_python: LanguageClient, tmp_path):
    """A report with an error is answered to the client, which shows nothing more of it (VS Code
    took the server to have shown it, Neovim shows no answer): the server shows it, every run."""
    client = broken_python
    add_workspace_folder(client, tmp_path)  # (verify runs only files of the workspace)
    path = tmp_path / "verify_demo.py"
    shutil.copy(EXAMPLES / "verify_demo.py", path)
    for attempt in range(2):  # a second run after an error is shown again
        since = len(client.messages)
        result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="torchlint.verifyModule",
            arguments=[{"uri": path.as_uri(), "className": "LayerScaleBlock", "device": "cpu"}]))
        assert result["outcome"] == "error" and "exit code 3" in result["error"], result
        await wait_for(lambda: any("exit code 3" in m.message for m in client.messages[since:]), timeout=60,
                       what="the failure shown (run %d)" % (attempt + 1))
        (shown,) = [m for m in client.messages[since:] if "exit code 3" in m.message]
        assert shown.type == types.MessageType.Error
        assert shown.message == "torchlint verify LayerScaleBlock: %s" % result["error"]
    # A file that is not on disk: shown too.
    since = len(client.messages)
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="torchlint.verifyModule", arguments=[{"uri": (tmp_path / "gone.py").as_uri()}]))
    assert "not a file on disk" in result["error"]
    await wait_for(lambda: any("gone.py" in m.message for m in client.messages[since:]), timeout=60,
                   what="the missing file shown")


@pytest.mark.parametrize("arguments", [[], [{"className": "X"}], [{"uri": 3}], [{"uri": "file:///no/such.py"}],
                                       [{"uri": "file:///tmp/x.py", "className": "not a name"}], [1, 2, 3, 4]])
async def test_bad_arguments_get_an_error_and_the_server_lives(vscode: LanguageClient, arguments):
    client = vscode
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="torchlint.verifyModule", arguments=arguments))
    assert result.get("error")
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri="file:///nowhere.py"), position=types.Position(line=0, character=0)))
    assert hover is None


HANGS = '''import torch
from torch import nn


class Hangs(nn.Module):
    def __init__(self):
        super().__init__()
        while True:
            pass
'''


async def test_cancelling_the_progress_kills_the_run(vscode: LanguageClient, tmp_path):
    client = vscode
    path = tmp_path / "hangs.py"
    path.write_text(HANGS)
    add_workspace_folder(client, tmp_path)
    tokens_before = set(client.progress_reports)
    running = asyncio.ensure_future(client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="torchlint.verifyModule", arguments=[{"uri": path.as_uri(), "device": "cpu"}])))
    await wait_for(lambda: set(client.progress_reports) - tokens_before, timeout=180, what="progress to begin")
    (token,) = set(client.progress_reports) - tokens_before
    await asyncio.sleep(1.0)  # let the child start its endless loop
    client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    result = await asyncio.wait_for(running, timeout=180)
    assert result["outcome"] == "cancelled"




RUNS_AT_IMPORT = '''import pathlib
pathlib.Path(%r).write_text("ran")
import torch.nn as nn


class Net(nn.Module):
    def forward(self, x):
        return x
'''


async def test_a_file_outside_the_workspace_is_never_run(vscode: LanguageClient, tmp_path):
    """The command named any file on disk and ran it: one outside the workspace's folders (the
    repository here; the file in a temporary folder) is refused, saying why, and nothing runs."""
    client = vscode
    marker = tmp_path / "ran"
    path = tmp_path / "outside.py"
    path.write_text(RUNS_AT_IMPORT % str(marker))
    open_document(client, path.as_uri(), path.read_text())
    result = await asyncio.wait_for(client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="torchlint.verifyModule", arguments=[{"uri": path.as_uri(), "device": "cpu"}])), 180)
    assert "not in the workspace's folders" in result["error"] and str(ROOT) in result["error"]
    await wait_for(lambda: any("not in the workspace's folders" in m.message and m.type == types.MessageType.Error
                               for m in client.messages), timeout=60, what="the refusal shown")
    assert not marker.exists()


async def test_a_link_in_the_workspace_to_a_file_outside_is_refused(tmp_path, monkeypatch):
    from torchlint.config import Config
    from torchlint.lsp import verification
    from torchlint.settings import DEFAULT_SETTINGS
    workspace, outside = tmp_path / "workspace", tmp_path / "outside.py"
    workspace.mkdir()
    outside.write_text(RUNS_AT_IMPORT % str(tmp_path / "ran"))
    (workspace / "model.py").symlink_to(outside)
    ran, shown = [], []
    monkeypatch.setattr(verification, "verify_file", lambda *args, **kwargs: ran.append(args))
    services = verification.VerifyServices(log=lambda *a: None, show=lambda message, kind: shown.append(message),
                                           warn_once=lambda m: None, progress=None, deliver=lambda *a: None,
                                           workspace_folders=lambda: [str(workspace)])
    result = await verification.verify_module(
        ({"uri": (workspace / "model.py").as_uri(), "device": "cpu"},), lambda uri: None, DEFAULT_SETTINGS,
        lambda p: Config(root=workspace), services)
    assert "not in the workspace's folders" in result["error"] and shown == [result["error"]]
    assert ran == [] and not (tmp_path / "ran").exists()
    assert verification.in_workspace(str(workspace / "model.py"), [str(tmp_path)])


async def test_a_cancelled_request_stops_the_run_and_ends_its_progress(tmp_path, monkeypatch):
    """The command's task cancelled ($/cancelRequest, or the server stopping): the run in its
    thread is told to stop as the progress's own cancel does, and the progress ends."""
    import threading
    from torchlint.config import Config
    from torchlint.lsp import verification
    from torchlint.settings import DEFAULT_SETTINGS
    path = tmp_path / "hangs.py"
    path.write_text(HANGS)
    started, stopped = threading.Event(), threading.Event()

    def verify_file(*args, cancel_event, **kwargs):
        started.set()
        if cancel_event.wait(60):  # the real run ends its child when this is set
            stopped.set()
        raise verification.VerifyError("stopped")

    class Progress:
        tokens: dict = {}
        ended: list = []

        async def create_async(self, token):
            pass

        def begin(self, token, value):
            pass

        def end(self, token, value):
            self.ended.append(value.message)

    progress = Progress()
    monkeypatch.setattr(verification, "verify_file", verify_file)
    services = verification.VerifyServices(log=lambda *a: None, show=lambda *a: None, warn_once=lambda m: None,
                                           progress=progress, deliver=lambda *a: None,
                                           workspace_folders=lambda: [str(tmp_path)])
    task = asyncio.ensure_future(verification.verify_module(
        ({"uri": path.as_uri(), "device": "cpu"},), lambda uri: None, DEFAULT_SETTINGS,
        lambda p: Config(root=tmp_path), services))
    assert await asyncio.get_running_loop().run_in_executor(None, started.wait, 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.get_running_loop().run_in_executor(None, stopped.wait, 60)
    assert progress.ended == ["stopped"]

async def test_a_pull_client_that_cannot_be_refreshed_gets_them_pushed(neovim: LanguageClient, tmp_path):
    """Neovim 0.11 pulls diagnostics but neither declares nor handles workspace/diagnostic/refresh:
    it pulls again only after an edit, which makes verification findings stale. They are pushed
    to it on their own (it shows pushed and pulled diagnostics side by side), never also in pull
    answers (they would show twice), and an empty push clears them once the text changes."""
    client = neovim
    assert client.init_result.capabilities.diagnostic_provider is not None  # it pulls
    path = tmp_path / "verify_demo.py"
    shutil.copy(EXAMPLES / "verify_demo.py", path)
    add_workspace_folder(client, tmp_path)
    uri = path.as_uri()
    text = path.read_text()
    open_document(client, uri, text)
    document = types.TextDocumentIdentifier(uri=uri)
    before = await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(text_document=document))
    assert not any(d.source == "torchlint-verify" for d in before.items)
    since = len(client.publishes)
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="torchlint.verifyModule", arguments=[{"uri": uri, "className": "LayerScaleBlock", "device": "cpu"}]))
    assert result["outcome"] == "completed"

    def pushed():
        return [p for p in client.publishes[since:] if p.uri == uri]
    await wait_for(lambda: pushed(), timeout=60, what="the verification's findings pushed")
    (push,) = pushed()
    assert push.diagnostics and {d.source for d in push.diagnostics} == {"torchlint-verify"}
    assert {d.code for d in push.diagnostics} >= {"TL901", "TL903"}
    assert {d.range.start.line for d in push.diagnostics} == {23}  # `self.gamma_1 = torch.full(...)`
    after = await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
        text_document=document, previous_result_id=before.result_id))
    items = after.items if after.kind == "full" else before.items
    assert not any(d.source == "torchlint-verify" for d in items)  # shown once: by the push

    since = len(client.publishes)
    replace_text(client, uri, text, text + "\n", version=2)
    await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(text_document=document))
    await wait_for(lambda: pushed(), timeout=60, what="the stale findings cleared")
    assert list(pushed()[-1].diagnostics) == []


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def vscode_pull(lsp_client: LanguageClient):
    """VS Code as it is today: pulls, and declares workspace.diagnostics.refreshSupport."""
    capabilities = client_capabilities(VSCODE)
    capabilities.text_document.diagnostic = types.DiagnosticClientCapabilities(
        dynamic_registration=True, related_document_support=False)
    capabilities.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    record_publishes(lsp_client)
    lsp_client.init_result = await lsp_client.initialize_session(types.InitializeParams(
        capabilities=capabilities, root_uri=ROOT.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=ROOT.as_uri(), name=ROOT.name)]))
    yield
    await lsp_client.shutdown_session()


async def test_a_pull_client_that_can_be_refreshed_is_asked_to_pull(vscode_pull: LanguageClient, tmp_path):
    """A verification changes the diagnostics but not the document's version: the server asks the
    client to pull again, and the pull (with the previous result id) is a full answer with them."""
    client = vscode_pull
    path = tmp_path / "verify_demo.py"
    shutil.copy(EXAMPLES / "verify_demo.py", path)
    add_workspace_folder(client, tmp_path)
    uri = path.as_uri()
    open_document(client, uri, path.read_text())
    document = types.TextDocumentIdentifier(uri=uri)
    before = await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(text_document=document))
    refreshes = client.diagnostic_refresh_count
    since = len(client.publishes)
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="torchlint.verifyModule", arguments=[{"uri": uri, "className": "LayerScaleBlock", "device": "cpu"}]))
    assert result["outcome"] == "completed"
    await wait_for(lambda: client.diagnostic_refresh_count > refreshes, timeout=60,
                   what="workspace/diagnostic/refresh")
    after = await client.text_document_diagnostic_async(types.DocumentDiagnosticParams(
        text_document=document, previous_result_id=before.result_id))
    assert after.kind == "full" and after.result_id != before.result_id
    assert {d.code for d in after.items if d.source == "torchlint-verify"} >= {"TL901", "TL903"}
    assert [p for p in client.publishes[since:] if p.uri == uri] == []  # a pull client: never pushed to


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def without_torch(lsp_client: LanguageClient, tmp_path_factory):
    """A server whose `interpreter` setting names a Python that cannot import torch."""
    folder = tmp_path_factory.mktemp("no-torch")
    python = folder / "python-without-torch"
    python.write_text('#!/bin/sh\nexec "%s" -S "$@"\n' % sys.executable)  # -S: no site-packages, no torch
    python.chmod(0o755)
    lsp_client.python = str(python)
    lsp_client.init_result = await initialize(lsp_client, VSCODE, {"interpreter": str(python)})
    yield
    await lsp_client.shutdown_session()


@pytest.mark.skipif(os.name != "posix", reason="the stand-in interpreter is a shell script")
async def test_an_interpreter_without_torch_is_shown_to_the_user(without_torch: LanguageClient, tmp_path):
    client = without_torch
    path = tmp_path / "model.py"
    path.write_text("import torch\n\n\nclass Net(torch.nn.Module):\n    pass\n")
    add_workspace_folder(client, tmp_path)
    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="torchlint.verifyModule", arguments=[{"uri": path.as_uri(), "device": "cpu"}]))
    assert result["outcome"] == "error" and "torch cannot be imported" in result["error"]
    await wait_for(lambda: any(client.python in m.message for m in client.messages), timeout=60,
                   what="a message naming the interpreter")
    (shown,) = [m for m in client.messages if client.python in m.message]
    assert shown.type == types.MessageType.Error
    assert "has no torch" in shown.message and "torchlint.interpreter" in shown.message


TWO_BUGGY = '''import torch
import torch.nn as nn


class First(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.scale = torch.ones(4, requires_grad=True)

    def forward(self, x):
        return self.proj(x) * self.scale


class Second(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.shift = torch.zeros(4, requires_grad=True)

    def forward(self, x):
        return self.proj(x) + self.shift
'''


async def test_a_run_of_one_class_replaces_only_that_class_s_findings(vscode: LanguageClient, tmp_path):
    client = vscode
    path = tmp_path / "two.py"
    path.write_text(TWO_BUGGY)
    add_workspace_folder(client, tmp_path)
    uri = path.as_uri()
    open_document(client, uri, TWO_BUGGY)
    await wait_for_publish(client, uri, version=1)

    async def verify(class_name):
        since = len(client.publishes)
        result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="torchlint.verifyModule", arguments=[{"uri": uri, "className": class_name, "device": "cpu"}]))
        assert result["error"] is None and result["outcome"] == "completed", result

        def verified():
            return next((p for p in client.publishes[since:] if p.uri == uri
                         and any(d.source == "torchlint-verify" for d in p.diagnostics)), None)
        await wait_for(lambda: verified() is not None, timeout=300, what="verified diagnostics")
        return {d.range.start.line for d in verified().diagnostics if d.source == "torchlint-verify"}

    assert await verify("First") == {8}  # `self.scale = ...`
    assert await verify("Second") == {8, 18}  # First's stay: its bug is still there
