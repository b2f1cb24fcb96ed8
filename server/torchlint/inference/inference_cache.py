"""The jedi layer's answers kept on disk, so that a second run, a restart and the other worker
processes ask jedi nothing they (or a run before them) already asked.

One small JSON file per analysed text: the answers jedi gave about that text's undecided names
(bases, helper calls, receivers), with the project files those answers were read from. An entry
is found by a hash of the text, its path, the analysed environment and torchlint's version, and
used only while each of those project files still has the size and modification time it had
(a changed helper in another file means asking again). Files are written whole to a temporary
name and renamed into place, so concurrent writers (parallel workers, two runs) never leave a
half-written entry. Nothing an entry says is taken on trust: it names the key it was stored
under, the torchlint version that wrote it and a digest of everything it holds; one that is
unreadable, malformed, of another key or version, or altered since it was written (a digest that
does not match: a disk fault, another tool) counts as missing, is deleted and counted
(:attr:`InferenceCache.dropped`), so that it is computed again. The folder is kept under a size
bound by deleting the entries used least recently.

A cache that cannot be written (a full disk, a read-only folder) only costs time: the first
reason is kept (:attr:`InferenceCache.unwritable`) for the owner to say once.

A text whose questions the per-file budget cut short is kept too, with the answers it got and
the note that says so, under the budget it ran with: a later run with that budget gives the same
findings at once, and one with another budget asks again.

Nothing here imports jedi or starts a process.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from .. import __version__

CACHE_DIR_ENV = "TORCHLINT_CACHE_DIR"  # where the cache lives (default: $XDG_CACHE_HOME/torchlint)
DEFAULT_MAX_BYTES = 64 << 20  # the whole folder; the oldest entries go first past it
_FORMAT = 2  # bumped when an entry's layout changes
_MAX_ENTRY_BYTES = 4 << 20  # an entry bigger than this is not ours (or is damaged)
# A temporary file not renamed into place this long after its last write was left by a writer
# that died (kill -9, a power cut); a live writer's is seconds old.
STALE_TEMPORARY_SECONDS = 10 * 60
_TEMPORARY_PREFIX, TEMPORARY_SUFFIX = ".", ".tmp"  # an entry's name while it is written

Dependency = Tuple[str, int, int]  # (path, st_mtime_ns, st_size)


def default_cache_dir(environ: Optional[Mapping[str, str]] = None) -> Path:
    """``$TORCHLINT_CACHE_DIR``, else ``$XDG_CACHE_HOME/torchlint``, else ``~/.cache/torchlint``."""
    environ = os.environ if environ is None else environ
    if environ.get(CACHE_DIR_ENV):
        return Path(environ[CACHE_DIR_ENV])
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "torchlint"


def dependency(path: str) -> Optional[Dependency]:
    """What a project file looks like now (None when it is gone)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (path, st.st_mtime_ns, st.st_size)


@dataclass(frozen=True)
class Entry:
    """What the cache holds for one text."""

    answers: Dict[str, object]
    note: Optional[str] = None  # why inference stopped early on this text (the budget), else None
    budget: Optional[float] = None  # the per-file budget of the run that stopped early


@dataclass(frozen=True)
class CacheEvents:
    """What a layer's disk caches met, for its owner to tell the user (plain data: it travels back
    from worker processes)."""

    dropped: int = 0  # entries not what they claimed (damaged, altered): deleted, computed again
    unwritten: Tuple[str, ...] = ()  # why a cache could not be written, one sentence each


