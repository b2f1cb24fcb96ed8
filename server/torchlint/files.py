"""Which files to check: command-line paths expanded into Python files and notebooks (.ipynb).

Directories are walked skipping virtual environments, caches and build output, the
configured ``exclude`` globs and what the ``.gitignore`` files of the project ignore (the
root's and every folder's below it, read by ``pathspec`` with git's rules: negation,
anchoring, a deeper file overriding). A file named explicitly is always checked.

The ``exclude`` globs are ``.gitignore`` lines, read by ``pathspec``: a pattern without a
slash matches any path component by name (``build``, ``*.egg-info``); one with a slash is
matched against the path relative to the project root (``tests/fixtures``, ``/docs/*.py``);
``**`` spans directories; a trailing slash matches directories only; the last pattern that
matches a path decides, so ``!pattern`` re-includes what an earlier one excluded (a file
inside an excluded folder stays excluded: the walk never enters the folder, as in git).
"""
from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple, Union

import pathspec

# A path as callers hold it: a string or a Path (os.fspath takes either).
PathText = Union[str, "os.PathLike[str]"]

DEFAULT_EXCLUDES = (
    ".git", ".hg", ".svn", ".venv", "venv", "__pycache__", "node_modules", "build", "dist",
    "site-packages", ".tox", ".nox", ".eggs", "*.egg-info", ".mypy_cache", ".pytest_cache",
    ".ruff_cache", "_build", ".ipynb_checkpoints", ".direnv",
)
PYTHON_SUFFIXES = (".py", ".ipynb")  # Python files and Jupyter notebooks


