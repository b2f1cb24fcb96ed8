"""The "Verify" lens looks beyond its file: a class whose only literal call site is in another
module of its package (or its tests) gets "Verify", not "Verify (needs ...)", once the
project scan has answered. The scan runs on a thread of its own; until it answers the lens
says what the file alone says, and when its answer changes the lens the server sends
``workspace/codeLens/refresh`` (VS Code declares refreshSupport)."""
from __future__ import annotations

import textwrap
import threading
from pathlib import Path

import pytest
from pytest_lsp import LanguageClient

from torchlint.config import VerifyConfig
from torchlint.lsp import verification
from torchlint.lsp.verification import ProjectScans

from lsp_helpers import lenses, open_document, wait_for

in_server_loop = pytest.mark.asyncio(loop_scope="module")  # the tests sharing the module's server

BOUND = 60  # seconds: only stops a hung test; a scan of these few files takes milliseconds

NET = '''
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, dim, depth):
        super().__init__()
        self.blocks = nn.Sequential(*[nn.Linear(dim, dim) for _ in range(depth)])

    def forward(self, x):
        return self.blocks(x)


class Lonely(nn.Module):
    """Nothing anywhere says how to build it."""

    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return self.fc(x)
'''

TRAIN = '''
from .models.net import Net


def main():
    model = Net(dim=8, depth=2)
    return model
'''

# The same call with an argument that is not a literal: nothing the child could evaluate.
TRAIN_WITHOUT_LITERALS = '''
from .models.net import Net


def main(cfg):
    model = Net(dim=cfg.dim, depth=2)
    return model
'''


def write(root: Path, files: dict) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


def package(root: Path, train: str = TRAIN) -> Path:
    """pkg/models/net.py holds the classes; pkg/train.py is Net's only literal call site."""
    write(root, {"pyproject.toml": "[tool.torchlint]\n", "pkg/__init__.py": "", "pkg/models/__init__.py": "",
                 "pkg/models/net.py": NET, "pkg/train.py": train})
    return root / "pkg" / "models" / "net.py"


async def lenses_once(client: LanguageClient, uri: str, predicate, what: str, refreshes: int = 10):
    """The lenses as the client sees them after each refresh the server asks for, until
    ``predicate`` holds (each wait bounded)."""
    for _ in range(refreshes):
        seen = client.lens_refreshes
        current = await lenses(client, uri)
        if predicate(current):
            return current
        await wait_for(lambda: client.lens_refreshes > seen, BOUND, "workspace/codeLens/refresh (%s)" % what)
    raise AssertionError("%s: not after %d refreshes" % (what, refreshes))


def needs(command) -> list:
    return command.arguments[0].get("needsArguments", [])


@in_server_loop
async def test_a_call_site_in_another_module_of_the_package_is_found(vscode: LanguageClient, tmp_path):
    client = vscode
    path = package(tmp_path)
    uri = path.as_uri()
    open_document(client, uri, path.read_text())
    first = await lenses(client, uri)
    # Before the scan answers: what the file alone says.
    assert needs(first["Net"]) == ["dim", "depth"] and first["Net"].title.endswith("(needs dim, depth)")

    found = await lenses_once(client, uri, lambda by_class: not needs(by_class["Net"]), "Net found in pkg/train.py")
    assert "needs" not in found["Net"].title and "needsArguments" not in found["Net"].arguments[0]
    assert found["Net"].title.startswith("Verify")
    # The class nothing builds keeps asking, after the same scan.
    assert needs(found["Lonely"]) == ["width"] and found["Lonely"].title.endswith("(needs width)")


@in_server_loop
async def test_a_class_with_no_call_site_anywhere_keeps_needs(vscode: LanguageClient, tmp_path):
    client = vscode
    path = package(tmp_path)
    write(tmp_path, {"tests/test_net.py": "from pkg.models.net import Net\n\n\ndef test_net():\n    Net(4, 1)\n"})
    (tmp_path / "pkg" / "train.py").write_text("")  # the tests folder is Net's only call site now
    uri = path.as_uri()
    open_document(client, uri, path.read_text())
    found = await lenses_once(client, uri, lambda by_class: not needs(by_class["Net"]), "Net found in tests/")
    assert needs(found["Lonely"]) == ["width"]  # the scan answered, and found nothing for it


