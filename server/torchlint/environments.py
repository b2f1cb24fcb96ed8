"""Which Python environment torchlint looks at (type inference) or runs (verification).

Trust: an interpreter is *run* only if the user chose it outside the analysed
repository: ``--python`` or the editor's ``interpreter`` setting, ``TORCHLINT_PYTHON``,
``VIRTUAL_ENV``, or the interpreter running torchlint. One named by a repository file
(``[tool.torchlint] python``) is run only after an opt-in made outside the repository
(``--trust-workspace``, ``TORCHLINT_TRUST_WORKSPACE=1``, the server's
``trustWorkspaceInterpreter`` setting). Without it, a virtual environment it names is
still *read* for type inference (its ``pyvenv.cfg`` and ``site-packages``, nothing
runs); anything else is ignored with a warning that says how to allow it.

Nothing here starts a process or imports jedi: reading an environment is plain file
reading, and the front ends (CLI, server, verification) share this one choice.
"""
from __future__ import annotations

import ast
import os
import re
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from .files import display_path

PYTHON_ENV = "TORCHLINT_PYTHON"  # an interpreter the user chose, like --python
TRUST_ENV = "TORCHLINT_TRUST_WORKSPACE"  # "1": run an interpreter the repository names
TIMEOUT_ENV = "TORCHLINT_INTERPRETER_TIMEOUT"  # seconds one call into an interpreter may take
DEFAULT_TIMEOUT = 30.0  # importing torch in jedi's subprocess takes seconds on a busy machine

INFERENCE = "inference"  # what the interpreter is for: read (or run, if trusted) by jedi
RUN = "run"  # run: verification executes the user's module with it

CLI_HINT = ("pass --trust-workspace (or set %s=1) to run it, or choose an interpreter with --python or %s"
            % (TRUST_ENV, PYTHON_ENV))
SERVER_HINT = ('set "trustWorkspaceInterpreter": true in your editor\'s user-level torchlint settings '
               "(or %s=1 in the server's environment) to run it, or set the \"interpreter\" setting" % TRUST_ENV)

_TRUE = ("1", "true", "yes", "on")
_MAX_READ = 1 << 20  # bytes read of one pyvenv.cfg / .pth / finder file: they are small
_VERSION = re.compile(r"^\s*(\d+)\.(\d+)")


@dataclass(frozen=True)
class VirtualEnv:
    """What a virtual environment puts on ``sys.path``, read from its files (PEP 405)."""

    root: str  # the folder holding pyvenv.cfg
    version: Optional[str]  # "3.11" (from pyvenv.cfg, else from the lib/pythonX.Y folder)
    sys_path: Tuple[str, ...]  # standard library, site-packages, .pth entries: in Python's order


@dataclass(frozen=True)
class Interpreter:
    path: str  # absolute, symlinks kept (a venv's bin/python is a link to its base Python)
    source: str  # who chose it, for messages: "--python", "TORCHLINT_PYTHON", "VIRTUAL_ENV"...
    trusted: bool  # chosen outside the repository (or the user opted in): it may be run
    venv: Optional[VirtualEnv] = None  # None: not a virtual environment; only running it tells its sys.path

    @property
    def is_own(self) -> bool:
        """The interpreter running torchlint."""
        return self.path == sys.executable


@dataclass(frozen=True)
class Choice:
    interpreter: Interpreter
    warnings: Tuple[str, ...] = ()  # for the user, once: a repository's interpreter that was passed over


def own_interpreter() -> Interpreter:
    return Interpreter(sys.executable, "the interpreter running torchlint", True, read_virtualenv(sys.executable))


def trust_from_environment(environ: Optional[Mapping[str, str]] = None) -> bool:
    environ = os.environ if environ is None else environ
    return environ.get(TRUST_ENV, "").strip().lower() in _TRUE


def interpreter_timeout(environ: Optional[Mapping[str, str]] = None) -> float:
    """Seconds one call into an interpreter may take (``TORCHLINT_INTERPRETER_TIMEOUT``)."""
    environ = os.environ if environ is None else environ
    try:
        value = float(environ.get(TIMEOUT_ENV, ""))
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if value > 0 else DEFAULT_TIMEOUT


