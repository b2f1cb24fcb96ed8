"""Every setting torchlint has, declared once: its names, type, allowed values, default and text.

:class:`Settings` is that declaration. Each field says where the setting can be given:
the editor (``torchlint.<editor>`` in VS Code's ``package.json``, ``initializationOptions``,
``workspace/configuration``), ``[tool.torchlint]`` in pyproject.toml (``pyproject``) and the
command line (``flag``). The language server reads the editor's JSON with :func:`parse_editor`;
``config.py`` takes its keys from :func:`pyproject_keys`; ``tests/test_settings.py`` checks
package.json's ``contributes.configuration`` against :func:`vscode_schema`, and that every
allowed value is accepted by the code that reads it.

Adding a setting: a field here (and its entry in package.json when the editor offers it),
then the code that uses it.
"""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

import cattrs

from .analysis.findings import Severity

DEVICES = ("auto", "cuda", "cpu", "mps")  # and cuda:N (see is_device)
SEVERITIES = tuple(s.value for s in Severity)
IMPORT_STRATEGIES = ("useBundled", "fromEnvironment")
TRACE_LEVELS = ("off", "messages", "verbose")

Codes = Tuple[str, ...]  # rule codes or prefixes, in the order given
SeverityTable = Tuple[Tuple[str, str], ...]  # (code or prefix, severity), sorted: a JSON object


@dataclass(frozen=True)
class Where:
    """A setting's names and the constraints its type alone does not say."""

    description: str
    editor: Optional[str] = None  # torchlint.<editor>; dotted names are nested objects in the JSON
    pyproject: Optional[str] = None  # key of [tool.torchlint]; dotted: a sub-table
    flag: Optional[str] = None  # the command-line flag that sets it
    enum: Tuple[str, ...] = ()  # allowed values (of the values, for a table)
    enum_descriptions: Tuple[str, ...] = ()
    minimum: Optional[float] = None
    scope: Optional[str] = None  # VS Code's configuration scope, when not the default
    server: bool = True  # False: only the VS Code extension reads it
    vscode: bool = True  # False: not offered in package.json (other editors send it)


def setting(default: Any, description: str, **where: Any) -> Any:
    return field(default=default, metadata={"where": Where(description, **where)})


