"""Adopting torchlint on a code base that has findings: ``--add-noqa`` (analysis.noqa.add_noqa)
and ``--diff-against REF`` / ``--changed-lines-only`` (torchlint.adoption, on temporary git
repositories)."""
from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from testkit.support import run_cli as run
from torchlint.adoption import GitError, changed_lines, changes_against
from torchlint.analysis.findings import Finding, Range, Severity
from torchlint.analysis.noqa import add_noqa
from torchlint.engine import check_source

# Two TL101 warnings (lines 8 and 9), each with a safe fix.
MODEL = '''import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.mask = torch.tril(torch.ones(4, 4))
        self.scale = torch.ones(4)

    def forward(self, x):
        return x * self.mask * self.scale
'''

CLEAN = '''import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mask", torch.tril(torch.ones(4, 4)))

    def forward(self, x):
        return x * self.mask
'''

MODULE_HEAD = '''import torch
from torch import nn


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
'''
MODULE_TAIL = '''
    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
'''


def finding(code: str, line: int, end_line: int = 0) -> Finding:
    return Finding(code, "message", Severity.WARNING, Range.of(line, 0, end_line or line, 1))


def reported(text: str, path: str = "model.py"):
    result = check_source(text, path)
    assert result.parse_error is None, result.parse_error
    return sorted((f.range.start.line, f.code) for f in result.findings)


# -- add_noqa on a text ------------------------------------------------------------------------------

def test_add_noqa_appends_sorted_codes_one_comment_per_line():
    added = add_noqa("x = 1\ny = 2\n", [finding("TL203", 1), finding("TL101", 1), finding("TL101", 1)])
    assert added.text == "x = 1  # noqa: TL101, TL203\ny = 2\n"
    assert added.lines == [1] and added.added == 1 and not added.unplaced


def test_add_noqa_merges_into_an_existing_noqa_and_leaves_a_bare_one():
    text = "a = 1  # noqa: E501\nb = 2  # noqa:TL101\nc = 3  # noqa\nd = 4  # NOQA: e501 -- long\n"
    added = add_noqa(text, [finding("TL203", 1), finding("TL101", 2), finding("TL102", 2), finding("TL101", 3),
                            finding("TL101", 4)])
    assert added.text == ("a = 1  # noqa: E501, TL203\nb = 2  # noqa:TL101, TL102\nc = 3  # noqa\n"
                          "d = 4  # NOQA: e501, TL101 -- long\n")
    assert added.lines == [1, 2, 4]


def test_add_noqa_keeps_other_comments_first_and_fmt_skip_last():
    text = "a = 1  # keep me\nb = 2  # type: ignore[attr]\nc = 3  # type: ignore  # fmt: skip\nd = 4  # fmt: skip\n"
    added = add_noqa(text, [finding("TL101", n) for n in (1, 2, 3, 4)])
    assert added.text.splitlines() == [
        "a = 1  # keep me  # noqa: TL101",
        "b = 2  # type: ignore[attr]  # noqa: TL101",
        "c = 3  # type: ignore  # noqa: TL101  # fmt: skip",
        "d = 4  # noqa: TL101  # fmt: skip",
    ]


def test_add_noqa_never_writes_into_a_string_or_after_a_backslash():
    text = 'x = f("""first\nsecond""")\ny = a + \\\n    b\nz = """only\nstring"""\n'
    added = add_noqa(text, [finding("TL101", 1, 2), finding("TL102", 3, 4), finding("TL103", 5, 5)])
    assert added.text.splitlines()[:4] == ['x = f("""first', 'second""")  # noqa: TL101', "y = a + \\",
                                           "    b  # noqa: TL102"]
    assert [f.code for f in added.unplaced] == ["TL103"]  # its only line ends inside a string
    ast.parse(added.text)


def test_add_noqa_keeps_crlf_a_byte_order_mark_and_trailing_spaces_out():
    text = "\ufeffx = 1   \r\ny = 2\r\n"
    added = add_noqa(text, [finding("TL101", 1)])
    assert added.text == "\ufeffx = 1  # noqa: TL101\r\ny = 2\r\n"


