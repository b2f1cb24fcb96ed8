"""Real editors, headless: Vim + ALE and Emacs + eglot each start ``python -m torchlint
serve`` as a language server on a copy of examples/scaled_block.py and must show TL101
on line 14 (``self.gamma_1 = torch.cuda.FloatTensor([1.0])``). The editor scripts live
in tests/lsp/editors/ and write what the editor shows to a file.

An editor that is not installed fails the test with what to install:
``bash tests/lsp/editors/install.sh`` installs both (Debian: vim, vim-ale, emacs-nox,
elpa-eglot)."""
from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

import pytest

from lsp_helpers import EXAMPLES, SERVER_ENV

EDITORS = Path(__file__).resolve().parent / "editors"
EDITOR_TIMEOUT = 240  # seconds for one whole editor run (server start on a busy machine)
DIAGNOSTICS_WAIT = 120  # seconds the editor script waits for the first diagnostics

# line 14: self.gamma_1 = torch.cuda.FloatTensor([1.0])
GAMMA_LINE, GAMMA_COLUMN = 14, 9


def _ale_runtime() -> Optional[str]:
    """The ALE plugin folder (Debian's vim-ale, or a user's package)."""
    candidates = ["/usr/share/vim-ale", "/usr/share/vim/vimfiles/pack/dist-bundle/opt/ale"]
    candidates += sorted(glob.glob(os.path.expanduser("~/.vim/pack/*/*/ale")))
    for folder in candidates:
        if os.path.isfile(os.path.join(folder, "autoload", "ale", "engine.vim")):
            return folder
    return None


def _vim_missing() -> Optional[str]:
    vim = shutil.which("vim")
    if vim is None:
        return "vim is not installed (Debian: apt-get install -y vim-ale)"
    # vim.tiny and other small builds have no jobs or channels, which ALE needs.
    version = subprocess.run([vim, "--version"], capture_output=True, text=True,
                             stdin=subprocess.DEVNULL, timeout=60).stdout
    if "+job" not in version or "+channel" not in version:
        return "%s has no +job/+channel, which ALE needs (Debian: apt-get install -y vim)" % vim
    if _ale_runtime() is None:
        return "ALE is not installed (Debian: apt-get install -y vim-ale)"
    return None


def _eglot_folder() -> Optional[str]:
    """Debian's elpa-eglot source folder, '' when eglot is built in, None when absent."""
    folders = sorted(glob.glob("/usr/share/emacs/site-lisp/elpa-src/eglot-*"))
    if folders:
        return folders[-1]
    emacs = shutil.which("emacs")
    if emacs is None:
        return None
    found = subprocess.run([emacs, "-Q", "--batch", "--eval", '(princ (or (locate-library "eglot") ""))'],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60).stdout
    return "" if found.strip() else None


def _emacs_missing() -> Optional[str]:
    if shutil.which("emacs") is None:
        return "emacs is not installed (Debian: apt-get install -y --no-install-recommends emacs-nox elpa-eglot)"
    if _eglot_folder() is None:
        return "eglot is not installed (Debian: apt-get install -y --no-install-recommends elpa-eglot)"
    return None


def _run_editor(command: List[str], tmp_path: Path, extra_env: dict) -> List[str]:
    """Run one headless editor on a fresh copy of scaled_block.py; return the lines its
    script wrote. Editor and server run in their own process group, killed afterwards."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    model = workspace / "scaled_block.py"
    shutil.copy(EXAMPLES / "scaled_block.py", model)
    out = tmp_path / "diagnostics.txt"
    env = dict(SERVER_ENV, HOME=str(tmp_path / "home"), TL_FILE=str(model), TL_ROOT=str(workspace),
               TL_PY=sys.executable, TL_OUT=str(out), TL_WAIT=str(DIAGNOSTICS_WAIT), **extra_env)
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env[name] = str(tmp_path / name.lower())
    (tmp_path / "home").mkdir()
    editor = subprocess.Popen(command, env=env, cwd=str(workspace), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True)
    try:
        console, _ = editor.communicate(timeout=EDITOR_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(editor.pid, signal.SIGKILL)
        console, _ = editor.communicate()
        pytest.fail("%s ran past %d s and was killed\n%s" % (command[0], EDITOR_TIMEOUT, console))
    finally:
        # A server the editor left behind goes with it.
        try:
            os.killpg(editor.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    written = out.read_text().splitlines() if out.exists() else []
    assert editor.returncode == 0 and written[-1:] == ["done"], \
        "exit %s\nwritten: %s\nconsole:\n%s" % (editor.returncode, written, console)
    return written[:-1]


def test_vim_ale_shows_tl101(tmp_path):
    missing = _vim_missing()
    if missing:
        pytest.fail(missing + "; or: bash tests/lsp/editors/install.sh")
    command = [shutil.which("vim"), "-N", "-u", "NONE", "-i", "NONE", "-es",
               "-S", str(EDITORS / "ale_check.vim")]
    lines = _run_editor(command, tmp_path, {"TL_ALE": _ale_runtime()})
    # ALE's loclist: 1-based line and column, the diagnostic's code, the linter's name.
    assert "diagnostic %d:%d TL101 torchlint" % (GAMMA_LINE, GAMMA_COLUMN) in \
        [" ".join(line.split()[:4]) for line in lines], lines
    assert all(line.split()[3] == "torchlint" for line in lines), lines


def test_emacs_eglot_shows_tl101(tmp_path):
    missing = _emacs_missing()
    if missing:
        pytest.fail(missing + "; or: bash tests/lsp/editors/install.sh")
    command = [shutil.which("emacs"), "-Q", "--batch", "-l", str(EDITORS / "eglot_check.el")]
    lines = _run_editor(command, tmp_path, {"TL_EGLOT": _eglot_folder()})
    # flymake text as eglot writes it: "<source> [<code>]: <message>".
    at_gamma = [line for line in lines if line.startswith("diagnostic %d:%d " % (GAMMA_LINE, GAMMA_COLUMN))]
    assert any(" torchlint [TL101]: " in line for line in at_gamma), lines
    assert all(" torchlint [TL" in line for line in lines), lines
