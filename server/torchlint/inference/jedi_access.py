"""Everything torchlint takes from jedi's and parso's internals, in one place (jedi is pinned in
pyproject.toml to the versions this was written against): jedi's interpreter protocol (an
interpreter in its own process group whose every call runs under a watchdog, or jedi's
compiled-object access in this process), the deadline checked at each inference step, the
inference state that scripts of one run share, and the trees parso keeps (parso's parser loop,
which this module installs, is in :mod:`.parso_parser`). Also the one piece of CPython's internals
jedi's recursion needs: room for its frames (with_frame_room).

The rest of the jedi layer (:mod:`.layer`) goes through these functions and jedi's public API,
whose objects it sees through the narrow Protocols below (jedi has no annotations: to mypy, all
of jedi is ``Any``, which stays in this module).
"""
from __future__ import annotations

import contextlib
import functools
import importlib.machinery
import logging
import os
import pickle
import queue
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import IO, Any, Callable, Dict, FrozenSet, Iterator, List, Optional, Protocol, Sequence, Set, Tuple, TypeVar, Union, cast

import parso
import parso.cache as _parso_cache
from jedi.api.environment import Environment, InterpreterEnvironment
from jedi.api.environment import InvalidPythonEnvironment as InvalidPythonEnvironment  # (for the layer)
# jedi's own pieces of its subprocess protocol: the script the subprocess runs, the function
# that reports the interpreter's version, the version tuple.
from jedi.api.environment import _get_info as _jedi_environment_info
from jedi.api.environment import _VersionInfo as _JediVersion
from jedi.inference import imports as _jedi_imports
from jedi.inference import syntax_tree as _jedi_syntax_tree
from jedi.inference.value.module import ModuleMixin as _JediModuleMixin
from jedi.inference.compiled.subprocess import _MAIN_PATH as _jedi_main_path
from jedi.inference.compiled.subprocess import CompiledSubprocess, InferenceStateSameProcess
from jedi.inference.compiled.subprocess import functions as _jedi_functions

from .. import collection, processes
from . import parso_parser
from ..environments import TIMEOUT_ENV
from .inference_cache import TEMPORARY_SUFFIX, remove_stale_temporaries

log = logging.getLogger("torchlint")
Answer = TypeVar("Answer")

JEDI_MAIN: str = _jedi_main_path  # the script jedi's interpreter runs

# jedi's objects as the layer uses them (jedi.Script, jedi.api.classes.Name, a loaded module's
# value, the inference state): only what it reads.


class JediName(Protocol):
    """A name jedi inferred or went to (jedi.api.classes.Name)."""

    @property
    def type(self) -> str: ...  # "class", "instance", "function", "module"...

    @property
    def full_name(self) -> Optional[str]: ...

    @property
    def module_path(self) -> Optional[Path]: ...

    @property
    def line(self) -> Optional[int]: ...

    @property
    def column(self) -> Optional[int]: ...

    def execute(self) -> List["JediName"]: ...


class LoadedModule(Protocol):
    """A module an inference state has loaded (jedi's ModuleValue, or a stub module's)."""

    def py__file__(self) -> Optional[Path]: ...


class _ModuleCache(Protocol):
    _name_cache: Dict[Tuple[str, ...], Sequence[LoadedModule]]


class InferenceState(Protocol):
    """jedi's InferenceState: what it has loaded and parsed, shared by the scripts that use it."""

    module_cache: _ModuleCache
    stub_module_cache: Dict[Tuple[str, ...], Optional[LoadedModule]]
    script_path: Optional[Path]

    def get_sys_path(self) -> List[str]: ...


class JediProject(Protocol):
    """A jedi Project: the root and the module search path its scripts resolve imports with."""

    added_sys_path: List[str]


class JediScript(Protocol):
    """A jedi Script (jedi.Script): a text and its path, asked at code-point positions."""

    path: Optional[Path]
    _inference_state: InferenceState

    def infer(self, line: int, column: int) -> List[JediName]: ...

    def goto(self, line: int, column: int, *, follow_imports: bool = False) -> List[JediName]: ...