@in_server_loop
async def test_editing_the_call_site_changes_the_answer(vscode: LanguageClient, tmp_path):
    client = vscode
    path = package(tmp_path)
    uri = path.as_uri()
    open_document(client, uri, path.read_text())
    await lenses_once(client, uri, lambda by_class: not needs(by_class["Net"]), "Net found in pkg/train.py")

    train = tmp_path / "pkg" / "train.py"
    train.write_text(textwrap.dedent(TRAIN_WITHOUT_LITERALS).lstrip())
    again = await lenses_once(client, uri, lambda by_class: needs(by_class["Net"]), "the call site lost its literals")
    assert needs(again["Net"]) == ["dim", "depth"]

    train.write_text(textwrap.dedent(TRAIN).lstrip())
    await lenses_once(client, uri, lambda by_class: not needs(by_class["Net"]), "the literal call site is back")


# -- ProjectScans in this process: reuse and limits ------------------------------------------

class Recorder:
    def __init__(self):
        self.changes = threading.Semaphore(0)
        self.reports = []

    def changed(self) -> None:
        self.changes.release()


def test_an_answer_is_reused_until_a_file_it_read_changes(tmp_path, monkeypatch):
    path = str(package(tmp_path))
    scans_run = []
    real = verification.find_constructors

    def counting(*args, **kwargs):
        if kwargs.get("sites") is not None:
            scans_run.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(verification, "find_constructors", counting)
    recorder = Recorder()
    scans = ProjectScans(recorder.changed, recorder.reports.append)
    try:
        names, root = ["Lonely", "Net"], str(tmp_path)
        assert scans.needing(path, names, root, VerifyConfig()) is None  # not answered yet
        assert recorder.changes.acquire(timeout=BOUND)
        assert scans.needing(path, names, root, VerifyConfig()) == {"Lonely"}
        # Each request queues a check; with nothing changed it does not scan again nor signal.
        for _ in range(3):
            assert scans.needing(path, names, root, VerifyConfig()) == {"Lonely"}
        scans._executor.submit(lambda: None).result(timeout=BOUND)  # the checks queued before it are done
        assert len(scans_run) == 1 and not recorder.changes.acquire(timeout=0)

        (tmp_path / "pkg" / "train.py").write_text(textwrap.dedent(TRAIN_WITHOUT_LITERALS).lstrip())
        scans.needing(path, names, root, VerifyConfig())
        assert recorder.changes.acquire(timeout=BOUND)
        assert scans.needing(path, names, root, VerifyConfig()) == {"Lonely", "Net"}
        assert len(scans_run) == 2
        # A new file in the package is read too.
        write(tmp_path, {"pkg/demo.py": "from pkg.models.net import Net, Lonely\n\nLonely(width=3)\n"})
        scans.needing(path, names, root, VerifyConfig())
        assert recorder.changes.acquire(timeout=BOUND)
        assert scans.needing(path, names, root, VerifyConfig()) == {"Net"}
        assert recorder.reports == []
    finally:
        scans.close()


def test_a_scan_out_of_time_keeps_what_the_file_says_and_says_so(tmp_path):
    path = str(package(tmp_path))
    recorder = Recorder()
    scans = ProjectScans(recorder.changed, recorder.reports.append, seconds=0)
    try:
        assert scans.needing(path, ["Net"], str(tmp_path), VerifyConfig()) is None
        scans._executor.submit(lambda: None).result(timeout=BOUND)
        assert scans.needing(path, ["Net"], str(tmp_path), VerifyConfig()) == {"Net"}  # no file was reached
        assert not recorder.changes.acquire(timeout=0)  # the lens says what it said
        assert any("stopped after 0 s" in report for report in recorder.reports), recorder.reports
    finally:
        scans.close()


def test_a_scan_that_fails_leaves_the_lens_as_it_was(tmp_path, monkeypatch):
    path = str(package(tmp_path))

    def broken(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(verification, "find_constructors", broken)
    recorder = Recorder()
    scans = ProjectScans(recorder.changed, recorder.reports.append)
    try:
        assert scans.needing(path, ["Net"], str(tmp_path), VerifyConfig()) is None
        scans._executor.submit(lambda: None).result(timeout=BOUND)
        assert scans.needing(path, ["Net"], str(tmp_path), VerifyConfig()) == {"Net"}
        scans.needing(path, ["Net"], str(tmp_path), VerifyConfig())
        scans._executor.submit(lambda: None).result(timeout=BOUND)
        # Said once, and not tried again while the files stay as they are.
        assert [r for r in recorder.reports if "RecursionError" in r] == [recorder.reports[0]], recorder.reports
        assert len(recorder.reports) == 1 and not recorder.changes.acquire(timeout=0)
    finally:
        scans.close()
