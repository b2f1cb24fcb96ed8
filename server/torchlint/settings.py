"""Every setting torchlint has, declared once: its names, type, allowed values, default and text.

:class:`Settings` is that declaration. Each field says where the setting can be given:
the editor (``torchlint.<editor>`` in VS Code's ``package.json``, ``initializationOptions``,
``workspace/configuration``), ``[tool.torchlint]`` in pyproject.toml (``pyproject``) and the
command line (``flag``, on the subcommands its ``cli`` entries name, with their help text).

Each source is read from this declaration into a :class:`Partial` (only what that source gave):
the editor's JSON by :func:`parse_editor`, the flags by :func:`given_flags` (which
:func:`add_flags` made), ``[tool.torchlint]`` by ``config.parse_table``. Each reader checks each
value once, by its setting's :meth:`Spec.check`: the check the field declares (``check=``: rule
codes that exist, a severity table, a device...) or else its type, allowed values and minimum; a
Partial holds checked values only. ``config.Config`` puts
them over the defaults in one place, lowest first: pyproject.toml, then the command line or the
editor. ``tests/test_settings.py`` checks package.json's ``contributes.configuration`` against
:func:`vscode_schema`, that every allowed value is accepted by the code that reads it, and that
every setting arrives from each source it declares.

Adding a setting: a field here and the code that uses it; then ``tools/settings_docs.py`` writes
package.json's entry (when the editor offers it) and the settings tables of the extension's
README and docs/vscode.md from this declaration (``tests/test_settings_docs.py`` fails until it ran).
"""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import json
import re
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union, cast

import cattrs

from .analysis.findings import Severity
from .rules import RULES_BY_CODE

DEVICES = ("auto", "cuda", "cpu", "mps")  # and cuda:N (see is_device)
SEVERITIES = tuple(s.value for s in Severity)
IMPORT_STRATEGIES = ("useBundled", "fromEnvironment")
TRACE_LEVELS = ("off", "messages", "verbose")

Codes = Tuple[str, ...]  # rule codes or prefixes, in the order given
SeverityTable = Tuple[Tuple[str, str], ...]  # (code or prefix, severity), sorted: a JSON object