def choose_interpreter(explicit: Optional[str] = None, explicit_source: str = "--python",
                       configured: Optional[str] = None, config_file: Optional[os.PathLike[str]] = None,
                       trust_workspace: bool = False, purpose: str = INFERENCE, hint: str = CLI_HINT,
                       environ: Optional[Mapping[str, str]] = None) -> Choice:
    """The interpreter for ``purpose``, first of: ``explicit`` (a flag or an editor setting),
    ``TORCHLINT_PYTHON``, the repository's ``configured`` one (from ``config_file``; relative
    paths are relative to it), ``VIRTUAL_ENV``, the interpreter running torchlint."""
    environ = os.environ if environ is None else environ
    trust_workspace = trust_workspace or trust_from_environment(environ)
    candidates: List[Tuple[str, str, bool, Optional[Path]]] = []  # (named, source, trusted, relative to)
    if explicit:
        candidates.append((explicit, explicit_source, True, None))
    if environ.get(PYTHON_ENV):
        candidates.append((environ[PYTHON_ENV], PYTHON_ENV, True, None))
    if configured:
        where = Path(config_file) if config_file else None
        source = "%s [tool.torchlint] python" % (display_path(where) if where else "pyproject.toml")
        candidates.append((configured, source, trust_workspace, where.parent if where else None))
    if environ.get("VIRTUAL_ENV"):
        active = Path(environ["VIRTUAL_ENV"])
        found = next((c for c in (active / "bin" / "python", active / "Scripts" / "python.exe") if c.exists()), None)
        if found is not None:
            candidates.append((str(found), "VIRTUAL_ENV", True, None))

    warnings: List[str] = []
    for named, source, trusted, base in candidates:
        path = _absolute(named, base)
        venv = read_virtualenv(path)
        if trusted:
            return Choice(Interpreter(path, source, True, venv), tuple(warnings))
        if purpose == INFERENCE and venv is not None:  # read, never run
            return Choice(Interpreter(path, source, False, venv), tuple(warnings))
        warnings.append(_passed_over(named, source, venv is not None, purpose, hint))
    return Choice(own_interpreter(), tuple(warnings))


def _passed_over(named: str, source: str, is_venv: bool, purpose: str, hint: str) -> str:
    if purpose == RUN:
        why = "verification runs no interpreter a repository names without your consent"
    elif is_venv:
        why = "torchlint runs no interpreter a repository names without your consent"
    else:
        why = ("it is not a virtual environment torchlint could read without running it, and torchlint runs "
               "no interpreter a repository names without your consent")
    return "%s = %r is ignored: %s; %s" % (source, named, why, hint)


def _absolute(named: str, base: Optional[Path]) -> str:
    """A path as given (relative to ``base``, else the working directory), or a bare name on PATH."""
    expanded = os.path.expanduser(named)
    if os.sep not in expanded and (os.altsep is None or os.altsep not in expanded):
        found = shutil.which(expanded)
        if found:
            return os.path.abspath(found)
    return os.path.abspath(os.path.join(str(base), expanded) if base is not None else expanded)


# -- reading a virtual environment ---------------------------------------------------------------

def read_virtualenv(python: str) -> Optional[VirtualEnv]:
    """The environment an interpreter belongs to, from its ``pyvenv.cfg`` (next to the
    interpreter or one folder up), or None when there is none or it cannot be read."""
    executable = Path(python)
    for folder in (executable.parent, executable.parent.parent):
        config = folder / "pyvenv.cfg"
        text = _read_small(config)
        if text is not None:
            try:
                return _virtualenv(folder, _parse_cfg(text))
            except (OSError, ValueError):
                return None
    return None


def _read_small(path: Path) -> Optional[str]:
    """A regular file's text (never a FIFO or a device: reading one could block), capped."""
    try:
        if not path.is_file():
            return None
        with open(path, "rb") as handle:
            return handle.read(_MAX_READ).decode("utf-8", "replace")
    except OSError:
        return None


def _parse_cfg(text: str) -> Dict[str, str]:
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip().lower()] = value.strip()
    return values


