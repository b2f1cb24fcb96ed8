"""What the other files of a project say about names, for questions no single file answers: which
attribute names their code uses on instances of a class (``self.decoder.conv_s0(x)``,
``model.head.weight``), and which names they subclass.

Read from each file's text with regular expressions, not parsed: the whole project costs a
fraction of a second (benchmarks/README.md#tuned-constants), once per process. A use of
``name`` on an instance of a class is ``.name`` followed by a call, an attribute or an item (a
layer is called, or its weights or items are read; ``config.dropout`` as a value is not one), on
any receiver but a bare ``self`` (``self.decoder.conv_s0(x)``,
``model.head(x)``, ``blocks[0].norm(x)``), in a file that names the class or the module that
defines it (a word anywhere in its text: a file that builds an instance names it; code handed
one by a factory or a registry may not, and its uses are not seen), and not on what that file's
imports bind (``F.dropout(x)``, ``torch.norm(x)``: a module's functions). Which class the
receiver holds is not read: a tensor's method of the same name (``x.norm()``) in such a file
counts too, and strings and comments do: there the answers err on the side of "used" (the rules
that ask then say less). The language server tells it of saved files
(:meth:`ProjectIndex.changed`); in a project of more than ``MAX_FILES`` files every name counts
as used and subclassed.
"""
from __future__ import annotations

import fnmatch
import os
import re
import threading
from collections import Counter
from typing import Dict, FrozenSet, Iterator, List, Optional, Set, Tuple

from ..files import DEFAULT_EXCLUDES

MAX_FILES = 20000
_MAX_BYTES = 4 * 10 ** 6  # a larger file is taken as using every name (generated tables)
# `.name(`, `.name.`, `.name[`; `self.name` (not `x.self.name`, `myself.name`) is taken out first. The
# literals first: the search runs at C speed between them (a look-behind first costs six times as much).
_USE = re.compile(rb"\.([A-Za-z_]\w*)[ \t]*[(.\[]")
_SELF_NAME = re.compile(rb"self(?<![\w.]self)\.[A-Za-z_]\w*")
# `class Name(Base, mod.Other, metaclass=M)`: the words between the parentheses, up to the first `)`.
_CLASS_BASES = re.compile(rb"class[ \t]+\w+[ \t]*\(([^)]*)")
_WORD = re.compile(rb"[A-Za-z_]\w*")
# The names a file's imports bind: `import a.b` (a), `import a as b`, `from m import (x as y, z)`.
_IMPORTS = re.compile(rb"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+)?import[ \t]+(\([^)]*\)|[^\n#;]*)", re.MULTILINE)
_IMPORTED = re.compile(rb"([\w.]+)(?:[ \t]+as[ \t]+(\w+))?")

_Entry = Tuple[FrozenSet[bytes], FrozenSet[bytes]]  # (names used, base words)
_USES, _BASES = 0, 1
_EVERYTHING: FrozenSet[bytes] = frozenset([b"*"])  # a file too large to read: it may use any name