class SettingError(ValueError):
    """A value its setting's check refuses; the message says what was expected. ``at``: where
    inside the value (a table's key: ``.TL1``, ``."tests/**"``), written after the setting's name."""

    def __init__(self, message: str, at: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.at = at

    def naming(self, name: str) -> "SettingError":
        """The same error with the setting named as its source names it: ``--select: ...``."""
        return SettingError("%s%s: %s" % (name, self.at, self.message))


# -- what a setting's type cannot say: each is the whole check of the settings that declare it ----

_SELECTOR = re.compile(r"^(ALL|TL\d{0,3})$")
NO_RULE = "an empty list selects no rule at all (leave it out to run every rule)"


def matches(selector: str, code: str) -> bool:
    """Whether a (checked) rule selector covers ``code``: ``ALL``, a code, or a code prefix."""
    return selector == "ALL" or code.startswith(selector)


def specificity(selector: str) -> int:
    return 0 if selector == "ALL" else len(selector)


def rule_codes(values: object, empty: Optional[str] = None, at: str = "") -> Tuple[str, ...]:
    """Rule codes or prefixes that exist, upper-cased; ``empty``: why an empty list is an error
    here (None: it is fine)."""
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        raise SettingError("expected a list of rule codes, got %r" % (values,), at)
    if not values and empty:
        raise SettingError(empty, at)
    result = []
    for value in values:
        if not isinstance(value, str):
            raise SettingError("expected a rule code, got %r" % (value,), at)
        if not value.strip():
            raise SettingError("empty rule code %r" % (value,), at)
        selector = value.strip().upper()
        if not _SELECTOR.match(selector) or not any(matches(selector, c) for c in RULES_BY_CODE):
            raise SettingError("unknown rule code or prefix %r (known: %s)"
                               % (value, ", ".join(RULES_BY_CODE) or "none"), at)
        result.append(selector)
    return tuple(result)


def selected_codes(values: object) -> Tuple[str, ...]:
    """``select``: rule codes, at least one."""
    return rule_codes(values, empty=NO_RULE)


def severity_table(table: object) -> Tuple[Tuple[str, str], ...]:
    """(selector, severity) pairs, least specific first (a later pair wins); pairs are taken
    as the table they stand for (the value a Settings holds)."""
    if isinstance(table, tuple):
        table = dict(table)
    if not isinstance(table, dict):
        raise SettingError("expected a table of rule code = severity, got %r" % (table,))
    result = []
    for key, value in sorted(table.items(), key=lambda kv: specificity(str(kv[0]).upper())):
        (selector,) = rule_codes([key])
        if not isinstance(value, str) or value.lower() not in SEVERITIES:
            raise SettingError("expected one of %s, got %r" % (", ".join('"%s"' % s for s in SEVERITIES), value),
                               ".%s" % key)
        result.append((selector, value.lower()))
    return tuple(result)


def file_ignores(table: object) -> Tuple[Tuple[str, Tuple[str, ...]], ...]:
    """``per-file-ignores``: glob = the codes its files do not report (at least one)."""
    if not isinstance(table, dict):
        raise SettingError("expected a table of glob = [codes], got %r" % (table,))
    return tuple((glob, rule_codes(codes, empty="give the codes these files ignore", at='."%s"' % glob))
                 for glob, codes in table.items())


def interpreter_path(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SettingError("expected the path of a Python interpreter, got %r" % (value,))
    return value


def is_device(value: str) -> bool:
    """A device verification runs on: one of DEVICES, or cuda:N."""
    return value in DEVICES or (value.startswith("cuda:") and value[5:].isdigit())


def device(value: object) -> str:
    if not isinstance(value, str):
        raise SettingError("expected a string, got %r" % (value,))
    if not is_device(value):
        raise SettingError("expected one of %s (or cuda:N), got %r" % (", ".join(DEVICES), value))
    return value


def share(value: object) -> float:
    """A share of a whole: more than 0, at most 1."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise SettingError("expected a share more than 0 and at most 1, got %r" % (value,))
    return float(value)


VERIFY_CLASS_KEYS = ("kwargs", "factory", "inputs", "input-shape")
_FACTORY = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*$")


@dataclass(frozen=True)
class ClassRecipe:
    """How ``torchlint verify`` builds one class: keyword arguments, or a factory "pkg.mod:function"."""

    kwargs_json: Optional[str] = None  # JSON text: keeps the frozen config hashable
    factory: Optional[str] = None
    inputs: Tuple[str, ...] = ()  # forward's inputs as Python expressions (the CLI's --input)
    input_shapes: Tuple[str, ...] = ()  # forward's inputs as shapes, "2,16" or "2,16:long" (--input-shape)

    @property
    def kwargs(self) -> Optional[Dict[str, Any]]:
        return None if self.kwargs_json is None else json.loads(self.kwargs_json)


def unknown_key(key: str, known: Sequence[str]) -> str:
    """What an error says of a key no declaration knows, with the closest known one."""
    close = difflib.get_close_matches(key, known, n=1)
    return "unknown key %r%s (known: %s)" % (key, " (did you mean %r?)" % close[0] if close else "", ", ".join(known))


def class_recipes(classes: object) -> Tuple[Tuple[str, ClassRecipe], ...]:
    """``[tool.torchlint.verify.classes]``: how each named class is built."""
    if not isinstance(classes, dict):
        raise SettingError("expected a table of class name = {kwargs = {...}} or {factory = "
                           "\"pkg.mod:function\"}, got %r" % (classes,))
    recipes = []
    for class_name, entry in classes.items():
        at = ".%s" % class_name
        if not class_name.isidentifier():
            raise SettingError("%r is not a class name" % (class_name,), at)
        if not isinstance(entry, dict):
            raise SettingError("expected a table with kwargs = {...} or factory = \"pkg.mod:function\", got %r"
                               % (entry,), at)
        for name in entry:
            if name not in VERIFY_CLASS_KEYS:
                raise SettingError(unknown_key(name, VERIFY_CLASS_KEYS), at)
        if ("kwargs" in entry and "factory" in entry) or not entry:
            raise SettingError("give either kwargs = {...} or factory = \"pkg.mod:function\", not %s"
                               % ("both" if entry else "neither"), at)
        if "inputs" in entry and "input-shape" in entry:
            raise SettingError("give either inputs = [...] or input-shape = [...], not both", at)
        inputs = class_inputs(entry.get("inputs"), at + ".inputs")
        shapes = class_input_shapes(entry.get("input-shape"), at + ".input-shape")
        if "kwargs" not in entry and "factory" not in entry:
            recipes.append((class_name, ClassRecipe(inputs=inputs, input_shapes=shapes)))
        elif "factory" in entry:
            factory = entry["factory"]
            if not isinstance(factory, str) or not _FACTORY.match(factory.strip()):
                raise SettingError("expected \"package.module:function\", got %r" % (factory,), at + ".factory")
            recipes.append((class_name, ClassRecipe(factory=factory.strip(), inputs=inputs, input_shapes=shapes)))
        else:
            kwargs = entry["kwargs"]
            if not isinstance(kwargs, dict) or not all(k.isidentifier() for k in kwargs):
                raise SettingError("expected a table of argument name = value, got %r" % (kwargs,), at + ".kwargs")
            try:
                text = json.dumps(kwargs)
            except (TypeError, ValueError) as err:
                raise SettingError("values must be numbers, strings, booleans, arrays or tables (%s)" % err,
                                   at + ".kwargs") from None
            recipes.append((class_name, ClassRecipe(kwargs_json=text, inputs=inputs, input_shapes=shapes)))
    return tuple(recipes)


def class_inputs(value: object, at: str) -> Tuple[str, ...]:
    """``inputs = ["torch.randn(2, 16)", ...]``: forward's arguments as Python expressions."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise SettingError("expected a list of Python expressions, like [\"torch.randn(2, 16)\"], got %r"
                           % (value,), at)
    return tuple(v.strip() for v in value)


_SHAPE = re.compile(r"^\s*[\[(]?\s*\d+(\s*[,x\s]\s*\d+)*\s*[\])]?\s*(:\s*\w+)?\s*$")


def class_input_shapes(value: object, at: str) -> Tuple[str, ...]:
    """``input-shape = [2, 16]``, ``[[2, 16], [2, 16]]``, ``"2,16"`` or ``["2,16", "2,8:long"]``:
    one shape per forward argument, each as the CLI's --input-shape text."""
    if value is None:
        return ()
    items = value if isinstance(value, list) and value and not all(isinstance(v, int) for v in value) else [value]
    shapes = []
    for item in items:
        if isinstance(item, list) and item and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                                   for v in item):
            shapes.append(",".join(str(v) for v in item))
        elif isinstance(item, str) and _SHAPE.match(item):
            shapes.append(item.strip())
        else:
            raise SettingError("expected sizes like [2, 16], a list of them, or \"2,16\" (\"2,16:long\" for "
                               "integers), got %r" % (value,), at)
    return tuple(shapes)