@dataclass(frozen=True)
class Settings:
    """The settings as one value: the language server holds the editor's (over the defaults)."""

    enable: bool = setting(
        True, "Run torchlint on Python files. Turning it off stops the language server.",
        editor="enable", server=False)
    import_strategy: str = setting(
        "useBundled", "Which torchlint serves the editor: `useBundled`, the copy inside the extension "
        "(any Python 3.10+ runs it, nothing to install), or `fromEnvironment`, the torchlint installed "
        "in the interpreter's environment (install it there first: `pip install` a torchlint wheel or checkout).",
        editor="importStrategy", enum=IMPORT_STRATEGIES, server=False,
        enum_descriptions=("The server bundled with the extension.",
                           "The torchlint package installed in the selected interpreter's environment."))
    interpreter: str = setting(
        "", "Path of the Python interpreter that runs the torchlint server and the runtime verification "
        "(give the one that has torch). Empty: the Python extension's active environment when that "
        "extension is installed, else `python3`. Ignored at workspace level in an untrusted workspace.",
        editor="interpreter", flag="--python", scope="machine-overridable")
    trust_workspace_interpreter: bool = setting(
        False, "Allow the interpreter that the workspace's `[tool.torchlint] python` names to be run "
        "(without it, only a virtual environment's files are read). A user setting: a workspace cannot "
        "give itself this trust.",
        # VS Code always sends the interpreter it started the server with, which comes first.
        editor="trustWorkspaceInterpreter", flag="--trust-workspace", vscode=False)
    select: Optional[Codes] = setting(
        None, "Rule codes or prefixes to enable (for example `[\"TL1\", \"TL301\"]`). Null: what "
        "`[tool.torchlint]` in pyproject.toml selects, else every rule.",
        editor="select", pyproject="select", flag="--select")
    extend_select: Codes = setting(
        (), "Rule codes or prefixes to enable on top of `select`.",
        pyproject="extend-select", flag="--extend-select")
    ignore: Codes = setting(
        (), "Rule codes or prefixes to turn off, on top of pyproject.toml's `ignore`.",
        editor="ignore", pyproject="ignore", flag="--ignore")
    per_file_ignores: Tuple[Tuple[str, Codes], ...] = setting(
        (), "Pattern (a .gitignore line) = rule codes that files matching it do not report; a "
        "pattern starting with `!` applies to the files it does not match.", pyproject="per-file-ignores")
    exclude: Codes = setting(
        (), "Files and folders not to check, as .gitignore lines (the last matching one decides; `!` "
        "re-includes), added to the defaults (virtual environments, build folders, what .gitignore ignores).",
        pyproject="exclude")
    extend_exclude: Codes = setting(
        (), "More .gitignore lines of files and folders not to check.", pyproject="extend-exclude")
    severity: SeverityTable = setting(
        (), "Severity per rule code or prefix, for example `{\"TL301\": \"hint\", \"TL1\": \"error\"}`.",
        editor="severity", pyproject="severity", enum=SEVERITIES)
    show_all: bool = setting(
        False, "Also report what the rules grade quiet (no evidence of harm), as hints.",
        pyproject="show-all", flag="--show-all")
    show_hints: bool = setting(
        False, "Print hints in `torchlint check`'s text output (hidden by default, counted in the summary "
        "line; JSON, SARIF and GitHub output always carry them).",
        pyproject="show-hints", flag="--show-hints")
    fail_on: str = setting(
        "warning", "The least severe finding that makes `torchlint check` exit 1: `error`, `warning`, "
        "`info` or `hint` (a file that does not parse always does).",
        pyproject="fail-on", flag="--fail-on", enum=SEVERITIES)
    python: Optional[str] = setting(
        None, "The interpreter whose packages the jedi layer analyses, relative to the pyproject.toml: "
        "a virtual environment is read, and never run unless the user trusts the workspace.",
        pyproject="python")
    inference_cache: bool = setting(
        True, "Keep the type-inference (jedi) answers on disk, in `$TORCHLINT_CACHE_DIR` (else "
        "`$XDG_CACHE_HOME/torchlint`, else `~/.cache/torchlint`), so that a restart or a second run "
        "asks jedi nothing it already answered for the same text. Off: that folder is neither read "
        "nor written.", editor="inferenceCache", flag="--no-cache")
    infer_budget: float = setting(
        10.0, "Seconds of type inference (jedi) per file and check; past them the rest of the file is "
        "checked by names alone. 0: no limit.", editor="inferBudget", flag="--infer-budget", minimum=0)
    code_lens: bool = setting(
        True, "Show a \"Verify\" code lens above each nn.Module class (\"Verify on cuda\" when the run "
        "will use CUDA; never in an untrusted workspace).", editor="codeLens")
    inlay_hints: bool = setting(
        False, "Show, after each `self.<name> = ...` in an nn.Module's `__init__`, what the attribute is "
        "(parameter, buffer, submodule, container, plain tensor...) as an inlay hint.", editor="inlayHints")
    verify_device: str = setting(
        "auto", "Device the runtime verification runs the module on.",
        editor="verify.device", flag="--device", enum=DEVICES,
        enum_descriptions=("CUDA when the interpreter's torch sees a GPU, else the CPU",
                           "The first CUDA device (fails when there is none)",
                           "The CPU",
                           "Apple's Metal backend (fails when torch.backends.mps is not available)"))
    verify_timeout: float = setting(
        120.0, "Seconds a runtime verification may take before its process tree is killed.",
        editor="verify.timeout", flag="--timeout", minimum=1)
    verify_import_roots: Codes = setting(
        (), "Folders to import model files from as package modules.", pyproject="verify.import-roots")
    verify_extra_paths: Codes = setting(
        (), "Folders appended to sys.path in the verification child.", pyproject="verify.extra-paths")
    verify_classes: Tuple[Tuple[str, Any], ...] = setting(
        (), "Per class: `kwargs = {...}` or `factory = \"pkg.mod:function\"`.", pyproject="verify.classes")
    max_file_size: int = setting(
        1_000_000, "Documents with more characters than this are not analysed (parsing them would hold up "
        "every answer); torchlint says so once per document.", editor="maxFileSize", minimum=1)
    trace_server: str = setting(
        "off", "Log the LSP messages between VS Code and the torchlint server in the torchlint output channel.",
        editor="trace.server", enum=TRACE_LEVELS, scope="window", server=False)