# parso only calls gc.disable() and gc.enable() through this name: a stand-in, not the module
# (set by name: parso.cache's `gc` is its import of the module, not an attribute it exports).
setattr(_parso_cache, "gc", collection.RestoringCollector())

_parso_load: Callable[..., Any] = _parso_cache._load_from_file_system
_parso_hashed_path: Callable[..., str] = _parso_cache._get_hashed_path
_parso_cache_folder: Callable[..., Path] = _parso_cache._get_cache_directory_path  # (makes the folder)


def _always() -> bool:
    return True


# Whether parso's pickles are read from and written to disk, asked at each load and save: a layer
# without disk caches (--no-cache, the editor's inferenceCache off) says no (keep_pickles_on_disk).
_pickles_on_disk: Callable[[], bool] = _always


def keep_pickles_on_disk(when: Callable[[], bool]) -> None:
    """From now on, parso's pickles of parsed modules are loaded from and saved to jedi's cache
    folder only while ``when()`` is true (else each module is parsed in this process and kept in
    memory only). One answer for the process: its layers share parso's modules."""
    global _pickles_on_disk
    _pickles_on_disk = when


_TEMPORARY_PREFIX = ".torchlint-"  # a pickle's name while _save_whole writes it
_swept: Set[Optional[Path]] = set()  # the cache paths whose killed writers' temporary files this process deleted


def _sweep_once(cache_path: Optional[Path]) -> None:
    """At a process's first load or save of parso's pickles in a folder, delete the temporary
    files there that a killed writer left (parso never does); a live
    writer's are seconds old and kept (remove_stale_temporaries). Once: the folder holds a pickle
    per module jedi ever read."""
    if cache_path in _swept:
        return
    _swept.add(cache_path)
    try:
        folder = _parso_cache_folder(cache_path=cache_path)  # (makes it, as a load would)
    except OSError:
        return
    remove_stale_temporaries(str(folder), _TEMPORARY_PREFIX)


