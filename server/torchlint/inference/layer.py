"""The jedi layer: what names alone cannot tell.

The syntactic layer answers first; this layer is asked only about expressions it
left ``UNKNOWN`` and about class bases it could not resolve. It finds:

- Module bases defined in other files of the project or in installed packages
  (``class Block(MyBase)``), however deep, by jumping to each base's definition and
  reading that file's own imports;
- tensors and Parameters behind helper calls (``make_weight(3)``), variables,
  attribute chains (``model.fc.weight``) and functions jedi can execute.

jedi's first inference into torch costs seconds per process and later ones
milliseconds, so one :class:`JediInference` is kept per process and warmed once.
jedi is not thread-safe: callers use it from one thread at a time.
Without torch in the analysed environment, expression inference is off (jedi
would resolve nothing) and only base-class resolution runs.

Which environment, and whether its interpreter may run: :mod:`torchlint.environments`. Every call
into an interpreter runs under a watchdog (``TORCHLINT_INTERPRETER_TIMEOUT``) that kills
its process group when the call hangs.

Each question is asked once: answers are kept per file for the check, per class and per helper
function across files for the process, and, when the owner passes an :class:`InferenceCache`,
on disk for later runs and other processes. A per-file time budget stops the questions of a
file that takes too long (its remaining unknowns stay unknown: names alone decide).

The layer's modules: this one, the project-wide state (:class:`JediInference`: the environment,
jedi's scripts and their shared states, the warm-up, memory trims); :mod:`.file_inference`, one
file's questions and answers; :mod:`.project_files`, Module bases found by reading files, before
jedi is asked; :mod:`.reduced_text`, the reduced texts jedi is given; :mod:`.jedi_access`,
everything taken from jedi's and parso's internals.
"""
from __future__ import annotations

import ast
import logging
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, FrozenSet, List, Optional, Set, Tuple, Union

import jedi  # callers import this module lazily: the syntactic layer works without jedi
from . import jedi_access
from .. import collection
from ..analysis import torch_names as tn
from .jedi_access import (JEDI_MAIN, AnalysedEnvironment, InferenceState, InterpreterTimeout, InvalidPythonEnvironment,
                          JediProject, JediScript, LoadedModule, SameProcessEnvironment,
                          WatchedEnvironment, own_sys_path, timeout_message)
from ..environments import Interpreter, choose_interpreter, interpreter_timeout, own_interpreter
from .file_inference import FileInference, last_token
from .inference_cache import CacheEvents, InferenceCache, fingerprint
from .project_answers import QUESTION_FILE, ProjectAnswers
from . import project_files
from .project_files import BaseAsker, ProjectFiles
from ..analysis.imports import TORCH_STUBS
from ..analysis.scopes import NodeTable
from ..analysis.source import SourceText
from ..analysis.values import Value

log = logging.getLogger("torchlint")

# Scripts (checked files' texts, question texts) that share one jedi inference state (new_script). A
# fresh state infers builtins, typing and torch's classes again, so a state serves many scripts; what
# bounds a state's memory is the worker's limit (trim_memory drops the states), not this count
# (benchmarks/README.md#tuned-constants).
SCRIPTS_PER_STATE = 1024
# Bytes a process grows past its last trim before the next (trim_memory): the memory a trim frees
# is reused, not given back (benchmarks/README.md#tuned-constants).
TRIM_GROWTH = 32 * 2 ** 20
SHARED_STATES = 4  # shared states kept at once, one per jedi sys.path (folders outside packages)
# Read a user-chosen virtual environment's files rather than run its interpreter: the same
# findings on the fixtures either way (benchmarks/README.md), and no interpreter to wait for.
READ_TRUSTED_VENVS = True


def _stubs_version() -> str:
    try:
        with open(os.path.join(TORCH_STUBS, "VERSION"), encoding="utf-8") as file:
            return file.read().strip()
    except OSError:
        return "(unknown version)"


@dataclass
class _SharedState:
    """A jedi inference state that scripts of one run share (JediInference.new_script)."""
    state: InferenceState
    served: int  # scripts it has served


def _never() -> bool:
    return False