def seconds(text: str) -> float:
    """A flag's number of seconds: 0 or more, finite."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("not a number of seconds (0 or more): %r" % text)
    return value


@dataclass(frozen=True)
class Flag:
    """A setting's flag (``Where.flag``) on one subcommand, and what that command's --help says."""

    command: str  # "check", "verify"
    help: str  # "{default}" and "{enum}" stand for the declared default and allowed values
    metavar: Optional[str] = None
    type: Optional[Callable[[str], Any]] = None  # argparse's conversion of the text (None: kept as text)
    enum_only: bool = True  # the flag refuses what the declaration's ``enum`` does not list; False: it takes more (cuda:N)


@dataclass(frozen=True)
class Where:
    """A setting's names and the constraints its type alone does not say."""

    description: str
    editor: Optional[str] = None  # torchlint.<editor>; dotted names are nested objects in the JSON
    pyproject: Optional[str] = None  # key of [tool.torchlint]; dotted: a sub-table
    flag: Optional[str] = None  # the command-line flag that sets it; a bool flag sets the opposite of the default
    cli: Tuple[Flag, ...] = ()  # the subcommands that take ``flag``
    relative_paths: bool = False  # folders; those pyproject.toml gives are relative to its folder
    enum: Tuple[str, ...] = ()  # allowed values (of the values, for a table)
    enum_descriptions: Tuple[str, ...] = ()
    minimum: Optional[float] = None
    scope: Optional[str] = None  # VS Code's configuration scope, when not the default
    server: bool = True  # False: only the VS Code extension reads it
    vscode: bool = True  # False: not offered in package.json (other editors send it)
    # The setting's whole check, for what its type cannot say (rule codes that exist...): the
    # value as given -> the value held, or SettingError. None: its type, enum and minimum.
    check: Optional[Callable[[Any], Any]] = None