def _save_whole(hashed_grammar: str, path: str, item: Any, cache_path: Optional[Path] = None) -> None:
    """parso's pickle of a module's tree, written beside its place and renamed into it. parso
    writes into the place itself, so a worker loading that module meanwhile read half a file and
    jedi failed the question with EOFError (in runs with two workers:
    benchmarks/README.md#tuned-constants). A pickle that cannot be written (parso lets every error but PermissionError
    through: a full disk or a read-only folder failed the question, and its finding was lost) only
    costs the next run its parse: the first reason is kept for the owner to say
    (:func:`take_parse_cache_failure`)."""
    global _parse_cache_failure
    if not _pickles_on_disk():
        return
    _sweep_once(cache_path)
    try:
        target = _parso_hashed_path(hashed_grammar, path, cache_path=cache_path)  # (makes the folder)
        handle = tempfile.NamedTemporaryFile(dir=os.path.dirname(target), prefix=_TEMPORARY_PREFIX,
                                             suffix=TEMPORARY_SUFFIX, delete=False)
    except OSError as err:
        _parse_cache_failure = _parse_cache_failure or _cache_failure_reason(err, cache_path)
        return
    try:
        with handle:
            pickle.dump(item, handle, pickle.HIGHEST_PROTOCOL)
        os.replace(handle.name, target)
    except OSError as err:
        _parse_cache_failure = _parse_cache_failure or _cache_failure_reason(err, cache_path)
        with contextlib.suppress(OSError):
            os.unlink(handle.name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(handle.name)
        raise


_parse_cache_failure: Optional[str] = None  # why parso's pickles could not be written, since the last take


def _cache_failure_reason(err: OSError, cache_path: Optional[Path]) -> str:
    folder = cache_path if cache_path is not None else getattr(_parso_cache, "_default_cache_path", "parso's cache")
    return "%s (%s)" % (err.strerror or err, folder)


def take_parse_cache_failure() -> Optional[str]:
    """Why parso's pickles of parsed modules could not be written since the last call (None: they were)."""
    global _parse_cache_failure
    failure, _parse_cache_failure = _parse_cache_failure, None
    return failure


_parso_clear_old: Callable[..., Any] = _parso_cache._remove_cache_and_update_lock


def _clear_old_quietly(cache_path: Optional[Path] = None) -> Any:
    """parso's clean-up of old pickles after a save; on a folder that cannot be written it fails
    like the save (see _save_whole)."""
    if not _pickles_on_disk():
        return False
    try:
        return _parso_clear_old(cache_path=cache_path)
    except OSError:
        return False


def _load_whole(hashed_grammar: str, path: str, p_time: float, cache_path: Optional[Path] = None) -> Any:
    """parso's pickle of a module's tree, or None (parso parses the module again) where the file
    does not load: one another jedi tool (an editor's) was writing in place, or cut short. None
    too while pickles are kept off the disk (keep_pickles_on_disk): the file is never opened."""
    if not _pickles_on_disk():
        return None
    _sweep_once(cache_path)
    try:
        return _parso_load(hashed_grammar, path, p_time, cache_path=cache_path)
    except Exception:  # EOFError, UnpicklingError, or whatever half a pickle makes of the rest
        log.debug("parso's pickle of %s does not load: parsed again", path, exc_info=True)
        return None


_parso_cache._save_to_file_system = _save_whole
_parso_cache._load_from_file_system = _load_whole
_parso_cache._remove_cache_and_update_lock = _clear_old_quietly


class InterpreterTimeout(Exception):
    """An interpreter did not answer one call within the timeout; it was killed."""


class BudgetSpent(BaseException):
    """Raised by jedi's own code (:func:`within_deadline`) when a file's inference budget runs
    out in the middle of a question. A BaseException, so that jedi's ``except Exception`` blocks
    let it through."""

    where: Optional[str] = None  # the import jedi was in when the budget ran out ("fastai.imports")


_DEADLINE = threading.local()  # ``at``: the monotonic time this thread's question must end by


def _past_deadline(importing: Optional[Callable[[], str]] = None) -> None:
    """jedi's checkpoint: raise BudgetSpent once this thread's question is past its deadline.
    It runs only inside jedi's inference (never in a signal handler, a ``__del__`` or a collector
    callback, where Python would swallow the exception), in any thread, and raises at every
    later checkpoint too until the question ends. ``importing()`` names the module jedi is
    importing or reading names from, for the user."""
    at = getattr(_DEADLINE, "at", None)
    if at is not None and time.monotonic() > at:
        spent = BudgetSpent()
        spent.where = _importing_now(importing)
        raise spent


def _importing_now(importing: Optional[Callable[[], str]]) -> Optional[str]:
    """The outermost import this thread's question is in (what the user's file imports), else
    the one ``importing`` names."""
    stack = getattr(_DEADLINE, "imports", None)
    if stack:
        return cast(str, stack[0])
    try:
        return importing() if importing is not None else None
    except Exception:  # a name for a message: never worth a failure
        return None


def _parse_checkpoint() -> Optional[Callable[[], None]]:
    """What a parse within a question's deadline checks every few thousand tokens (parso_parser)."""
    return _past_deadline if getattr(_DEADLINE, "at", None) is not None else None


# jedi's infer_node(context, element): a jedi Context and a parso node, returning jedi's ValueSet.
_InferNode = Callable[[Any, Any], Any]


def _checked_infer_node(infer_node: _InferNode) -> _InferNode:
    @functools.wraps(infer_node)
    def infer_node_within_deadline(context: Any, element: Any) -> Any:
        _past_deadline()
        return infer_node(context, element)
    return infer_node_within_deadline


def _dotted(names: Sequence[Any]) -> str:
    return ".".join(str(getattr(n, "value", n)) for n in names)


def _checked_import(import_module: Callable[..., Any]) -> Callable[..., Any]:
    """jedi's import of a dotted name (``import_module_by_names``) or of each module on its way
    (``import_module``), within the question's deadline; the dotted names are kept on this
    thread's stack of imports in progress, for the message that names what cost the time."""
    @functools.wraps(import_module)
    def import_within_deadline(inference_state: Any, import_names: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
        stack = _DEADLINE.__dict__.setdefault("imports", [])
        stack.append(_dotted(import_names))
        try:
            _past_deadline()
            return import_module(inference_state, import_names, *args, **kwargs)
        finally:
            stack.pop()
    return import_within_deadline


def _module_name(module: Any) -> str:
    return _dotted(module.string_names or ()) or str(module.py__file__())


def _star_imports_once(star_imports: Callable[[Any], List[Any]]) -> Callable[[Any], List[Any]]:
    """jedi's star imports of a module, each module once, in the order jedi first lists it.
    jedi's list repeats a module for every path of star imports that reaches it: a name looked up
    in a file of tsai (``from ..imports import *``, which star-imports fastai, which star-imports
    fastcore...) went through 2.2 million filters of a few hundred modules, two minutes of one
    question. jedi takes the first filter that has the name, so the answers are the same. Each
    module's list is jedi's cached one, made unique in place the first time (later: the check
    finds it unique)."""
    @functools.wraps(star_imports)
    def star_imports_once(module: Any) -> List[Any]:
        modules = star_imports(module)  # (imports within the deadline: _checked_import_module)
        seen: Set[int] = set()
        unique = [m for m in modules if not (id(m) in seen or seen.add(id(m)))]  # type: ignore[func-returns-value]
        if len(unique) < len(modules):
            modules[:] = unique
        return modules
    return star_imports_once


def _checked_star_filters(iter_star_filters: Callable[[Any], Iterator[Any]]) -> Callable[[Any], Iterator[Any]]:
    """jedi's filters of the modules a module star-imports (one each, in the order of
    ``star_imports``), within the question's deadline."""
    @functools.wraps(iter_star_filters)
    def star_filters_within_deadline(module: Any) -> Iterator[Any]:
        modules = module.star_imports()
        for index, found in enumerate(iter_star_filters(module)):
            _past_deadline(lambda: _module_name(modules[index]))
            yield found
    return star_filters_within_deadline


def _replace(owner: Any, name: str, wrap: Callable[[Any], Any]) -> None:
    """``owner.name = wrap(owner.name)``, once per process (jedi's own functions are wrapped already:
    ``__wrapped__`` does not tell)."""
    current = getattr(owner, name)
    if not getattr(current, "_torchlint_wrapper", False):
        replacement = wrap(current)
        replacement._torchlint_wrapper = True
        setattr(owner, name, replacement)


# Every inference step goes through syntax_tree.infer_node (Context.infer_node looks it up at each
# call), so a question past its deadline stops at its next step. Module loading and star imports
# never reach it: checked where jedi imports a module, at each module whose star-imported names a
# lookup reads, and in the parse of a module (parso_parser).
_replace(_jedi_syntax_tree, "infer_node", _checked_infer_node)
_replace(_jedi_imports, "import_module_by_names", _checked_import)
_replace(_jedi_imports, "import_module", _checked_import)
_replace(_JediModuleMixin, "star_imports", _star_imports_once)
_replace(_JediModuleMixin, "iter_star_filters", _checked_star_filters)
# Every module jedi reads is parsed by parso: its loop at three quarters of the cost, stopped at a
# question's deadline.
parso_parser.install(_parse_checkpoint)


@contextlib.contextmanager
def within_deadline(seconds: Optional[float]) -> Iterator[None]:
    """Within the block, this thread's jedi inference stops with BudgetSpent after ``seconds``."""
    if seconds is None:
        yield
        return
    outer = getattr(_DEADLINE, "at", None)
    _DEADLINE.at = time.monotonic() + seconds if outer is None else min(outer, time.monotonic() + seconds)
    try:
        yield
    finally:
        _DEADLINE.at = outer


# CPython 3.11 and later keep the frames of Python calls in chunks of memory (16 KiB at first): a
# call that does not fit in the current chunk maps a new one, and unmaps it when it returns. jedi's
# recursion goes up and down across such a border thousands of times per question, each crossing a
# mapping, an unmapping and page faults: kernel time (benchmarks/README.md#tuned-constants). A call
# made through _call_with_room gets a frame FRAME_ROOM_SLOTS slots larger than it needs: CPython
# places it at the start of a new chunk twice that size (a power of two), and the calls below it fit
# in the rest of that chunk, mapped once per question (mostly never touched: only the pages used
# count). Slots past a frame's stack are never initialized; before 3.11 frames are separate objects,
# and the room is not given.
FRAME_ROOM_SLOTS = 128 * 1024  # pointers: 1 MiB, some 8,000 of jedi's frames


def _call(function: Callable[[], Answer]) -> Answer:
    return function()


_call_with_room: Callable[[Callable[[], Any]], Any] = _call
if sys.version_info >= (3, 11):
    _call_with_room = type(_call)(_call.__code__.replace(co_stacksize=_call.__code__.co_stacksize + FRAME_ROOM_SLOTS),
                                  _call.__globals__, "_call_with_room")


def with_frame_room(function: Callable[[], Answer]) -> Answer:
    """``function()``, with room below it for deep recursion that does not map and unmap memory
    at each step across a border (see FRAME_ROOM_SLOTS)."""
    return cast(Answer, _call_with_room(function))


def _end_process(process: "subprocess.Popen[bytes]", reader: threading.Thread) -> None:
    processes.end(process)  # its whole group: a shell script's `sleep` holds the pipes too
    reader.join(timeout=1)
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is None:
            continue  # (all three are pipes)
        try:
            stream.close()
        except OSError:
            pass


def _drain(stream: IO[bytes], lines: "queue.Queue[bytes]") -> None:
    for line in iter(stream.readline, b""):
        lines.put(line)


class _Watchdog:
    """Kills an interpreter's process group when one call into it runs past ``timeout``.

    One polling thread per interpreter: jedi makes thousands of small calls, too many to
    start a timer for each.
    """

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.expired = False
        self.on_expire: Optional[Callable[[str], None]] = None  # told once, from the watchdog's thread
        self._started: Optional[float] = None  # when the call in flight began
        self._process: Optional["subprocess.Popen[bytes]"] = None
        self._executable = ""  # what started that process
        self._thread: Optional[threading.Thread] = None

    def watch(self, process: "subprocess.Popen[bytes]", executable: str) -> None:
        self._process, self._executable = process, executable
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="torchlint-interpreter-watchdog", daemon=True)
            self._thread.start()

    def __enter__(self) -> None:
        self._started = time.monotonic()

    def __exit__(self, *exc_info: object) -> None:
        self._started = None

    def _run(self) -> None:
        poll = min(0.25, self.timeout / 4)
        while not self.expired:
            time.sleep(poll)
            started, process = self._started, self._process
            if process is None or process.poll() is not None:
                return  # the interpreter is gone (jedi dropped it): nothing left to watch
            if started is not None and process is not None and time.monotonic() - started > self.timeout:
                self.expired = True
                processes.end(process)
                if self.on_expire is not None:
                    try:
                        self.on_expire(timeout_message(self._executable, self.timeout))
                    except Exception:
                        log.debug("on_expire failed", exc_info=True)


# jedi's classes are Any to mypy (no annotations): subclassing them is what this module is for.
class _WatchedSubprocess(CompiledSubprocess):  # type: ignore[misc]  # (jedi: Any)
    """jedi's compiled-object subprocess, in its own process group, every call under the watchdog."""

    def __init__(self, executable: str, watchdog: _Watchdog):
        super().__init__(executable)
        self._watchdog = watchdog
        self._process: Optional["subprocess.Popen[bytes]"] = None

    def _get_process(self) -> "subprocess.Popen[bytes]":
        if self._process is None:
            args = (self._executable, "-c", _JEDI_MAIN_WITH_PLAIN_FINDERS, JEDI_MAIN,
                    os.path.dirname(os.path.dirname(parso.__file__)), "%d.%d.%d" % sys.version_info[:3])
            process = processes.start(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      close_fds=True)
            self._stderr_queue: "queue.Queue[bytes]" = queue.Queue()  # jedi's _send reads it into its debug log
            reader = threading.Thread(target=_drain, args=(process.stderr, self._stderr_queue), daemon=True)
            reader.start()
            self._cleanup_callable = weakref.finalize(self, _end_process, process, reader)
            self._watchdog.watch(process, self._executable)
            self._process = process
        return self._process

    def _send(self, inference_state_id: Optional[int], function: Optional[Callable[..., Any]] = None,
              args: Tuple[Any, ...] = (), kwargs: Dict[str, Any] = {}) -> Any:  # jedi's protocol: any value
        if function is _jedi_functions.load_module:
            if not _may_import(kwargs.get("dotted_name") or ""):
                return None  # jedi then reads the package's stubs, as for a module that fails to import
            if self._executable == sys.executable:  # torchlint's own Python, reading another sys.path
                if not _own_compiled(kwargs.get("dotted_name") or ""):
                    return None
                kwargs = dict(kwargs, sys_path=list(own_stdlib_folders()))
        if self._watchdog.expired:
            raise InterpreterTimeout(timeout_message(self._executable, self._watchdog.timeout))
        with self._watchdog:
            try:
                return super()._send(inference_state_id, function, args, kwargs)
            except Exception:
                if self._watchdog.expired:
                    raise InterpreterTimeout(timeout_message(self._executable, self._watchdog.timeout)) from None
                raise


# The finders jedi's module lookups may run (it calls every finder on sys.meta_path, with sys.path
# set to the project's: the repository first): importlib's own and setuptools' editable finders,
# which map names to folders. Others may import while they find: setuptools' distutils finder
# (distutils-precedence.pth) imports `setuptools._distutils`, from the repository when it ships one.
_PLAIN_FINDER_MODULES = ("_frozen_importlib", "_frozen_importlib_external", "importlib._bootstrap",
                         "importlib._bootstrap_external", "__editable__")


def _is_plain_finder(finder: object) -> bool:
    module = finder.__module__ if isinstance(finder, type) else type(finder).__module__
    return str(module).startswith(_PLAIN_FINDER_MODULES)


@contextlib.contextmanager
def _plain_finders() -> Iterator[None]:
    """Within the block, sys.meta_path holds only the plain finders (jedi swaps sys.path the same way)."""
    kept = sys.meta_path[:]
    sys.meta_path[:] = [finder for finder in kept if _is_plain_finder(finder)]
    try:
        yield
    finally:
        sys.meta_path[:] = kept


# jedi's interpreter script, run with only the plain finders (the same test, written out for ``-c``).
_JEDI_MAIN_WITH_PLAIN_FINDERS = (
    "import runpy, sys\n"
    "sys.meta_path[:] = [f for f in sys.meta_path if str(f.__module__ if isinstance(f, type) else "
    "type(f).__module__).startswith(%r)]\n"
    "sys.argv = sys.argv[1:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n" % (_PLAIN_FINDER_MODULES,))


def _may_import(dotted_name: str) -> bool:
    """Whether jedi's interpreter may import a compiled module to look into it: the standard
    library's only. A package's extension (torch._C) would run the package's own code first
    (``import torch``, in each interpreter: benchmarks/README.md#tuned-constants); its stubs
    (.pyi) answer instead."""
    return dotted_name.split(".", 1)[0] in STDLIB


@functools.lru_cache(maxsize=None)
def own_stdlib_folders() -> Tuple[str, ...]:
    """The folders of the standard library of the Python running torchlint (its modules and its
    extensions): the only place torchlint's own Python imports a module from for jedi. The
    analysed environment's ``sys.path`` is the repository's to choose (a planted ``winreg.pyc`` in
    its site-packages, a ``pyvenv.cfg`` whose ``home`` points into the repository): its files are
    read, never imported (docs/SECURITY.md)."""
    paths = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_exec_prefix})  # not a venv's
    folders = []
    for key in ("stdlib", "platstdlib"):
        folder = paths.get(key)
        if folder:
            folders += [folder, os.path.join(folder, "lib-dynload")]
    folders.append(os.path.join(sys.base_prefix, "DLLs"))  # Windows' extensions
    return tuple(dict.fromkeys(f for f in folders if os.path.isdir(f)))