DEFAULT_SETTINGS = Settings()


@dataclass(frozen=True)
class Spec:
    """One field of :class:`Settings` with its declared type."""

    name: str
    type: Any
    default: Any
    where: Where


def specs() -> List[Spec]:
    hints = typing.get_type_hints(Settings)
    return [Spec(f.name, hints[f.name], f.default, f.metadata["where"]) for f in dataclasses.fields(Settings)]


def editor_specs(server_only: bool = False) -> List[Spec]:
    """The settings an editor can give (only those the server reads, with ``server_only``)."""
    return [s for s in specs() if s.where.editor and (s.where.server or not server_only)]


def pyproject_keys(table: str = "") -> Tuple[str, ...]:
    """The keys of ``[tool.torchlint]`` (``table=""``) or of one of its sub-tables (``"verify"``)."""
    prefix = table + "." if table else ""
    keys: List[str] = []
    for spec in specs():
        name = spec.where.pyproject
        if name and name.startswith(prefix):
            key = name[len(prefix):].split(".")[0]
            if key not in keys:
                keys.append(key)
    return tuple(keys)


def pyproject_spec(key: str) -> Spec:
    """The declaration of a [tool.torchlint] key (dotted for a sub-table's: ``verify.extra-paths``)."""
    (spec,) = [s for s in specs() if s.where.pyproject == key]
    return spec


def is_device(value: str) -> bool:
    """A device verification runs on: one of DEVICES, or cuda:N."""
    return value in DEVICES or (value.startswith("cuda:") and value[5:].isdigit())


# -- the editor's JSON -------------------------------------------------------------------------

class SettingError(ValueError):
    """A value the schema rejects; the message says what was expected."""


def _strict_converter() -> cattrs.Converter:
    """cattrs, but refusing what JSON clients get wrong: "true" for true, 1 for true, a string for a list."""
    converter = cattrs.Converter()

    def exact(kind, expected):
        def structure(value, _type):
            if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
                raise SettingError("expected %s, got %r" % (expected, value))
            return value
        return structure

    converter.register_structure_hook(bool, exact(bool, "true or false"))
    converter.register_structure_hook(int, exact(int, "a whole number"))
    converter.register_structure_hook(str, exact(str, "a string"))
    converter.register_structure_hook(float, lambda v, _t: float(exact((int, float), "a number")(v, _t)))

    def codes(value, _type):
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise SettingError("expected a list of strings, got %r" % (value,))
        return tuple(converter.structure(item, str) for item in value)

    def table(value, _type):
        if not isinstance(value, dict):
            raise SettingError("expected an object of rule code = severity, got %r" % (value,))
        return tuple(sorted((str(k), converter.structure(v, str)) for k, v in value.items()))

    converter.register_structure_hook_func(lambda kind: kind == Codes, codes)
    converter.register_structure_hook_func(lambda kind: kind == SeverityTable, table)
    return converter


CONVERTER = _strict_converter()


