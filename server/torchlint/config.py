"""``[tool.torchlint]`` in ``pyproject.toml``: reading, validating, and resolving it per file.

Shared by the command line and the language server, so nothing here prints or exits:
problems are raised as :class:`ConfigError` with a message naming the file and the key.

Rule selectors are codes or code prefixes: ``"TL101"``, ``"TL1"`` (every TL1xx rule),
``"TL"`` or ``"ALL"`` (every rule). An unknown code or prefix is an error.
"""
from __future__ import annotations

import difflib
import json
import os
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from functools import cached_property
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple, Union

from .engine import CheckOptions
from .analysis.findings import Severity
from .files import GlobPattern, display_path, relative_to_root
from .rules import RULES_BY_CODE
from .settings import (SEVERITIES, Partial, SettingError, Settings, Spec, check_value, flag_name, lookup, merged,
                       pyproject_keys, specs)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10, where tomli is a dependency (pyproject.toml's marker)
    import tomli as tomllib

SECTION = "[tool.torchlint]"
KEYS = pyproject_keys()  # declared in torchlint.settings
SUB_TABLES = tuple(sorted({spec.where.pyproject.split(".")[0] for spec in specs()
                          if spec.where.pyproject and "." in spec.where.pyproject}))
SEVERITY_NAMES = SEVERITIES
_SELECTOR = re.compile(r"^(ALL|TL\d{0,3})$")


class ConfigError(Exception):
    """A configuration problem; the message names where (file and key, or flag) and what."""


@dataclass(frozen=True)
class RuleSelection:
    """One layer of rule selection: the file's, then the command line's or the editor's."""

    select: Optional[Tuple[str, ...]] = None  # None: keep what the previous layer enabled
    extend_select: Tuple[str, ...] = ()
    ignore: Tuple[str, ...] = ()

    def apply(self, enabled: FrozenSet[str]) -> FrozenSet[str]:
        """The codes enabled after this layer; the most specific selector wins, ignore on ties."""
        result = set()
        for code in RULES_BY_CODE:
            on, best = (code in enabled if self.select is None else False), -1
            for selector in (self.select or ()) + self.extend_select:
                if matches(selector, code) and specificity(selector) > best:
                    on, best = True, specificity(selector)
            for selector in self.ignore:
                if matches(selector, code) and specificity(selector) >= best:
                    on, best = False, specificity(selector)
            if on:
                result.add(code)
        return frozenset(result)


@dataclass(frozen=True)
class Config:
    """The settings of one project: pyproject.toml's ``[tool.torchlint]`` (the lowest source),
    then the command line's or the editor's, each a Partial of what that source gave."""

    path: Optional[Path] = None  # the pyproject.toml the settings came from (None: defaults)
    root: Path = field(default_factory=Path.cwd)  # anchored globs are relative to it
    sources: Tuple[Partial, ...] = ()  # checked values, lowest first

    @cached_property
    def settings(self) -> Settings:
        """Every setting: where sources disagree, the later one's value (see torchlint.settings)."""
        return merged(self.sources)

    # Rule selection and severities are not replaced by a later source but applied after the
    # earlier ones: a flag's `--ignore TL101` turns off TL101 among what pyproject.toml selects.
    @cached_property
    def selections(self) -> Tuple[RuleSelection, ...]:
        """One layer of rule selection per source that selects rules, applied in order."""
        return tuple(RuleSelection(given.get("select"), given.get("extend_select", ()), given.get("ignore", ()))
                     for given in self.sources if any(name in given for name in _SELECTION))

    @cached_property
    def severities(self) -> Tuple[Tuple[str, Severity], ...]:
        """(selector, severity) of every source, lowest first: later entries win."""
        return tuple((selector, Severity(severity)) for given in self.sources
                     for selector, severity in given.get("severity", ()))

    @cached_property
    def per_file_ignores(self) -> Tuple[Tuple[GlobPattern, FrozenSet[str]], ...]:
        return tuple((GlobPattern(glob), expand(codes)) for glob, codes in self.settings.per_file_ignores)

    @property
    def exclude(self) -> Tuple[str, ...]:
        return self.settings.exclude

    @property
    def extend_exclude(self) -> Tuple[str, ...]:
        return self.settings.extend_exclude

    @property
    def show_all(self) -> bool:
        """Findings are graded by the evidence for harm; quiet ones (e.g. a tensor attribute never
        read) are left out unless this is on, and then shown as hints."""
        return self.settings.show_all

    @property
    def fail_on(self) -> Severity:
        """The command line's grading: the least severe finding that fails a run (the editor shows
        every finding)."""
        return Severity(self.settings.fail_on)

    @property
    def show_hints(self) -> bool:
        """Whether the command line's text output prints hints (it counts them either way)."""
        return self.settings.show_hints

    @property
    def python(self) -> Optional[str]:
        """The interpreter whose packages the jedi layer analyses, as the file names it: the
        repository's choice, so torchlint.environments decides whether it may run."""
        return self.settings.python

    @cached_property
    def verify(self) -> "VerifyConfig":  # [tool.torchlint.verify]
        settings = self.settings
        return VerifyConfig(settings.verify_import_roots, settings.verify_extra_paths, settings.verify_classes)

    @property
    def exclude_patterns(self) -> List[GlobPattern]:
        return [GlobPattern(p) for p in self.exclude + self.extend_exclude]

    def enabled_codes(self) -> FrozenSet[str]:
        enabled = frozenset(RULES_BY_CODE)
        for selection in self.selections:
            enabled = selection.apply(enabled)
        return enabled

    def severity_overrides(self) -> Dict[str, Severity]:
        overrides: Dict[str, Tuple[int, Severity]] = {}
        for selector, severity in self.severities:
            for code in RULES_BY_CODE:
                if matches(selector, code) and specificity(selector) >= overrides.get(code, (-1, None))[0]:
                    overrides[code] = (specificity(selector), severity)
        return {code: severity for code, (_, severity) in overrides.items()}

    def fails_on(self, severity: Severity) -> bool:
        """Whether a finding of this severity makes ``torchlint check`` exit 1 (``fail-on``)."""
        return at_least(severity, self.fail_on)

    def options_for(self, path: Union[str, os.PathLike[str]]) -> CheckOptions:
        """What check_source needs for one file: enabled rules and severity overrides."""
        enabled = self.enabled_codes()
        rel = relative_to_root(Path(path), self.root)
        for pattern, codes in self.per_file_ignores:
            # `"!tests/**" = [...]`: the codes are ignored in every file the pattern does not match.
            if pattern.matches_file(rel, Path(path).name) != pattern.negated:
                enabled = enabled - codes
        return CheckOptions(enabled=enabled, severities=self.severity_overrides(), show_all=self.show_all)

    def over(self, given: Partial, name: Callable[[Spec], str] = flag_name) -> "Config":
        """These settings with a higher source on top (the command line's, the editor's): its
        values as it gave them, checked here; ``name`` says what errors call a setting."""
        return replace(self, sources=self.sources + (checked(given, name),))

    def with_overrides(self, name: Callable[[Spec], str] = flag_name, **given: object) -> "Config":
        """:meth:`over` with the settings as keywords: ``with_overrides(select=["TL1"])``."""
        return self.over(Partial.of(given), name)


_SELECTION = ("select", "extend_select", "ignore")


# -- selectors ---------------------------------------------------------------------------------

def matches(selector: str, code: str) -> bool:
    return selector == "ALL" or code.startswith(selector)


def specificity(selector: str) -> int:
    return 0 if selector == "ALL" else len(selector)


def at_least(severity: Severity, threshold: Severity) -> bool:
    """Whether ``severity`` is ``threshold`` or more severe (error > warning > info > hint: the
    order in which Severity declares them)."""
    return SEVERITY_NAMES.index(severity.value) <= SEVERITY_NAMES.index(threshold.value)


def expand(selectors: Iterable[str]) -> FrozenSet[str]:
    """The rule codes a list of (already validated) selectors covers."""
    return frozenset(code for code in RULES_BY_CODE for s in selectors if matches(s, code))


_NO_RULE = "an empty list selects no rule at all (leave it out to run every rule)"


def _selectors(values: object, where: str, empty: Optional[str] = None) -> List[str]:
    """Validated selectors; ``empty``: why an empty list is an error here (None: it is fine)."""
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        raise ConfigError("%s: expected a list of rule codes, got %r" % (where, values))
    if not values and empty:
        raise ConfigError("%s: %s" % (where, empty))
    result = []
    for value in values:
        if not isinstance(value, str):
            raise ConfigError("%s: expected a rule code, got %r" % (where, value))
        if not value.strip():
            raise ConfigError("%s: empty rule code %r" % (where, value))
        selector = value.strip().upper()
        if not _SELECTOR.match(selector) or not any(matches(selector, c) for c in RULES_BY_CODE):
            raise ConfigError("%s: unknown rule code or prefix %r (known: %s)"
                              % (where, value, ", ".join(RULES_BY_CODE) or "none"))
        result.append(selector)
    return result


def _severities(table: object, where: str) -> List[Tuple[str, Severity]]:
    if not isinstance(table, dict):
        raise ConfigError("%s: expected a table of rule code = severity, got %r" % (where, table))
    result = []
    for key, value in sorted(table.items(), key=lambda kv: specificity(str(kv[0]).upper())):
        (selector,) = _selectors([key], where)
        if not isinstance(value, str) or value.lower() not in SEVERITY_NAMES:
            raise ConfigError("%s.%s: expected one of %s, got %r"
                              % (where, key, ", ".join('"%s"' % s for s in SEVERITY_NAMES), value))
        result.append((selector, Severity(value.lower())))
    return result


def _declared(spec: Spec, value: object, where: str) -> Any:
    """``value`` checked against the setting's declaration (torchlint.settings)."""
    try:
        return check_value(spec, value)
    except SettingError as err:
        raise ConfigError("%s: %s" % (where, err)) from None


def _severity_table(table: object, where: str) -> Tuple[Tuple[str, str], ...]:
    """(selector, severity) pairs, least specific first; an editor's table comes as pairs already."""
    return tuple((selector, severity.value)
                 for selector, severity in _severities(dict(table) if isinstance(table, tuple) else table, where))


def _per_file_ignores(table: object, where: str) -> Tuple[Tuple[str, Tuple[str, ...]], ...]:
    if not isinstance(table, dict):
        raise ConfigError("%s: expected a table of glob = [codes], got %r" % (where, table))
    return tuple((glob, tuple(_selectors(codes, '%s."%s"' % (where, glob), empty="give the codes these files ignore")))
                 for glob, codes in table.items())


def _interpreter_path(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError("%s: expected the path of a Python interpreter, got %r" % (where, value))
    return value


# -- reading -----------------------------------------------------------------------------------

def read_table(path: Path) -> Optional[Dict[str, Any]]:
    """The ``[tool.torchlint]`` table of a pyproject.toml (None when it has none)."""
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as err:
        raise ConfigError("%s: cannot read: %s" % (display_path(path), err.strerror or err))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError("%s: invalid TOML: %s" % (display_path(path), err))
    except RecursionError:  # tomllib reads nested arrays and tables by recursion
        raise ConfigError("%s: invalid TOML: arrays or tables nested too deeply to read" % display_path(path)) from None
    table = data.get("tool", {}).get("torchlint") if isinstance(data.get("tool"), dict) else None
    if table is not None and not isinstance(table, dict):
        raise ConfigError("%s: %s must be a table" % (display_path(path), SECTION))
    return table


def parse_table(table: Dict[str, Any], path: Path, root: Optional[Path] = None) -> Config:
    """Validate a ``[tool.torchlint]`` table; every problem names the file and the key."""
    where = "%s: %s" % (display_path(path), SECTION)
    for key in table:
        if key not in KEYS:
            close = difflib.get_close_matches(key, KEYS, n=1)
            hint = " (did you mean %r?)" % close[0] if close else ""
            raise ConfigError("%s unknown key %r%s" % (where, key, hint))
    for sub_table in SUB_TABLES:
        at = "%s %s" % (where, sub_table)
        value = table.get(sub_table, {})
        if not isinstance(value, dict):
            raise ConfigError("%s: expected a table, got %r" % (at, value))
        for key in value:
            if key not in pyproject_keys(sub_table):
                raise _unknown_key(key, pyproject_keys(sub_table), at)
    given = {}
    for spec in specs():
        found, value = lookup(table, spec.where.pyproject) if spec.where.pyproject else (False, None)
        if found:
            given[spec.name] = value
    values = dict(checked(Partial.of(given), lambda spec: "%s %s" % (where, spec.where.pyproject)).values)
    for spec in specs():
        if spec.where.relative_paths and spec.name in values:
            values[spec.name] = tuple(os.path.normpath(os.path.join(str(path.parent), folder))
                                      for folder in values[spec.name])
    return Config(path=path, root=root or path.parent, sources=(Partial.of(values),))


# -- [tool.torchlint.verify] -------------------------------------------------------------------

VERIFY_CLASS_KEYS = ("kwargs", "factory")
_FACTORY = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*$")


@dataclass(frozen=True)
class ClassRecipe:
    """How ``torchlint verify`` builds one class: keyword arguments, or a factory "pkg.mod:function"."""

    kwargs_json: Optional[str] = None  # JSON text: keeps the frozen config hashable
    factory: Optional[str] = None

    @property
    def kwargs(self) -> Optional[Dict[str, Any]]:
        return None if self.kwargs_json is None else json.loads(self.kwargs_json)


@dataclass(frozen=True)
class VerifyConfig:
    import_roots: Tuple[str, ...] = ()  # absolute folders to import files from as package modules
    extra_paths: Tuple[str, ...] = ()  # absolute folders appended to sys.path in the child
    classes: Tuple[Tuple[str, ClassRecipe], ...] = ()  # class name -> recipe

    def recipe(self, class_name: str) -> Optional[ClassRecipe]:
        return dict(self.classes).get(class_name)


def _unknown_key(key: str, known: Sequence[str], where: str) -> ConfigError:
    close = difflib.get_close_matches(key, known, n=1)
    return ConfigError("%s: unknown key %r%s (known: %s)" % (
        where, key, " (did you mean %r?)" % close[0] if close else "", ", ".join(known)))


def _class_recipes(classes: object, where: str) -> Tuple[Tuple[str, ClassRecipe], ...]:
    """``[tool.torchlint.verify.classes]``: how each named class is built."""
    if not isinstance(classes, dict):
        raise ConfigError("%s: expected a table of class name = {kwargs = {...}} or {factory = "
                          "\"pkg.mod:function\"}, got %r" % (where, classes))
    recipes = []
    for class_name, entry in classes.items():
        at = "%s.%s" % (where, class_name)
        if not class_name.isidentifier():
            raise ConfigError("%s: %r is not a class name" % (at, class_name))
        if not isinstance(entry, dict):
            raise ConfigError("%s: expected a table with kwargs = {...} or factory = \"pkg.mod:function\", got %r"
                              % (at, entry))
        for name in entry:
            if name not in VERIFY_CLASS_KEYS:
                raise _unknown_key(name, VERIFY_CLASS_KEYS, at)
        if ("kwargs" in entry) == ("factory" in entry):
            raise ConfigError("%s: give either kwargs = {...} or factory = \"pkg.mod:function\", not %s"
                              % (at, "both" if entry else "neither"))
        if "factory" in entry:
            factory = entry["factory"]
            if not isinstance(factory, str) or not _FACTORY.match(factory.strip()):
                raise ConfigError("%s.factory: expected \"package.module:function\", got %r" % (at, factory))
            recipes.append((class_name, ClassRecipe(factory=factory.strip())))
        else:
            kwargs = entry["kwargs"]
            if not isinstance(kwargs, dict) or not all(k.isidentifier() for k in kwargs):
                raise ConfigError("%s.kwargs: expected a table of argument name = value, got %r" % (at, kwargs))
            try:
                text = json.dumps(kwargs)
            except (TypeError, ValueError) as err:
                raise ConfigError("%s.kwargs: values must be numbers, strings, booleans, arrays or tables (%s)"
                                  % (at, err)) from None
            recipes.append((class_name, ClassRecipe(kwargs_json=text)))
    return tuple(recipes)


# What a setting's declared type cannot say: that its rule codes exist, and so on. Every other
# setting is checked against its declaration alone.
_CHECKS: Dict[str, Callable[[object, str], object]] = {
    "select": lambda value, where: tuple(_selectors(value, where, empty=_NO_RULE)),
    "extend_select": lambda value, where: tuple(_selectors(value, where)),
    "ignore": lambda value, where: tuple(_selectors(value, where)),
    "severity": _severity_table,
    "per_file_ignores": _per_file_ignores,
    "python": _interpreter_path,
    "verify_classes": _class_recipes,
}


def checked(given: Partial, name: Callable[[Spec], str]) -> Partial:
    """The values of ``given`` (as its source gave them) checked and made the settings' types;
    a bad one raises ConfigError naming the setting as ``name(spec)`` does."""
    declared = {spec.name: spec for spec in specs()}
    values = {}
    for setting, value in given.values:
        spec = declared[setting]
        check = _CHECKS.get(setting)
        values[setting] = check(value, name(spec)) if check else _declared(spec, value, name(spec))
    return Partial.of(values)


def load_config(path: Union[str, os.PathLike[str]]) -> Config:
    """Settings from an explicitly named pyproject.toml (``--config``)."""
    path = Path(path).resolve()
    if not path.is_file():
        raise ConfigError("%s: no such file" % display_path(path))
    table = read_table(path)
    if table is None:
        raise ConfigError("%s: no %s table" % (display_path(path), SECTION))
    return parse_table(table, path)


def find_config(start: Optional[Union[str, os.PathLike[str]]] = None) -> Config:
    """Settings from the nearest pyproject.toml with a ``[tool.torchlint]`` table at or above
    ``start`` (a file or directory; default: the working directory), else the defaults."""
    start = Path(start or Path.cwd()).resolve()
    if not start.is_dir():
        start = start.parent
    for directory in (start, *start.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file() and _mentions_torchlint(candidate):
            table = read_table(candidate)
            if table is not None:
                return parse_table(table, candidate)
    return Config(root=project_root(start))


def _mentions_torchlint(path: Path) -> bool:
    """A cheap look before parsing: most pyproject.toml files on the way up are someone else's."""
    try:
        return b"torchlint" in path.read_bytes()
    except OSError:
        return False


def project_root(start: Path) -> Path:
    """Without a config: the nearest directory that looks like a project, else the folder that
    holds the package ``start`` is in (a package's own folder as the root would leave its imports of
    itself, ``from pkg.base import Base``, naming nothing on the analysed path), else ``start``."""
    for directory in (start, *start.parents):
        if (directory / ".git").exists() or (directory / "pyproject.toml").is_file():
            return directory
    while (start / "__init__.py").is_file() and start.parent != start:
        start = start.parent
    return start