@functools.lru_cache(maxsize=None)
def _own_compiled(dotted_name: str) -> bool:
    """Whether ``dotted_name`` is, in the standard library of the Python running torchlint, a
    module built into it or a top-level extension (``math``, ``_io``): the only modules jedi
    looks into by importing them. jedi imports a module wherever the analysed path holds no
    source for it, which the repository decides (a sourceless ``antigravity.pyc`` at its root):
    a module whose own copy is Python source (``antigravity`` opens a browser, ``this`` prints)
    is answered from typeshed's stubs instead, and never imported."""
    if dotted_name in sys.builtin_module_names:
        return True
    if "." in dotted_name:
        return False
    try:
        spec = importlib.machinery.PathFinder.find_spec(dotted_name, list(own_stdlib_folders()))
    except (ImportError, ValueError):
        return False
    return spec is not None and isinstance(spec.loader, importlib.machinery.ExtensionFileLoader)


class WatchedEnvironment(Environment):  # type: ignore[misc]  # (jedi: Any)
    """A jedi Environment whose interpreter calls time out; one that timed out is never restarted."""

    def __init__(self, executable: str, timeout: float):
        self.watchdog = _Watchdog(timeout)
        super().__init__(executable)  # starts the interpreter (under the watchdog)

    _subprocess: Optional[_WatchedSubprocess]  # jedi's Environment: None until started

    def _get_subprocess(self) -> _WatchedSubprocess:
        current = self._subprocess
        if current is not None and not current.is_crashed:
            return current
        if self.watchdog.expired:
            raise InterpreterTimeout(timeout_message(self._start_executable, self.watchdog.timeout))
        started = _WatchedSubprocess(self._start_executable, self.watchdog)
        try:
            executable, prefix, version = started._send(None, _jedi_environment_info)
        except InterpreterTimeout:
            raise
        except Exception as err:
            raise InvalidPythonEnvironment("%s did not start as a Python interpreter (%s)"
                                           % (self._start_executable, err)) from None
        self._subprocess = started
        self.executable, self.path = executable, prefix
        self.version_info = _JediVersion(*version)
        return started