def setting(default: Any, description: str, **where: Any) -> Any:
    return field(default=default, metadata={"where": Where(description, **where)})


@dataclass(frozen=True)
class Settings:
    """The settings as one value: the language server holds the editor's (over the defaults).
    The order of the fields is the order of the flags in --help."""

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
    select: Optional[Codes] = setting(
        None, "Rule codes or prefixes to enable (for example `[\"TL1\", \"TL301\"]`). Null: what "
        "`[tool.torchlint]` in pyproject.toml selects, else every rule.",
        editor="select", pyproject="select", flag="--select", check=selected_codes,
        cli=(Flag("check", "rules to run: codes or prefixes, comma-separated", "CODES"),))
    extend_select: Codes = setting(
        (), "Rule codes or prefixes to enable on top of `select`.",
        pyproject="extend-select", flag="--extend-select", check=rule_codes, cli=(Flag("check", "rules to run in addition", "CODES"),))
    ignore: Codes = setting(
        (), "Rule codes or prefixes to turn off, on top of pyproject.toml's `ignore`.",
        editor="ignore", pyproject="ignore", flag="--ignore", check=rule_codes, cli=(Flag("check", "rules not to run", "CODES"),))
    per_file_ignores: Tuple[Tuple[str, Codes], ...] = setting(
        (), "Pattern (a .gitignore line) = rule codes that files matching it do not report; a "
        "pattern starting with `!` applies to the files it does not match.", pyproject="per-file-ignores",
        check=file_ignores)
    exclude: Codes = setting(
        (), "Files and folders not to check, as .gitignore lines (the last matching one decides; `!` "
        "re-includes), added to the defaults (virtual environments, build folders, what .gitignore ignores).",
        pyproject="exclude")
    extend_exclude: Codes = setting(
        (), "More .gitignore lines of files and folders not to check.", pyproject="extend-exclude")
    severity: SeverityTable = setting(
        (), "Severity per rule code or prefix, for example `{\"TL301\": \"hint\", \"TL1\": \"error\"}`.",
        editor="severity", pyproject="severity", enum=SEVERITIES, check=severity_table)
    inference_cache: bool = setting(
        True, "Keep the type-inference (jedi) answers on disk, in `$TORCHLINT_CACHE_DIR` (else "
        "`$XDG_CACHE_HOME/torchlint`, else `~/.cache/torchlint`), so that a restart or a second run "
        "asks jedi nothing it already answered for the same text. Off: that folder is neither read "
        "nor written, nor are the parsed modules jedi keeps in its own cache folder "
        "(`$XDG_CACHE_HOME/jedi`).", editor="inferenceCache", flag="--no-cache",
        cli=(Flag("check", "neither read nor write type-inference answers on disk, nor jedi's parsed "
                           "modules (default: kept in $TORCHLINT_CACHE_DIR, else $XDG_CACHE_HOME/torchlint "
                           "or ~/.cache/torchlint, and $XDG_CACHE_HOME/jedi)"),))
    infer_budget: float = setting(
        10.0, "Seconds of type inference (jedi) per file and check; past them the rest of the file is "
        "checked by names alone. 0: no limit.", editor="inferBudget", flag="--infer-budget", minimum=0,
        cli=(Flag("check", "type inference time per file; past it the rest of the file is checked by names "
                           "alone (default: {default:g}; 0: no limit)", "SECONDS", seconds),))
    show_all: bool = setting(
        False, "Also report what the rules grade quiet (no evidence of harm), as hints.",
        pyproject="show-all", flag="--show-all",
        cli=(Flag("check", "also report findings graded quiet (no evidence of harm), as hints (printed)"),))
    show_hints: bool = setting(
        False, "Print hints in `torchlint check`'s text output (hidden by default, counted in the summary "
        "line; JSON, SARIF and GitHub output always carry them).",
        pyproject="show-hints", flag="--show-hints",
        cli=(Flag("check", "print hints too (default: counted in the summary line only; config: show-hints)"),))
    fail_on: str = setting(
        "warning", "The least severe finding that makes `torchlint check` exit 1: `error`, `warning`, "
        "`info` or `hint` (a file that does not parse always does).",
        pyproject="fail-on", flag="--fail-on", enum=SEVERITIES,
        cli=(Flag("check", "exit 1 on findings of this severity or worse: {enum} (default: config fail-on, "
                           "else {default})", "SEVERITY"),))
    code_lens: bool = setting(
        True, "Show a \"Verify\" code lens above each nn.Module class (\"Verify on cuda\" when the run "
        "will use CUDA; never in an untrusted workspace).", editor="codeLens")
    inlay_hints: bool = setting(
        False, "Show, after each `self.<name> = ...` in an nn.Module's `__init__`, what the attribute is "
        "(parameter, buffer, submodule, container, plain tensor...) as an inlay hint.", editor="inlayHints")
    verify_device: str = setting(
        "auto", "Device the runtime verification runs the module on.",
        editor="verify.device", flag="--device", enum=DEVICES, check=device,
        enum_descriptions=("CUDA when the interpreter's torch sees a GPU, else the CPU",
                           "The first CUDA device (fails when there is none)",
                           "The CPU",
                           "Apple's Metal backend (fails when torch.backends.mps is not available)"),
        cli=(Flag("verify", "where to run: auto = CUDA when available, else CPU (default: {default}); cuda:N "
                            "works too", "|".join(DEVICES), enum_only=False),))
    verify_timeout: float = setting(
        120.0, "Seconds a runtime verification may take before its process tree is killed.",
        editor="verify.timeout", flag="--timeout", minimum=1,
        cli=(Flag("verify", "kill the run and everything it started after S seconds (default: {default:g})",
                  "S", float),))
    verify_memory_share: float = setting(
        0.5, "Share of this machine's memory (of its container's limit, when lower) that a runtime "
        "verification on the CPU may allocate; past it an allocation fails as out of memory, so that an "
        "input guessed too large fails that guess instead of swapping the machine. 1: no bound. CUDA "
        "runs are not bounded (the GPU's own memory is).",
        editor="verify.memoryShare", flag="--memory-share", check=share,
        cli=(Flag("verify", "the share of this machine's memory a CPU run may allocate (default: {default:g}; "
                            "1: no bound)", "SHARE", float),))
    verify_import_roots: Codes = setting(
        (), "Folders to import model files from as package modules.", pyproject="verify.import-roots",
        relative_paths=True)
    verify_extra_paths: Codes = setting(
        (), "Folders appended to sys.path in the verification child.", pyproject="verify.extra-paths",
        relative_paths=True)
    verify_classes: Tuple[Tuple[str, Any], ...] = setting(
        (), "Per class: `kwargs = {...}` or `factory = \"pkg.mod:function\"`.", pyproject="verify.classes",
        check=class_recipes)
    interpreter: str = setting(
        "", "Path of the Python interpreter that runs the torchlint server and the runtime verification "
        "(give the one that has torch). Empty: the Python extension's active environment when that "
        "extension is installed, else `python3`. Ignored at workspace level in an untrusted workspace.",
        editor="interpreter", flag="--python", scope="machine-overridable",
        cli=(Flag("check", "the interpreter whose packages the code uses, for type inference (default: "
                           "$TORCHLINT_PYTHON, config `python`, the active virtualenv, else this Python)", "PATH"),
             Flag("verify", "the interpreter to run with (default: $TORCHLINT_PYTHON, the active virtualenv, "
                            "else this Python)", "PATH")))
    interpreter_source: str = setting(
        "", "Who chose `interpreter`, as the server's messages name it: an editor that picks the interpreter "
        "itself says where it came from (the VS Code extension sends \"the default\", \"the Python "
        "extension's active environment\" or \"the torchlint.interpreter setting\", as its status bar "
        "says). Empty: the interpreter setting.", editor="interpreterSource", vscode=False)
    trust_workspace_interpreter: bool = setting(
        False, "Allow the interpreter that the workspace's `[tool.torchlint] python` names to be run "
        "(without it, only a virtual environment's files are read). A user setting: a workspace cannot "
        "give itself this trust.",
        # VS Code always sends the interpreter it started the server with, which comes first.
        editor="trustWorkspaceInterpreter", flag="--trust-workspace", vscode=False,
        cli=(Flag("check", "run the interpreter the project's config names (without it, only a virtual "
                           "environment's files are read; also: TORCHLINT_TRUST_WORKSPACE=1)"),))
    python: Optional[str] = setting(
        None, "The interpreter whose packages the jedi layer analyses, relative to the pyproject.toml: "
        "a virtual environment is read, and never run unless the user trusts the workspace.",
        pyproject="python", check=interpreter_path)
    max_file_size: int = setting(
        1_000_000, "Documents with more characters than this are not analysed (parsing them would hold up "
        "every answer); torchlint says so once per document. `torchlint check` skips such a file as it "
        "skips one it cannot read: an error on stderr, exit 2.", editor="maxFileSize", flag="--max-file-size",
        minimum=1, cli=(Flag("check", "files with more characters than this are not checked: said as an error, "
                                      "exit 2 (default: {default})", "CHARACTERS", int),))
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

    def check(self, value: Any) -> Any:
        """The value as the setting holds it, or SettingError saying why not: the setting's own
        check where it declares one, else its type, allowed values and minimum. Every source's
        value (pyproject.toml, a flag, the editor) is checked here, once."""
        if self.where.check is not None:
            return self.where.check(value)
        return check_value(self, value)