def fingerprint(*parts: object) -> str:
    """A stable hex digest of plain data (strings, numbers, lists of them)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode("utf-8", "surrogatepass")
                          ).hexdigest()


class InferenceCache:
    """A folder of entries; ``load`` and ``store`` never raise for a bad folder or a bad file."""

    def __init__(self, directory: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.directory = Path(directory) / ("v%d" % _FORMAT)
        self.max_bytes = max_bytes
        self.dropped = 0  # entries found damaged or not what they claim, deleted (see take_events)
        self.unwritable: Optional[str] = None  # why the first entry could not be written, if one could not

    def enabled(self) -> bool:
        """Whether disk caches are in use now (a subclass may switch them off)."""
        return True

    def key(self, environment: str, path: str, text: str) -> str:
        return fingerprint(__version__, environment, path, hashlib.sha256(
            text.encode("utf-8", "surrogatepass")).hexdigest())

    def _file(self, key: str) -> Path:
        return self.directory / key[:2] / (key + ".json")

    def load(self, key: str) -> Optional[Entry]:
        """What is stored under ``key``, when every project file its answers came from is unchanged.
        An entry that is not what it claims to be is deleted (see :meth:`discard`)."""
        target = self._file(key)
        try:
            with open(target, "rb") as handle:
                data = handle.read(_MAX_ENTRY_BYTES + 1)
        except OSError:  # missing (the usual case), or unreadable
            return None
        checked = _checked_entry(data, key)
        if checked is None:
            self.discard(key)
            return None
        entry, dependencies = checked
        for path, mtime, size in dependencies:
            if dependency(path) != (path, mtime, size):
                return None  # a file the answers came from changed: ask again
        try:
            os.utime(target)  # recently used: kept longest when the folder is trimmed
        except OSError:
            pass
        return entry

    def discard(self, key: str) -> None:
        """Delete the entry under ``key``, found damaged (by this module, or by the owner, whose
        answers it holds: :func:`..file_inference.valid_answers`), and count it."""
        self.dropped += 1
        _unlink(str(self._file(key)))

    def take_events(self) -> Tuple[int, Optional[str]]:
        """(entries dropped, why the cache could not be written or None) since the last call."""
        events = (self.dropped, self.unwritable)
        self.dropped, self.unwritable = 0, None
        return events

    def store(self, key: str, entry: Entry, dependencies: Iterable[Dependency]) -> None:
        """Write an entry atomically (a temporary file renamed into place); failures are ignored:
        the cache only ever saves time."""
        stored: Dict[str, object] = {"key": key, "version": __version__, "answers": entry.answers,
                                     "dependencies": sorted(set(dependencies))}
        if entry.note is not None:
            stored.update(note=entry.note, budget=entry.budget)
        stored["digest"] = _digest(stored)
        target = self._file(key)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(prefix=_TEMPORARY_PREFIX, suffix=TEMPORARY_SUFFIX,
                                                 dir=str(target.parent))
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as out:
                    json.dump(stored, out, separators=(",", ":"))
                os.replace(temporary, target)
            except BaseException:
                _unlink(temporary)
                raise
        except OSError as err:  # full, read-only, not a folder: the run goes on without
            if self.unwritable is None:
                self.unwritable = "%s (%s)" % (err.strerror or err, self.directory)
        except (ValueError, TypeError):  # (answers are plain data: not expected)
            pass

    def trim(self) -> int:
        """Delete the stray temporary files of writers that died (whatever the folder's size),
        then the least recently used entries until the folder is under 80 % of its bound;
        returns how many files were deleted."""
        files: List[Tuple[float, int, str]] = []
        total = 0
        removed = 0
        stale_before = time.time() - STALE_TEMPORARY_SECONDS
        try:
            with os.scandir(self.directory) as shards:
                for shard in shards:
                    if not shard.is_dir(follow_symlinks=False):
                        continue
                    with os.scandir(shard.path) as entries:
                        for entry in entries:
                            try:
                                st = entry.stat(follow_symlinks=False)
                            except OSError:
                                continue
                            if _is_stale_temporary(entry.name, st.st_mtime, _TEMPORARY_PREFIX, stale_before) \
                                    and _unlink(entry.path):
                                removed += 1
                                continue
                            files.append((st.st_mtime, st.st_size, entry.path))
                            total += st.st_size
        except OSError:
            return removed
        if total <= self.max_bytes:
            return removed
        for _, size, path in sorted(files):
            if total <= self.max_bytes * 0.8:
                break
            if _unlink(path):
                total -= size
                removed += 1
        return removed


def _is_stale_temporary(name: str, mtime: float, prefix: str, stale_before: float) -> bool:
    return name.startswith(prefix) and name.endswith(TEMPORARY_SUFFIX) and mtime < stale_before


def remove_stale_temporaries(folder: str, prefix: str) -> int:
    """Delete the files ``prefix*.tmp`` directly in ``folder`` whose writer died (last written
    STALE_TEMPORARY_SECONDS ago or more); a live writer's are kept. Returns how many were deleted;
    a folder that cannot be read deletes nothing."""
    stale_before = time.time() - STALE_TEMPORARY_SECONDS
    removed = 0
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if not (entry.name.startswith(prefix) and entry.name.endswith(TEMPORARY_SUFFIX)):
                    continue  # (the name first: parso's folder holds thousands of pickles)
                try:
                    stale = _is_stale_temporary(entry.name, entry.stat(follow_symlinks=False).st_mtime, prefix,
                                                stale_before) and entry.is_file(follow_symlinks=False)
                except OSError:
                    continue
                if stale and _unlink(entry.path):
                    removed += 1
    except OSError:
        pass
    return removed


def _digest(stored: Mapping[str, object]) -> str:
    return fingerprint({name: value for name, value in stored.items() if name != "digest"})


def _checked_entry(data: bytes, key: str) -> Optional[Tuple[Entry, List[Dependency]]]:
    """The entry ``data`` holds and the files its answers came from, when it is the one stored under
    ``key`` by this version and unaltered since; None for anything else."""
    if len(data) > _MAX_ENTRY_BYTES:
        return None
    try:
        stored: Any = json.loads(data)
    except ValueError:  # (UnicodeDecodeError included)
        return None
    if not isinstance(stored, dict) or stored.get("key") != key or stored.get("version") != __version__ \
            or stored.get("digest") != _digest(stored):
        return None
    answers, dependencies = stored.get("answers"), stored.get("dependencies")
    note, budget = stored.get("note"), stored.get("budget")
    if not isinstance(answers, dict) or not isinstance(dependencies, list) \
            or not isinstance(note, (str, type(None))) or isinstance(budget, bool) \
            or not isinstance(budget, (int, float, type(None))):
        return None
    checked: List[Dependency] = []
    for recorded in dependencies:
        if not (isinstance(recorded, list) and len(recorded) == 3 and isinstance(recorded[0], str)
                and all(isinstance(n, int) and not isinstance(n, bool) for n in recorded[1:])):
            return None
        checked.append((recorded[0], recorded[1], recorded[2]))
    return Entry(answers, note, budget), checked


def _unlink(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except OSError:
        return False
