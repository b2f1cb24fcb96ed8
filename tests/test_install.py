"""Installing torchlint as the README's Install section says, in clean virtual environments:
`python -m build` on a copy of the checkout gives an sdist and a wheel that pass `twine check`;
the wheel installs alone (its dependencies from the package index) and runs: `torchlint check
examples/` exits 1 with findings, `torchlint rule` prints pages shipped in the wheel, and
`torchlint serve` answers an LSP initialize. Installing from the checkout's folder and from a
git URL (`git+file://`, standing in for the repository's address) gives the same torchlint.

The version is declared once, in server/torchlint/__init__.py; the VS Code extension's
package.json carries its own, which must agree."""
from __future__ import annotations

import json
import re
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from testkit.packaging import (BUILD_LIMIT, INSTALL_LIMIT, ROOT, bin_dir, copy_checkout, lsp_handshake,
                               make_git_repository, new_venv, pip_install, run)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytest.importorskip("build", reason="pip install -e '.[test]' (installs build and twine)")

VERSION = re.search(r'^__version__ = "([^"]+)"$', (ROOT / "server" / "torchlint" / "__init__.py")
                    .read_text(encoding="utf-8"), re.M).group(1)
WHEEL = "torchlint-%s-py3-none-any.whl" % VERSION
SDIST = "torchlint-%s.tar.gz" % VERSION


