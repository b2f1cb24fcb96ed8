"""What the repository ships besides code: the licence, the hash-pinned bundle, rule page links."""
import json
import os
import re
import shlex
import subprocess
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


# -- install, release, the extension's page, CI: what the README promises (#24) ------------------
PACKAGE = json.loads((ROOT / "package.json").read_text(encoding="utf-8"))
VSCODE_CATEGORIES = {"AI", "Azure", "Chat", "Data Science", "Debuggers", "Education", "Extension Packs",
                     "Formatters", "Keymaps", "Language Packs", "Linters", "Machine Learning", "Notebooks",
                     "Other", "Programming Languages", "SCM Providers", "Snippets", "Testing", "Themes",
                     "Visualization"}


def readme_section(title):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"^## %s\n(.*?)(?=^## )" % re.escape(title), text, re.S | re.M)
    assert found, "README.md has no '## %s' section" % title
    return found.group(1)


def test_the_extension_is_packaged_with_its_own_readme_changelog_and_icon():
    script = PACKAGE["scripts"]["package"]
    assert "--readme-path client-vscode/README.md" in script and "--changelog-path client-vscode/CHANGELOG.md" in script
    icon = ROOT / PACKAGE["icon"]
    assert PACKAGE["icon"] == "client-vscode/images/icon.png" and icon.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(icon.read_bytes()[16:20], "big") >= 128 and int.from_bytes(icon.read_bytes()[20:24], "big") >= 128
    ignore = (ROOT / ".vscodeignore").read_text(encoding="utf-8").splitlines()
    assert "!client-vscode/images/icon.png" in ignore and "!client-vscode/CHANGELOG.md" in ignore
    assert PACKAGE["categories"] and set(PACKAGE["categories"]) <= VSCODE_CATEGORIES, PACKAGE["categories"]
    assert "Linters" in PACKAGE["categories"]


def test_the_extension_readme_lists_every_setting_and_command():
    readme = (ROOT / "client-vscode" / "README.md").read_text(encoding="utf-8")
    settings = PACKAGE["contributes"]["configuration"]["properties"]
    missing = [name for name in settings if "`%s`" % name not in readme]
    assert not missing, "client-vscode/README.md does not describe %s" % missing
    titles = ["*%s: %s*" % (command["category"], command["title"]) for command in PACKAGE["contributes"]["commands"]]
    assert [title for title in titles if title not in readme] == []


def test_every_vsix_named_in_the_docs_is_the_current_version():
    for name in ["README.md", "docs/vscode.md", "client-vscode/README.md", "docs/RELEASING.md"]:
        for version in re.findall(r"torchlint-(\d[\w.]*)\.vsix", (ROOT / name).read_text(encoding="utf-8")):
            assert version == PACKAGE["version"], (name, version)


def test_no_internal_jargon_or_machine_specific_tools_in_the_docs():
    files = [ROOT / "README.md", ROOT / "client-vscode" / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             *sorted((ROOT / "examples").glob("*.py"))]
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\bseed (article|example)s?\b|\bthe seeds?'?s?\b|\bseed article", text, re.I), path
        assert "a command on this machine" not in text and "`duplicates`" not in text, path


