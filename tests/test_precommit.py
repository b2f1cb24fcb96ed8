"""The README's pre-commit configurations, run by pre-commit itself on a scratch git repository:
`repo: local` with `additional_dependencies` naming a checkout (the README's first snippet,
its `/path/to/torchlint` replaced by a copy of this checkout), and `repo:` the path of a git
checkout at a commit (the second snippet, which uses .pre-commit-hooks.yaml). For each, a file
with a TL101 bug fails the hook and the output names it; the fixed file passes.

pre-commit builds each hook's environment (a virtualenv, torchlint installed from the
checkout, its dependencies from the package index) in a PRE_COMMIT_HOME of the test's own."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from testkit.packaging import ROOT, clean_env, copy_checkout, git, make_git_repository, run

yaml = pytest.importorskip("yaml", reason="pip install -e '.[test]' (installs pyyaml)")
pytest.importorskip("pre_commit", reason="pip install -e '.[test]' (installs pre-commit)")

HOOK_LIMIT = 420  # the first run creates the hook's environment: a venv and a pip install

BUGGY = """import torch
import torch.nn as nn


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.gamma = torch.ones(3, requires_grad=True)

    def forward(self, x):
        return x * self.gamma
"""
FIXED = BUGGY.replace("torch.ones(3, requires_grad=True)", "nn.Parameter(torch.ones(3))")


def readme_precommit_blocks():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## pre-commit and flake8\n(.*?)(?=^## )", text, re.S | re.M)
    assert section, "README.md has no '## pre-commit and flake8' section"
    blocks = re.findall(r"^```yaml\n(.*?)^```", section.group(1), re.S | re.M)
    assert len(blocks) == 2, blocks
    return blocks


def test_the_readme_snippets_are_the_configurations_tested():
    local, by_path = (yaml.safe_load(block) for block in readme_precommit_blocks())
    (repo,) = local["repos"]
    assert repo["repo"] == "local"
    (hook,) = repo["hooks"]
    assert hook["language"] == "python" and hook["additional_dependencies"] == ["/path/to/torchlint"]
    assert hook["entry"] == "torchlint check --force-exclude"
    # The same hook as the one the repository defines for `repo: <path or URL>`.
    (defined,) = [h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text()) if h["id"] == "torchlint"]
    assert {k: hook[k] for k in ("entry", "language", "types", "require_serial")} == \
        {k: defined[k] for k in ("entry", "language", "types", "require_serial")}
    (repo,) = by_path["repos"]
    assert repo["repo"] == "/path/to/torchlint" and repo["rev"] == "<commit or tag>"
    assert [h["id"] for h in repo["hooks"]] == ["torchlint"]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A copy of this checkout, as a git repository at one commit: (path, commit)."""
    folder = copy_checkout(tmp_path_factory.mktemp("clone") / "torchlint")
    return folder, make_git_repository(folder)


def pre_commit(project: Path, home: Path):
    return run([sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never"], HOOK_LIMIT,
               cwd=project, env=clean_env(PRE_COMMIT_HOME=str(home), HOME=str(home)), check=False)


@pytest.mark.parametrize("snippet", [0, 1], ids=["repo-local", "repo-path"])
def test_the_hook_fails_on_a_finding_and_passes_once_fixed(snippet, checkout, tmp_path):
    folder, commit = checkout
    config = readme_precommit_blocks()[snippet].replace("/path/to/torchlint", str(folder))
    config = config.replace("<commit or tag>", commit)
    project = tmp_path / "project"
    project.mkdir()
    (project / ".pre-commit-config.yaml").write_text(config, encoding="utf-8")
    (project / "model.py").write_text(BUGGY, encoding="utf-8")
    make_git_repository(project)

    failed = pre_commit(project, tmp_path / "pre-commit-home")
    output = failed.stdout + failed.stderr
    assert failed.returncode == 1, output[-4000:]
    assert "Installing environment" in output, output[-4000:]  # its own, not this test run's torchlint
    assert re.search(r"^torchlint\.+Failed$", output, re.M), output[-4000:]
    assert "model.py:8:9: TL101" in output, output[-4000:]

    (project / "model.py").write_text(FIXED, encoding="utf-8")
    git(project, "add", "model.py")
    passed = pre_commit(project, tmp_path / "pre-commit-home")
    output = passed.stdout + passed.stderr
    assert passed.returncode == 0, output[-4000:]
    assert re.search(r"^torchlint\.+Passed$", output, re.M), output[-4000:]
