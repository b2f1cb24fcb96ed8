"""A real editor, headless: Neovim starts ``python -m torchlint.lsp`` as its language
server and must show TL101 on examples/scaled_block.py, then get a hover and the quick
fixes for it. Debian's neovim (0.7.2) has start_client; newer ones have vim.lsp.start."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from lsp_helpers import EXAMPLES, SERVER_ENV

NVIM = shutil.which("nvim")

CHECK_LUA = r'''
local file, root, py = os.getenv("TL_FILE"), os.getenv("TL_ROOT"), os.getenv("TL_PY")
local function say(line) io.stdout:write(line .. "\n") end
vim.cmd("edit " .. file)
local buf = vim.api.nvim_get_current_buf()
local cfg = { name = "torchlint", cmd = { py, "-m", "torchlint.lsp" }, root_dir = root }
local id
if vim.lsp.start then id = vim.lsp.start(cfg) else
  id = vim.lsp.start_client(cfg); vim.lsp.buf_attach_client(buf, id) end
local ok = vim.wait(20000, function() return #vim.diagnostic.get(buf) > 0 end, 50)
local first
for _, d in ipairs(vim.diagnostic.get(buf)) do
  local code = d.user_data and d.user_data.lsp and d.user_data.lsp.code or d.code
  say(string.format("diagnostic %d:%d %s %s", d.lnum, d.col, tostring(code), d.source or ""))
  if code == "TL101" and first == nil then first = d end
end
if first then
  local position = { line = first.lnum, character = first.col }
  local doc = { uri = vim.uri_from_bufnr(buf) }
  local hover = vim.lsp.buf_request_sync(buf, "textDocument/hover",
    { textDocument = doc, position = position }, 10000)
  for _, response in pairs(hover or {}) do
    if response.result and response.result.contents then
      say("hover " .. (response.result.contents.value or ""):sub(1, 60):gsub("\n", " "))
    end
  end
  local actions = vim.lsp.buf_request_sync(buf, "textDocument/codeAction",
    { textDocument = doc, range = { start = position, ["end"] = position },
      context = { diagnostics = { { range = { start = position, ["end"] = position },
                                    message = first.message, code = "TL101", source = "torchlint" } } } },
    10000)
  for _, response in pairs(actions or {}) do
    for _, action in ipairs(response.result or {}) do say("action " .. action.title) end
  end
end
io.stdout:flush()
vim.cmd(ok and "qall!" or "cquit 1")
'''


@pytest.mark.skipif(NVIM is None, reason="nvim is not installed (Debian: apt-get install -y neovim)")
def test_neovim_shows_tl101_with_hover_and_fixes(tmp_path):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    model = workspace / "scaled_block.py"
    shutil.copy(EXAMPLES / "scaled_block.py", model)
    script = tmp_path / "check.lua"
    script.write_text(CHECK_LUA)
    env = dict(SERVER_ENV, TL_FILE=str(model), TL_ROOT=str(workspace), TL_PY=sys.executable)
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env[name] = str(tmp_path / name.lower())
    done = subprocess.run([NVIM, "--headless", "--clean", "-c", "luafile %s" % script],
                          env=env, cwd=str(workspace), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    lines = output.splitlines()
    tl101 = [line for line in lines if line.startswith("diagnostic ") and " TL101 " in line]
    assert tl101, output
    assert all(line.endswith("torchlint") for line in lines if line.startswith("diagnostic ")), output
    assert "diagnostic 13:8 TL101 torchlint" in lines, output  # line 14: self.gamma_1 = torch.cuda.FloatTensor(...)
    assert any(line.startswith("hover **TL101**") for line in lines), output
    actions = [line for line in lines if line.startswith("action ")]
    assert "action Disable TL101 for this line" in actions, output
    assert any("nn.Parameter" in line for line in actions), output
