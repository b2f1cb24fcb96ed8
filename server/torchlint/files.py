"""Which files to check: command-line paths expanded into Python files.

Directories are walked skipping virtual environments, caches and build output, the
configured ``exclude`` globs and what the project root's ``.gitignore`` lists. A file
named explicitly is always checked.

Globs follow ``.gitignore``: a pattern without a slash matches any path component by
name (``build``, ``*.egg-info``); one with a slash is matched against the path relative
to the project root (``tests/fixtures``, ``/docs/*.py``); ``**`` spans directories; a
trailing slash matches directories only.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Tuple

DEFAULT_EXCLUDES = (
    ".git", ".hg", ".svn", ".venv", "venv", "__pycache__", "node_modules", "build", "dist",
    "site-packages", ".tox", ".nox", ".eggs", "*.egg-info", ".mypy_cache", ".pytest_cache",
    ".ruff_cache", "_build", ".ipynb_checkpoints", ".direnv",
)
PYTHON_SUFFIX = ".py"


class GlobPattern:
    def __init__(self, pattern: str):
        self.pattern = pattern
        text = pattern.strip()
        self.dir_only = text.endswith("/")
        text = text.rstrip("/")
        if text.startswith("./"):
            text = text[2:]
        self.anchored = "/" in text
        self.regex = re.compile(_translate(text.lstrip("/")))

    def __repr__(self) -> str:
        return "GlobPattern(%r)" % self.pattern

    def __eq__(self, other) -> bool:
        return isinstance(other, GlobPattern) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __reduce__(self):  # compiled regexes pickle fine, but the pattern is all we need
        return (GlobPattern, (self.pattern,))

    def matches(self, rel: Optional[str], name: str, is_dir: bool) -> bool:
        """``rel``: the posix path relative to the project root (None when outside it)."""
        if self.dir_only and not is_dir:
            return False
        if self.anchored:
            return rel is not None and self.regex.fullmatch(rel) is not None
        return self.regex.fullmatch(name) is not None

    def matches_file(self, rel: Optional[str], name: str) -> bool:
        """The file or one of its directories (below the root) matches."""
        if self.matches(rel, name, is_dir=False):
            return True
        if rel is None:
            return False
        parts = rel.split("/")[:-1]
        return any(self.matches("/".join(parts[: i + 1]), parts[i], is_dir=True) for i in range(len(parts)))


def _translate(glob: str) -> str:
    out, i = [], 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("/**", i) and i + 3 == len(glob):
            out.append("(?:/.*)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        elif glob[i] == "[" and "]" in glob[i + 2:]:
            end = glob.index("]", i + 2)
            body = glob[i + 1:end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return "".join(out)


def relative_to_root(path: Path, root: Path) -> Optional[str]:
    try:
        return Path(os.path.abspath(path)).relative_to(Path(os.path.abspath(root))).as_posix()
    except ValueError:
        return None


def read_gitignore(root: Path) -> List[GlobPattern]:
    """The project root's .gitignore, in a simple subset (negations are not supported)."""
    try:
        lines = (root / ".gitignore").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    patterns = []
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#") or line.startswith("!"):
            continue
        patterns.append(GlobPattern(line))
    return patterns


def discover(paths: Sequence[Path], root: Path, exclude: Iterable[GlobPattern] = (),
             use_gitignore: bool = True, force_exclude: bool = False) -> Tuple[List[Path], List[Path]]:
    """The Python files to check under ``paths``, sorted, and the paths that do not exist.

    ``force_exclude`` applies the excludes to the paths themselves too: for pre-commit,
    which names every changed file explicitly."""
    patterns = [GlobPattern(p) for p in DEFAULT_EXCLUDES] + list(exclude)
    if use_gitignore:
        patterns += read_gitignore(root)
    found, missing = set(), []
    for path in paths:
        path = Path(os.path.abspath(path))
        if force_exclude and path.exists() and path != Path(os.path.abspath(root)) \
                and any(p.matches_file(relative_to_root(path, root), path.name) for p in patterns):
            continue
        if path.is_dir():
            found.update(_walk(path, root, patterns))
        elif path.exists():
            found.add(path)  # named explicitly: checked whatever its name
        else:
            missing.append(path)
    return sorted(found), missing


def _walk(top: Path, root: Path, patterns: List[GlobPattern]) -> Iterable[Path]:
    def excluded(full: str, name: str, is_dir: bool) -> bool:
        rel = relative_to_root(Path(full), root)
        return any(p.matches(rel, name, is_dir) for p in patterns)

    for directory, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames
                       if not excluded(os.path.join(directory, d), d, True)
                       and not os.path.exists(os.path.join(directory, d, "pyvenv.cfg"))]
        for name in filenames:
            if name.endswith(PYTHON_SUFFIX):
                full = os.path.join(directory, name)
                if not excluded(full, name, False):
                    yield Path(full)
