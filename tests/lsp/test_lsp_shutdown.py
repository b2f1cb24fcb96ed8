"""`shutdown` while a verification runs: the server ends the run (its probe, the child process
that runs the user's code, and the run's progress) instead of waiting for the verify timeout,
answers, and exits on `exit`."""
from __future__ import annotations

import asyncio
import os
import signal
import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_helpers import CONFIG, VSCODE, add_workspace_folder, initialize, wait_for
from test_hostile_files import descendants

pytestmark = [pytest.mark.asyncio(loop_scope="module"),
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process tree from /proc")]

VERIFY_TIMEOUT = 600  # seconds: the run would hold the server this long if shutdown left it to time out
DEADLINE = 90  # seconds for each step below: generous on a busy machine, far under VERIFY_TIMEOUT

# forward says it started (the probe imported torch and built the module), then never returns.
HANGS_IN_FORWARD = '''import pathlib

import torch
from torch import nn


class Hangs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        pathlib.Path(%r).touch()
        while True:
            pass
'''


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def client(lsp_client: LanguageClient):
    """A VS Code client whose verifications may run for VERIFY_TIMEOUT; the test shuts it down."""
    lsp_client.init_result = await initialize(lsp_client, VSCODE, {"verify": {"timeout": VERIFY_TIMEOUT}})
    yield


def _probes(server_pid: int):
    return [pid for pid in descendants(server_pid) if b"probe.py" in _cmdline(pid)]


def _cmdline(pid: int) -> bytes:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    """Running, not a zombie left for its parent to reap."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


async def test_shutdown_ends_a_running_verification_and_the_server_exits(client: LanguageClient, tmp_path):
    server = client._server
    assert server is not None
    started = tmp_path / "forward-started"
    path = tmp_path / "hangs.py"
    path.write_text(HANGS_IN_FORWARD % str(started))
    add_workspace_folder(client, tmp_path)
    tokens_before = set(client.progress_reports)
    running = asyncio.ensure_future(client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="torchlint.verifyModule", arguments=[{"uri": path.as_uri(), "device": "cpu"}])))
    probes = []
    try:
        await wait_for(started.exists, timeout=300, what="the module's forward to start")  # torch's import
        probes = _probes(server.pid)
        assert probes, "no probe under the server"
        (token,) = set(client.progress_reports) - tokens_before

        await asyncio.wait_for(client.shutdown_async(None), DEADLINE)

        await wait_for(lambda: not any(_alive(pid) for pid in probes), timeout=DEADLINE, what="the probe to end")
        await wait_for(lambda: isinstance(client.progress_reports[token][-1], types.WorkDoneProgressEnd),
                       timeout=DEADLINE, what="the run's progress to end")
        await asyncio.wait_for(asyncio.gather(running, return_exceptions=True), DEADLINE)  # answered, or cancelled
        client.exit(None)
        assert await asyncio.wait_for(server.wait(), DEADLINE) == 0
    finally:
        running.cancel()
        leftovers = probes + (_probes(server.pid) if server.returncode is None else [])
        if server.returncode is None:
            server.kill()  # a server that did not exit: the fixture's teardown would wait for it for ever
        for pid in leftovers:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
