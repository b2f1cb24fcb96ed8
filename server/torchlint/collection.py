"""When the cyclic garbage collector runs, and what it leaves out: the only module that calls
``gc``'s controls. The callers say what happens; this module decides what the collector does:

- an analysis under way (engine, incremental check, fixes): no collection (:func:`paused`);
- parso's cache loading a pickled tree: back as it was after (:class:`RestoringCollector`);
- jedi's first trip into torch done: what is alive is left out of later collections
  (:func:`freeze_long_lived`);
- a CLI worker: no automatic collection (:func:`stop_automatic`); between files, when
  ``cli.process_state.ProcessState.collect_now`` says, everything (:func:`collect_everything`), and what is left frozen
  (:func:`freeze`);
- the language server: the C library's allocator where glibc's gives memory back
  (:func:`restart_on_system_allocator`), the young generations after each jedi wave (:func:`collect_young`),
  fewer young collections once jedi is warm (:func:`fewer_young_collections`), and a full
  collection once it is quiet after documents were closed, of the frozen objects too when none
  is open (:class:`CollectionAfterClosing`).
"""
from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import sys
import threading
import time
from typing import Callable, Iterator, List, Optional, Tuple

_PAUSES = 0  # analyses under way with the cyclic GC paused (threads of the language server)
_PAUSE_LOCK = threading.Lock()
_RESUME_GC = False  # whether the GC was on when the first of them paused it


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Keep the cyclic garbage collector off while a file is parsed and analysed.

    An analysis allocates millions of AST nodes and index entries that all stay alive until it
    ends: every full collection on the way walks all of them again, which makes the cost grow
    faster than the file (a 60,000-line file took three times as long). Nothing is freed
    later than it would be: the GC runs as usual once the last analysis under way is done.
    """
    global _PAUSES, _RESUME_GC
    with _PAUSE_LOCK:
        if _PAUSES == 0:
            _RESUME_GC = gc.isenabled()
            gc.disable()
        _PAUSES += 1
    try:
        yield
    finally:
        with _PAUSE_LOCK:
            _PAUSES -= 1
            if _PAUSES == 0 and _RESUME_GC:
                gc.enable()


class RestoringCollector:
    """Stands for the ``gc`` module in parso's cache, which turns the collector off to load a
    pickled tree and then always on again: here it comes back as it was, so a check that paused
    it (:func:`paused`) is not scanned through by full collections in mid-question."""

    def __init__(self) -> None:
        self._states = threading.local()

    def disable(self) -> None:
        self._states.__dict__.setdefault("stack", []).append(gc.isenabled())
        gc.disable()

    def enable(self) -> None:
        stack = self._states.__dict__.setdefault("stack", [])
        if not stack or stack.pop():
            gc.enable()


def freeze() -> None:
    """What is alive now is left out of every later collection (until :func:`collect_everything`)."""
    gc.freeze()


def freeze_long_lived() -> None:
    """After jedi's first trip into torch: what is alive now (parso's trees of torch, typing and
    builtins, jedi itself) lives as long as the process, and every later full collection would walk
    it again: left out of collections from now on. Not collected first, which would cost one such
    walk: the warm-up's own garbage is small, kept until the next :func:`collect_everything`
    (figures: benchmarks/README.md#tuned-constants)."""
    gc.freeze()


def stop_automatic() -> None:
    """No collection but those asked for (a CLI worker: ``ProcessState.collect_now``)."""
    gc.disable()


def collect_everything() -> int:
    """A full collection of everything, frozen objects included (they are thawed first: what a
    freeze kept of a file or a document checked since goes too). The objects it freed."""
    gc.unfreeze()
    return gc.collect()


def collect_young() -> None:
    """The two young generations: jedi leaves tens of thousands of cyclic objects per question
    (parso's trees point back to their parents)."""
    gc.collect(1)


def fewer_young_collections() -> None:
    """Young collections rarer, so that fewer of them land in the middle of a keystroke's check."""
    gc.set_threshold(50_000, 20, 100)


def _glibc_malloc_trim() -> Optional[Callable[[], None]]:
    """glibc's malloc_trim: a full collection frees objects, but the C heap keeps the pages they
    were in until asked to give them back. None elsewhere (another system, or another C library
    such as musl)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: trim(0) and None


_MALLOC_TRIM = _glibc_malloc_trim()
_GIVE_BACK: Callable[[], None] = _MALLOC_TRIM or (lambda: None)
# The allocator the language server's objects come from, where glibc's can give pages back:
# Python's own (pymalloc) takes memory from the system in blocks of 1 MiB and returns a block
# only once nothing in it is alive, and a few objects made while documents were open (a cache
# entry, a log line, a converter) kept most blocks once the documents closed; the C library's
# allocator, which malloc_trim empties page by page, gives them back (figures:
# benchmarks/README.md#tuned-constants). Chosen at start (PYTHONMALLOC), so the server starts
# once more for it (see restart_on_system_allocator).
SERVER_ALLOCATOR = "malloc"


def restart_on_system_allocator() -> None:
    """Run this process again, the same command, on the C library's allocator (SERVER_ALLOCATOR),
    when the library is glibc and nobody chose an allocator (PYTHONMALLOC unset: set it, to
    ``pymalloc`` say, to keep Python's). The same process (its id, its stdin and stdout) goes on
    as the new interpreter; nothing has been read or written yet. Returns when it stays as it is."""
    orig_argv = getattr(sys, "orig_argv", None)
    if _MALLOC_TRIM is None or "PYTHONMALLOC" in os.environ or sys.flags.ignore_environment \
            or not sys.executable or not orig_argv:
        return
    sys.stderr.flush()
    try:  # (the interpreter's own path, not argv[0], which another PATH could resolve elsewhere)
        os.execve(sys.executable, [sys.executable, *orig_argv[1:]],
                  dict(os.environ, PYTHONMALLOC=SERVER_ALLOCATOR))
    except OSError:
        return  # serves on as it is


def full_collection_between_analyses(thaw: bool = True) -> Optional[Tuple[int, float]]:
    """A full collection, then the freed pages given back to the system; never while an analysis
    is under way, which waits for it. ``thaw``: of everything, frozen objects included (frozen
    again after, when they were, so that what is left, jedi's warm state, stays out of young
    collections); otherwise of what is not frozen, which leaves out the walk of jedi's warm state
    (half a million objects: 0.26 s against 2.9 s on a busy machine, with as much memory given
    back once closed documents no longer leave cycles behind, jedi_access.drop_closed_tree).
    (objects freed, seconds taken), or None while an analysis is under way: nothing done."""
    with _PAUSE_LOCK:
        if _PAUSES:
            return None
        started = time.perf_counter()
        if thaw:
            refreeze = gc.get_freeze_count() > 0
            freed = collect_everything()
            if refreeze:
                gc.freeze()
        else:
            freed = gc.collect()
        _GIVE_BACK()
        return freed, time.perf_counter() - started


# How long the language server must be quiet (no document closed or edited) after a close before
# the full collection: it takes a second or more with a large heap, holding every thread (the
# collector holds the interpreter's lock), so it waits for the end of a burst of closes and never
# runs between keystrokes.
QUIET_SECONDS = 2.0


class CollectionAfterClosing:
    """A full collection once the server has been quiet for ``quiet`` seconds after a document was
    closed: what the closed documents held is garbage by then, much of it in cycles (parso's and
    jedi's trees) that young collections do not reach, or frozen since jedi's warm-up. Each close
    or edit starts the wait again, and an analysis under way puts the collection off by another
    wait. ``release`` runs first (what the closed documents still pinned elsewhere, dropped);
    ``report`` gets the objects freed and the seconds the collection took. The frozen objects
    are thawed only when ``thaw()`` says (no document open: nobody waits on the pause); their
    garbage, what was alive at jedi's warm-up and was dropped since, waits until then. On a
    thread of its own."""

    def __init__(self, release: Callable[[], None], report: Callable[[int, float], None],
                 quiet: float = QUIET_SECONDS, thaw: Callable[[], bool] = lambda: True) -> None:
        self._release, self._report, self._quiet, self._thaw = release, report, quiet, thaw
        self._lock = threading.Lock()
        self._timer: Optional[threading.Timer] = None
        self.collections: List[Tuple[int, float]] = []  # (objects freed, seconds) of each, in order

    def closed(self) -> None:
        """A document was closed: collect once the server is quiet."""
        with self._lock:
            self._wait_again()

    def edited(self) -> None:
        """A document changed: a collection due waits for the next quiet period."""
        with self._lock:
            if self._timer is not None:
                self._wait_again()

    def cancel(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def _wait_again(self) -> None:
        """Under the lock."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(self._quiet, self._collect)
        self._timer.name = "torchlint-collect-after-close"
        self._timer.daemon = True  # the process may end while it waits
        self._timer.start()

    def _collect(self) -> None:
        with self._lock:
            if self._timer is not threading.current_thread():
                return  # a close or an edit since: a newer wait runs
            self._timer = None
        self._release()
        done = full_collection_between_analyses(self._thaw())
        if done is None:  # an analysis under way: after it, quiet again
            with self._lock:
                if self._timer is None:
                    self._wait_again()
            return
        self.collections.append(done)
        self._report(*done)