class GlobPattern:
    """One ``exclude`` / ``per-file-ignores`` pattern, read by ``pathspec`` as a ``.gitignore``
    line (``!pattern`` negates). Like the ``.gitignore`` files (and ripgrep), a pattern decides
    for the path it matches itself: pathspec's prefix matches of a folder's contents do not count
    (the walk does not enter an excluded folder; ``matches_file`` asks about each folder)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        text = pattern.strip()
        self.negated = text.startswith("!")
        text = text[1:] if self.negated else text
        if text.startswith("./"):
            text = text[2:]
        self.anchored = "/" in text.rstrip("/")
        # pathspec's compiled form of the positive pattern; `negated` says which way it decides.
        self._compiled: Optional[pathspec.RegexPattern]
        (self._compiled,) = pathspec.GitIgnoreSpec.from_lines([text]).patterns or (None,)

    def __repr__(self) -> str:
        return "GlobPattern(%r)" % self.pattern

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GlobPattern) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __reduce__(self) -> Tuple[type, Tuple[str]]:  # compiled regexes pickle fine, but the pattern is all we need
        return (GlobPattern, (self.pattern,))

    def matches(self, rel: Optional[str], name: str, is_dir: bool) -> bool:
        """The path itself matches the pattern (its ``!`` left aside). ``rel``: the posix path
        relative to the project root (None when outside it: only patterns without a slash,
        which match a name at any depth, can match there)."""
        if self._compiled is None or self._compiled.include is None:
            return False  # a blank pattern or a comment
        if rel is None:
            if self.anchored:
                return False
            rel = name
        path = rel + ("/" if is_dir else "")
        regex = self._compiled.regex
        assert regex is not None  # (a pattern that includes or excludes has one)
        match = regex.match(path)
        return match is not None and match.end() == len(path)

    def matches_file(self, rel: Optional[str], name: str) -> bool:
        """The file or one of its directories (below the root) matches."""
        return any(self.matches(*entry) for entry in _file_and_folders(rel, name))


def excluded_by(patterns: Sequence[GlobPattern], rel: Optional[str], name: str, is_dir: bool) -> bool:
    """Whether ``patterns`` exclude the path itself: the last one that matches decides, so a
    later ``!pattern`` re-includes what an earlier one excluded (as in a ``.gitignore`` file)."""
    decision = False
    for pattern in patterns:
        if pattern.matches(rel, name, is_dir):
            decision = not pattern.negated
    return decision


def excluded_file(patterns: Sequence[GlobPattern], rel: Optional[str], name: str) -> bool:
    """Whether ``patterns`` exclude a file, itself or through one of its folders below the root."""
    return any(excluded_by(patterns, *entry) for entry in _file_and_folders(rel, name))


def _file_and_folders(rel: Optional[str], name: str) -> Iterator[Tuple[Optional[str], str, bool]]:
    """(rel, name, is_dir) of a file and of each folder above it below the root."""
    if rel is not None:
        parts = rel.split("/")[:-1]
        for i in range(len(parts)):
            yield "/".join(parts[: i + 1]), parts[i], True
    yield rel, name, False


def display_path(path: PathText, base: Optional[PathText] = None) -> str:
    """How messages and reports name a file: relative to ``base`` (default: the working
    directory) when it is inside it, else as given; with forward slashes; its control characters
    escaped (:func:`printable`)."""
    return printable(relative_path(path, base))


def relative_path(path: PathText, base: Optional[PathText] = None) -> str:
    """``path`` relative to ``base`` (default: the working directory) when it is inside it, else as
    given; with forward slashes. As it is: for formats that encode it (SARIF's JSON)."""
    base = os.getcwd() if base is None else str(base)
    shown = os.path.relpath(path, base) if inside(path, base) else str(path)
    return shown.replace(os.sep, "/")


# Characters a terminal or a CI log reads as more than text: C0 and C1 controls (a newline starts a
# line GitHub Actions takes as a workflow command, `::error::` or `::add-mask::`; ESC starts a
# terminal sequence), DEL, and the Unicode line and paragraph separators.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: str) -> str:
    """``text`` with each control character written as an escape (``\n``, ``\x1b``), as Python's
    repr writes it: a file name prints on one line and changes no terminal state."""
    return _CONTROLS.sub(lambda m: repr(m.group(0))[1:-1], text)


def inside(path: PathText, directory: PathText) -> bool:
    try:
        return os.path.commonpath([os.path.abspath(path), os.path.abspath(directory)]) == os.path.abspath(directory)
    except ValueError:  # another drive on Windows
        return False


def relative_to_root(path: Path, root: Path) -> Optional[str]:
    try:
        return Path(os.path.abspath(path)).relative_to(Path(os.path.abspath(root))).as_posix()
    except ValueError:
        return None


class GitIgnores:
    """The ``.gitignore`` files from the project root down, each read once, matched as git
    does: a file's patterns are relative to its folder, the last matching pattern of a file
    decides (``!pattern`` re-includes) and a deeper file's decision overrides. Like ``exclude``
    (and ripgrep), a pattern decides for the path it matches itself: a folder named on the
    command line is walked even when it is ignored, its contents are not ignored for that.
    Paths outside the root are never ignored."""

    def __init__(self, root: Path) -> None:
        self.root = os.path.abspath(root)
        self._specs: Dict[str, Optional[pathspec.GitIgnoreSpec]] = {}

    def _spec(self, directory: str) -> Optional[pathspec.GitIgnoreSpec]:
        if directory not in self._specs:
            try:
                with open(os.path.join(directory, ".gitignore"), encoding="utf-8", errors="replace") as handle:
                    self._specs[directory] = pathspec.GitIgnoreSpec.from_lines(handle.read().splitlines())
            except OSError:  # none there (or unreadable: git would not use it either)
                self._specs[directory] = None
        return self._specs[directory]

    def ignored(self, path: PathText, is_dir: bool) -> bool:
        """Whether ``path`` itself is ignored (not asking about the folders above it)."""
        rel = relative_to_root(Path(path), Path(self.root))
        if not rel or rel == ".":
            return False
        parts = rel.split("/")
        decision = False
        directory = self.root
        for depth in range(len(parts)):
            spec = self._spec(directory)
            if spec is not None:
                below = "/".join(parts[depth:]) + ("/" if is_dir else "")
                for pattern in spec.patterns:
                    # pathspec's regexes also match what is inside a matched folder (a prefix
                    # match): only a match of the whole path is about the path itself.
                    regex = pattern.regex if pattern.include is not None else None  # (None for a comment)
                    match = regex.match(below) if regex is not None else None
                    if match is not None and match.end() == len(below):
                        decision = bool(pattern.include)
            directory = os.path.join(directory, parts[depth])
        return decision

    def ignored_file(self, path: PathText) -> bool:
        """Whether a file is ignored, itself or through a folder above it (below the root)."""
        rel = relative_to_root(Path(path), Path(self.root))
        if not rel or rel == ".":
            return False
        parts = rel.split("/")
        folders = (os.path.join(self.root, *parts[:i + 1]) for i in range(len(parts) - 1))
        return any(self.ignored(folder, True) for folder in folders) or self.ignored(path, False)


@dataclass
class Discovery:
    """What ``discover`` found: the files to check, and every path it could not use."""

    files: List[Path] = field(default_factory=list)  # sorted
    missing: List[Path] = field(default_factory=list)  # named but absent
    skipped: List[Tuple[Path, str]] = field(default_factory=list)  # (path, why): not regular files in a walk
    # Folders a walk left out by a default exclude (said with -v: a source folder named `build`
    # that is not a package is left out without a word otherwise).
    excluded_by_default: List[Path] = field(default_factory=list)
    errors: List[Tuple[Path, str]] = field(default_factory=list)  # (path, why): unreadable, or unusable when named


def discover(paths: Sequence[Path], root: Path, exclude: Iterable[GlobPattern] = (),
             use_gitignore: bool = True, force_exclude: bool = False) -> Discovery:
    """The Python files to check under ``paths``, and what could not be used.

    Only regular files (or symbolic links to them) are kept: a FIFO, socket or device named
    ``*.py`` in a walked directory is skipped (``skipped``) without being opened; one named
    explicitly, and a directory that cannot be listed, are ``errors``.
    ``force_exclude`` applies the excludes to the paths themselves too: for pre-commit,
    which names every changed file explicitly."""
    defaults = [GlobPattern(p) for p in DEFAULT_EXCLUDES]
    patterns = defaults + list(exclude)
    gitignores = GitIgnores(root) if use_gitignore else None
    found: Set[Path] = set()
    result = Discovery()
    for path in paths:
        path = Path(os.path.abspath(path))
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            result.missing.append(path)
            continue
        except OSError as err:
            result.errors.append((path, "cannot read: %s" % (err.strerror or err)))
            continue
        if force_exclude and path != Path(os.path.abspath(root)) \
                and (excluded_file(patterns, relative_to_root(path, root), path.name)
                     or (gitignores is not None and gitignores.ignored_file(path))):
            continue
        if stat.S_ISDIR(mode):
            found.update(_walk(path, root, list(exclude), defaults, gitignores, result))
        elif stat.S_ISREG(mode):
            found.add(path)  # named explicitly: checked whatever its name
        else:
            result.errors.append((path, "not a regular file (%s); not read" % file_kind(mode)))
    result.files = sorted(found)
    return result


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def _walk(top: Path, root: Path, patterns: List[GlobPattern], defaults: List[GlobPattern],
          gitignores: Optional[GitIgnores], result: Discovery) -> Iterable[Path]:
    """Python files under ``top``. Symbolic links to directories are not followed (no loops);
    links to files are. Entries are classified from ``stat`` only, and ``__init__.py`` looked up:
    nothing is opened. A default exclude (``build``, ``venv``...) does not apply to a folder that
    is a Python package (it holds ``__init__.py``): that is source code with an unlucky name."""
    def excluded(full: str, name: str, is_dir: bool) -> bool:
        rel = relative_to_root(Path(full), root)
        if gitignores is not None and gitignores.ignored(full, is_dir):
            return True
        if any(pattern.matches(rel, name, is_dir) for pattern in patterns):
            return excluded_by(defaults + patterns, rel, name, is_dir)  # the user's pattern decides
        if not excluded_by(defaults, rel, name, is_dir):
            return False
        if is_dir and os.path.isfile(os.path.join(full, "__init__.py")):
            return False
        if is_dir:
            result.excluded_by_default.append(Path(full))
        return True

    pending = [str(top)]
    while pending:
        directory = pending.pop()
        try:
            with os.scandir(directory) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as err:
            result.errors.append((Path(directory), "cannot read directory: %s" % (err.strerror or err)))
            continue
        subdirectories = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if not excluded(entry.path, entry.name, True) \
                            and not os.path.exists(os.path.join(entry.path, "pyvenv.cfg")):
                        subdirectories.append(entry.path)
                    continue
                if not entry.name.endswith(PYTHON_SUFFIXES) or excluded(entry.path, entry.name, False):
                    continue
                if entry.is_file():  # follows a symbolic link: its target must be a regular file
                    yield Path(entry.path)
                    continue
                if entry.is_symlink() and entry.is_dir():
                    continue  # a link to a directory named *.py: links to directories are not followed
                mode = entry.stat().st_mode  # follows links; raises for a dangling one
                result.skipped.append((Path(entry.path), "%s, not a regular file" % file_kind(mode)))
            except FileNotFoundError:
                result.skipped.append((Path(entry.path), "a dangling symbolic link"))
            except OSError as err:
                result.errors.append((Path(entry.path), "cannot read: %s" % (err.strerror or err)))
        pending.extend(reversed(subdirectories))


class NotRegularFile(OSError):
    """A path that is not a regular file where file content was expected."""


def read_regular_file(path: str, limit: Optional[int] = None) -> bytes:
    """A regular file's bytes (at most ``limit`` + 1 of them: the caller can tell a file over its
    limit). The file is opened without blocking, so a FIFO or device put in its place after
    discovery raises :class:`NotRegularFile` instead of hanging the read."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    descriptor = os.open(path, flags)
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile("not a regular file (%s)" % file_kind(mode))
        chunks: List[bytes] = []
        left = None if limit is None else limit + 1
        while left is None or left > 0:
            chunk = os.read(descriptor, 1 << 20 if left is None else min(1 << 20, left))
            if not chunk:
                break
            chunks.append(chunk)
            if left is not None:
                left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(descriptor)