def test_directives_added_silence_the_findings_where_a_statement_spans_lines():
    # The first line of each finding ends inside a string / with a backslash: the comment goes
    # on its last line, which the noqa matching reads too.
    bodies = ['        self.layers = [nn.Linear(2, 2, bias="""x\n""" == "y"), nn.Linear(2, 2)]\n',
              '        self.layers = [nn.Linear(2, 2), \\\n            nn.Linear(2, 2)]\n']
    for body in bodies:
        text = MODULE_HEAD + body + MODULE_TAIL
        before = check_source(text, "model.py").findings
        assert [(f.code, f.range.start.line, f.range.end.line) for f in before] == [("TL102", 8, 9)]
        added = add_noqa(text, before)
        assert added.lines == [9] and "# noqa: TL102" in added.text.splitlines()[8]
        assert added.text.replace("  # noqa: TL102", "") == text  # the string is untouched
        assert reported(added.text) == []


def test_add_noqa_on_a_real_file_leaves_no_finding():
    before = check_source(MODEL, "model.py").findings
    assert [(f.range.start.line, f.code) for f in before] == [(8, "TL101"), (9, "TL101")]
    assert reported(add_noqa(MODEL, before).text) == []


# -- git diff -U0 parsing ------------------------------------------------------------------------

def test_changed_lines_reads_hunks_of_the_new_version():
    patch = "\n".join([
        "diff --git a/pkg/model.py b/pkg/model.py",
        "--- a/pkg/model.py",
        "+++ b/pkg/model.py",
        "@@ -3,0 +4,2 @@ class A:",
        "+x",
        "+y",
        "@@ -10 +12 @@",
        "-old",
        "+new",
        "@@ -20,3 +21,0 @@",  # a deletion: no line of the new version
        "-a", "-b", "-c",
        'diff --git "a/caf\\303\\251 x.py" "b/caf\\303\\251 x.py"',
        '--- "a/caf\\303\\251 x.py"',
        '+++ "b/caf\\303\\251 x.py"',
        "@@ -1 +1 @@",
        "-a",
        "+b",
        "diff --git a/gone.py b/gone.py",
        "--- a/gone.py",
        "+++ /dev/null",
        "@@ -1 +0,0 @@",
        "-a",
    ])
    assert changed_lines(patch) == {"pkg/model.py": frozenset({4, 5, 12}), "café x.py": frozenset({1})}


# -- temporary git repositories ------------------------------------------------------------------