def test_the_ci_recipe_runs_as_written(tmp_path):
    import yaml  # a test dependency (pyyaml)

    (block,) = re.findall(r"^```yaml\n(.*?)^```", readme_section("CI (GitHub Actions)"), re.S | re.M)
    steps = yaml.safe_load(block)["jobs"]["torchlint"]["steps"]
    runs = [step["run"] for step in steps if "run" in step]
    assert any("pip install" in run for run in runs)
    (upload,) = [step for step in steps if step.get("uses", "").startswith("github/codeql-action/upload-sarif@")]
    checks = [run for run in runs if run.startswith("torchlint ")]
    assert [run.split()[:4] for run in checks] == [["torchlint", "check", "--format", "github"],
                                                   ["torchlint", "check", "--format", "sarif"]]
    (tmp_path / "model.py").write_text("import torch\nimport torch.nn as nn\n\n\nclass M(nn.Module):\n"
                                       "    def __init__(self):\n        super().__init__()\n"
                                       "        self.w = torch.ones(3, requires_grad=True)\n\n"
                                       "    def forward(self, x):\n        return x * self.w\n", encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "server"))
    results = []
    for run in checks:  # the torchlint of this checkout, as the command the recipe installs
        command = "%s -m torchlint%s" % (shlex.quote(sys.executable), run[len("torchlint"):])
        results.append(subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True,
                                      text=True, timeout=300))
    annotations, sarif = results
    assert annotations.returncode == 1, annotations.stderr  # a finding fails the job...
    assert re.search(r"^::error [^:]*\bfile=model\.py,line=8,[^:]*::TL101", annotations.stdout, re.M), annotations.stdout
    assert sarif.returncode == 0, sarif.stderr  # ...and the SARIF step still uploads
    log = json.loads((tmp_path / upload["with"]["sarif_file"]).read_text(encoding="utf-8"))
    assert log["version"] == "2.1.0" and [r["ruleId"] for r in log["runs"][0]["results"]] == ["TL101"]


def test_the_release_workflow_builds_checks_and_publishes_only_when_asked():
    import yaml

    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8"))
    assert workflow[True]["push"]["tags"] == ["v*"]  # YAML 1.1 reads the key `on` as true
    jobs = workflow["jobs"]
    build = "\n".join(step.get("run", "") for step in jobs["build"]["steps"])
    for needed in ("python -m build", "twine check --strict", "npm run package", "server/torchlint/__init__.py",
                   "package.json", "CHANGELOG.md"):
        assert needed in build, needed
    assert jobs["pypi"]["if"] == "vars.PUBLISH_PYPI == 'true'" and jobs["pypi"]["permissions"] == {"id-token": "write"}
    assert any(step.get("uses", "").startswith("pypa/gh-action-pypi-publish@") for step in jobs["pypi"]["steps"])
    assert jobs["marketplace"]["if"] == "vars.PUBLISH_VSCODE == 'true'"


def test_the_editors_marker_is_registered_and_names_real_tests(pytestconfig):
    # tests/conftest.py as pytest loaded it (`import conftest` may find tests/verify's).
    (conftest,) = [plugin for plugin in pytestconfig.pluginmanager.get_plugins()
                   if getattr(plugin, "__file__", None) and Path(plugin.__file__).resolve() == ROOT / "tests" / "conftest.py"]
    EDITOR_TESTS = conftest.EDITOR_TESTS
    assert any(marker.startswith("editors:") for marker in PYPROJECT["tool"]["pytest"]["ini_options"]["markers"])
    for relative, names in EDITOR_TESTS.items():
        source = (ROOT / "tests" / relative).read_text(encoding="utf-8")
        for name in names or ():
            assert re.search(r"^(async )?def %s\(" % name, source, re.M), (relative, name)


def test_test_extra_and_setup_scripts():
    extra = PYPROJECT["project"]["optional-dependencies"]["test"]
    for needed in ("numpy", "pre-commit", "build", "twine"):
        assert any(re.match(r"%s\b" % needed, requirement) for requirement in extra), needed
    setup = (ROOT / "tests" / "e2e_vscode" / "setup.sh").read_text(encoding="utf-8")
    commands = [line.split("#")[0] for line in setup.splitlines()]
    assert not [line for line in commands if "--unsafe-perm" in line]  # npm 7+ has no such option


def test_the_jupyterlab_page_names_the_versions_the_suite_installs():
    setup = (ROOT / "tests" / "e2e_jupyter" / "setup.sh").read_text(encoding="utf-8")
    pins = re.findall(r"([a-z-]+)==([0-9.]+)", re.search(r"^PINS=\((.*)\)", setup, re.M).group(1))
    assert [name for name, _ in pins] == ["jupyterlab", "jupyterlab-lsp", "jupyter-lsp"]
    tried = (ROOT / "docs" / "jupyterlab.md").read_text(encoding="utf-8").split("\n\n")[1]
    assert tried.startswith("Tried here:") and "tests/e2e_jupyter/test_jupyterlab.py" in tried
    for name, version in pins:
        assert re.search(r"\b%s %s\b" % (name, re.escape(version)), tried, re.I), (name, version)