class ProjectIndex:
    """The attribute names used and the base names of the Python files under ``root`` (the
    default excludes left out, and ``skipped``: folders of the environment, each ending in a
    separator), read at the first question."""

    def __init__(self, root: str, skipped: Tuple[str, ...] = ()) -> None:
        self.root = os.path.abspath(root)
        self._skipped = skipped
        self._entries: Optional[Dict[str, _Entry]] = None  # path -> what it says (None: not read yet)
        self._counts: Tuple[Counter[bytes], ...] = (Counter(), Counter())  # per field: name -> files
        self._closer: Dict[str, FrozenSet[bytes]] = {}  # path -> its uses, those on its imports left out
        self._complete = True  # every file was read (not more than MAX_FILES)
        self._changed: Set[str] = set()  # paths saved since the last question (changed)
        self._lock = threading.Lock()
        self._interned: Dict[bytes, bytes] = {}

    def used_elsewhere(self, path: str, name: str, class_name: str) -> bool:
        """Whether a project file other than ``path`` may use ``<expr>.name`` on an instance of the
        class ``class_name`` that ``path`` defines (see the module's docstring)."""
        key = name.encode("utf-8", "replace")
        with self._lock:
            others = self._others(path, key, _USES)
            if not others:
                return others is None
            stem = os.path.splitext(os.path.basename(path))[0]
            if stem == "__init__":
                stem = os.path.basename(os.path.dirname(os.path.abspath(path)))
            naming = re.compile(rb"\b(?:%s|%s)\b" % (re.escape(class_name.encode("utf-8", "replace")),
                                                     re.escape(stem.encode("utf-8", "replace"))))
            for other in others:
                if other not in self._closer:
                    self._closer[other] = _uses_read_closely(other)
                uses = self._closer[other]
                if (key in uses or uses is _EVERYTHING) and _names(other, naming):
                    return True
            return False

    def subclassed_elsewhere(self, path: str, name: str) -> bool:
        """Whether a project file other than ``path`` may define a class with ``name`` among the
        words of its bases, in a file that may import it from ``path``: one that names the module
        (``from .gpt import GPT``) or its package (a re-export), or has a star import. Another
        module's class of the same name (``from .model import GPT``) is not this one."""
        with self._lock:
            others = self._others(path, name.encode("utf-8", "replace"), _BASES)
            if not others:
                return others is None
            folder, stem = os.path.split(os.path.splitext(os.path.abspath(path))[0])
            words = [stem, os.path.basename(folder)] if stem != "__init__" else [os.path.basename(folder)]
            naming = re.compile(rb"\b(?:%s)\b|import[ \t]+\*" % b"|".join(
                re.escape(word.encode("utf-8", "replace")) for word in words))
            return any(_names(other, naming) for other in others)

    def changed(self, path: str) -> None:
        """``path`` was saved, created or deleted: read again before the next answer. Any thread."""
        self._changed.add(os.path.abspath(path))

    def _others(self, path: str, key: bytes, field: int) -> Optional[List[str]]:
        """The files other than ``path`` whose ``field`` holds ``key``; None when any file may
        (one too large to read, or the project was not read whole)."""
        entries = self._current()
        counts = self._counts[field]
        path = os.path.abspath(path)
        own = entries.get(path)
        if not self._complete or counts[b"*"] > (1 if own is not None and own[field] is _EVERYTHING else 0):
            return None
        if counts[key] <= (1 if own is not None and key in own[field] else 0):
            return []  # (the common answer, without a look at each file)
        return [other for other, entry in entries.items() if other != path and key in entry[field]]

    def _current(self) -> Dict[str, _Entry]:
        if self._entries is None:
            self._entries = {}
            for count, path in enumerate(self._python_files()):
                if count >= MAX_FILES:
                    self._complete = False
                    break
                self._add(path)
            self._changed.clear()
        while self._changed:
            path = self._changed.pop()
            if path.endswith(".py") and path.startswith(os.path.join(self.root, "")):
                self._remove(path)
                if os.path.isfile(path):
                    self._add(path)
        return self._entries

    def _python_files(self) -> Iterator[str]:
        for folder, folders, files in os.walk(self.root):
            folders[:] = sorted(name for name in folders if not _excluded(name)
                                and not os.path.join(folder, name, "").startswith(self._skipped))
            for name in sorted(files):
                if name.endswith(".py"):
                    yield os.path.join(folder, name)

    def _add(self, path: str) -> None:
        assert self._entries is not None
        data = _read(path)
        if data is None:
            return
        if len(data) > _MAX_BYTES:
            entry: _Entry = (_EVERYTHING, _EVERYTHING)
        else:
            intern = self._interned.setdefault
            uses = frozenset(intern(name, name) for name in _USE.findall(_SELF_NAME.sub(b"", data)))
            bases = frozenset(intern(word, word) for found in _CLASS_BASES.findall(data)
                              for word in _WORD.findall(found))
            entry = (uses, bases)
        self._entries[path] = entry
        for counts, names in zip(self._counts, entry):
            counts.update(names)

    def _remove(self, path: str) -> None:
        assert self._entries is not None
        self._closer.pop(path, None)
        entry = self._entries.pop(path, None)
        if entry is not None:
            for counts, names in zip(self._counts, entry):
                counts.subtract(names)


def _read(path: str) -> Optional[bytes]:
    try:
        with open(path, "rb") as handle:
            return handle.read(_MAX_BYTES + 1)
    except OSError:
        return None


def _names(path: str, naming: "re.Pattern[bytes]") -> bool:
    """Whether the file's text holds a word ``naming`` finds (read again: asked of the few files
    that use a name a rule asks about)."""
    data = _read(path)
    return data is None or len(data) > _MAX_BYTES or naming.search(data) is not None


def _uses_read_closely(path: str) -> FrozenSet[bytes]:
    """The file's uses (see the module's docstring), once the dotted names that start with
    what its imports bind are taken out (``F.dropout(x)``, ``nn.functional.dropout(x)``): a
    regular expression of its own, which costs a millisecond or two; asked only of files that
    use a name a rule asks about."""
    data = _read(path)
    if data is None:
        return frozenset()  # (gone since: it is read again when the editor says so)
    if len(data) > _MAX_BYTES:
        return _EVERYTHING
    text = _SELF_NAME.sub(b"", data)
    bound = {alias or full.split(b".")[0] for found in _IMPORTS.findall(data)
             for full, alias in _IMPORTED.findall(found) if full != b"as"}
    if bound:
        modules = re.compile(rb"(?<![\w.])(?:%s)(?:[ \t]*\.[ \t]*[A-Za-z_]\w*)+" % b"|".join(
            re.escape(name) for name in sorted(bound, key=len, reverse=True)))
        text = modules.sub(b"", text)
    return frozenset(_USE.findall(text))


_EXCLUDED = tuple(DEFAULT_EXCLUDES)


def _excluded(name: str) -> bool:
    """A folder the walk leaves out: a default exclude of the command line's (``build``,
    ``.venv``...), or a hidden one."""
    return name.startswith(".") or any(fnmatch.fnmatchcase(name, pattern) for pattern in _EXCLUDED)