class SameProcessEnvironment(InterpreterEnvironment):  # type: ignore[misc]  # (jedi: Any)
    """jedi's compiled-object access in this process, for a run that analyses with torchlint's own
    Python or reads a virtual environment (the CLI): what jedi's interpreter would do (find
    modules, evaluate literals, look into builtin objects) without starting it in every worker
    and without a pipe round trip per access. As there, only the standard library's extensions
    may be imported (_may_import), and none that touches the terminal."""

    def __init__(self, sys_path: List[str], timeout: float):
        super().__init__()
        self._sys_path = list(sys_path)
        self.watchdog = _Watchdog(timeout)  # nothing to watch: no interpreter to wait for

    def get_sys_path(self) -> List[str]:
        return list(self._sys_path)

    def get_inference_state_subprocess(self, inference_state: InferenceState) -> "_SameProcessAccess":
        return _SameProcessAccess(inference_state)


class _SameProcessAccess(InferenceStateSameProcess):  # type: ignore[misc]  # (jedi: Any)
    def __getattr__(self, name: str) -> Callable[..., Any]:  # jedi's access functions
        function: Callable[..., Any] = super().__getattr__(name)
        if name == "get_module_info":
            def get_module_info(**kwargs: Any) -> Any:
                with _plain_finders():
                    return function(**kwargs)
            return get_module_info
        if name != "load_module":
            return function

        def load_module(**kwargs: Any) -> Any:
            dotted = kwargs.get("dotted_name") or ""
            if not _may_import(dotted) or dotted.split(".", 1)[0] in _NOT_IN_PROCESS or not _own_compiled(dotted):
                return None  # jedi then reads the module's stubs
            with _plain_finders():
                return function(**dict(kwargs, sys_path=list(own_stdlib_folders())))
        return load_module


