"""The settings are declared once (torchlint.settings): package.json, the server, the
[tool.torchlint] loader and the command line agree with that declaration, and every value the
declaration allows is accepted by the code that reads it."""
import json
import re
import types
from pathlib import Path

import pytest

from torchlint import config as config_module
from typing import Optional

from torchlint.cli import build_parser, load_settings
from torchlint.config import ClassRecipe, Config, ConfigError, parse_table
from torchlint.lsp.workspace_settings import OptionsResolver, parse_settings
from torchlint.settings import (DEFAULT_SETTINGS, DEVICES, IMPORT_STRATEGIES, SEVERITIES, editor_specs, given_flags,
                                is_codes, merged, pyproject_keys, specs, vscode_schema)
from torchlint.verify import probe
from torchlint.verify.runner import VerifyError, verify_file

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = json.loads((ROOT / "package.json").read_text(encoding="utf-8"))
PROPERTIES = PACKAGE["contributes"]["configuration"]["properties"]


def test_package_json_declares_exactly_the_schema_settings():
    assert sorted(PROPERTIES) == sorted(vscode_schema())


@pytest.mark.parametrize("name", sorted(vscode_schema()))
def test_package_json_entry_matches_the_schema(name):
    expected, declared = vscode_schema()[name], PROPERTIES[name]
    for key, value in expected.items():
        assert declared.get(key) == value, "%s: package.json's %r is %r, the schema says %r" % (
            name, key, declared.get(key), value)
    extra = set(declared) - set(expected)
    assert not extra, "%s: package.json says %s, which the schema does not declare" % (name, sorted(extra))


def test_the_extension_forwards_the_whole_section_without_listing_settings():
    # A new setting must reach the server with no change to the extension: settings.ts names
    # only the settings it treats specially (the server's interpreter and where it came from, the
    # lens in untrusted workspaces, the trust it never forwards, the ones that restart the server).
    source = (ROOT / "client-vscode" / "src" / "settings.ts").read_text(encoding="utf-8")
    code = re.sub(r"//[^\n]*|/\*.*?\*/", "", source, flags=re.S)
    special = {"interpreter", "interpreterSource", "codeLens", "trustWorkspaceInterpreter", "enable",
               "importStrategy"}
    named = {spec.where.editor for spec in editor_specs() if re.search(r"\b%s\b" % re.escape(spec.where.editor), code)}
    assert named <= special, "client-vscode/src/settings.ts lists %s" % sorted(named - special)
    assert "JSON.stringify(section)" in source


def test_the_server_reads_every_editor_setting_it_declares():
    raw = {}
    for spec in editor_specs(server_only=True):
        value = {bool: not spec.default, int: 5, float: 7.0, str: "x"}.get(spec.type, ["TL101"])
        if spec.name == "severity":
            value = {"TL101": "hint"}
        elif spec.name == "verify_device":
            value = "cpu"
        elif spec.name == "verify_memory_share":
            value = 0.25
        *parents, last = spec.where.editor.split(".")
        table = raw
        for parent in parents:
            table = table.setdefault(parent, {})
        table[last] = value
    settings, errors = parse_settings(raw)
    assert errors == []
    changed = {spec.name for spec in editor_specs(server_only=True)
               if getattr(settings, spec.name) != getattr(DEFAULT_SETTINGS, spec.name)}
    assert changed == {spec.name for spec in editor_specs(server_only=True)}


@pytest.mark.parametrize("device", DEVICES + ("cuda:1",))
def test_every_device_is_accepted_by_the_server_the_runner_and_the_probe(device, tmp_path):
    settings, errors = parse_settings({"verify": {"device": device}})
    assert errors == [] and settings.verify_device == device
    # The runner checks the device before the timeout: a timeout error means the device passed.
    script = tmp_path / "m.py"
    script.write_text("x = 1\n")
    with pytest.raises(VerifyError) as raised:
        verify_file(str(script), device=device, timeout=-1)
    assert "unknown device" not in str(raised.value) and "timeout" in str(raised.value)
    # The child's device choice, with a torch that has every backend.
    torch = fake_torch(cuda=True, mps=True)
    chosen, _name, _note = probe.pick_device(torch, device)
    assert chosen.type == {"auto": "cuda"}.get(device, device.split(":")[0])


