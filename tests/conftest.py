"""Helpers shared by the tests: where the fixtures are, how findings read in failures."""
from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RULE_FIXTURES = ROOT / "tests" / "fixtures" / "rules"

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
    from torchlint.analysis.inference import JediInference
    made = []

    def make(root: Path, **options):
        made.append(JediInference(str(root), **options))
        return made[-1]

    yield make
    for layer in made:
        layer.close()


def rule_fixture_files():
    return sorted(RULE_FIXTURES.glob("*.py"))


def describe(finding) -> str:
    return "%d:%d %s %s" % (finding.range.start.line, finding.range.start.column, finding.code, finding.message)


def default_sigint() -> None:
    """``preexec_fn`` for a child that is sent SIGINT: Python turns SIGINT into KeyboardInterrupt
    only when it starts with SIGINT's default action, and pytest run as a background job (a
    script's ``cmd &``) passes it on ignored."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(argv, capsys, cwd=None):
    """``torchlint.cli.main`` in-process, from ``cwd``: (exit code, stdout, stderr)."""
    from torchlint import cli

    old = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        code = cli.main([str(a) for a in argv])
    finally:
        os.chdir(old)
    out, err = capsys.readouterr()
    return code, out, err


# -- the `editors` marker ------------------------------------------------------------------------
# Tests that need a real editor, a browser, npm or tools installed as root (tests/lsp/editors/
# install.sh, tests/e2e_vscode/setup.sh). `pytest -m "not editors"` runs everything else: the
# core, the command line, the language server (driven by pytest-lsp) and verification.
# Keys are test files (relative to tests/); values the test functions in them that need an
# editor, or None for every test of the file. tests/test_project_files.py checks that each
# name still exists. A test file of this list may also mark itself with @pytest.mark.editors.
EDITOR_TESTS = {
    "lsp/test_real_editors.py": {"test_neovim_with_the_readme_setup_shows_tl101_hover_and_fixes"},
    "lsp/test_real_editors_vim_emacs.py": None,  # Vim + ALE, Emacs + eglot (apt)
    "e2e_vscode/test_vscode_extension.py": None,  # npm: unit tests, the .vsix; code-server + Chromium
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
