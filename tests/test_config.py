"""[tool.torchlint]: validation errors, rule selection, per-file ignores, severities, lookup."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from torchlint import cli
from torchlint.analysis.findings import Severity
from torchlint.config import Config, ConfigError, expand, find_config, load_config
from torchlint.files import GlobPattern
from torchlint.rules import RULES_BY_CODE

MASK = '''import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.mask = torch.tril(torch.ones(4, 4))
'''


def pyproject(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text("[project]\nname = 'demo'\n\n[tool.torchlint]\n" + body, encoding="utf-8")
    return path


def config_error(tmp_path, body) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(pyproject(tmp_path, body))
    return str(info.value)


# -- errors name the file and the key --------------------------------------------------------------

def test_unknown_key(tmp_path):
    message = config_error(tmp_path, "selekt = ['TL101']\n")
    assert "pyproject.toml" in message and "[tool.torchlint]" in message
    assert "unknown key 'selekt'" in message and "did you mean 'select'" in message


@pytest.mark.parametrize("body, key", [
    ("select = 'TL101'\n", "select"),
    ("ignore = ['TL999']\n", "ignore"),
    ("extend-select = [101]\n", "extend-select"),
    ("select = ['E501']\n", "select"),
    ("exclude = 'build'\n", "exclude"),
    ("extend-exclude = [1]\n", "extend-exclude"),
    ("per-file-ignores = ['tests/*']\n", "per-file-ignores"),
    ("per-file-ignores = {'tests/*' = ['XX1']}\n", "per-file-ignores"),
    ("severity = {TL101 = 'fatal'}\n", "severity"),
    ("severity = {TL999 = 'error'}\n", "severity"),
    ("severity = 'error'\n", "severity"),
    ("python = 3\n", "python"),
    ("python = ''\n", "python"),
    ("fail-on = 'fatal'\n", "fail-on"),
    ("fail-on = ['error']\n", "fail-on"),
    ("show-hints = 'yes'\n", "show-hints"),
])
def test_bad_values_name_the_key(tmp_path, body, key):
    message = config_error(tmp_path, body)
    assert "pyproject.toml" in message
    assert " %s" % key in message


def test_invalid_toml_names_the_file(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.torchlint\nselect = \n", encoding="utf-8")
    with pytest.raises(ConfigError, match="pyproject.toml: invalid TOML"):
        load_config(path)


def test_explicit_config_without_table_is_an_error(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text("[project]\nname = 'x'\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"no \[tool.torchlint\] table"):
        load_config(path)


# -- selection ---------------------------------------------------------------------------------------

def test_prefixes_expand_to_rule_codes():
    assert expand(["TL101"]) == {"TL101"}
    assert "TL101" in expand(["TL1"]) and all(code.startswith("TL1") for code in expand(["TL1"]))
    assert expand(["TL"]) == expand(["ALL"]) == set(RULES_BY_CODE)


def test_defaults_enable_every_rule(tmp_path):
    assert Config(root=tmp_path).options_for(tmp_path / "a.py").enabled == set(RULES_BY_CODE)


def test_select_then_ignore(tmp_path):
    config = load_config(pyproject(tmp_path, "select = ['TL1']\nignore = ['TL101']\n"))
    enabled = config.options_for(tmp_path / "a.py").enabled
    assert "TL101" not in enabled and enabled == expand(["TL1"]) - {"TL101"}


def test_more_specific_selector_wins(tmp_path):
    config = load_config(pyproject(tmp_path, "select = ['TL101']\nignore = ['TL1']\n"))
    assert config.options_for(tmp_path / "a.py").enabled == {"TL101"}


def test_extend_select_adds_to_select(tmp_path):
    other = sorted(set(RULES_BY_CODE) - {"TL101"})[0]
    config = load_config(pyproject(tmp_path, "select = ['TL101']\nextend-select = ['%s']\n" % other.lower()))
    assert config.options_for(tmp_path / "a.py").enabled == {"TL101", other}


def test_command_line_overrides_the_file(tmp_path):
    config = load_config(pyproject(tmp_path, "ignore = ['TL101']\n"))
    assert "TL101" not in config.options_for(tmp_path / "a.py").enabled
    assert config.with_overrides(select=["TL101"]).options_for(tmp_path / "a.py").enabled == {"TL101"}
    assert "TL101" not in config.with_overrides(ignore=["tl101"]).options_for(tmp_path / "a.py").enabled
    with pytest.raises(ConfigError, match="--select: unknown rule code or prefix 'TL9'"):
        config.with_overrides(select=["TL9"])


def test_per_file_ignores(tmp_path):
    config = load_config(pyproject(tmp_path, "[tool.torchlint.per-file-ignores]\n"
                                             "'tests/**' = ['TL101']\n'conftest.py' = ['TL1']\n"))
    assert "TL101" not in config.options_for(tmp_path / "tests" / "unit" / "test_a.py").enabled
    assert "TL101" in config.options_for(tmp_path / "src" / "a.py").enabled
    assert not config.options_for(tmp_path / "src" / "conftest.py").enabled & expand(["TL1"])


def test_severity_overrides(tmp_path):
    config = load_config(pyproject(tmp_path, "[tool.torchlint.severity]\nTL1 = 'info'\nTL101 = 'ERROR'\n"))
    severities = config.options_for(tmp_path / "a.py").severities
    assert severities["TL101"] is Severity.ERROR
    assert all(severities[code] is Severity.INFO for code in expand(["TL1"]) - {"TL101"})


def test_grading_keys(tmp_path):
    default = load_config(pyproject(tmp_path, "python = 'py'\n"))
    assert (default.fail_on, default.show_hints) == (Severity.WARNING, False) == (Config().fail_on, Config().show_hints)
    assert [s for s in Severity if default.fails_on(s)] == [Severity.ERROR, Severity.WARNING]
    config = load_config(pyproject(tmp_path, "fail-on = 'info'\nshow-hints = true\n"))
    assert config.fail_on is Severity.INFO and config.show_hints is True
    assert [s for s in Severity if config.fails_on(s)] == [Severity.ERROR, Severity.WARNING, Severity.INFO]
    # The command line's flags come on top; a bad value names the flag.
    overridden = config.with_overrides(fail_on="error", show_hints=False)
    assert [s for s in Severity if overridden.fails_on(s)] == [Severity.ERROR] and overridden.show_hints is False
    assert config.with_overrides().fail_on is Severity.INFO
    with pytest.raises(ConfigError, match="--fail-on: expected one of error, warning, info, hint, got 'all'"):
        config.with_overrides(fail_on="all")


def test_python_is_stored(tmp_path):
    config = load_config(pyproject(tmp_path, "python = '.venv/bin/python'\n"))
    assert config.python == ".venv/bin/python"


def test_exclude_patterns(tmp_path):
    config = load_config(pyproject(tmp_path, "exclude = ['tests/fixtures']\nextend-exclude = ['*_pb2.py']\n"))
    assert [p.pattern for p in config.exclude_patterns] == ["tests/fixtures", "*_pb2.py"]


@pytest.mark.parametrize("pattern, rel, matched", [
    ("build", "src/build/x.py", True),
    ("tests/fixtures", "tests/fixtures/a/b.py", True),
    ("tests/fixtures", "src/tests/fixtures/b.py", False),
    ("/gen/*.py", "gen/a.py", True),
    ("/gen/*.py", "gen/sub/a.py", False),
    ("**/gen/*.py", "deep/gen/a.py", True),
    ("*_pb2.py", "a/b/model_pb2.py", True),
    ("data/", "data", False),
    ("data/", "a/data/x.py", True),
    ("docs/**/x.py", "docs/x.py", True),
    ("docs/**/x.py", "docs/a/b/x.py", True),
    ("docs/**/x.py", "src/docs/a/x.py", False),
    ("./src/*.py", "src/a.py", True),
    ("src/[ab].py", "src/c.py", False),
    ("!*_pb2.py", "a/model_pb2.py", True),  # matches: the `!` says which way it decides
])
def test_glob_patterns(pattern, rel, matched):
    assert GlobPattern(pattern).matches_file(rel, rel.rsplit("/", 1)[-1]) is matched


def test_glob_patterns_outside_the_root():
    assert GlobPattern("*_pb2.py").matches_file(None, "model_pb2.py")
    assert not GlobPattern("gen/*_pb2.py").matches_file(None, "model_pb2.py")


def test_per_file_ignores_nested_and_negated(tmp_path):
    config = load_config(pyproject(tmp_path, '[tool.torchlint.per-file-ignores]\n'
                                              '"tests/**/fixtures/*.py" = ["TL101"]\n"!src/**" = ["TL301"]\n'))
    assert "TL101" not in config.options_for(tmp_path / "tests" / "a" / "fixtures" / "m.py").enabled
    assert "TL101" in config.options_for(tmp_path / "tests" / "m.py").enabled
    # A negated pattern: the codes are ignored in every file it does not match.
    assert "TL301" in config.options_for(tmp_path / "src" / "pkg" / "m.py").enabled
    assert "TL301" not in config.options_for(tmp_path / "scripts" / "m.py").enabled


# -- lookup ----------------------------------------------------------------------------------------

def test_nearest_pyproject_with_a_torchlint_table(tmp_path):
    pyproject(tmp_path, "ignore = ['TL101']\n")
    nested = tmp_path / "pkg"
    nested.mkdir()
    (nested / "pyproject.toml").write_text("[project]\nname = 'inner'\n", encoding="utf-8")  # no table: skipped
    config = find_config(nested / "model.py")
    assert config.path == tmp_path / "pyproject.toml"
    assert config.root == tmp_path


def test_no_config_gives_defaults(tmp_path):
    config = find_config(tmp_path)
    assert config.path is None and config.selections == ()


# -- through the command line ------------------------------------------------------------------------

def run_json(tmp_path, capsys, *argv):
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        code = cli.main(["check", "--format", "json", *argv])
    finally:
        os.chdir(old)
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out else None), err


def test_cli_honours_config_and_flags_override_it(tmp_path, capsys):
    pyproject(tmp_path, "ignore = ['TL101']\n")
    (tmp_path / "model.py").write_text(MASK, encoding="utf-8")
    code, entries, _ = run_json(tmp_path, capsys, ".")
    assert code == 0 and entries == []
    code, entries, _ = run_json(tmp_path, capsys, "--select", "TL101", ".")
    assert code == 1 and [e["code"] for e in entries] == ["TL101"]


def test_cli_per_file_ignores_and_severity(tmp_path, capsys):
    pyproject(tmp_path, "select = ['TL101']\n"
                        "per-file-ignores = {'legacy/*.py' = ['TL101']}\nseverity = {TL101 = 'error'}\n")
    (tmp_path / "legacy").mkdir()
    (tmp_path / "legacy" / "old.py").write_text(MASK, encoding="utf-8")
    (tmp_path / "model.py").write_text(MASK, encoding="utf-8")
    code, entries, _ = run_json(tmp_path, capsys, ".")
    assert code == 1
    assert [(Path(e["filename"]).name, e["severity"]) for e in entries] == [("model.py", "error")]


def test_cli_a_rule_made_a_hint_no_longer_fails_the_run(tmp_path, capsys):
    pyproject(tmp_path, "select = ['TL101']\nseverity = {TL101 = 'hint'}\n")
    (tmp_path / "model.py").write_text(MASK, encoding="utf-8")
    code, entries, _ = run_json(tmp_path, capsys, ".")
    assert code == 0 and [(e["code"], e["severity"]) for e in entries] == [("TL101", "hint")]
    code, entries, _ = run_json(tmp_path, capsys, "--fail-on", "hint", ".")
    assert code == 1


def test_cli_toml_nested_too_deeply_is_a_configuration_error(tmp_path, capsys):
    # tomllib reads nested arrays by recursion: this raised RecursionError out of the run (exit 1).
    pyproject(tmp_path, "select = ['TL101']\n\n[other]\na = " + "[" * 100_000 + "\n")
    (tmp_path / "model.py").write_text(MASK, encoding="utf-8")
    code, entries, err = run_json(tmp_path, capsys, ".")
    assert code == 2 and entries is None
    assert err == "torchlint: error: pyproject.toml: invalid TOML: arrays or tables nested too deeply to read\n"


def test_cli_config_flag(tmp_path, capsys):
    elsewhere = tmp_path / "conf"
    elsewhere.mkdir()
    pyproject(elsewhere, "ignore = ['TL']\n")
    (tmp_path / "model.py").write_text(MASK, encoding="utf-8")
    code, entries, _ = run_json(tmp_path, capsys, "--config", "conf/pyproject.toml", "model.py")
    assert code == 0 and entries == []
    code, _, err = run_json(tmp_path, capsys, "--config", "missing.toml", "model.py")
    assert code == 2 and "missing.toml" in err