def test_an_unknown_device_is_refused_everywhere(tmp_path):
    settings, errors = parse_settings({"verify": {"device": "tpu"}})
    assert settings.verify_device == "auto" and "torchlint.verify.device" in errors[0]
    script = tmp_path / "m.py"
    script.write_text("x = 1\n")
    with pytest.raises(VerifyError, match="unknown device"):
        verify_file(str(script), device="tpu", timeout=-1)


def test_mps_without_the_backend_says_so():
    with pytest.raises(RuntimeError, match="mps"):
        probe.pick_device(fake_torch(cuda=False, mps=False), "mps")


def fake_torch(cuda: bool, mps: bool):
    """Just what pick_device asks of torch."""
    return types.SimpleNamespace(
        __version__="0.0", version=types.SimpleNamespace(cuda="12" if cuda else None),
        device=lambda kind, index=None: types.SimpleNamespace(
            type=kind.split(":")[0], index=int(kind.split(":")[1]) if ":" in kind else index),
        cuda=types.SimpleNamespace(is_available=lambda: cuda, current_device=lambda: 0,
                                   get_device_name=lambda index: "GPU %d" % index),
        backends=types.SimpleNamespace(mps=types.SimpleNamespace(is_available=lambda: mps)))


@pytest.mark.parametrize("severity", SEVERITIES)
def test_every_severity_is_accepted_by_the_editor_and_pyproject(severity, tmp_path):
    settings, errors = parse_settings({"severity": {"TL1": severity}})
    assert errors == [] and settings.severity == (("TL1", severity),)
    config = parse_table({"severity": {"TL1": severity}}, tmp_path / "pyproject.toml")
    assert config.severity_overrides()["TL101"].value == severity


@pytest.mark.parametrize("severity", SEVERITIES)
def test_every_severity_is_a_fail_on_value_of_pyproject_and_the_flag(severity, tmp_path):
    assert parse_table({"fail-on": severity}, tmp_path / "pyproject.toml").fail_on.value == severity
    check = next(a for a in build_parser()._actions if a.dest == "command").choices["check"]
    assert check.parse_args(["--fail-on", severity]).fail_on == severity
    assert Config().with_overrides(fail_on=severity).fail_on.value == severity


def test_the_command_line_grading_is_not_an_editor_setting():
    # The editor shows every finding with its severity: fail-on and show-hints are for the CLI.
    for name in ("fail_on", "show_hints"):
        (spec,) = [s for s in specs() if s.name == name]
        assert spec.where.editor is None and spec.where.pyproject and spec.where.flag
    check = next(a for a in build_parser()._actions if a.dest == "command").choices["check"]
    assert check.parse_args([]).fail_on is None  # unset: the config's fail-on, else the default
    assert Config().fail_on.value == DEFAULT_SETTINGS.fail_on == "warning"


def test_every_import_strategy_is_handled_by_the_extension():
    launcher = (ROOT / "client-vscode" / "src" / "launcher.ts").read_text(encoding="utf-8")
    declared = re.search(r"type ImportStrategy = ([^;]+);", launcher).group(1)
    assert sorted(re.findall(r"'(\w+)'", declared)) == sorted(IMPORT_STRATEGIES)
    launch = (ROOT / "client-vscode" / "bundled" / "launch.py").read_text(encoding="utf-8")
    assert "--from-environment" in launcher and "--from-environment" in launch


def test_pyproject_keys_come_from_the_schema(tmp_path):
    assert config_module.KEYS == pyproject_keys()
    for sub_table in config_module.SUB_TABLES:  # [tool.torchlint.verify]: its keys are the schema's too
        with pytest.raises(ConfigError, match="unknown key 'bogus'.*%s" % ", ".join(pyproject_keys(sub_table))):
            parse_table({sub_table: {"bogus": 1}}, tmp_path / "pyproject.toml")
    assert config_module.SUB_TABLES == ("verify",)
    for key in pyproject_keys():
        assert any(spec.where.pyproject.split(".")[0] == key for spec in specs() if spec.where.pyproject)
    with pytest.raises(ConfigError, match="unknown key 'show_all'.*did you mean 'show-all'"):
        parse_table({"show_all": True}, tmp_path / "pyproject.toml")
    assert parse_table({}, tmp_path / "pyproject.toml").show_all is DEFAULT_SETTINGS.show_all
    assert Config().show_all is DEFAULT_SETTINGS.show_all