@functools.lru_cache(maxsize=None)
def specs() -> Tuple[Spec, ...]:
    hints = typing.get_type_hints(Settings)
    return tuple(Spec(f.name, hints[f.name], f.default, f.metadata["where"]) for f in dataclasses.fields(Settings))


def spec_of(name: str) -> Spec:
    """The declaration of the field ``name`` (for a message that names the setting as its source does)."""
    return next(spec for spec in specs() if spec.name == name)


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


def is_codes(kind: object) -> bool:
    """A list of strings: rule codes, patterns, folders (``select``'s may be None: unset)."""
    return kind == Codes or kind == Optional[Codes]


# -- one source's settings, and the sources together --------------------------------------------

@dataclass(frozen=True)
class Partial:
    """What one source gave, as (field name, value) pairs in declaration order; a setting the
    source left unset is not there. Hashable, so that a Config made of partials is."""

    values: Tuple[Tuple[str, Any], ...] = ()

    @staticmethod
    def of(values: Mapping[str, Any]) -> "Partial":
        names = [spec.name for spec in specs()]
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise TypeError("not settings: %s" % ", ".join(unknown))
        return Partial(tuple((name, values[name]) for name in names if name in values))

    def __contains__(self, name: object) -> bool:
        return any(given == name for given, _ in self.values)

    def get(self, name: str, default: Any = None) -> Any:
        return next((value for given, value in self.values if given == name), default)