pytestmark_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@pytest.fixture
def git_env(tmp_path, monkeypatch):
    """git that reads no user or system configuration."""
    empty = tmp_path / "empty.gitconfig"
    empty.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv("GIT_%s_NAME" % role, "Test")
        monkeypatch.setenv("GIT_%s_EMAIL" % role, "test@example.com")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE).stdout.decode()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def repo(tmp_path, git_env):
    """A repository on `main` with two committed files that have findings (old.py, kept.py)."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    git(root, "symbolic-ref", "HEAD", "refs/heads/main")
    write(root / "old.py", MODEL)
    write(root / "kept.py", MODEL)
    write(root / ".gitignore", "generated/\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "start")
    return root


def paths_in(out: str):
    return sorted({line.split(":")[0] for line in out.splitlines() if ": TL" in line})


@pytestmark_git
def test_diff_against_a_branch_checks_committed_staged_unstaged_and_untracked_files(repo, capsys):
    git(repo, "checkout", "-q", "-b", "feature")
    write(repo / "committed.py", MODEL)
    git(repo, "add", "committed.py")
    git(repo, "commit", "-q", "-m", "more")
    write(repo / "staged.py", MODEL)
    git(repo, "add", "staged.py")
    write(repo / "old.py", MODEL + "\n# edited\n")  # unstaged edit of a committed file
    write(repo / "untracked.py", MODEL)
    write(repo / "generated" / "ignored.py", MODEL)  # untracked but ignored: not a change
    write(repo / "notes.txt", "not Python")
    code, out, err = run(["check", "--no-infer", "--diff-against", "main", "."], capsys, cwd=repo)
    assert code == 1, err
    assert paths_in(out) == ["committed.py", "old.py", "staged.py", "untracked.py"]
    code, out, _ = run(["check", "--no-infer", "."], capsys, cwd=repo)  # without it: everything but ignored
    assert paths_in(out) == ["committed.py", "kept.py", "old.py", "staged.py", "untracked.py"]


@pytestmark_git
def test_diff_against_head_sees_uncommitted_changes_only(repo, capsys):
    code, out, err = run(["check", "--no-infer", "--diff-against", "HEAD"], capsys, cwd=repo)
    assert code == 0 and paths_in(out) == [], out
    assert "no Python file under . changed against HEAD" in err
    write(repo / "kept.py", MODEL.replace("4, 4", "5, 5"))
    code, out, _ = run(["check", "--no-infer", "--diff-against", "HEAD"], capsys, cwd=repo)
    assert code == 1 and paths_in(out) == ["kept.py"]


@pytestmark_git
def test_diff_against_runs_nothing_the_repositorys_git_config_names(repo, capsys, tmp_path):
    """A repository archive ships its .git/config: a file-system monitor hook, hooks, and a
    clean/smudge filter (with a process variant) for *.py. `--diff-against` asks git about the
    files, which would run each of them; none may run, and the changes are still found."""
    marker = tmp_path / "MARKER"
    hook = write(tmp_path / "hook.sh", '#!/bin/sh\necho "$0 $*" >> "%s"\ncat\n' % marker)
    hook.chmod(0o755)
    write(repo / ".gitattributes", "*.py filter=planted.driver\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-q", "-m", "attributes")
    for key, value in (("core.fsmonitor", str(hook)), ("core.hooksPath", str(tmp_path)),
                       ("filter.planted.driver.clean", str(hook)), ("filter.planted.driver.smudge", str(hook)),
                       ("filter.planted.driver.process", str(hook))):
        git(repo, "config", key, value)
    write(repo / "kept.py", MODEL.replace("4, 4", "5, 5"))
    os.utime(repo / "kept.py", (946684800, 946684800))  # a stat that differs: git must read the file
    code, out, err = run(["check", "--no-infer", "--diff-against", "HEAD", "--changed-lines-only"], capsys, cwd=repo)
    assert not marker.exists(), marker.read_text()
    assert code == 1 and paths_in(out) == ["kept.py"], err


@pytestmark_git
def test_diff_against_honours_excludes_and_the_paths_given(repo, capsys):
    write(repo / "pyproject.toml", '[tool.torchlint]\nexclude = ["legacy/"]\n')
    write(repo / "legacy" / "a.py", MODEL)
    write(repo / "src" / "b.py", MODEL)
    write(repo / "tests" / "c.py", MODEL)
    code, out, _ = run(["check", "--no-infer", "--diff-against", "HEAD", "."], capsys, cwd=repo)
    assert paths_in(out) == ["src/b.py", "tests/c.py"]
    code, out, _ = run(["check", "--no-infer", "--diff-against", "HEAD", "src"], capsys, cwd=repo)
    assert paths_in(out) == ["src/b.py"]


@pytestmark_git
def test_a_deleted_file_is_not_checked_and_a_renamed_one_is(repo, capsys):
    git(repo, "checkout", "-q", "-b", "feature")
    git(repo, "mv", "old.py", "renamed.py")
    git(repo, "rm", "-q", "kept.py")
    git(repo, "commit", "-q", "-m", "move")
    code, out, err = run(["check", "--no-infer", "--diff-against", "main"], capsys, cwd=repo)
    assert paths_in(out) == ["renamed.py"] and "kept.py" not in err, (out, err)
    # A pure rename changes no line: --changed-lines-only has nothing to say about it.
    code, out, _ = run(["check", "--no-infer", "--diff-against", "main", "--changed-lines-only"], capsys, cwd=repo)
    assert code == 0 and paths_in(out) == []


@pytestmark_git
def test_changed_lines_only_keeps_findings_on_changed_lines(repo, capsys):
    git(repo, "checkout", "-q", "-b", "feature")
    # line 9 is edited (still a finding), line 8 is not; a new file counts whole.
    write(repo / "old.py", MODEL.replace("self.scale = torch.ones(4)", "self.scale = torch.ones(8)"))
    git(repo, "commit", "-q", "-am", "edit")
    write(repo / "new.py", MODEL)
    code, out, err = run(["check", "--no-infer", "--diff-against", "main", "--changed-lines-only"], capsys,
                         cwd=repo)
    assert code == 1, err
    lines = sorted(line.split(": TL")[0] for line in out.splitlines() if ": TL" in line)
    assert lines == ["new.py:8:9", "new.py:9:9", "old.py:9:9"]
    code, out, _ = run(["check", "--no-infer", "--diff-against", "main", "--format", "json"], capsys, cwd=repo)
    assert len([e for e in json.loads(out) if e["filename"].endswith("old.py")]) == 2  # without it: both


@pytestmark_git
def test_changes_against_reports_lines_and_merge_base(repo, git_env):
    base = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "-b", "feature")
    write(repo / "old.py", "# top\n" + MODEL)
    git(repo, "commit", "-q", "-am", "top")
    git(repo, "checkout", "-q", "main")
    write(repo / "main_only.py", "x = 1\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "main moves on")
    git(repo, "checkout", "-q", "feature")
    changes = changes_against("main", str(repo), with_lines=True)
    assert changes.base == base  # the merge base, not main's tip: main's own commits are not changes
    assert changes.contains(repo / "old.py") and not changes.contains(repo / "main_only.py")
    assert changes.lines_of(repo / "old.py") == frozenset({1})


@pytestmark_git
def test_bad_ref_and_not_a_repository_exit_2_saying_why(repo, tmp_path, capsys):
    code, _, err = run(["check", "--no-infer", "--diff-against", "no-such-branch"], capsys, cwd=repo)
    assert code == 2 and "unknown git ref 'no-such-branch'" in err
    code, _, err = run(["check", "--no-infer", "--diff-against=-x"], capsys, cwd=repo)  # never a git option
    assert code == 2 and "'-x' is not a git ref" in err
    outside = write(tmp_path / "outside" / "model.py", MODEL)
    code, _, err = run(["check", "--no-infer", "--diff-against", "main", outside], capsys, cwd=tmp_path)
    assert code == 2 and "is not in a git repository" in err
    with pytest.raises(GitError, match="not a git ref"):
        changes_against("-x", str(repo))


def test_changed_lines_only_needs_diff_against_and_refuses_fix(capsys, tmp_path):
    code, _, err = run(["check", "--changed-lines-only", "."], capsys, cwd=tmp_path)
    assert code == 2 and "--changed-lines-only needs --diff-against" in err
    code, _, err = run(["check", "--diff-against", "HEAD", "--changed-lines-only", "--fix", "."], capsys, cwd=tmp_path)
    assert code == 2 and "cannot be combined with --fix" in err


# -- --add-noqa ----------------------------------------------------------------------------------

def test_add_noqa_then_a_run_reports_nothing(tmp_path, capsys):
    first = write(tmp_path / "a.py", MODEL)
    second = write(tmp_path / "pkg" / "b.py", MODEL.replace("self.mask = torch.tril(torch.ones(4, 4))",
                                                            "self.mask = torch.tril(torch.ones(4, 4))  # why"))
    clean = write(tmp_path / "c.py", CLEAN)
    code, out, err = run(["check", "--no-infer", "."], capsys, cwd=tmp_path)
    assert code == 1 and out.count(": TL101") == 4
    code, out, err = run(["check", "--no-infer", "--add-noqa", "."], capsys, cwd=tmp_path)
    assert code == 0, err
    assert out == "" and "Added 4 noqa directives to 2 files." in err
    assert first.read_text().splitlines()[7:9] == ["        self.mask = torch.tril(torch.ones(4, 4))  # noqa: TL101",
                                                   "        self.scale = torch.ones(4)  # noqa: TL101"]
    assert second.read_text().splitlines()[7] == \
        "        self.mask = torch.tril(torch.ones(4, 4))  # why  # noqa: TL101"
    assert clean.read_text() == CLEAN
    code, out, err = run(["check", "--no-infer", "."], capsys, cwd=tmp_path)
    assert code == 0 and "All checks passed!" in out, out
    code, _, err = run(["check", "--no-infer", "--add-noqa", "."], capsys, cwd=tmp_path)  # nothing left to add
    assert code == 0 and "Added 0 noqa directives to 0 files." in err


def test_add_noqa_merges_into_noqa_of_other_tools(tmp_path, capsys):
    path = write(tmp_path / "a.py", MODEL.replace("self.scale = torch.ones(4)",
                                                  "self.scale = torch.ones(4)  # noqa: E501"))
    code, _, err = run(["check", "--no-infer", "--add-noqa", path], capsys)
    assert code == 0, err
    assert path.read_text().splitlines()[8] == "        self.scale = torch.ones(4)  # noqa: E501, TL101"


def test_add_noqa_refuses_a_file_that_does_not_parse_and_does_the_others(tmp_path, capsys):
    broken = write(tmp_path / "broken.py", "x = (\n" + MODEL)
    good = write(tmp_path / "good.py", MODEL)
    code, out, err = run(["check", "--no-infer", "--add-noqa", "."], capsys, cwd=tmp_path)
    assert code == 2
    assert "torchlint: error: broken.py: does not parse (line 1: SyntaxError:" in err
    assert "no noqa directive added (fix it, then run again)" in err
    assert broken.read_text() == "x = (\n" + MODEL
    assert good.read_text().count("# noqa: TL101") == 2 and "Added 2 noqa directives to 1 file." in err


def test_add_noqa_on_a_read_only_file_writes_nothing_and_says_so(tmp_path, capsys):
    path = write(tmp_path / "locked.py", MODEL)
    path.chmod(0o444)
    try:  # no write permission bit: refused even for root
        code, _, err = run(["check", "--no-infer", "--add-noqa", path], capsys)
    finally:
        path.chmod(0o644)
    assert code == 2 and path.read_text() == MODEL
    assert "locked.py: read-only file; no noqa directive added (make it writable, e.g. with `chmod u+w`, to " \
           "let --add-noqa change it)" in err
    assert "Added 0 noqa directives to 0 files." in err


def test_add_noqa_on_a_notebook_changes_only_the_cells_source(tmp_path, capsys):
    notebook = {"cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Model"]},
        {"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [],
         "source": ["import torch\n", "from torch import nn\n", "%matplotlib inline"]},
        {"cell_type": "code", "execution_count": 2, "metadata": {"tags": ["x"]}, "outputs": [],
         "source": ["class Block(nn.Module):\n", "    def __init__(self):\n", "        super().__init__()\n",
                    "        self.mask = torch.ones(3)  # see paper\n", "\n", "    def forward(self, x):\n",
                    "        return x * self.mask"]},
    ], "metadata": {"kernelspec": {"language": "python", "name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}
    text = json.dumps(notebook, indent=1) + "\n"
    path = write(tmp_path / "nb.ipynb", text)
    code, out, _ = run(["check", "--no-infer", path], capsys)
    assert code == 1 and "nb.ipynb:cell 3:4:9: TL101" in out
    code, _, err = run(["check", "--no-infer", "--add-noqa", path], capsys)
    assert code == 0 and "Added 1 noqa directive to 1 file." in err
    assert path.read_text() == text.replace("# see paper\\n", "# see paper  # noqa: TL101\\n")
    code, out, _ = run(["check", "--no-infer", path], capsys)
    assert code == 0 and "All checks passed!" in out


def test_add_noqa_hints_only_when_they_are_printed(tmp_path, capsys):
    hint = "import torch\n\nx = torch.FloatTensor(3)\n"  # TL301, a hint
    path = write(tmp_path / "h.py", hint)
    code, _, err = run(["check", "--no-infer", "--add-noqa", path], capsys)
    assert code == 0 and path.read_text() == hint
    code, _, err = run(["check", "--no-infer", "--add-noqa", "--show-hints", path], capsys)
    assert code == 0 and path.read_text() == hint.replace("(3)", "(3)  # noqa: TL301")


def test_add_noqa_limited_to_selected_rules_and_from_stdin(tmp_path, capsys, monkeypatch):
    path = write(tmp_path / "a.py", MODEL)
    code, _, _ = run(["check", "--no-infer", "--add-noqa", "--select", "TL102", path], capsys)
    assert code == 0 and path.read_text() == MODEL
    import io
    import sys
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(MODEL.encode())))
    code, out, err = run(["check", "--no-infer", "--add-noqa", "-"], capsys)
    assert code == 0 and out == MODEL.replace("(4, 4))\n", "(4, 4))  # noqa: TL101\n").replace(
        "ones(4)\n", "ones(4)  # noqa: TL101\n")


def test_add_noqa_refuses_to_combine_with_fix(tmp_path, capsys):
    code, _, err = run(["check", "--add-noqa", "--fix", "."], capsys, cwd=tmp_path)
    assert code == 2 and "--add-noqa cannot be combined with --fix" in err
