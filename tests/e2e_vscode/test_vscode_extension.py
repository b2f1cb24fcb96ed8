"""The VS Code extension, built and driven for real: its unit tests, the packaged .vsix (the
server and its libraries in, what the server never reads out), then the end-to-end test in
code-server + Chromium (tests/e2e_vscode/e2e.js).

The .vsix is the one `npm run package` left in the repository root (`.ci/run` builds it once,
before pytest), or $TORCHLINT_VSIX; when there is none, or it is older than the sources it is
built from, the fixture builds it. What the end-to-end test needs (code-server, playwright-core,
Chromium) is installed by tests/e2e_vscode/setup.sh, never from here: without it the test
fails and says so. Every command runs in its own process group, killed when it runs past
its limit."""
from __future__ import annotations

import json
import os
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from testkit.browser import CACHE, CHROMIUM, PLAYWRIGHT_CORE, ROOT, fail_without, run

VERSION = json.loads((ROOT / "package.json").read_text(encoding="utf-8"))["version"]
# What the .vsix is built from: a .vsix older than any of these is stale.
SOURCES = ["package.json", "package-lock.json", ".vscodeignore", "client-vscode/src", "client-vscode/scripts",
           "client-vscode/bundled/launch.py", "server/torchlint"]
# Limits that only stop a hung command: a busy 2-core machine needs a fraction of them.
NPM_CI_LIMIT = 900
PACKAGE_LIMIT = 900
UNIT_TEST_LIMIT = 600
E2E_LIMIT = 1800


def _newest_source_mtime() -> float:
    newest = 0.0
    for name in SOURCES:
        path = ROOT / name
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        newest = max([newest] + [p.stat().st_mtime for p in files])
    return newest


@pytest.fixture(scope="module")
def node_modules():
    if shutil.which("npm") is None:
        pytest.fail("npm is required to build the VS Code extension (Node 20+)")
    if not (ROOT / "node_modules" / ".bin" / "tsc").exists():
        run(["npm", "ci", "--no-audit", "--no-fund"], NPM_CI_LIMIT)
    return ROOT / "node_modules"


@pytest.fixture(scope="module")
def vsix(node_modules):
    given = os.environ.get("TORCHLINT_VSIX")
    if given:
        if not Path(given).is_file():
            pytest.fail("TORCHLINT_VSIX=%s: no such file" % given)
        return Path(given)
    built = ROOT / ("torchlint-%s.vsix" % VERSION)
    if built.is_file() and built.stat().st_mtime >= _newest_source_mtime():
        return built
    output = run(["npm", "run", "package"], PACKAGE_LIMIT)
    assert built.is_file(), "npm run package wrote no %s:\n%s" % (built.name, output[-3000:])
    return built


def test_extension_unit_tests(node_modules):
    output = run(["npm", "test"], UNIT_TEST_LIMIT)
    assert "# fail 0" in output, output[-3000:]


def test_vsix_is_complete_and_carries_only_what_the_server_reads(vsix):
    archive = zipfile.ZipFile(vsix)
    assert archive.testzip() is None  # packaging finished: every entry reads back
    names = [name for name in archive.namelist() if not name.endswith("/")]
    libs = "extension/client-vscode/bundled/libs/"
    for needed in ["extension/package.json", "extension/client-vscode/out/extension.js",
                   "extension/client-vscode/bundled/launch.py", libs + "torchlint/lsp/server.py",
                   libs + "jedi/third_party/typeshed/stdlib/builtins.pyi", libs + "parso/python/grammar313.txt"]:
        assert needed in names, needed
    for package in ["pygls", "lsprotocol", "jedi", "parso", "attr", "cattrs", "torchlint/rules"]:
        assert any(name.startswith(libs + package + "/") for name in names), package
    # jedi's third-party stubs are never read by the server; with them vsce scanned ~6,200 files.
    assert not [name for name in names if "/typeshed/stubs/" in name or "/django-stubs/" in name]
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]
    assert len(names) < 2000, len(names)


def test_end_to_end_in_real_vscode(vsix):
    fail_without("tests/e2e_vscode/setup.sh", CACHE / "cs" / "node_modules" / ".bin" / "code-server", PLAYWRIGHT_CORE,
                 Path(CHROMIUM))
    env = dict(os.environ, TORCHLINT_E2E_TORCH_PYTHON=sys.executable)
    output = run(["node", "tests/e2e_vscode/e2e.js", "--vsix", str(vsix)], E2E_LIMIT, env=env)
    sys.stdout.write(output[-4000:])
    assert "PASS" in output.splitlines()[-1], output[-3000:]