class JediInference(ProjectFiles):
    """Project-wide jedi state, shared by every file checked in this process; what reading the
    project's files cannot tell about a base (:class:`.project_files.ProjectFiles`), jedi is asked.

    ``interpreter`` is the environment to analyse (see :mod:`torchlint.environments`); a string is
    taken as chosen by the user (``--python``). A virtual environment that may not be run,
    or whose files say all jedi needs, is read: jedi runs in torchlint's own interpreter
    with that environment's ``sys.path``, and compiled extensions from it are never loaded
    (jedi's ``load_unsafe_extensions`` stays off). Others are run, every call under
    ``timeout``; one that fails or times out at start gives way to torchlint's own
    interpreter. A later timeout kills the interpreter, calls ``on_timeout`` and sets
    :attr:`failure`: the layer answers nothing more, and its owner replaces it.
    """

    def __init__(self, project_root: str, interpreter: Union[None, str, Interpreter] = None,
                 timeout: Optional[float] = None, on_timeout: Optional[Callable[[str], None]] = None,
                 cache: Optional[InferenceCache] = None, budget: Optional[float] = None,
                 freeze_after_warm: bool = False, share_states: bool = False) -> None:
        jedi.settings.dynamic_params = False  # searching call sites for parameter types is slow and rarely right
        # Nor does it search the module for what is added to a list or set (`x.append(t)`): costly,
        # and no answer in the benchmark corpus, the fixtures or the real-bug set changes without it
        # (figures: benchmarks/README.md, "Incremental checks in the server").
        jedi.settings.dynamic_array_additions = False
        self._jedi = jedi
        if not isinstance(interpreter, Interpreter):
            interpreter = choose_interpreter(explicit=interpreter).interpreter
        self.timeout = interpreter_timeout() if timeout is None else timeout
        self.root = str(Path(project_root).resolve())
        self.warnings: List[str] = []  # for the user, once: what was not usable and what is used instead
        self.interpreter, self.read_only = interpreter, False
        sys_path = self._open_environment(interpreter, share_states)
        self.python = self.interpreter.path
        self.environment.watchdog.on_expire = on_timeout  # after start-up, which self.warnings reports
        # Not the folder of jedi's interpreter script, first on that interpreter's path: the same
        # path (and environment_id) whichever way jedi looks into the environment.
        self.sys_path = [p for p in sys_path if p and p != os.path.dirname(JEDI_MAIN)]
        self._find_torch()
        self.cache = cache  # answers on disk (None: this process only)
        # parso's pickles of the modules jedi reads are on disk only while the answers are: with
        # no disk cache, a pickle planted in jedi's user-level folder is never loaded either.
        jedi_access.keep_pickles_on_disk(cache.enabled if cache is not None else _never)
        self.budget = budget  # seconds of jedi per file (None: no limit)
        # A process that keeps jedi's warm-up state until it ends (a CLI worker, the language
        # server): see collection.freeze_long_lived.
        self.freeze_after_warm = freeze_after_warm
        # Files of one run share jedi's inference state (see new_script); texts that change
        # between questions (an editor's) do not: each of their scripts starts afresh.
        self.share_states = share_states
        self._states: Dict[Tuple[str, ...], _SharedState] = {}  # by jedi's sys.path
        # Where the environment's own files live: answers read from there are covered by the
        # environment's identity; files elsewhere (the project's) are each checked for changes.
        ProjectFiles.__init__(self, self.root, self.sys_path,
                              tuple(os.path.join(os.path.abspath(p), "") for p in self._environment_folders()),
                              TORCH_STUBS, self.reads_stubs, project_files.READ_FILES_KEPT if share_states
                              else project_files.READ_FILES_KEPT_UNTRIMMED)
        self._environment_id: Optional[str] = None
        self.notes: Dict[str, str] = {}  # path -> why inference stopped early there (take_notes)
        self.return_cache: Dict[Tuple[str, int, int], Tuple[Optional[Value], FrozenSet[str]]] = {}
        self.answers = ProjectAnswers(self, self.return_cache)  # what files tell without jedi
        # jedi's answers by what was asked about, the same in any file (ProjectAnswers.question_key)
        self.asked: Dict[Tuple[object, ...], Tuple[Optional[Value], FrozenSet[str]]] = {}
        self._warmed = threading.Event()
        # Resident bytes when trim_memory last dropped jedi's state; at first, when this layer
        # started: a worker forked from a large process does not drop it before it has grown.
        self._trimmed_at = resident_memory() or 0
        self._dropped_read_files = False  # the last trim dropped the files read only (trim_memory)

    def _open_environment(self, interpreter: Interpreter, share_states: bool) -> List[str]:
        """Sets :attr:`environment` and :attr:`project` (and :attr:`read_only` when the environment
        is read, :attr:`interpreter` when torchlint's own takes its place); returns the
        environment's ``sys.path``."""
        if interpreter.venv is not None and not interpreter.is_own and (READ_TRUSTED_VENVS or not interpreter.trusted):
            sys_path = list(interpreter.venv.sys_path)
            self.environment: AnalysedEnvironment = SameProcessEnvironment(sys_path, self.timeout) if share_states \
                else WatchedEnvironment(sys.executable, self.timeout)
            self.project: JediProject = jedi.Project(self.root, sys_path=sys_path)
            self.read_only = True
        elif share_states and interpreter.is_own:
            sys_path = own_sys_path()
            self.environment = SameProcessEnvironment(sys_path, self.timeout)
            self.project = jedi.Project(self.root)
        else:
            sys_path = self._run_interpreter(interpreter)
            self.project = jedi.Project(self.root)
        return sys_path

    def _run_interpreter(self, interpreter: Interpreter) -> List[str]:
        """Starts the environment that runs ``interpreter``, or, when it fails or times out at
        start, torchlint's own (with a warning); its ``sys.path``."""
        try:
            self.environment = WatchedEnvironment(interpreter.path, self.timeout)
            sys_path: List[str] = self.environment.get_sys_path()
        except (InterpreterTimeout, InvalidPythonEnvironment, OSError) as err:
            if interpreter.is_own:
                raise
            self.warnings.append("cannot use %s (%s) for type inference: %s; using torchlint's own Python (%s)"
                                 % (interpreter.path, interpreter.source, err, sys.executable))
            log.debug("%s", self.warnings[-1])
            self.interpreter = own_interpreter()
            self.environment = WatchedEnvironment(sys.executable, self.timeout)
            sys_path = self.environment.get_sys_path()
        return sys_path

    def _find_torch(self) -> None:
        """Where jedi learns torch's API: the environment's own torch, else the stubs shipped with
        torchlint (generated from the pinned torch by tools/make_torch_stubs.py), so that the
        findings do not depend on torch being installed where torchlint runs."""
        self.torch_source: Optional[str] = None
        self.reads_stubs = False
        if any(os.path.exists(os.path.join(p, "torch", "__init__.py")) for p in self.sys_path):
            self.torch_source = "the environment's torch"
        elif os.path.isfile(os.path.join(TORCH_STUBS, "__init__.pyi")):
            self.torch_source = "torchlint's stubs of torch %s" % _stubs_version()
            self.reads_stubs = True
            self.project.added_sys_path = [os.path.dirname(TORCH_STUBS)]
            self.sys_path = self.sys_path + [os.path.dirname(TORCH_STUBS)]
        self.torch_available = self.torch_source is not None

    @property
    def failure(self) -> Optional[str]:
        """Why this layer stopped answering (an interpreter call timed out), or None."""
        if self.environment.watchdog.expired:
            return timeout_message(jedi_access.executable_of(self.environment), self.environment.watchdog.timeout)
        return None

    def describe(self) -> str:
        how = "read, not run" if self.read_only else "run"
        where = "%s (%s; %s)" % (self.python, self.interpreter.source, how)
        if self.torch_available:
            return "jedi inference with %s; torch's API from %s" % (where, self.torch_source)
        return "no torch importable by %s: jedi resolves Module bases only; tensor inference is off" % where

    def warm(self) -> None:
        """Pay jedi's first trip into torch now (seconds) rather than on the first real question."""
        if self._warmed.is_set():
            return
        if self.torch_available and self.failure is None:
            code = "import torch\nx = torch.zeros(1)\nx\np = torch.nn.Parameter(x)\np\n"
            script: Optional[JediScript] = None
            try:
                script = self.new_script(code, os.path.join(self.root, "__torchlint_warm__.py"))
                script.infer(3, 0)
                script.infer(5, 0)
                self.done_with(script)
            except Exception:
                log.debug("jedi warm-up failed", exc_info=True)
                self.done_with(script, spoiled=True)
            script = None
            if self.freeze_after_warm:
                collection.freeze_long_lived()
        self._warmed.set()

    def for_file(self, text: str, path: str, source: SourceText, tree: Optional[ast.Module] = None,
                 nodes: Optional[NodeTable] = None) -> FileInference:
        return FileInference(self, text, path, source, tree, nodes)

    def new_script(self, text: str, path: str) -> JediScript:
        """A jedi Script of ``text``. With ``share_states``, on the inference state of the earlier
        scripts whose jedi ``sys.path`` is the same (it depends on the file's folder): torch and
        the standard library, as jedi understood them for those, are not inferred again
        (benchmarks/README.md#tuned-constants). Imports resolve alike for all of
        them, as in one Python process. A state serves SCRIPTS_PER_STATE scripts, then a fresh
        one starts: it holds on to every script's tree until then."""
        script: JediScript = self._jedi.Script(code=text, path=path, project=self.project,
                                               environment=self.environment)
        if not self.share_states:
            return script
        fresh = jedi_access.state_of(script)
        try:
            key = jedi_access.state_key(script)
        except Exception:  # jedi's internals moved: no sharing
            log.debug("jedi sys.path unavailable", exc_info=True)
            return script
        shared = self._states.get(key)
        if shared is None or shared.served >= SCRIPTS_PER_STATE:
            self._states.pop(key, None)
            while len(self._states) >= SHARED_STATES:
                del self._states[next(iter(self._states))]  # the oldest
            self._states[key] = _SharedState(fresh, 1)
        else:
            shared.served += 1
            jedi_access.share_state(script, shared.state)
        return script

    def done_with(self, script: Optional[JediScript], spoiled: bool = False) -> None:
        """A script's questions are over. Its shared state forgets the project's modules (its own
        among them): their files may change, and a later file must load them again for
        :meth:`loaded_files` to see that its answers depend on them. ``spoiled``: a question was
        cut short, and jedi may have kept a partial answer: the state is not shared any more."""
        if script is None or not self.share_states:
            return
        # Its own tree (kept by path for the diff parser) is dropped: not checked again. The trees
        # of the project's modules stay until trim_memory: keeping only the last used made the
        # workers load more modules, and the largest process was no smaller for it
        # (benchmarks/README.md#tuned-constants).
        jedi_access.forget_parsed(script.path)
        state = jedi_access.state_of(script)
        key = next((k for k, shared in self._states.items() if shared.state is state), None)
        if key is None:
            return
        if spoiled:
            del self._states[key]
            return
        try:
            jedi_access.forget_modules(state, self._project_value)
        except Exception:  # jedi's internals moved: this state is not shared any more
            log.debug("cannot clean a shared jedi state", exc_info=True)
            del self._states[key]

    def trim_memory(self, limit: int) -> bool:
        """Between two files of a run that shares states: when this process holds more than
        ``limit`` bytes, drop the files read for base resolution and the files' answers if they
        are many (at least a quarter of ``files_kept``) and the last trim did not: their trees
        hold no cycles, so no collection is needed, and jedi keeps what it learnt. Otherwise
        (jedi's states are what grew) drop what jedi and this layer keep (the shared states, the
        parsed trees of the project's modules, the files read); the next question starts a fresh
        state (jedi's trip into torch again, not counted in a file's budget). Answers kept per
        process (classes, helpers) stay: they are small. True when the caller should collect the
        garbage (the states were dropped). Not again before the process has grown by TRIM_GROWTH
        since: the memory a trim frees is reused, not given back, so the process stays as large
        (dropping all again at each file past the limit made a run re-read every module:
        benchmarks/README.md#tuned-constants)."""
        if not self.share_states:
            return False
        resident = resident_memory()
        if resident is None or resident <= max(limit, self._trimmed_at + TRIM_GROWTH):
            return False
        self._trimmed_at = resident
        if not self._dropped_read_files and len(self._file_cache) >= self.files_kept // 4:
            self._file_cache.clear()
            self._dropped_read_files = True
            return False
        self._dropped_read_files = False
        self._states.clear()
        self._file_cache.clear()
        jedi_access.drop_parsed(lambda kept: [path for _, path in kept  # the project modules parso keeps
                                              if path is None or self.is_project_file(str(path))])
        self._warmed.clear()
        return True

    def _project_value(self, value: LoadedModule) -> bool:
        path = value.py__file__()
        return path is not None and self.is_project_file(str(path))

    def _environment_folders(self) -> List[str]:
        """sys.path folders outside the project, site-packages wherever they are (a .venv inside
        the project), the environment's own folder, jedi's (its typeshed stubs) and torchlint's
        torch stubs, which are never the project's files, even when the project holds them (a check
        of torchlint's own checkout): otherwise each file would drop them from the shared state."""
        root = os.path.join(self.root, "")
        folders = [p for p in self.sys_path if not os.path.join(os.path.abspath(p), "").startswith(root)
                   or {"site-packages", "dist-packages"} & set(Path(p).parts)]
        if self.interpreter.venv is not None:
            folders.append(self.interpreter.venv.root)
        if self.interpreter.is_own:
            folders.append(sys.prefix)
        folders.append(os.path.dirname(os.path.abspath(jedi.__file__)))
        folders.append(TORCH_STUBS)
        return folders

    def take_notes(self) -> Dict[str, str]:
        """The files whose inference stopped early since the last call, and why."""
        notes, self.notes = self.notes, {}
        return notes

    def take_cache_events(self) -> CacheEvents:
        """What the disk caches met since the last call: entries of torchlint's found damaged (and
        computed again), and why torchlint's answers or parso's parsed modules could not be written."""
        dropped, unwritable = self.cache.take_events() if self.cache is not None else (0, None)
        parse_failure = jedi_access.take_parse_cache_failure()
        unwritten = []
        if unwritable is not None:
            unwritten.append("jedi's answers are not kept on disk: %s" % unwritable)
        if parse_failure is not None:
            unwritten.append("jedi's parsed modules are not kept on disk: %s" % parse_failure)
        return CacheEvents(dropped, tuple(unwritten))

    def close(self) -> None:
        """End jedi's interpreter now (a process about to fork must not hand it to its children)."""
        jedi_access.end_interpreter(self.environment)

    @property
    def environment_id(self) -> str:
        """What the answers depend on besides the project's files: the analysed environment (its
        interpreter, how it is used, its sys.path and when each folder of it last changed: an
        install or upgrade changes its site-packages folder), the project root (on jedi's path: the
        project's own absolute imports resolve from there) and jedi's version."""
        if self._environment_id is None:
            folders: List[Tuple[str, Optional[int]]] = []
            for path in self.sys_path:
                try:
                    folders.append((path, os.stat(path).st_mtime_ns))
                except OSError:
                    folders.append((path, None))
            self._environment_id = fingerprint(jedi.__version__, self.python, self.read_only, self.torch_source,
                                               folders, self.root)
        return self._environment_id

    def is_project_file(self, path: str) -> bool:
        """A file the answers may depend on that the environment's identity does not cover."""
        return path.endswith((".py", ".pyi")) and not os.path.abspath(path).startswith(self.environment_dirs)

    def loaded_files(self, script: JediScript) -> Optional[Set[str]]:
        """The modules jedi read to answer a script's questions (None: jedi did not say)."""
        try:
            files = jedi_access.loaded_files(script)
        except Exception:  # jedi's internals moved: answers are then not kept on disk
            return None
        return {f for f in files if self.is_project_file(f) and os.path.basename(f) != QUESTION_FILE}

    def _base_asker(self, path: str, text: str) -> BaseAsker:
        """jedi, for the bases of a class in another file that reading files could not settle: one
        Script of that file for all of them."""
        script: JediScript = self._jedi.Script(code=text, path=path, project=self.project,
                                               environment=self.environment)

        def ask(base: ast.expr, depth: int, read: Set[str]) -> bool:
            try:
                return bool(self.base_is_module(script, base, text, depth, read))
            finally:
                read.update(self.loaded_files(script) or ())
        return ask

    def base_is_module(self, script: JediScript, base: ast.expr, text: str, depth: int,
                        read: Set[str]) -> Optional[bool]:
        """Whether jedi finds ``base`` to be a Module class; None when it finds no definition of
        it at all (a name from a package that is not installed: whether it is a Module is not known)."""
        line, column = last_token(base, text)
        if line is None:
            return False
        try:
            definitions = script.goto(line, column, follow_imports=True)
        except Exception:
            log.debug("jedi goto failed", exc_info=True)
            return False
        if not definitions:
            return None
        for definition in definitions:
            if definition.type != "class":
                continue
            full_name = tn.canonical(definition.full_name or "")
            if full_name in tn.MODULE_BASES or tn.is_module_class(full_name):
                return True
            if definition.module_path and definition.line and self.readable_source(str(definition.module_path)):
                if self.is_project_file(str(definition.module_path)):
                    read.add(str(definition.module_path))
                if self.class_is_module(str(definition.module_path), definition.line, depth, read):
                    return True
        return False


def resident_memory() -> Optional[int]:
    """This process's resident memory now, in bytes (None where it cannot be read: not Linux)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