def merged(partials: Iterable[Partial]) -> Settings:
    """The defaults with each partial over the ones before it: where two sources give a setting,
    the later one's value is the setting's."""
    values: Dict[str, Any] = {}
    for partial in partials:
        values.update(partial.values)
    return Settings(**values)


def editor_given(settings: Settings) -> Partial:
    """The editor's settings that differ from the defaults. VS Code sends every setting, unset
    ones at their defaults, so a default value is taken as unset: what pyproject.toml says stands."""
    return Partial.of({spec.name: getattr(settings, spec.name) for spec in editor_specs(server_only=True)
                       if getattr(settings, spec.name) != spec.default})


# -- the command line ----------------------------------------------------------------------------

def command_flags(command: str) -> List[Tuple[Spec, Flag]]:
    """The settings ``torchlint <command>`` takes as flags, in declaration order."""
    return [(spec, flag) for spec in specs() for flag in spec.where.cli if flag.command == command]


def add_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """The flags of ``torchlint <command>``'s settings, made from the declaration. A flag not
    given parses as None (False for a switch), so that it leaves the setting to the other sources."""
    for spec, flag in command_flags(command):
        text = flag.help.format(default=spec.default, enum=", ".join(spec.where.enum))
        name = cast(str, spec.where.flag)  # (command_flags gives the specs that have a flag)
        if spec.type is bool:
            parser.add_argument(name, action="store_true", help=text)
        elif is_codes(spec.type):
            parser.add_argument(name, action="append", metavar=flag.metavar, help=text)
        else:
            choices = spec.where.enum if flag.enum_only and spec.where.enum else None
            parser.add_argument(name, type=cast(Callable[[str], Any], flag.type), choices=choices,
                                metavar=flag.metavar, help=text)


