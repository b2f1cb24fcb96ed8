"""Editor settings (``torchlint.*``) and what they make of a document's check options.

What each setting is (name, type, allowed values, default) is declared in torchlint.settings.
Settings come from ``initializationOptions`` first, then ``workspace/configuration``
(section ``torchlint``), and are re-read on ``workspace/didChangeConfiguration``. They sit
on top of the workspace's ``[tool.torchlint]`` in pyproject.toml (see ``torchlint.config``).
A bad value is reported and that key keeps its default; nothing here raises.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

from ..engine import CheckOptions
from ..config import Config, ConfigError, find_config
from ..settings import (DEFAULT_SETTINGS, EDITOR_SECTION, Settings, editor_given, merged,
                        parse_editor)

SECTION = EDITOR_SECTION  # what workspace/configuration asks for


def unwrap(raw: Any) -> Any:
    """The ``torchlint`` section, whether a client sends it bare or nested."""
    if isinstance(raw, dict):
        for key in (SECTION, "settings"):
            if isinstance(raw.get(key), dict):
                return unwrap(raw[key])
    return raw


def parse_settings(raw: Any) -> Tuple[Settings, List[str]]:
    """Settings from the client's JSON, and one message per value that its setting's check
    (torchlint.settings) rejected: a wrong type, a rule code that does not exist..."""
    raw = unwrap(raw)
    if raw is None:
        return DEFAULT_SETTINGS, []
    if not isinstance(raw, dict):
        return DEFAULT_SETTINGS, ["torchlint settings: expected an object, got %r" % (raw,)]
    given, errors = parse_editor(raw)  # each value checked once, by its setting's declared check
    return merged([given]), errors


class OptionsResolver:
    """CheckOptions per document path: pyproject.toml's settings under the editor's.

    pyproject.toml files are read once per directory; ``forget`` drops them (settings
    changed, or a pyproject.toml was saved).
    """

    def __init__(self, report_error: Callable[[str], None]) -> None:
        self.settings = DEFAULT_SETTINGS
        self._configs: Dict[Path, Config] = {}
        self._report_error = report_error  # called with a message; must not raise

    def update(self, settings: Settings) -> None:
        self.settings = settings
        self.forget()

    def forget(self) -> None:
        self._configs.clear()

    def config_for(self, path: str) -> Config:
        """The document's project settings: its pyproject.toml's, the editor's over them."""
        directory = Path(path).resolve().parent if path else Path.cwd()
        config = self._configs.get(directory)
        if config is None:
            try:
                config = find_config(directory)
            except ConfigError as err:
                self._report_error("%s; using the default settings" % (err,))
                config = Config(root=directory)
            config = self._with_editor_settings(config)
            self._configs[directory] = config
        return config

    def _with_editor_settings(self, config: Config) -> Config:
        return config.over(editor_given(self.settings))  # (checked when parse_settings read them)

    def options_for(self, path: str) -> CheckOptions:
        try:
            return self.config_for(path).options_for(path or "untitled.py")
        except Exception as err:  # a path the config code cannot place: check with every rule
            self._report_error("cannot resolve settings for %s: %s" % (path, err))
            return CheckOptions()