def test_declared_flags_exist_on_the_command_line():
    subcommands = next(a for a in build_parser()._actions if a.dest == "command").choices
    for spec in specs():
        for flag in spec.where.cli:
            (action,) = [a for a in subcommands[flag.command]._actions if spec.where.flag in a.option_strings]
            assert action.help and action.metavar == flag.metavar
    assert all(spec.where.cli for spec in specs() if spec.where.flag)  # a flag on no command is no flag
    verify = merged([given_flags(subcommands["verify"].parse_args(["m.py"]), "verify")])
    assert verify == DEFAULT_SETTINGS  # flags left out leave every setting at its default


# -- every setting arrives from each source it declares ------------------------------------------

def sample(spec):
    """A value other than the default: (as a source writes it, as the resolved settings hold it)."""
    special = {
        "severity": ({"TL101": "hint"}, (("TL101", "hint"),)),
        "per_file_ignores": ({"tests/*": ["TL101"]}, (("tests/*", ("TL101",)),)),
        "verify_classes": ({"Net": {"factory": "pkg.models:make"}},
                           (("Net", ClassRecipe(factory="pkg.models:make")),)),
        "verify_memory_share": (0.25, 0.25),
    }
    if spec.name in special:
        return special[spec.name]
    if spec.where.enum:
        value = next(v for v in spec.where.enum if v != spec.default)
        return value, value
    if is_codes(spec.type):
        return ["TL101"], ("TL101",)
    kind = {Optional[str]: str}.get(spec.type, spec.type)
    value = {bool: not spec.default, int: (spec.default or 0) + 1, float: (spec.default or 0) + 1.5,
             str: "some/python"}[kind]
    return value, value


def nested(dotted, value):
    *parents, last = dotted.split(".")
    table = top = {}
    for parent in parents:
        table = table.setdefault(parent, {})
    table[last] = value
    return top


@pytest.mark.parametrize("spec", [s for s in specs() if s.where.pyproject], ids=lambda s: s.name)
def test_every_pyproject_setting_arrives(spec, tmp_path):
    raw, expected = sample(spec)
    if spec.where.relative_paths:
        raw, expected = ["src"], (str(tmp_path / "src"),)
    config = parse_table(nested(spec.where.pyproject, raw), tmp_path / "pyproject.toml")
    assert getattr(config.settings, spec.name) == expected != spec.default


def flag_argv(spec):
    raw, expected = sample(spec)
    if spec.type is bool:
        return [spec.where.flag], expected
    return [spec.where.flag, ",".join(raw) if isinstance(raw, list) else str(raw)], expected


@pytest.mark.parametrize("spec, command", [(s, f.command) for s in specs() for f in s.where.cli],
                         ids=lambda value: getattr(value, "name", value))
def test_every_flag_arrives(spec, command, tmp_path):
    argv, expected = flag_argv(spec)
    subcommand = next(a for a in build_parser()._actions if a.dest == "command").choices[command]
    if command == "check":  # the settings a check runs with: pyproject.toml's, the flags over them
        args = subcommand.parse_args(argv + [str(tmp_path)])
        settings = load_settings(args).settings
    else:  # verify reads its settings from the flags alone
        settings = merged([given_flags(subcommand.parse_args(argv + ["m.py"]), command)])
    assert getattr(settings, spec.name) == expected != spec.default


def check_command():
    return next(a for a in build_parser()._actions if a.dest == "command").choices["check"]


def over_pyproject(tmp_path, specs_given):
    """A pyproject.toml giving each of these settings a value other than the top source's sample."""
    lines = []
    for spec in specs_given:
        # A switch only turns on what the file leaves off: the file gives the default.
        value = json.dumps(["TL2"] if is_codes(spec.type) else spec.default)
        lines.append("%s = %s" % (spec.where.pyproject, '{TL2 = "error"}' if spec.name == "severity" else value))
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.torchlint]\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_flags_go_over_pyproject(tmp_path):
    both = [s for s in specs() if s.where.pyproject and any(f.command == "check" for f in s.where.cli)]
    assert both
    over_pyproject(tmp_path, both)
    argv = [arg for spec in both for arg in flag_argv(spec)[0]]
    settings = load_settings(check_command().parse_args(argv + [str(tmp_path)])).settings
    for spec in both:
        assert getattr(settings, spec.name) == flag_argv(spec)[1], spec.name