def test_the_version_is_declared_once_and_the_extension_agrees():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "torchlint.__version__"}
    assert json.loads((ROOT / "package.json").read_text(encoding="utf-8"))["version"] == VERSION
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(r"^## \[?%s\]?" % re.escape(VERSION), changelog, re.M), "CHANGELOG.md has no %s entry" % VERSION
    extension_changelog = (ROOT / "client-vscode" / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(r"^## \[?%s\]?" % re.escape(VERSION), extension_changelog, re.M)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A copy of the checkout, as a git repository (for the git URL install)."""
    folder = copy_checkout(tmp_path_factory.mktemp("clone") / "torchlint")
    make_git_repository(folder)
    return folder


@pytest.fixture(scope="module")
def dist(checkout, tmp_path_factory):
    """`python -m build` as the README says: the sdist, then the wheel built from the sdist."""
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--outdir", out, checkout], BUILD_LIMIT)
    assert sorted(p.name for p in out.iterdir()) == sorted([SDIST, WHEEL])
    return out


def test_twine_check_passes(dist):
    output = run([sys.executable, "-m", "twine", "check", "--strict", dist / SDIST, dist / WHEEL])
    assert output.stdout.count("PASSED") == 2, output.stdout


def test_the_wheel_carries_every_file_the_package_reads(dist, checkout):
    names = set(zipfile.ZipFile(dist / WHEEL).namelist())
    # The files of the copy the wheel was built from (the working tree may have changed since).
    package_files = [path.relative_to(checkout / "server").as_posix()
                     for path in (checkout / "server" / "torchlint").rglob("*")
                     if path.is_file() and "__pycache__" not in path.parts]
    missing = [name for name in package_files if name not in names]
    assert not missing, "in server/torchlint but not in the wheel (pyproject's package-data): %s" % missing
    assert {"torchlint/docs/TL101.md", "torchlint/docs/TL301.md", "torchlint/docs/verify.md"} <= names
    metadata = zipfile.ZipFile(dist / WHEEL).read("torchlint-%s.dist-info/METADATA" % VERSION).decode("utf-8")
    assert "Version: %s\n" % VERSION in metadata and "License-Expression: MIT" in metadata
    entry_points = zipfile.ZipFile(dist / WHEEL).read("torchlint-%s.dist-info/entry_points.txt" % VERSION).decode()
    assert "torchlint = torchlint.cli:console_main" in entry_points and "TL = torchlint.flake8_plugin:Flake8Plugin" in entry_points


def test_the_sdist_builds_the_same_package(dist):
    with tarfile.open(dist / SDIST) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    for needed in ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "server/torchlint/cli/__init__.py",
                   "server/torchlint/docs/TL101.md"):
        assert needed in names, needed


@pytest.fixture(scope="module")
def wheel_venv(dist, tmp_path_factory):
    """A clean virtual environment with only the wheel (and its dependencies) installed."""
    environment = new_venv(tmp_path_factory.mktemp("wheel") / "venv")
    pip_install(environment, dist / WHEEL)
    return environment


def test_the_installed_wheel_checks_the_examples(wheel_venv, checkout):
    torchlint = bin_dir(wheel_venv) / "torchlint"
    assert run([torchlint, "--version"]).stdout.strip() == "torchlint %s" % VERSION
    result = run([torchlint, "check", "examples/"], cwd=checkout, check=False)
    assert result.returncode == 1, (result.stdout[-3000:], result.stderr[-3000:])
    assert re.search(r"^Found \d+ findings", result.stdout, re.M), result.stdout[-2000:]
    for code in ("TL101", "TL102", "TL103", "TL202"):
        assert re.search(r"^examples/\S+\.py:\d+:\d+: %s " % code, result.stdout, re.M), code
    # python -m torchlint is the same command.
    result = run([bin_dir(wheel_venv) / "python", "-m", "torchlint", "check", "examples/"], cwd=checkout, check=False)
    assert result.returncode == 1 and "TL101" in result.stdout


def test_the_installed_wheel_prints_rule_pages_from_the_wheel(wheel_venv, tmp_path):
    python = bin_dir(wheel_venv) / "python"
    page = run([bin_dir(wheel_venv) / "torchlint", "rule", "TL101"], cwd=tmp_path).stdout
    assert page.startswith("# TL101")
    where = run([python, "-c", "from torchlint.rules import RULES_BY_CODE; print(RULES_BY_CODE['TL101'].doc_path())"],
                cwd=tmp_path).stdout.strip()
    assert Path(where).is_file() and Path(where).is_relative_to(wheel_venv), where


def test_the_installed_wheel_serves_lsp(wheel_venv, tmp_path):
    result = lsp_handshake([bin_dir(wheel_venv) / "torchlint", "serve"], cwd=tmp_path)
    assert result["serverInfo"] == {"name": "torchlint", "version": VERSION}
    assert result["capabilities"]["codeActionProvider"]


def readme_section(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"^## %s\n(.*?)(?=^## )" % re.escape(title), text, re.S | re.M)
    assert found, "README.md has no '## %s' section" % title
    return found.group(1)


def readme_install_blocks():
    """The README's Install section's shell blocks that install the command line."""
    blocks = re.findall(r"^```sh\n(.*?)^```", readme_section("Install"), re.S | re.M)
    return [block for block in blocks if "pip install" in block]


def test_the_readme_installs_from_a_wheel_a_checkout_and_a_url():
    blocks = readme_install_blocks()
    assert len(blocks) == 3
    assert "python -m build torchlint" in blocks[0] and "dist/torchlint-" in blocks[0]
    assert "pip install ./torchlint" in blocks[1]
    assert 'pip install "git+<repository-url>"' in blocks[2]
    # Nothing may promise a package index entry that does not exist (see docs/RELEASING.md).
    for name in ["README.md", "docs/vscode.md", "client-vscode/README.md", "package.json",
                 "server/torchlint/settings.py", "client-vscode/bundled/launch.py"]:
        text = (ROOT / name).read_text(encoding="utf-8")
        promises = [line for line in text.splitlines()
                    if re.search(r"pip install (-U |--upgrade )?torchlint\b(?![-/.@\w])", line)
                    and not re.search(r"not (install|published)|does not|no package index", line)]
        assert not promises, (name, promises)


@pytest.mark.parametrize("number", [0, 1, 2], ids=["wheel", "checkout", "url"])
def test_the_readme_install_block_works_as_written(number, checkout, tmp_path):
    """Each block, run by bash in an empty folder, with <repository-url> a file:// URL of a
    git copy of this checkout; then the installed command checks a buggy file."""
    block = readme_install_blocks()[number].replace("<repository-url>", checkout.as_uri())
    (tmp_path / "model.py").write_text(BUGGY, encoding="utf-8")
    script = "set -eo pipefail\n%s\ntorchlint check model.py\n" % block
    result = run(["bash", "-c", script], INSTALL_LIMIT, cwd=tmp_path, check=False)
    assert "torchlint %s" % VERSION in result.stdout, (result.stdout[-3000:], result.stderr[-3000:])
    assert result.returncode == 1 and "model.py:8:9: TL101" in result.stdout, (result.stdout[-3000:],
                                                                               result.stderr[-3000:])


BUGGY = """import torch
import torch.nn as nn


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.gamma = torch.ones(3, requires_grad=True)

    def forward(self, x):
        return x * self.gamma
"""
