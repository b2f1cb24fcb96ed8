"""The torchlint command line: exit codes, fixing, discovery, robustness, subprocess and flake8."""
from __future__ import annotations

import ast
import errno
import json
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.support import run_cli as run
from torchlint import cli, fixing
from torchlint.cli import workers
from torchlint.cli.process_state import ProcessState
from torchlint.engine import CheckOptions
from torchlint.rules import RULES_BY_CODE

# One TL101 finding whose preferred fix (register_buffer) is unsafe and whose
# non-persistent-buffer fix is safe.
MASK = '''import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.mask = torch.tril(torch.ones(4, 4))
'''

# One TL101 finding with unsafe fixes only (it requires grad).
TRAINABLE = '''import torch
from torch import nn


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.randn(3, requires_grad=True)
'''

# One TL301 hint (a legacy constructor that works as written), with a safe fix.
HINT = '''import torch

x = torch.FloatTensor(3)
'''

# One TL106 information (a layer forward never uses), no fix.
UNUSED = '''import torch
from torch import nn


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.unused = nn.Linear(3, 3)

    def forward(self, x):
        return self.fc(x)
'''

CLEAN = '''import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mask", torch.tril(torch.ones(4, 4)))
'''


def write(path: Path, text: str, newline: str = "\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.replace("\n", newline).encode("utf-8"))
    return path


# -- exit codes ----------------------------------------------------------------------------------

def test_clean_file_exits_0(tmp_path, capsys):
    write(tmp_path / "ok.py", CLEAN)
    code, out, _ = run(["check", tmp_path / "ok.py"], capsys)
    assert code == 0
    assert "All checks passed!" in out


def test_findings_exit_1_with_ruff_style_lines(tmp_path, capsys):
    write(tmp_path / "model.py", MASK)
    code, out, _ = run(["check", "model.py", "--select", "TL101"], capsys, cwd=tmp_path)
    assert code == 1
    assert out.splitlines()[0].startswith("model.py:8:9: TL101 [warning] [*] `self.mask`")
    assert out.rstrip().endswith("Found 1 finding (1 fixable with --fix).")


def test_unsafe_only_fixes_have_their_own_marker_and_a_hint(tmp_path, capsys):
    write(tmp_path / "model.py", TRAINABLE)
    code, out, _ = run(["check", "model.py", "--select", "TL101"], capsys, cwd=tmp_path)
    assert code == 1
    assert "TL101 [error] [-] `self.w`" in out and "[*]" not in out
    assert "1 fixable with --fix --unsafe-fixes, marked [-]" in out
    _, out, _ = run(["check", "model.py", "--select", "TL101", "--unsafe-fixes"], capsys, cwd=tmp_path)
    assert "TL101 [error] [*] `self.w`" in out


def test_exit_zero_and_quiet(tmp_path, capsys):
    write(tmp_path / "model.py", MASK)
    code, out, _ = run(["check", "-q", "--exit-zero", tmp_path / "model.py"], capsys)
    assert code == 0
    assert "TL101" in out and "Found" not in out


# -- the grading: what is printed, what fails the run ---------------------------------------------

HIDDEN = "1 hint hidden (--show-hints shows them)"


def test_hints_alone_pass_and_are_counted_not_printed(tmp_path, capsys):
    write(tmp_path / "legacy.py", HINT)
    code, out, _ = run(["check", "legacy.py"], capsys, cwd=tmp_path)
    assert code == 0
    assert "TL301" not in out
    assert out == "All checks passed! %s.\n" % HIDDEN


def test_a_warning_fails_the_run_and_hints_stay_counted(tmp_path, capsys):
    write(tmp_path / "model.py", MASK)
    write(tmp_path / "legacy.py", HINT)
    code, out, _ = run(["check", "--select", "TL101,TL301", "."], capsys, cwd=tmp_path)
    assert code == 1
    assert "model.py:8:9: TL101 [warning] [*] `self.mask`" in out and "TL301" not in out
    assert out.rstrip().endswith("Found 1 finding (1 fixable with --fix); %s." % HIDDEN)


def test_show_hints_prints_them_with_their_severity(tmp_path, capsys):
    write(tmp_path / "legacy.py", HINT)
    code, out, _ = run(["check", "--show-hints", "legacy.py"], capsys, cwd=tmp_path)
    assert code == 0  # printed, still not failing
    assert out.splitlines()[0].startswith("legacy.py:3:5: TL301 [hint] [*] `torch.FloatTensor(...)`")
    assert out.rstrip().endswith("Found 1 finding (1 fixable with --fix).") and "hidden" not in out


def test_show_all_prints_hints(tmp_path, capsys):
    # --show-all reports the quiet findings as hints: hiding them would show nothing more.
    write(tmp_path / "legacy.py", HINT)
    code, out, _ = run(["check", "--show-all", "legacy.py"], capsys, cwd=tmp_path)
    assert code == 0 and "TL301 [hint]" in out and "hidden" not in out


def test_fail_on_hint_fails_on_hints_and_prints_them(tmp_path, capsys):
    write(tmp_path / "legacy.py", HINT)
    code, out, _ = run(["check", "--fail-on", "hint", "legacy.py"], capsys, cwd=tmp_path)
    assert code == 1
    assert "legacy.py:3:5: TL301 [hint]" in out and "hidden" not in out


@pytest.mark.parametrize("fail_on, codes", [
    # MASK: a warning; TRAINABLE: an error; UNUSED: an information; HINT: a hint.
    ("error", {"model.py": 0, "trainable.py": 1, "unused.py": 0, "legacy.py": 0}),
    ("warning", {"model.py": 1, "trainable.py": 1, "unused.py": 0, "legacy.py": 0}),
    ("info", {"model.py": 1, "trainable.py": 1, "unused.py": 1, "legacy.py": 0}),
    ("hint", {"model.py": 1, "trainable.py": 1, "unused.py": 1, "legacy.py": 1}),
])
def test_fail_on_sets_the_least_severe_finding_that_fails(tmp_path, capsys, fail_on, codes):
    for name, text in (("model.py", MASK), ("trainable.py", TRAINABLE), ("unused.py", UNUSED), ("legacy.py", HINT)):
        write(tmp_path / name, text)
    for name, expected in codes.items():
        code, out, _ = run(["check", "--fail-on", fail_on, name], capsys, cwd=tmp_path)
        assert code == expected, (name, out)
    assert run(["check", "unused.py"], capsys, cwd=tmp_path)[0] == 0  # the default: warning
    code, out, _ = run(["check", "unused.py"], capsys, cwd=tmp_path)
    assert "unused.py:9:9: TL106 [info]" in out  # information is printed even when it does not fail


def test_a_file_that_does_not_parse_fails_whatever_fail_on_says(tmp_path, capsys):
    write(tmp_path / "broken.py", "x = (\n")
    code, out, _ = run(["check", "--fail-on", "error", "broken.py"], capsys, cwd=tmp_path)
    assert code == 1 and "SyntaxError" in out


def test_fail_on_and_show_hints_from_pyproject(tmp_path, capsys):
    write(tmp_path / "legacy.py", HINT)
    write(tmp_path / "model.py", MASK)
    write(tmp_path / "pyproject.toml", '[tool.torchlint]\nfail-on = "hint"\n')
    code, out, _ = run(["check", "legacy.py"], capsys, cwd=tmp_path)
    assert code == 1 and "TL301 [hint]" in out
    write(tmp_path / "pyproject.toml", '[tool.torchlint]\nfail-on = "error"\n')
    assert run(["check", "model.py"], capsys, cwd=tmp_path)[0] == 0
    assert run(["check", "--fail-on", "warning", "model.py"], capsys, cwd=tmp_path)[0] == 1  # the flag wins
    write(tmp_path / "pyproject.toml", '[tool.torchlint]\nshow-hints = true\n')
    code, out, _ = run(["check", "legacy.py"], capsys, cwd=tmp_path)
    assert code == 0 and "legacy.py:3:5: TL301 [hint]" in out and "hidden" not in out


@pytest.mark.parametrize("table, message", [
    ('fail-on = "fatal"\n', "fail-on: expected one of error, warning, info, hint, got 'fatal'"),
    ('fail-on = "Warning"\n', "fail-on: expected one of error, warning, info, hint, got 'Warning'"),
    ("fail-on = 1\n", "fail-on: expected a string, got 1"),
    ('show-hints = "yes"\n', "show-hints: expected true or false, got 'yes'"),
])
def test_bad_grading_settings_exit_2_naming_the_key(tmp_path, capsys, table, message):
    write(tmp_path / "pyproject.toml", "[tool.torchlint]\n" + table)
    write(tmp_path / "model.py", MASK)
    code, out, err = run(["check", "."], capsys, cwd=tmp_path)
    assert code == 2
    assert "pyproject.toml: [tool.torchlint] " + message in err and out == ""


def test_bad_fail_on_flag_exits_2_naming_the_flag(tmp_path, capsys):
    write(tmp_path / "model.py", MASK)
    code, out, err = run(["check", "--fail-on", "warn", "model.py"], capsys, cwd=tmp_path)
    assert code == 2 and out == ""
    assert "argument --fail-on: invalid choice: 'warn'" in err


def test_quiet_leaves_hints_out_and_counts_nothing(tmp_path, capsys):
    write(tmp_path / "legacy.py", HINT)
    write(tmp_path / "model.py", MASK)
    code, out, _ = run(["check", "-q", "--select", "TL101,TL301", "."], capsys, cwd=tmp_path)
    assert code == 1
    assert out.splitlines() == [line for line in out.splitlines() if line.startswith("model.py:8:9: TL101 ")]
    assert len(out.splitlines()) == 1


def test_statistics_count_hidden_hints_in_one_row(tmp_path, capsys):
    write(tmp_path / "legacy.py", HINT + "y = torch.LongTensor(2)\n")
    write(tmp_path / "model.py", MASK)
    code, out, _ = run(["check", "--statistics", "--select", "TL101,TL301", "."], capsys, cwd=tmp_path)
    assert code == 1
    rows = [line.split("\t") for line in out.splitlines()]
    assert [(count.strip(), rule.strip()) for count, rule, _ in rows] == [("1", "TL101"), ("2", "")]
    assert rows[1][2].strip() == "hints (--show-hints counts them per rule)"
    code, out, _ = run(["check", "--statistics", "--show-hints", "--select", "TL101,TL301", "."], capsys, cwd=tmp_path)
    assert [tuple(c.strip() for c in line.split("\t")[:2]) for line in out.splitlines()] == [("2", "TL301"),
                                                                                          ("1", "TL101")]


def test_fix_applies_safe_fixes_of_hidden_hints(tmp_path, capsys):
    # Fixing is independent of what is printed: --fix fixes hints, and says so in "N fixed".
    path = write(tmp_path / "legacy.py", HINT)
    code, out, _ = run(["check", "--fix", "legacy.py"], capsys, cwd=tmp_path)
    assert code == 0
    assert "torch.empty(3, dtype=torch.float32)" in path.read_text()
    assert out == "Found 1 finding (1 fixed, 0 remaining).\n"


def test_diff_shows_fixes_of_hints_and_exit_zero_turns_its_1_off(tmp_path, capsys):
    write(tmp_path / "legacy.py", HINT)
    code, out, err = run(["check", "--diff", "legacy.py"], capsys, cwd=tmp_path)
    assert code == 1  # --fix would change the file
    assert "+x = torch.empty(3, dtype=torch.float32)\n" in out and "Would fix 1 finding in 1 file." in err
    code, out, _ = run(["check", "--diff", "--exit-zero", "legacy.py"], capsys, cwd=tmp_path)
    assert code == 0 and "+x = torch.empty(3, dtype=torch.float32)\n" in out


def test_machine_formats_carry_hints_with_their_severity(tmp_path, capsys):
    write(tmp_path / "legacy.py", HINT)
    write(tmp_path / "model.py", MASK)
    argv = ["check", "--select", "TL101,TL301", "."]
    code, out, _ = run([*argv, "--format", "json"], capsys, cwd=tmp_path)
    assert code == 1
    assert sorted((e["code"], e["severity"]) for e in json.loads(out)) == [("TL101", "warning"), ("TL301", "hint")]
    code, out, _ = run([*argv, "--format", "sarif"], capsys, cwd=tmp_path)
    results = json.loads(out)["runs"][0]["results"]
    assert sorted((r["ruleId"], r["level"], r["properties"]["severity"]) for r in results) == [
        ("TL101", "warning", "warning"), ("TL301", "note", "hint")]
    code, out, _ = run([*argv, "--format", "github"], capsys, cwd=tmp_path)
    assert sorted(line.split(" ", 1)[0] for line in out.splitlines()) == ["::notice", "::warning"]
    assert "::TL301 [hint] `torch.FloatTensor(...)`" in out
    # Hints alone: carried, and the run still passes.
    code, out, _ = run(["check", "--format", "json", "legacy.py"], capsys, cwd=tmp_path)
    assert code == 0 and [e["severity"] for e in json.loads(out)] == ["hint"]


@pytest.mark.parametrize("argv", [
    ["check", "--no-such-flag"],
    ["check", "--format", "xml"],
    [],
    ["rule", "TL999"],
])
def test_usage_errors_exit_2(argv, capsys):
    code, _, _ = run(argv, capsys)
    assert code == 2


def test_missing_path_exits_2(tmp_path, capsys):
    code, _, err = run(["check", tmp_path / "nope.py"], capsys)
    assert code == 2
    assert "nope.py" in err


def test_unknown_select_code_exits_2(tmp_path, capsys):
    write(tmp_path / "model.py", MASK)
    code, _, err = run(["check", "--select", "TL999", tmp_path / "model.py"], capsys)
    assert code == 2
    assert "TL999" in err


@pytest.mark.parametrize("flags, message", [
    (["--select", ""], "--select: no rule code in ''"),
    (["--select", " , "], "--select: no rule code in ' , '"),
    (["--select", "TL101", "--select", ""], "--select: no rule code in ''"),
    (["--ignore", ""], "--ignore: no rule code in ''"),
    (["--extend-select", ","], "--extend-select: no rule code in ','"),
    (["--select", "TL101,TL999"], "--select: unknown rule code or prefix 'TL999'"),
    (["--ignore", "E501"], "--ignore: unknown rule code or prefix 'E501'"),
])
def test_empty_or_unknown_rule_flags_exit_2(tmp_path, capsys, flags, message):
    # `--select ""` used to select nothing: every rule silently off and "All checks passed!".
    write(tmp_path / "model.py", MASK)
    code, out, err = run(["check", *flags, tmp_path / "model.py"], capsys)
    assert code == 2
    assert message in err and out == ""


@pytest.mark.parametrize("table, message", [
    ("select = []\n", "select: an empty list selects no rule at all"),
    ("select = ['']\n", "select: empty rule code ''"),
    ("extend-select = ['TL999']\n", "extend-select: unknown rule code or prefix 'TL999'"),
    ("ignore = ['TL1', ' ']\n", "ignore: empty rule code ' '"),
    ("per-file-ignores = { 'tests/*' = [] }\n", 'per-file-ignores."tests/*": give the codes these files ignore'),
    ("per-file-ignores = { 'tests/*' = ['TL1O1'] }\n", "unknown rule code or prefix 'TL1O1'"),
])
def test_empty_or_unknown_rule_settings_exit_2(tmp_path, capsys, table, message):
    write(tmp_path / "pyproject.toml", "[tool.torchlint]\n" + table)
    write(tmp_path / "model.py", MASK)
    code, out, err = run(["check", "."], capsys, cwd=tmp_path)
    assert code == 2
    assert "pyproject.toml" in err and message in err and out == ""


def test_config_error_exits_2_and_names_the_key(tmp_path, capsys):
    write(tmp_path / "pyproject.toml", "[tool.torchlint]\nselekt = ['TL101']\n")
    write(tmp_path / "model.py", MASK)
    code, out, err = run(["check", "."], capsys, cwd=tmp_path)
    assert code == 2
    assert "pyproject.toml" in err and "'selekt'" in err
    assert out == ""


def test_internal_error_is_reported_and_other_files_still_checked(tmp_path, capsys, monkeypatch):
    def crash(self, ctx):
        if ctx.path.endswith("boom.py"):
            raise RuntimeError("rule exploded")
        return original(self, ctx)

    rule_type = type(RULES_BY_CODE["TL101"])
    original = rule_type.check
    monkeypatch.setattr(rule_type, "check", crash)
    write(tmp_path / "a_boom.py", MASK.replace("Block", "Boom")).rename(tmp_path / "boom.py")
    write(tmp_path / "model.py", MASK)
    code, out, err = run(["check", "--select", "TL101", "."], capsys, cwd=tmp_path)
    assert code == 2
    assert err.count("RuntimeError: rule exploded") == 1 and "boom.py" in err
    assert "model.py:8:9: TL101" in out


# -- files that cannot be checked ----------------------------------------------------------------

def test_syntax_error_is_reported_and_other_files_checked(tmp_path, capsys):
    write(tmp_path / "a_broken.py", "def f(:\n    pass\n")
    write(tmp_path / "b_model.py", MASK)
    code, out, _ = run(["check", "--select", "TL101", "."], capsys, cwd=tmp_path)
    assert code == 1
    assert "a_broken.py:1:7: SyntaxError:" in out
    assert "b_model.py:8:9: TL101" in out
    assert "Found 2 findings" in out


def test_syntax_error_alone_exits_1(tmp_path, capsys):
    write(tmp_path / "broken.py", "x = (\n")
    code, out, _ = run(["check", tmp_path / "broken.py"], capsys)
    assert code == 1
    assert "SyntaxError" in out


def test_undecodable_file_is_reported_and_other_files_checked(tmp_path, capsys):
    (tmp_path / "a_latin.py").write_bytes(b"x = 1\nname = '\xe9t\xe9'\n")
    write(tmp_path / "b_model.py", MASK)
    code, out, _ = run(["check", "--select", "TL101", "."], capsys, cwd=tmp_path)
    assert code == 1
    assert "a_latin.py:2:9: DecodeError:" in out
    assert "b_model.py:8:9: TL101" in out


def test_coding_cookie_is_honoured(tmp_path, capsys):
    text = "# -*- coding: latin-1 -*-\n# caf\xe9\n" + MASK
    (tmp_path / "model.py").write_bytes(text.encode("latin-1"))
    code, out, _ = run(["check", "--select", "TL101", tmp_path / "model.py"], capsys)
    assert code == 1
    assert "model.py:10:9: TL101" in out


# -- --fix, --unsafe-fixes, --diff ----------------------------------------------------------------

def test_fix_applies_safe_fix_and_reports_what_remains(tmp_path, capsys):
    path = write(tmp_path / "model.py", MASK + TRAINABLE.split("\n\n\n", 1)[1])
    code, out, _ = run(["check", "--fix", "--select", "TL101", path], capsys)
    fixed = path.read_text()
    ast.parse(fixed)
    assert 'self.register_buffer("mask", torch.tril(torch.ones(4, 4)), persistent=False)' in fixed
    assert "self.w = torch.randn(3, requires_grad=True)" in fixed  # unsafe: left alone
    assert code == 1  # self.w remains
    assert "Found 2 findings (1 fixed, 1 remaining; 1 more fixable with --unsafe-fixes, marked [-])." in out
    assert ":8:9:" not in out  # the fixed finding is not listed


def test_fix_everything_exits_0(tmp_path, capsys):
    path = write(tmp_path / "model.py", MASK)
    code, out, _ = run(["check", "--fix", "--select", "TL101", path], capsys)
    assert code == 0
    assert "(1 fixed, 0 remaining)" in out


def test_unsafe_fix_applied_only_with_unsafe_fixes(tmp_path, capsys):
    path = write(tmp_path / "model.py", TRAINABLE)
    run(["check", "--fix", "--select", "TL101", path], capsys)
    assert path.read_text() == TRAINABLE
    code, _, _ = run(["check", "--fix", "--unsafe-fixes", "--select", "TL101", path], capsys)
    fixed = path.read_text()
    assert "self.w = nn.Parameter(torch.randn(3, requires_grad=True))" in fixed
    ast.parse(fixed)
    assert code == 0


def test_unsafe_fixes_prefer_the_rules_preferred_fix(tmp_path, capsys):
    path = write(tmp_path / "model.py", MASK)
    run(["check", "--fix", "--unsafe-fixes", "--select", "TL101", path], capsys)
    assert 'self.register_buffer("mask", torch.tril(torch.ones(4, 4)))\n' in path.read_text()


def test_fix_keeps_crlf_and_file_mode(tmp_path, capsys):
    path = write(tmp_path / "model.py", MASK, newline="\r\n")
    path.chmod(0o640)
    run(["check", "--fix", "--select", "TL101", path], capsys)
    data = path.read_bytes()
    assert b"persistent=False)\r\n" in data
    assert data.count(b"\r\n") == MASK.count("\n") and b"\n" not in data.replace(b"\r\n", b"")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["model.py"]  # no temporary file left


def test_fix_adds_import_with_the_files_newline(tmp_path, capsys):
    # Nothing in the file spells nn.Parameter: the fix adds `import torch`, with the file's newline.
    text = "from torch.nn import Module\nfrom torch import ones\n\n\nclass M(Module):\n    def __init__(self):\n" \
           "        super().__init__()\n        self.w = ones(3, requires_grad=True)\n"
    path = write(tmp_path / "model.py", text, newline="\r\n")
    run(["check", "--fix", "--unsafe-fixes", "--select", "TL101", path], capsys)
    data = path.read_bytes()
    assert data.startswith(b"import torch\r\nfrom torch.nn import Module\r\n"), data
    assert b"torch.nn.Parameter(ones(3, requires_grad=True))" in data
    assert b"\n" not in data.replace(b"\r\n", b"")


def test_crash_during_write_leaves_original_intact(tmp_path, capsys, monkeypatch):
    path = write(tmp_path / "model.py", MASK)
    real_pwrite = os.pwrite
    calls = []

    def crash_after_a_few_bytes(descriptor, data, offset):
        calls.append(offset)
        if len(calls) == 1:  # the fixed content: a few bytes land, then the disk fails
            real_pwrite(descriptor, bytes(data[:7]), offset)
            raise OSError(errno.ENOSPC, "disk on fire")
        return real_pwrite(descriptor, data, offset)  # putting the old content back works

    monkeypatch.setattr(fixing.os, "pwrite", crash_after_a_few_bytes)
    code, out, err = run(["check", "--fix", "--select", "TL101", path], capsys)
    assert code == 2
    assert "model.py: not fixed: disk on fire" in err
    assert path.read_text() == MASK
    assert [p.name for p in tmp_path.iterdir()] == ["model.py"]
    assert "model.py:8:9: TL101" in out and "fixed" not in out  # reported as still there


def test_diff_prints_and_writes_nothing(tmp_path, capsys):
    path = write(tmp_path / "model.py", MASK)
    code, out, err = run(["check", "--diff", "--select", "TL101", "model.py"], capsys, cwd=tmp_path)
    assert code == 1
    assert path.read_text() == MASK
    assert "--- model.py\n+++ model.py\n" in out
    assert "-        self.mask = torch.tril(torch.ones(4, 4))\n" in out
    assert '+        self.register_buffer("mask", torch.tril(torch.ones(4, 4)), persistent=False)\n' in out
    assert "Would fix 1 finding in 1 file." in err


def test_diff_with_nothing_to_fix_exits_0(tmp_path, capsys):
    write(tmp_path / "ok.py", CLEAN)
    code, out, _ = run(["check", "--diff", tmp_path / "ok.py"], capsys)
    assert code == 0 and out == ""


def test_fix_leaves_unparsable_files_alone(tmp_path, capsys):
    path = write(tmp_path / "broken.py", "def f(:\n")
    code, _, _ = run(["check", "--fix", path], capsys)
    assert code == 1
    assert path.read_text() == "def f(:\n"


# -- discovery -----------------------------------------------------------------------------------

def test_directory_walk_skips_excluded_folders(tmp_path, capsys):
    for folder in [".venv/lib", "node_modules/pkg", "build/lib", "generated", "myenv", "src/__pycache__",
                   "pkg.egg-info", "vendored/deep"]:
        write(tmp_path / folder / "bad.py", MASK)
    write(tmp_path / "myenv" / "pyvenv.cfg", "home = /usr/bin\n")
    write(tmp_path / ".gitignore", "# generated code\n/generated/\nvendored\n*.tmp.py\n")
    write(tmp_path / "scratch.tmp.py", MASK)
    write(tmp_path / "src" / "model.py", MASK)
    write(tmp_path / "src" / "notes.txt", "not python")
    write(tmp_path / "pyproject.toml", "[project]\nname = 'x'\n")
    code, out, _ = run(["check", "--select", "TL101", "--format", "json", "."], capsys, cwd=tmp_path)
    assert code == 1
    files = sorted({Path(entry["filename"]).relative_to(tmp_path).as_posix() for entry in json.loads(out)})
    assert files == ["src/model.py"]


def test_config_exclude_and_explicit_files(tmp_path, capsys):
    write(tmp_path / "pyproject.toml", '[tool.torchlint]\nexclude = ["tests/fixtures"]\n'
                                       'extend-exclude = ["legacy_*.py"]\n')
    write(tmp_path / "tests" / "fixtures" / "bad.py", MASK)
    write(tmp_path / "legacy_model.py", MASK)
    write(tmp_path / "model.py", MASK)
    write(tmp_path / ".venv" / "explicit.py", MASK)
    code, out, _ = run(["check", "--select", "TL101", "."], capsys, cwd=tmp_path)
    assert "model.py:8:9" in out and "bad.py" not in out and "legacy_model.py" not in out
    # Files named explicitly are always checked.
    code, out, _ = run(["check", "--select", "TL101", "tests/fixtures/bad.py", ".venv/explicit.py"], capsys,
                       cwd=tmp_path)
    assert "tests/fixtures/bad.py:8:9" in out and ".venv/explicit.py:8:9" in out
    # ... unless --force-exclude (what pre-commit runs, naming every changed file).
    code, out, _ = run(["check", "--force-exclude", "--select", "TL101", "tests/fixtures/bad.py",
                        ".venv/explicit.py", "legacy_model.py", "model.py"], capsys, cwd=tmp_path)
    assert code == 1 and out.splitlines()[0].startswith("model.py:8:9") and "Found 1 finding" in out


def test_pre_commit_hooks_file():
    import yaml  # a test dependency (pyyaml): missing, the test fails rather than skips

    hooks = yaml.safe_load((Path(__file__).resolve().parent.parent / ".pre-commit-hooks.yaml").read_text())
    by_id = {hook["id"]: hook for hook in hooks}
    assert set(by_id) == {"torchlint", "torchlint-fix"}
    assert by_id["torchlint"]["entry"].startswith("torchlint check")
    assert "--fix" in by_id["torchlint-fix"]["entry"].split()
    assert all(hook["language"] == "python" and hook["types"] == ["python"] for hook in hooks)


def test_many_files_in_parallel_give_sorted_complete_results(tmp_path, capsys):
    for i in range(workers.PARALLEL_MIN_FILES + 4):
        write(tmp_path / ("m%02d.py" % i), MASK if i % 2 else CLEAN)
    write(tmp_path / "m99_broken.py", "def f(:\n")
    code, out, _ = run(["check", "--select", "TL101", "."], capsys, cwd=tmp_path)
    assert code == 1
    lines = [line for line in out.splitlines() if line.startswith("m")]
    assert lines == sorted(lines)
    assert len([line for line in lines if "TL101" in line]) == (workers.PARALLEL_MIN_FILES + 4) // 2
    assert "m99_broken.py:1:7: SyntaxError" in out


def test_a_worker_forked_after_the_run_showed_its_log_logs_once():
    # A forked worker inherits the main process's handler on the "torchlint" logger; with -v
    # both would print each message.
    logger = logging.getLogger("torchlint")
    parent = ProcessState()
    parent.show_log(True)
    inherited = parent.log_handler
    worker = ProcessState(as_a_worker=True)  # as start_worker makes it, after the fork
    try:
        worker.show_log(True)
        assert [h for h in logger.handlers if isinstance(h, logging.StreamHandler)] == [worker.log_handler]
    finally:
        worker.close()
        parent.close()
    assert inherited not in logger.handlers and worker.log_handler is None


def test_workers_get_the_files_of_one_folder_together_the_largest_batches_first(tmp_path):
    # Files of one folder import the same modules: a worker given them together reads those once.
    sizes = {"a": [100] * (workers.BATCH_FILES + 2), "b": [5000] * 3, "c": [10]}
    jobs = []
    for folder, lengths in sizes.items():
        for number, length in enumerate(lengths):
            path = tmp_path / folder / ("m%02d.py" % number)
            write(path, "x = 1\n" + "#" * length + "\n")
            jobs.append(cli.Job(path=str(path), display=str(path), options=CheckOptions()))
    batches = workers._batches(jobs)
    assert sorted(index for batch in batches for index in batch) == list(range(len(jobs)))
    folders = [{os.path.dirname(jobs[index].path) for index in batch} for batch in batches]
    assert all(len(one) == 1 for one in folders) and len(batches) == 4
    assert all(len(batch) <= workers.BATCH_FILES and batch == sorted(batch) for batch in batches)
    assert folders[0] == {str(tmp_path / "b")} and folders[-1] == {str(tmp_path / "c")}


# -- other commands and entry points ----------------------------------------------------------------

def test_rule_prints_the_doc_page(capsys):
    code, out, _ = run(["rule", "tl101"], capsys)
    assert code == 0
    assert out.startswith("# TL101 unregistered-tensor")


def test_rule_all_lists_every_rule(capsys):
    code, out, _ = run(["rule", "--all"], capsys)
    assert code == 0
    listed = [line.split()[0] for line in out.splitlines()]
    assert [c for c in listed if not c.startswith("TL9")] == sorted(RULES_BY_CODE)
    assert "unregistered-tensor" in out


def test_python_dash_m_torchlint(tmp_path):
    write(tmp_path / "model.py", MASK)
    write(tmp_path / "broken.py", "x = (\n")
    proc = subprocess.run([sys.executable, "-m", "torchlint", "check", "--select", "TL101", "--format", "json", "."],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    entries = json.loads(proc.stdout)
    assert [(Path(e["filename"]).name, e["code"]) for e in entries] == [("broken.py", None), ("model.py", "TL101")]


def test_flake8_plugin_reports_tl_codes(tmp_path):
    write(tmp_path / "model.py", MASK.replace("torch.ones(4, 4))", "torch.ones(4, 4))  # keep it"))
    write(tmp_path / "quiet.py", MASK.replace("torch.ones(4, 4))", "torch.ones(4, 4))  # noqa: TL101"))
    proc = subprocess.run([sys.executable, "-m", "flake8", "--select", "TL", "model.py", "quiet.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("model.py:8:9: TL101 `self.mask`"), proc.stdout


def test_every_code_verify_reports_has_a_page_the_rule_command_prints(capsys):
    from torchlint.lsp.convert import rule_href
    from torchlint.rules import VERIFY_CODES
    code, out, _ = run(["rule", "--all"], capsys)
    listed = [line.split()[0] for line in out.splitlines()]
    # Every code verify reports is listed (TL901-TL905 at least; verify may add more).
    assert code == 0 and [c for c in listed if c.startswith("TL9")] == sorted(VERIFY_CODES)
    assert {"TL901", "TL902", "TL903", "TL904", "TL905"} <= set(VERIFY_CODES)
    for verify_code, entry in VERIFY_CODES.items():
        code, out, err = run(["rule", verify_code.lower()], capsys)
        assert code == 0 and out.startswith("# %s %s" % (verify_code, entry.name)), err
        assert "## What it finds" in out and "## Fix" in out and "## Example" in out
        assert rule_href(verify_code).endswith("/%s.md" % verify_code)


# -- standard input, --output-file, --statistics --format json ---------------------------------------

def feed_stdin(monkeypatch, text: str) -> None:
    import io
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8")), encoding="utf-8"))


def test_dash_checks_standard_input(tmp_path, capsys, monkeypatch):
    feed_stdin(monkeypatch, MASK)
    code, out, _ = run(["check", "--no-infer", "--select", "TL101", "-"], capsys, cwd=tmp_path)
    assert code == 1 and out.startswith("-:8:9: TL101 [warning] [*] ")
    assert list(tmp_path.iterdir()) == []


def test_stdin_filename_names_the_file_and_picks_its_settings(tmp_path, capsys, monkeypatch):
    write(tmp_path / "pyproject.toml", '[tool.torchlint]\nper-file-ignores = {"legacy/*" = ["TL101"]}\n')
    feed_stdin(monkeypatch, MASK)
    code, out, _ = run(["check", "--no-infer", "--stdin-filename", "src/model.py", "-"], capsys, cwd=tmp_path)
    assert code == 1 and out.startswith("src/model.py:8:9: TL101 ")
    feed_stdin(monkeypatch, MASK)  # no path at all: --stdin-filename alone reads standard input too
    code, out, _ = run(["check", "--no-infer", "--stdin-filename", "legacy/model.py"], capsys, cwd=tmp_path)
    assert code == 0 and "All checks passed!" in out
    feed_stdin(monkeypatch, MASK)
    code, out, err = run(["check", "--no-infer", "--format", "json", "--stdin-filename", "src/model.py"], capsys,
                         cwd=tmp_path)
    assert json.loads(out)[0]["filename"] == str(tmp_path / "src" / "model.py")


def test_fix_from_stdin_prints_the_fixed_text_and_writes_no_file(tmp_path, capsys, monkeypatch):
    on_disk = write(tmp_path / "model.py", "# the saved version\n")
    feed_stdin(monkeypatch, MASK)
    code, out, err = run(["check", "--no-infer", "--fix", "--select", "TL101", "--stdin-filename", "model.py", "-"],
                         capsys, cwd=tmp_path)
    assert code == 0, err
    assert out == MASK.replace('self.mask = torch.tril(torch.ones(4, 4))',
                               'self.register_buffer("mask", torch.tril(torch.ones(4, 4)), persistent=False)')
    assert "Found 1 finding (1 fixed, 0 remaining)." in err  # the report on stderr
    assert on_disk.read_text() == "# the saved version\n"
    feed_stdin(monkeypatch, "x = (\n")  # does not parse: given back as it came, and reported
    code, out, err = run(["check", "--no-infer", "--fix", "-"], capsys, cwd=tmp_path)
    assert code == 1 and out == "x = (\n" and "-:" in err and "SyntaxError" in err


def test_force_exclude_with_stdin_filename_checks_nothing_and_echoes_for_fix(tmp_path, capsys, monkeypatch):
    write(tmp_path / "pyproject.toml", "[project]\nname = 'x'\n")
    feed_stdin(monkeypatch, MASK)
    code, out, err = run(["check", "--no-infer", "--fix", "--force-exclude", "--stdin-filename", "build/gen.py"],
                         capsys, cwd=tmp_path)
    assert code == 0 and out == MASK
    assert "skipped build/gen.py: excluded by `build` (a default exclude)" in err


def test_output_file_receives_the_report(tmp_path, capsys):
    write(tmp_path / "model.py", MASK)
    code, out, err = run(["check", "--no-infer", "--format", "json", "--output-file", "reports/tl.json", "."],
                         capsys, cwd=tmp_path)
    assert code == 1 and out == ""
    entries = json.loads((tmp_path / "reports" / "tl.json").read_text())
    assert [entry["code"] for entry in entries] == ["TL101"]
    code, out, err = run(["check", "--no-infer", "--output-file", "report.txt", "--diff", "."], capsys, cwd=tmp_path)
    assert code == 1 and out == "" and (tmp_path / "report.txt").read_text().startswith("--- model.py\n")
    assert "Would fix 1 finding in 1 file." in err
    (tmp_path / "adir").mkdir()
    code, out, err = run(["check", "--no-infer", "--output-file", "adir", "."], capsys, cwd=tmp_path)
    assert code == 2 and "--output-file adir: cannot write" in err


def test_statistics_json(tmp_path, capsys):
    write(tmp_path / "a.py", MASK)
    write(tmp_path / "b.py", MASK + "\nx = torch.FloatTensor(3)\n")
    write(tmp_path / "broken.py", "def f(:\n")
    code, out, _ = run(["check", "--no-infer", "--statistics", "--format", "json", "--select", "TL101,TL301", "."],
                       capsys, cwd=tmp_path)
    assert code == 1
    assert json.loads(out) == [
        {"code": "TL101", "name": "unregistered-tensor", "count": 2, "fixable": True},
        {"code": "TL301", "name": RULES_BY_CODE["TL301"].name, "count": 1, "fixable": True},  # hints too
        {"code": None, "name": "syntax-error", "count": 1, "fixable": False},
    ]


# -- what the messages say -----------------------------------------------------------------------

def test_diff_ends_with_a_newline_before_the_summary(tmp_path):
    # A file with old Mac line endings: its last diff line ends with "\r" alone.
    write(tmp_path / "model.py", MASK, newline="\r")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # stdout block-buffered
    env["PYTHONPATH"] = str(Path(cli.__file__).resolve().parents[2])
    done = subprocess.run([sys.executable, "-m", "torchlint", "check", "--no-infer", "--diff", "model.py"],
                          cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
    output = done.stdout.decode()
    assert done.returncode == 1, output
    assert output.startswith("--- model.py")  # the diff first, then the summary on a line of its own
    assert output.endswith("\nWould fix 1 finding in 1 file.\n"), output[-80:]
    assert not output.endswith("\rWould fix 1 finding in 1 file.\n")


def test_force_exclude_says_what_excluded_the_file(tmp_path, capsys):
    write(tmp_path / "pyproject.toml", '[tool.torchlint]\nexclude = ["legacy/"]\n')
    write(tmp_path / "build" / "gen.py", MASK)
    write(tmp_path / "legacy" / "old.py", MASK)
    write(tmp_path / ".gitignore", "*_pb2.py\n")
    write(tmp_path / "proto_pb2.py", MASK)
    code, out, err = run(["check", "--no-infer", "--force-exclude", "build/gen.py", "legacy/old.py", "proto_pb2.py"],
                         capsys, cwd=tmp_path)
    assert code == 0, err
    assert "no Python files found" not in err
    assert "skipped build/gen.py: excluded by `build` (a default exclude)" in err
    assert "skipped legacy/old.py: excluded by `legacy/` (an exclude in pyproject.toml)" in err
    assert "skipped proto_pb2.py: ignored by a .gitignore file" in err
    write(tmp_path / "model.py", MASK)  # something else to check: said with -v only
    code, out, err = run(["check", "--no-infer", "--force-exclude", "build/gen.py", "model.py"], capsys, cwd=tmp_path)
    assert code == 1 and "skipped build/gen.py" not in err
    code, out, err = run(["check", "--no-infer", "-v", "--force-exclude", "build/gen.py", "model.py"], capsys,
                         cwd=tmp_path)
    assert "skipped build/gen.py: excluded by `build`" in err


BOTH_FIXES = MASK + "        self.w = torch.randn(3, requires_grad=True)\n"  # safe fix, then unsafe only


def test_fix_on_a_read_only_file_counts_the_fixes_not_written(tmp_path, capsys):
    path = write(tmp_path / "locked.py", BOTH_FIXES)
    path.chmod(0o444)
    try:
        code, out, err = run(["check", "--no-infer", "--fix", "--select", "TL101", "locked.py"], capsys, cwd=tmp_path)
    finally:
        path.chmod(0o644)
    assert code == 2 and path.read_text() == BOTH_FIXES
    assert "locked.py: read-only file; not fixed" in err
    assert out.splitlines()[-1] == \
        "Found 2 findings (1 fix not written: read-only file; 1 more fixable with --unsafe-fixes, marked [-])."


def test_usage_errors_of_the_new_flags(tmp_path, capsys):
    for argv, message in [(["-", "a.py"], "`-` reads a file from standard input"),
                          (["--stdin-filename", "x.py", "a.py"], "--stdin-filename names the file read"),
                          (["--add-noqa", "--diff"], "--add-noqa cannot be combined with --diff"),
                          (["--diff-against", "HEAD", "-"], "--diff-against checks the changed files")]:
        code, _, err = run(["check"] + argv, capsys, cwd=tmp_path)
        assert code == 2 and message in err, (argv, err)


HAND_LINEAR_AND_MASK = """\
import torch
from torch import nn


class HandLinear(nn.Module):
    def __init__(self, n: int = 4):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n, n))
        self.bias = torch.randn(n)
        self.mask = torch.tril(torch.ones(n, n))

    def forward(self, x):
        return (x @ self.weight.T + self.bias) * self.mask[0]
"""


def test_fix_leaves_a_bias_alone_and_registers_a_mask(tmp_path, capsys):
    path = write(tmp_path / "model.py", HAND_LINEAR_AND_MASK)
    code, out, _ = run(["check", "model.py", "--select", "TL101", "--fix"], capsys, cwd=tmp_path)
    text = path.read_text()
    assert "        self.bias = torch.randn(n)\n" in text  # a safe fix never freezes a weight
    assert 'self.register_buffer("mask", torch.tril(torch.ones(n, n)), persistent=False)' in text
    assert code == 1 and "TL101 [warning] [-] `self.bias`" in out
    assert "1 fixed, 1 remaining" in out and "1 fixable with --fix --unsafe-fixes" not in out
