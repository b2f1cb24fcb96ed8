"""What the repository ships besides code: the licence, the hash-pinned bundle, rule page links."""
import json
import re
import sys
from pathlib import Path

import pytest

from torchlint.analysis.findings import Finding, Position, Range, Severity
from torchlint.output import FileReport, OutputOptions, render
from torchlint.rules import RULES_BY_CODE, base

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
BUNDLE = ROOT / "client-vscode" / "bundle-requirements.txt"


def test_the_licence_file_is_the_one_the_packages_declare():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License")
    assert PYPROJECT["project"]["license"] == "MIT" and PYPROJECT["project"]["license-files"] == ["LICENSE"]
    assert json.loads((ROOT / "package.json").read_text(encoding="utf-8"))["license"] == "MIT"


def bundle_pins():
    pins = {}
    for line in BUNDLE.read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if line:
            match = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+) --hash=sha256:([0-9a-f]{64})", line)
            assert match, "not a hash-pinned requirement: %r" % line
            pins[match.group(1).lower().replace("_", "-")] = match.group(2)
    return pins


def test_every_bundled_wheel_is_pinned_with_its_hash():
    pins = bundle_pins()
    # The server's own dependencies (and what they import) are all in the bundle.
    for requirement in PYPROJECT["project"]["dependencies"]:
        name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower()
        assert name in pins, "%s is a dependency but not bundled in the VS Code extension" % name
    for needed in ("lsprotocol", "parso", "attrs", "cattrs", "tomli"):
        assert needed in pins
    script = (ROOT / "client-vscode" / "scripts" / "bundle_server.js").read_text(encoding="utf-8")
    assert script.count("'--require-hashes'") == 2  # pip download and pip install both check


def test_tomli_is_required_where_tomllib_is_missing():
    requirements = PYPROJECT["project"]["dependencies"]
    assert any(re.fullmatch(r'tomli[^;]*;\s*python_version\s*<\s*"3\.11"', r) for r in requirements), requirements


@pytest.fixture
def published(monkeypatch):
    """The installed metadata says where the rule pages are published."""
    class Metadata:
        def get_all(self, key):
            return ["Homepage, https://example.org", "Rule docs, https://example.org/torchlint/docs/"] \
                if key == "Project-URL" else None

    monkeypatch.setattr(base.metadata, "metadata", lambda name: Metadata())
    base.published_docs_url.cache_clear()
    yield
    base.published_docs_url.cache_clear()


def sarif_rules():
    finding = Finding("TL101", "m", Severity.WARNING, Range(Position(1, 0), Position(1, 1)))
    log = json.loads(render([FileReport("m.py", [finding])], "sarif", OutputOptions()))
    return {rule["id"]: rule for rule in log["runs"][0]["tool"]["driver"]["rules"]}


def test_sarif_links_the_published_rule_page(published):
    assert sarif_rules()["TL101"]["helpUri"] == "https://example.org/torchlint/docs/TL101.md"
    assert RULES_BY_CODE["TL203"].doc_url() == "https://example.org/torchlint/docs/TL203.md"


def test_without_a_published_url_the_link_is_the_installed_page():
    # This repository declares no [project.urls] "Rule docs" (it has no public address yet).
    assert base.DOCS_URL_LABEL not in PYPROJECT["project"].get("urls", {})
    base.published_docs_url.cache_clear()
    uri = sarif_rules()["TL101"]["helpUri"]
    assert uri == RULES_BY_CODE["TL101"].doc_path().as_uri()
    assert RULES_BY_CODE["TL101"].doc_path().is_file()