def test_the_editor_goes_over_pyproject(tmp_path):
    both = [s for s in editor_specs(server_only=True) if s.where.pyproject]
    assert both
    over_pyproject(tmp_path, both)
    raw = {}
    for spec in both:
        raw.update(nested(spec.where.editor, sample(spec)[0]))
    settings, errors = parse_settings(raw)
    resolver = OptionsResolver(errors.append)
    resolver.update(settings)
    resolved = resolver.config_for(str(tmp_path / "m.py")).settings
    assert errors == []
    for spec in both:
        assert getattr(resolved, spec.name) == sample(spec)[1], spec.name


@pytest.mark.parametrize("spec", editor_specs(server_only=True), ids=lambda s: s.name)
def test_every_editor_setting_arrives(spec, tmp_path):
    raw, expected = sample(spec)
    settings, errors = parse_settings(nested(spec.where.editor, raw))
    assert errors == [] and getattr(settings, spec.name) == expected != spec.default
    # ... and in the settings a document is checked with (over its pyproject.toml's).
    resolver = OptionsResolver(errors.append)
    resolver.update(settings)
    assert getattr(resolver.config_for(str(tmp_path / "m.py")).settings, spec.name) == expected
    assert errors == []


# -- one check per setting, run once ---------------------------------------------------------------

def counting_checks(monkeypatch):
    """Spec.check, counting its calls per setting."""
    from torchlint import settings as settings_module

    calls = {}
    check = settings_module.Spec.check

    def counted(self, value):
        calls[self.name] = calls.get(self.name, 0) + 1
        return check(self, value)

    monkeypatch.setattr(settings_module.Spec, "check", counted)
    return calls


def test_an_editor_value_is_checked_once(monkeypatch, tmp_path):
    calls = counting_checks(monkeypatch)
    settings, errors = parse_settings({"select": ["TL1"], "severity": {"TL101": "hint"}, "verify": {"device": "cpu"}})
    resolver = OptionsResolver(errors.append)
    resolver.update(settings)
    resolver.options_for(str(tmp_path / "m.py"))
    assert errors == [] and calls == {"select": 1, "severity": 1, "verify_device": 1}


def test_a_flag_and_a_pyproject_value_are_checked_once(monkeypatch, tmp_path):
    calls = counting_checks(monkeypatch)
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\nignore = ['TL2']\n", encoding="utf-8")
    config = load_settings(check_command().parse_args(["--select", "TL1", str(tmp_path)]))
    config.options_for(str(tmp_path / "m.py"))
    assert calls == {"select": 1, "ignore": 1}


@pytest.mark.parametrize("raw, held", [
    ({"select": ["tl1"]}, {"select": ("TL1",)}),
    ({"severity": {"tl1": "ERROR", "TL101": "hint"}}, {"severity": (("TL1", "error"), ("TL101", "hint"))}),
])
def test_the_editor_and_pyproject_accept_the_same_values(raw, held, tmp_path):
    # One check per setting: the editor no longer refuses what [tool.torchlint] takes.
    settings, errors = parse_settings(raw)
    config = parse_table(raw, tmp_path / "pyproject.toml")
    for name, value in held.items():
        assert errors == [] and getattr(settings, name) == value == getattr(config.settings, name)


@pytest.mark.parametrize("raw, message", [
    ({"select": 42}, "torchlint.select: expected a list of rule codes, got 42; using the default"),
    ({"select": ["TL9"]}, "torchlint.select: unknown rule code or prefix 'TL9'"),
    ({"select": []}, "torchlint.select: an empty list selects no rule at all"),
    ({"severity": {"TL1": "loud"}}, "torchlint.severity.TL1: expected one of \"error\", "),
    ({"verify": {"device": "tpu"}}, "torchlint.verify.device: expected one of auto, cuda, cpu, mps (or cuda:N), "
                                    "got 'tpu'; using the default"),
    ({"verify": {"timeout": 0}}, "torchlint.verify.timeout: expected at least 1, got 0; using the default"),
])
def test_an_editor_error_names_the_setting_and_what_was_expected(raw, message):
    _settings, errors = parse_settings(raw)
    assert len(errors) == 1 and errors[0].startswith(message), errors
