"""Editor settings (``torchlint.*``) and what they make of a document's check options.

Settings come from ``initializationOptions`` first, then ``workspace/configuration``
(section ``torchlint``), and are re-read on ``workspace/didChangeConfiguration``. They sit
on top of the workspace's ``[tool.torchlint]`` in pyproject.toml (see ``torchlint.config``).
A bad value is reported and that key keeps its default; nothing here raises.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..analysis.engine import CheckOptions
from ..config import Config, ConfigError, find_config

SECTION = "torchlint"
LABEL = SECTION + ".%s"  # how errors name a setting: torchlint.select
DEVICES = ("auto", "cuda", "cpu", "mps")


@dataclass(frozen=True)
class Settings:
    select: Optional[Tuple[str, ...]] = None  # None: what pyproject.toml selects
    ignore: Tuple[str, ...] = ()
    severity: Tuple[Tuple[str, str], ...] = ()  # (code or prefix, error|warning|info|hint)
    code_lens: bool = True
    verify_device: str = "auto"
    verify_timeout: float = 120.0  # seconds
    interpreter: Optional[str] = None
    max_file_size: int = 1_000_000  # characters; larger documents are not analysed
    # Run an interpreter the workspace's pyproject.toml names (a user-level opt-in: see
    # analysis.environments). Editors should only send it from user settings.
    trust_workspace_interpreter: bool = False


DEFAULT_SETTINGS = Settings()


def unwrap(raw: Any) -> Any:
    """The ``torchlint`` section, whether a client sends it bare or nested."""
    if isinstance(raw, dict):
        for key in (SECTION, "settings"):
            if isinstance(raw.get(key), dict):
                return unwrap(raw[key])
    return raw


def parse_settings(raw: Any) -> Tuple[Settings, List[str]]:
    """Settings from the client's JSON, and one message per value that was rejected."""
    raw = unwrap(raw)
    errors: List[str] = []
    if raw is None:
        return DEFAULT_SETTINGS, errors
    if not isinstance(raw, dict):
        return DEFAULT_SETTINGS, ["torchlint settings: expected an object, got %r" % (raw,)]
    values: Dict[str, Any] = {}
    probe = Config()

    def take(name: str, key: str, value: Any, check) -> None:
        try:
            values[name] = check(value)
        except ConfigError as err:  # already names the key
            errors.append("%s; using the default" % (err,))
        except (TypeError, ValueError) as err:
            errors.append("torchlint.%s: %s; using the default" % (key, err))

    if raw.get("select") is not None:
        take("select", "select", raw["select"],
             lambda v: (probe.with_overrides(select=v, label=LABEL), tuple(v))[1])
    if raw.get("ignore") is not None:
        take("ignore", "ignore", raw["ignore"],
             lambda v: (probe.with_overrides(ignore=v, label=LABEL), tuple(v))[1])
    if raw.get("severity") is not None:
        take("severity", "severity", raw["severity"],
             lambda v: (probe.with_overrides(severities=v, label=LABEL),
                        tuple(sorted(v.items())))[1])
    if raw.get("codeLens") is not None:
        take("code_lens", "codeLens", raw["codeLens"], _boolean)
    verify = raw.get("verify")
    if verify is not None:
        if not isinstance(verify, dict):
            errors.append("torchlint.verify: expected an object, got %r; using the defaults" % (verify,))
        else:
            if verify.get("device") is not None:
                take("verify_device", "verify.device", verify["device"], _device)
            if verify.get("timeout") is not None:
                take("verify_timeout", "verify.timeout", verify["timeout"], _timeout)
    if raw.get("maxFileSize") is not None:
        take("max_file_size", "maxFileSize", raw["maxFileSize"], _size)
    if raw.get("interpreter") not in (None, ""):
        take("interpreter", "interpreter", raw["interpreter"], _interpreter)
    if raw.get("trustWorkspaceInterpreter") is not None:
        take("trust_workspace_interpreter", "trustWorkspaceInterpreter", raw["trustWorkspaceInterpreter"], _boolean)
    return Settings(**values), errors


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError("expected true or false, got %r" % (value,))
    return value


def _device(value: Any) -> str:
    if not isinstance(value, str) or value.lower() not in DEVICES and not value.lower().startswith("cuda:"):
        raise ValueError("expected one of %s (or cuda:N), got %r" % (", ".join(DEVICES), value))
    return value.lower()


def _timeout(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError("expected a positive number of seconds, got %r" % (value,))
    return float(value)


def _size(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError("expected a positive number of characters, got %r" % (value,))
    return value


def _interpreter(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("expected the path of a Python interpreter, got %r" % (value,))
    return value


class OptionsResolver:
    """CheckOptions per document path: pyproject.toml's settings under the editor's.

    pyproject.toml files are read once per directory; ``forget`` drops them (settings
    changed, or a pyproject.toml was saved).
    """

    def __init__(self, report_error):
        self.settings = DEFAULT_SETTINGS
        self._configs: Dict[Path, Config] = {}
        self._report_error = report_error  # called with a message; must not raise

    def update(self, settings: Settings) -> None:
        self.settings = settings
        self.forget()

    def forget(self) -> None:
        self._configs.clear()

    def config_for(self, path: str) -> Config:
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
        settings = self.settings
        try:
            return config.with_overrides(select=settings.select, ignore=settings.ignore,
                                         severities=dict(settings.severity), label=LABEL)
        except ConfigError as err:  # already validated one by one; kept as a last guard
            self._report_error("%s; ignoring the editor's rule settings" % (err,))
            return config

    def options_for(self, path: str) -> CheckOptions:
        try:
            return self.config_for(path).options_for(path or "untitled.py")
        except Exception as err:  # a path the config code cannot place: check with every rule
            self._report_error("cannot resolve settings for %s: %s" % (path, err))
            return CheckOptions()