def _virtualenv(root: Path, cfg: Dict[str, str]) -> VirtualEnv:
    version = None
    for key in ("version_info", "version"):
        match = _VERSION.match(cfg.get(key, ""))
        if match:
            version = "%s.%s" % match.groups()
            break
    if version is None:  # an old or hand-made pyvenv.cfg: the lib folder says it
        found = sorted(root.glob("lib/python3.*/site-packages"))
        if found:
            version = found[-1].parent.name[len("python"):]
    base = _base_prefix(cfg)
    paths: List[str] = []
    paths.extend(_stdlib(base, version))
    for site in _site_dirs(root, version):
        paths.extend(_with_pth(site))
    if cfg.get("include-system-site-packages", "").lower() == "true" and base is not None:
        for site in _system_site_dirs(base, version):
            paths.extend(_with_pth(site))
    unique = tuple(dict.fromkeys(p for p in paths))
    return VirtualEnv(str(root), version, unique)


def _base_prefix(cfg: Dict[str, str]) -> Optional[Path]:
    if cfg.get("base-prefix"):  # virtualenv writes it
        return Path(cfg["base-prefix"])
    home = cfg.get("home")
    if not home:
        return None
    home_path = Path(home)
    # POSIX: home is the base's bin/ folder; Windows: the base's own folder, python.exe in it.
    return home_path.parent if home_path.name in ("bin", "Scripts") else home_path


def _stdlib(base: Optional[Path], version: Optional[str]) -> List[str]:
    candidates = []
    if base is not None and version:
        stdlib = base / "lib" / ("python" + version)
        candidates = [stdlib, stdlib / "lib-dynload", base / "Lib", base / "DLLs"]
    found = [str(p) for p in candidates if p.is_dir()]
    if found:
        return found
    # The base Python is not on this machine: torchlint's own standard library stands in.
    own_stdlib = sysconfig.get_path("stdlib")
    return [p for p in (own_stdlib, os.path.join(own_stdlib, "lib-dynload")) if os.path.isdir(p)]


def _site_dirs(root: Path, version: Optional[str]) -> List[Path]:
    found: List[Path] = []
    if version:
        found += [root / lib / ("python" + version) / "site-packages" for lib in ("lib", "lib64")]
    found.append(root / "Lib" / "site-packages")
    return _existing_unique(found)


def _system_site_dirs(base: Path, version: Optional[str]) -> List[Path]:
    found: List[Path] = []
    if version:
        found += [base / "lib" / ("python" + version) / "site-packages",
                  base / "local" / "lib" / ("python" + version) / "dist-packages",  # Debian's layout
                  base / "lib" / "python3" / "dist-packages"]
    found.append(base / "Lib" / "site-packages")
    return _existing_unique(found)


def _existing_unique(paths: List[Path]) -> List[Path]:
    seen, result = set(), []
    for path in paths:
        if path.is_dir():
            real = os.path.realpath(path)
            if real not in seen:  # lib64 is often a link to lib
                seen.add(real)
                result.append(path)
    return result


def _with_pth(site: Path) -> List[str]:
    """A site-packages folder and the folders its ``.pth`` files add. Lines that Python
    would execute (``import ...``) are not run: an editable install's finder is read
    for the folders it maps instead."""
    paths = [str(site)]
    try:
        pth_files = sorted(site.glob("*.pth"))
        finders = sorted(site.glob("__editable__*finder.py"))
    except OSError:
        return paths
    for pth in pth_files:
        for line in (_read_small(pth) or "").splitlines():
            entry = line.strip()
            if not entry or entry.startswith("#") or entry.startswith(("import ", "import\t")):
                continue
            folder = site / entry
            if folder.is_dir():
                paths.append(str(folder.resolve()))
    for finder in finders:
        paths.extend(_editable_folders(finder))
    return paths


def _editable_folders(finder: Path) -> List[str]:
    """The parents of the package folders a setuptools editable finder maps (its literal
    ``MAPPING = {"pkg": "/src/pkg"}``), read with ``ast``, never imported."""
    text = _read_small(finder)
    try:
        tree = ast.parse(text or "")
    except (SyntaxError, ValueError):
        return []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "MAPPING" for t in node.targets):
            try:
                mapping = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                return []
            if isinstance(mapping, dict):
                return [str(Path(p).parent) for p in mapping.values() if isinstance(p, str) and Path(p).is_dir()]
    return []