# Standard-library extensions that set up the terminal or a GUI when imported: never in this process.
_NOT_IN_PROCESS = frozenset(["readline", "_curses", "_curses_panel", "curses", "_tkinter", "tkinter", "_gdbm"])


def own_sys_path() -> List[str]:
    """The module search path a fresh start of this interpreter has: this process's, without the
    folder of the script or module that started it (jedi adds the project's folder itself)."""
    first = 0 if getattr(sys.flags, "safe_path", False) else 1  # python -P: no such folder in front
    return [p for p in sys.path[first:] if p]


# The environments jedi's questions run in.
AnalysedEnvironment = Union[WatchedEnvironment, SameProcessEnvironment]


def end_interpreter(environment: AnalysedEnvironment) -> None:
    """End ``environment``'s interpreter now, if it runs one; a later question starts a fresh one."""
    current = getattr(environment, "_subprocess", None)
    process = getattr(current, "_process", None)
    if current is not None and process is not None:
        current.is_crashed = True
        processes.end(process)


def executable_of(environment: AnalysedEnvironment) -> str:
    """The interpreter ``environment`` was started with."""
    executable: str = environment._start_executable
    return executable


def timeout_message(executable: str, timeout: float) -> str:
    return "%s did not answer within %g s (%s)" % (executable, timeout, TIMEOUT_ENV)


STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"builtins"}


@functools.lru_cache(maxsize=None)
def typeshed_stdlib() -> FrozenSet[str]:
    """The top-level names of the standard library stubs jedi ships (typeshed's), which it reads
    for a module of that name wherever the environment lacks it (one an older Python had)."""
    import jedi
    folder = os.path.join(os.path.dirname(jedi.__file__), "third_party", "typeshed", "stdlib")
    try:
        return frozenset(name.split(".", 1)[0] for name in os.listdir(folder))
    except OSError:
        return frozenset()


# -- the inference state scripts share, and the trees parso keeps ---------------------------------

def state_of(script: JediScript) -> InferenceState:
    """The inference state a jedi Script answers with."""
    return script._inference_state


def state_key(script: JediScript) -> Tuple[str, ...]:
    """What decides whether two scripts may share a state: jedi's sys.path for them."""
    return tuple(script._inference_state.get_sys_path())


def share_state(script: JediScript, state: InferenceState) -> None:
    """Let ``script`` answer with ``state`` (an earlier script's), which keeps what jedi learnt."""
    state.script_path = script._inference_state.script_path
    script._inference_state = state


def forget_modules(state: InferenceState, forget: Callable[[LoadedModule], bool]) -> None:
    """Drop the modules (and stub modules) ``forget`` picks from what ``state`` has loaded."""
    names = state.module_cache._name_cache
    for name, values in list(names.items()):
        if any(forget(value) for value in values):
            del names[name]
    for name, value in list(state.stub_module_cache.items()):
        if value is not None and forget(value):
            del state.stub_module_cache[name]