def given_flags(args: argparse.Namespace, command: str) -> Partial:
    """The settings the command line gave, checked (SettingError names the flag). A switch gives
    the opposite of the default (``--no-cache``: inference_cache off); rule codes come
    comma-separated, the flag repeated or not."""
    values: Dict[str, Any] = {}
    for spec, _flag in command_flags(command):
        name = cast(str, spec.where.flag)  # (command_flags gives the specs that have a flag)
        value = getattr(args, name.lstrip("-").replace("-", "_"))
        if value is None or value is False:
            continue
        if spec.type is bool:
            value = not spec.default
        elif is_codes(spec.type):
            value = _comma_codes(value, name)
        values[spec.name] = value
    return checked(values, flag_name)


def _comma_codes(values: List[str], flag: str) -> Codes:
    """Codes from repeated flags (`--select TL101,TL102 --select TL2`); a flag given no code at
    all (`--select ""`) is an error rather than "no rules"."""
    codes: List[str] = []
    for value in values:
        given = [code.strip() for code in value.split(",") if code.strip()]
        if not given:
            raise SettingError("%s: no rule code in %r (give codes or prefixes, e.g. %s TL1,TL301)"
                               % (flag, value, flag))
        codes.extend(given)
    return tuple(codes)


def flag_name(spec: Spec) -> str:
    """How an error names a setting that came from the command line (or from code)."""
    return spec.where.flag or spec.name


EDITOR_SECTION = "torchlint"  # the editor's configuration section: torchlint.select, torchlint.verify.device


def editor_name(spec: Spec) -> str:
    """How an error names a setting that came from the editor."""
    return "%s.%s" % (EDITOR_SECTION, spec.where.editor or spec.name)