def check_value(spec: Spec, value: Any) -> Any:
    """The value as the field's type, or SettingError saying why not (type, allowed values, minimum)."""
    try:
        value = CONVERTER.structure(value, spec.type)
    except SettingError:
        raise
    except Exception as err:  # cattrs' own errors (a type it cannot build from this value)
        raise SettingError("expected %s, got %r (%s)" % (json_type(spec.type), value, err)) from None
    where = spec.where
    if where.enum:
        given = [v for _, v in value] if spec.type is SeverityTable else [value]
        for item in given:
            if item not in where.enum and not (spec.name == "verify_device" and is_device(item)):
                raise SettingError("expected one of %s%s, got %r" % (
                    ", ".join(where.enum), " (or cuda:N)" if spec.name == "verify_device" else "", item))
    if where.minimum is not None and value < where.minimum:
        raise SettingError("expected at least %g, got %r" % (where.minimum, value))
    return value


def _lookup(raw: Mapping[str, Any], dotted: str) -> Tuple[bool, Any]:
    """(found, value) of a dotted editor name in the nested JSON."""
    *parents, last = dotted.split(".")
    for parent in parents:
        raw = raw.get(parent)
        if not isinstance(raw, dict):
            return False, None
    return last in raw, raw.get(last)


def parse_editor(raw: Mapping[str, Any], label: str = "torchlint.%s") -> Tuple[Settings, List[str]]:
    """The editor's settings (the ``torchlint`` section as a dict) over the defaults, and one
    message per value that was rejected (that setting keeps its default). Null means unset."""
    values: Dict[str, Any] = {}
    errors: List[str] = []
    for parent in sorted({s.where.editor.split(".")[0] for s in editor_specs(True) if "." in s.where.editor}):
        if raw.get(parent) is not None and not isinstance(raw[parent], dict):
            errors.append("%s: expected an object, got %r; using the defaults" % (label % parent, raw[parent]))
    for spec in editor_specs(server_only=True):
        found, value = _lookup(raw, spec.where.editor)
        if not found or value is None:
            continue
        try:
            values[spec.name] = check_value(spec, value)
        except SettingError as err:
            errors.append("%s: %s; using the default" % (label % spec.where.editor, err))
    return Settings(**values), errors


# -- package.json ------------------------------------------------------------------------------

def is_table(kind: Any) -> bool:
    """Tables (JSON objects, TOML tables) are kept as tuples of (key, value) pairs: hashable."""
    args = typing.get_args(kind)
    return typing.get_origin(kind) is tuple and bool(args) and typing.get_origin(args[0]) is tuple


def json_type(kind: Any) -> Any:
    """The JSON schema type of a field's Python type."""
    if is_table(kind):
        return "object"
    if kind == Codes or typing.get_origin(kind) in (tuple, list):
        return "array"
    args = typing.get_args(kind)
    if typing.get_origin(kind) is typing.Union and type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        return [json_type(inner), "null"]
    return {bool: "boolean", int: "integer", float: "number", str: "string"}[kind]


def json_default(value: Any) -> Any:
    if isinstance(value, tuple):
        return [] if not value or not isinstance(value[0], tuple) else dict(value)
    return value


def vscode_schema() -> Dict[str, Dict[str, Any]]:
    """What package.json's ``contributes.configuration.properties`` must say about each setting
    (type, default, enum, minimum, scope, description); package.json may add presentation keys."""
    properties: Dict[str, Dict[str, Any]] = {}
    for spec in editor_specs():
        where = spec.where
        if not where.vscode:
            continue
        entry: Dict[str, Any] = {"type": json_type(spec.type), "description": where.description}
        entry["default"] = {} if spec.type is SeverityTable else json_default(spec.default)
        if spec.type is SeverityTable:
            entry["additionalProperties"] = {"type": "string", "enum": list(where.enum)}
        elif where.enum:
            entry["enum"] = list(where.enum)
        if where.enum_descriptions:
            entry["enumDescriptions"] = list(where.enum_descriptions)
        if spec.type == Codes or spec.type == Optional[Codes]:
            entry["items"] = {"type": "string"}
        if where.minimum is not None:
            entry["minimum"] = where.minimum
        if where.scope:
            entry["scope"] = where.scope
        properties["torchlint." + where.editor] = entry
    return properties