def loaded_files(script: JediScript) -> Set[str]:
    """The files of the modules ``script``'s state has loaded."""
    files = set()
    for values in script._inference_state.module_cache._name_cache.values():
        for value in values:
            path = value.py__file__()
            if path is not None:
                files.add(str(path))
    return files


def forget_parsed(path: Optional[Path]) -> None:
    """Drop the tree parso keeps for ``path`` (jedi's diff parser stores each script's by path)."""
    if path is None:
        return
    for grammar_cache in list(_parso_cache.parser_cache.values()):
        grammar_cache.pop(path, None)


def drop_closed_tree(path: str) -> None:
    """Drop the tree parso keeps for a closed document's file, its nodes unlinked first (each
    one's parent cleared): the parent links make the tree one large cycle, which only a full
    collection frees, in one pause that grew with the files closed
    (benchmarks/README.md#tuned-constants); unlinked, its last reference going frees it at once, and the
    collection after closing walks only what lives on. For a tree no jedi state still uses (the
    language server's scripts do not share states, and a closed document's scripts are gone)."""
    for grammar_cache in list(_parso_cache.parser_cache.values()):
        item = grammar_cache.pop(Path(path), None)
        if item is None:
            continue
        nodes = [item.node]
        while nodes:
            node = nodes.pop()
            node.parent = None
            nodes.extend(getattr(node, "children", ()))


# A tree parso keeps: when it was last used, and its file (None: parsed from text alone).
ParsedTree = Tuple[float, Optional[Path]]


def drop_parsed(paths: Callable[[List[ParsedTree]], List[Optional[Path]]]) -> None:
    """Drop the trees parso keeps for the paths ``paths`` picks from the (last used, path) pairs
    of each grammar's cache (path None: a tree parsed from text alone)."""
    for grammar_cache in list(_parso_cache.parser_cache.values()):
        kept = [(item.last_used, path) for path, item in grammar_cache.items()]
        for path in paths(kept):
            grammar_cache.pop(path, None)
