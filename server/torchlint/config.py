"""``[tool.torchlint]`` in ``pyproject.toml``: reading, validating, and resolving it per file.

Shared by the command line and the language server, so nothing here prints or exits:
problems are raised as :class:`ConfigError` with a message naming the file and the key.

Rule selectors are codes or code prefixes: ``"TL101"``, ``"TL1"`` (every TL1xx rule),
``"TL"`` or ``"ALL"`` (every rule). An unknown code or prefix is an error.
"""
from __future__ import annotations

import difflib
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from functools import cached_property
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Optional, Tuple, Union

from .engine import CheckOptions
from .analysis.findings import Severity
from .files import GlobPattern, display_path, relative_to_root
from .rules import RULES_BY_CODE
from .settings import (SEVERITIES, ClassRecipe, Partial, SettingError, Settings, Spec, checked, flag_name, lookup,
                       matches, merged, pyproject_keys, specificity, specs, unknown_key)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10, where tomli is a dependency (pyproject.toml's marker)
    import tomli as tomllib

SECTION = "[tool.torchlint]"
KEYS = pyproject_keys()  # declared in torchlint.settings
SUB_TABLES = tuple(sorted({spec.where.pyproject.split(".")[0] for spec in specs()
                          if spec.where.pyproject and "." in spec.where.pyproject}))
SEVERITY_NAMES = SEVERITIES


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

    def over(self, given: Partial) -> "Config":
        """These settings with a higher source on top (the command line's, the editor's): a
        Partial its reader checked (``given_flags``, ``parse_editor``)."""
        return replace(self, sources=self.sources + (given,))

    def with_overrides(self, name: Callable[[Spec], str] = flag_name, **given: object) -> "Config":
        """:meth:`over` with the settings as keywords, checked here: ``with_overrides(select=["TL1"])``;
        ``name`` says what an error calls a setting."""
        try:
            return self.over(checked(given, name))
        except SettingError as err:
            raise ConfigError(str(err)) from None


_SELECTION = ("select", "extend_select", "ignore")


# -- selectors ---------------------------------------------------------------------------------

def at_least(severity: Severity, threshold: Severity) -> bool:
    """Whether ``severity`` is ``threshold`` or more severe (error > warning > info > hint: the
    order in which Severity declares them)."""
    return SEVERITY_NAMES.index(severity.value) <= SEVERITY_NAMES.index(threshold.value)


def expand(selectors: Iterable[str]) -> FrozenSet[str]:
    """The rule codes a list of (already validated) selectors covers."""
    return frozenset(code for code in RULES_BY_CODE for s in selectors if matches(s, code))


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
                raise ConfigError("%s: %s" % (at, unknown_key(key, pyproject_keys(sub_table))))
    given = {}
    for spec in specs():
        found, value = lookup(table, spec.where.pyproject) if spec.where.pyproject else (False, None)
        if found:
            given[spec.name] = value
    try:
        values = dict(checked(given, lambda spec: "%s %s" % (where, spec.where.pyproject)).values)
    except SettingError as err:
        raise ConfigError(str(err)) from None
    for spec in specs():
        if spec.where.relative_paths and spec.name in values:
            values[spec.name] = tuple(os.path.normpath(os.path.join(str(path.parent), folder))
                                      for folder in values[spec.name])
    return Config(path=path, root=root or path.parent, sources=(Partial.of(values),))


# -- [tool.torchlint.verify] -------------------------------------------------------------------

@dataclass(frozen=True)
class VerifyConfig:
    import_roots: Tuple[str, ...] = ()  # absolute folders to import files from as package modules
    extra_paths: Tuple[str, ...] = ()  # absolute folders appended to sys.path in the child
    classes: Tuple[Tuple[str, ClassRecipe], ...] = ()  # class name -> recipe

    def recipe(self, class_name: str) -> Optional[ClassRecipe]:
        return dict(self.classes).get(class_name)


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