def checked(values: Mapping[str, Any], name: Callable[[Spec], str] = flag_name) -> Partial:
    """The values (as a source gave them) checked, each by its setting (:meth:`Spec.check`); the
    first bad one raises SettingError naming the setting as ``name(spec)`` does."""
    result = {}
    for spec in specs():
        if spec.name in values:
            try:
                result[spec.name] = spec.check(values[spec.name])
            except SettingError as err:
                raise err.naming(name(spec)) from None
    return Partial.of({**values, **result})


# -- the editor's JSON -------------------------------------------------------------------------

def _strict_converter() -> cattrs.Converter:
    """cattrs, but refusing what JSON clients get wrong: "true" for true, 1 for true, a string for a list."""
    converter = cattrs.Converter()

    def exact(kind: Union[type, Tuple[type, ...]], expected: str) -> Callable[[Any, object], Any]:
        def structure(value: Any, _type: object) -> Any:
            if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
                raise SettingError("expected %s, got %r" % (expected, value))
            return value
        return structure

    converter.register_structure_hook(bool, exact(bool, "true or false"))
    converter.register_structure_hook(int, exact(int, "a whole number"))
    converter.register_structure_hook(str, exact(str, "a string"))
    converter.register_structure_hook(float, lambda v, _t: float(exact((int, float), "a number")(v, _t)))

    def codes(value: Any, _type: object) -> Codes:
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise SettingError("expected a list of strings, got %r" % (value,))
        return tuple(converter.structure(item, str) for item in value)

    converter.register_structure_hook_func(lambda kind: kind == Codes, codes)
    return converter


CONVERTER = _strict_converter()


def check_value(spec: Spec, value: Any) -> Any:
    """The value as the field's type, or SettingError saying why not (type, allowed values, minimum):
    the check of a setting that declares none of its own (see :meth:`Spec.check`)."""
    given = value  # what an error quotes: 0, not the 0.0 it became
    try:
        value = CONVERTER.structure(value, spec.type)
    except SettingError:
        raise
    except Exception as err:  # cattrs' own errors (a type it cannot build from this value)
        raise SettingError("expected %s, got %r (%s)" % (json_type(spec.type), value, err)) from None
    where = spec.where
    if where.enum and value not in where.enum:
        raise SettingError("expected one of %s, got %r" % (", ".join(where.enum), value))
    if where.minimum is not None and value < where.minimum:
        raise SettingError("expected at least %g, got %r" % (where.minimum, given))
    return value


def lookup(raw: Mapping[str, Any], dotted: str) -> Tuple[bool, Any]:
    """(found, value) of a dotted name (an editor's, a pyproject key) in the nested JSON or TOML."""
    *parents, last = dotted.split(".")
    table: Any = raw  # (each level: a dict, checked below)
    for parent in parents:
        table = table.get(parent)
        if not isinstance(table, dict):
            return False, None
    return last in table, table.get(last)


def parse_editor(raw: Mapping[str, Any]) -> Tuple[Partial, List[str]]:
    """The settings the editor gave (the ``torchlint`` section as a dict), and one message per
    value that was rejected (that setting is left unset). Null means unset."""
    values: Dict[str, Any] = {}
    errors: List[str] = []
    editor_names = [cast(str, s.where.editor) for s in editor_specs(True)]  # (editor_specs: those with one)
    for parent in sorted({name.split(".")[0] for name in editor_names if "." in name}):
        if raw.get(parent) is not None and not isinstance(raw[parent], dict):
            errors.append("%s.%s: expected an object, got %r; using the defaults"
                          % (EDITOR_SECTION, parent, raw[parent]))
    for spec in editor_specs(server_only=True):
        found, value = lookup(raw, cast(str, spec.where.editor))
        if not found or value is None:
            continue
        try:
            values[spec.name] = spec.check(value)
        except SettingError as err:
            errors.append("%s; using the default" % (err.naming(editor_name(spec)),))
    return Partial.of(values), errors


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
    if isinstance(value, float) and value.is_integer():
        return int(value)  # 120, not 120.0: the same number, as package.json's readers write it
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
        properties[editor_name(spec)] = entry
    return properties
