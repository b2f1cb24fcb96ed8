"""pytest's set-up for every test: torchlint from the source tree, a cache folder of the tests' own,
the ``layers`` fixture and the ``editors`` marker. What test files import is in the tests/testkit package: a
module imported as ``conftest`` may be tests/verify's, whichever pytest loaded last."""
from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The tests import torchlint from the source tree even when it is not installed.
if str(ROOT / "server") not in sys.path:
    sys.path.insert(0, str(ROOT / "server"))


# `torchlint check` keeps jedi's answers on disk: the tests use a folder of their own, empty at
# the start of the session, never the user's cache.
TEST_CACHE_DIR = tempfile.mkdtemp(prefix="torchlint-test-cache-")
os.environ["TORCHLINT_CACHE_DIR"] = TEST_CACHE_DIR
atexit.register(shutil.rmtree, TEST_CACHE_DIR, True)


@pytest.fixture
def layers():
    """Makes jedi layers (``layers(root, **options)``: a JediInference) and ends their jedi
    interpreters after the test."""
    from torchlint.inference.layer import JediInference
    made = []

    def make(root: Path, **options):
        made.append(JediInference(str(root), **options))
        return made[-1]

    yield make
    for layer in made:
        layer.close()


# -- the `editors` marker ------------------------------------------------------------------------
# Tests that need a real editor, a browser, npm or tools installed as root (tests/lsp/editors/
# install.sh, tests/e2e_vscode/setup.sh, tests/e2e_jupyter/setup.sh). `pytest -m "not editors"`
# runs everything else: the core, the command line, the language server (driven by pytest-lsp)
# and verification.
# Keys are test files (relative to tests/); values the test functions in them that need an
# editor, or None for every test of the file. tests/test_project_files.py checks that each
# name still exists. A test file of this list may also mark itself with @pytest.mark.editors.
EDITOR_TESTS = {
    "lsp/test_real_editors.py": {"test_neovim_with_the_readme_setup_shows_tl101_hover_and_fixes"},
    "lsp/test_real_editors_vim_emacs.py": None,  # Vim + ALE, Emacs + eglot (apt)
    "e2e_vscode/test_vscode_extension.py": None,  # npm: unit tests, the .vsix; code-server + Chromium
    "e2e_jupyter/test_jupyterlab.py": None,  # JupyterLab + jupyterlab-lsp (their own venv), Chromium
}


def pytest_collection_modifyitems(config, items):
    tests = Path(__file__).resolve().parent
    for item in items:
        try:
            relative = Path(str(item.fspath)).resolve().relative_to(tests).as_posix()
        except ValueError:
            continue
        if relative in EDITOR_TESTS:
            names = EDITOR_TESTS[relative]
            if names is None or getattr(item, "originalname", item.name) in names:
                item.add_marker(pytest.mark.editors)
