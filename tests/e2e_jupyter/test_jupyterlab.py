"""torchlint in real JupyterLab with jupyterlab-lsp, driven in headless Chromium
(tests/e2e_jupyter/e2e.js): a notebook's second cell gets torchlint's TL101 underline, and only
that cell; the fix typed into it makes the underline go.

The language server is this checkout's (`python -m torchlint serve` on this interpreter, with
server/ on PYTHONPATH), set up as docs/jupyterlab.md says. What the test needs is installed by
tests/e2e_jupyter/setup.sh (JupyterLab and jupyterlab-lsp, pinned, in a virtual environment of
their own) and tests/e2e_vscode/setup.sh (Chromium, playwright-core), never from here: without
them the test fails and says so. The driver runs in its own process group, killed when it runs
past its limit; it kills Jupyter's group (the language server with it) itself."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from testkit.browser import CACHE, CHROMIUM, PLAYWRIGHT_CORE, fail_without, run

E2E_LIMIT = 900  # only stops a hung run: a busy 2-core machine needs a fraction of it


def test_notebook_cell_shows_tl101_and_loses_it_when_fixed():
    if shutil.which("node") is None:
        pytest.fail("node (20+) is required to drive the browser")
    fail_without("tests/e2e_jupyter/setup.sh", CACHE / "jupyter-venv" / "bin" / "jupyter-lab")
    fail_without("tests/e2e_vscode/setup.sh", PLAYWRIGHT_CORE, Path(CHROMIUM))
    env = dict(os.environ, TORCHLINT_E2E_TORCHLINT_PYTHON=sys.executable)
    output = run(["node", "tests/e2e_jupyter/e2e.js"], E2E_LIMIT, env=env)
    sys.stdout.write(output[-4000:])
    lines = output.splitlines()
    assert "PASS" in lines[-1], output[-3000:]
    assert any("cell 2 underlined" in line and '"self.scale = torch.ones(dim)"' in line for line in lines), output
    assert any("the underline went" in line for line in lines), output
