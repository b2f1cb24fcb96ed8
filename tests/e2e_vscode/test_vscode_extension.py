"""The VS Code extension, built and driven for real: its unit tests, `npm run package`
(the .vsix with the bundled server), then the end-to-end test in code-server + Chromium
(tests/e2e_vscode/e2e.js; setup.sh installs what it needs, once)."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(command, timeout):
    done = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout)
    assert done.returncode == 0, "%s exited %d:\n%s" % (" ".join(command), done.returncode, done.stdout[-6000:])
    return done.stdout


@pytest.fixture(scope="module")
def vsix():
    if shutil.which("npm") is None:
        pytest.fail("npm is required to build the VS Code extension (Node 20+)")
    run(["npm", "ci", "--no-audit", "--no-fund"], 600)
    run(["npm", "run", "package"], 900)
    built = sorted(ROOT.glob("torchlint-*.vsix"))
    assert built, "npm run package wrote no .vsix"
    return built[-1]


def test_extension_unit_tests(vsix):
    output = run(["npm", "test"], 300)
    assert "fail 0" in output


def test_vsix_carries_the_server_and_its_libraries(vsix):
    import zipfile
    names = zipfile.ZipFile(vsix).namelist()
    assert "extension/package.json" in names
    assert any(n.startswith("extension/client-vscode/bundled/libs/pygls/") for n in names)
    assert any(n.startswith("extension/client-vscode/bundled/libs/torchlint/rules/") for n in names)


def test_end_to_end_in_real_vscode(vsix):
    run(["bash", "tests/e2e_vscode/setup.sh"], 900)
    output = run(["node", "tests/e2e_vscode/e2e.js"], 600)
    sys.stdout.write(output[-3000:])
