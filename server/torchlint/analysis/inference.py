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

Which environment, and whether its interpreter may run: :mod:`.environments`. Every call
into an interpreter runs under a watchdog (``TORCHLINT_INTERPRETER_TIMEOUT``) that kills
its process group when the call hangs.

Each question is asked once: answers are kept per file for the check, per class and per helper
function across files for the process, and, when the owner passes an :class:`InferenceCache`,
on disk for later runs and other processes. A per-file time budget stops the questions of a
file that takes too long (its remaining unknowns stay unknown: names alone decide).
"""
from __future__ import annotations

import ast
import bisect
import builtins
import collections
import gc
import importlib.machinery
import logging
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Dict, FrozenSet, List, Optional, Set, Tuple, Union

import jedi  # callers import this module lazily: the syntactic layer works without jedi
from . import jedi_access
from . import torch_names as tn
from .jedi_access import (JEDI_MAIN, STDLIB, BudgetSpent, InterpreterTimeout, InvalidPythonEnvironment,
                          SameProcessEnvironment, WatchedEnvironment, own_sys_path, timeout_message, within_deadline)
from .environments import Interpreter, choose_interpreter, interpreter_timeout, own_interpreter
from .imports import collect_imports
from .inference_cache import InferenceCache, dependency, fingerprint
from .scopes import dotted_name
from .source import SourceText, line_groups, statement_start
from .values import OTHER, Kind, Value

log = logging.getLogger("torchlint")

_TENSOR_CLASSES = frozenset(["torch.Tensor", "torch._tensor.Tensor", "torch._C.TensorBase", "torch._C._TensorBase"])
_PLAIN_TYPES = frozenset(["builtins.int", "builtins.float", "builtins.str", "builtins.bool", "builtins.NoneType",
                          "builtins.bytes", "torch.device", "torch.dtype", "torch.Size", "torch._C.device",
                          "torch._C.dtype", "torch.types.Device"])
SCRIPTS_PER_STATE = 128  # files that share one jedi inference state (JediInference.new_script)
FILES_BETWEEN_TRIMS = 64  # the fewest files between two trims (trim_memory)
READ_FILES_KEPT = 32  # other modules' files kept parsed for base resolution (JediInference._read_file)
PROJECT_TREES_KEPT = 64  # the project's modules parso keeps parsed (JediInference.done_with)
SHARED_STATES = 4  # shared states kept at once, one per jedi sys.path (folders outside packages)
_MAX_BASE_DEPTH = 12  # classes and re-exports followed from one base (torch's reach 8)
# Read a user-chosen virtual environment's files rather than run its interpreter: the same
# findings on the fixtures either way (benchmarks/README.md), and no interpreter to wait for.
READ_TRUSTED_VENVS = True


def _freeze_long_lived() -> None:
    """After jedi's first trip into torch: what is alive now (parso's trees of torch, typing and
    builtins, jedi itself) lives as long as the process, and every later full collection would walk
    it again (about 1 s of the corpus's 5 s of inference in one process): left out of collections
    from now on (gc.freeze). Not collected first, which would cost one such walk: the warm-up's
    own garbage is about a thousand objects, kept for good."""
    gc.freeze()


TORCH_STUBS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "stubs", "torch-stubs")


def _stubs_version() -> str:
    try:
        with open(os.path.join(TORCH_STUBS, "VERSION"), encoding="utf-8") as file:
            return file.read().strip()
    except OSError:
        return "(unknown version)"


def _readable_source(path: str) -> bool:
    """A file whose classes the layer reads itself: Python source, or torchlint's torch stubs."""
    return path.endswith(".py") or path.endswith(".pyi") and path.startswith(os.path.join(TORCH_STUBS, ""))


class JediInference:
    """Project-wide jedi state, shared by every file checked in this process.

    ``interpreter`` is the environment to analyse (see :mod:`.environments`); a string is
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
                 freeze_after_warm: bool = False, share_states: bool = False):
        jedi.settings.dynamic_params = False  # searching call sites for parameter types is slow and rarely right
        # Nor does it search the module for what is added to a list or set (`x.append(t)`): a quarter
        # of the questions' time on the benchmark corpus, and no answer there, in the fixtures or in
        # the real-bug set changes without it.
        jedi.settings.dynamic_array_additions = False
        self._jedi = jedi
        if not isinstance(interpreter, Interpreter):
            interpreter = choose_interpreter(explicit=interpreter).interpreter
        self.timeout = interpreter_timeout() if timeout is None else timeout
        self.root = str(Path(project_root).resolve())
        self.warnings: List[str] = []  # for the user, once: what was not usable and what is used instead
        self.interpreter, self.read_only = interpreter, False
        if interpreter.venv is not None and not interpreter.is_own and (READ_TRUSTED_VENVS or not interpreter.trusted):
            sys_path = list(interpreter.venv.sys_path)
            self.environment = SameProcessEnvironment(sys_path, self.timeout) if share_states \
                else WatchedEnvironment(sys.executable, self.timeout)
            self.project = jedi.Project(self.root, sys_path=sys_path)
            self.read_only = True
        elif share_states and interpreter.is_own:
            sys_path = own_sys_path()
            self.environment = SameProcessEnvironment(sys_path, self.timeout)
            self.project = jedi.Project(self.root)
        else:
            try:
                self.environment = WatchedEnvironment(interpreter.path, self.timeout)
                sys_path = self.environment.get_sys_path()
            except (InterpreterTimeout, InvalidPythonEnvironment, OSError) as err:
                if interpreter.is_own:
                    raise
                self.warnings.append("cannot use %s (%s) for type inference: %s; using torchlint's own Python (%s)"
                                     % (interpreter.path, interpreter.source, err, sys.executable))
                log.debug("%s", self.warnings[-1])
                self.interpreter = own_interpreter()
                self.environment = WatchedEnvironment(sys.executable, self.timeout)
                sys_path = self.environment.get_sys_path()
            self.project = jedi.Project(self.root)
        self.python = self.interpreter.path
        self.environment.watchdog.on_expire = on_timeout  # after start-up, which self.warnings reports
        # Not the folder of jedi's interpreter script, first on that interpreter's path: the same
        # path (and environment_id) whichever way jedi looks into the environment.
        self.sys_path = [p for p in sys_path if p and p != os.path.dirname(JEDI_MAIN)]
        # Where jedi learns torch's API: the environment's own torch, else the stubs shipped with
        # torchlint (generated from the pinned torch by tools/make_torch_stubs.py), so that the
        # findings do not depend on torch being installed where torchlint runs.
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
        self.cache = cache  # answers on disk (None: this process only)
        self.budget = budget  # seconds of jedi per file (None: no limit)
        # A process that keeps jedi's warm-up state until it ends (a CLI worker, the language
        # server): see _freeze_long_lived.
        self.freeze_after_warm = freeze_after_warm
        # Files of one run share jedi's inference state (see new_script); texts that change
        # between questions (an editor's) do not: each of their scripts starts afresh.
        self.share_states = share_states
        self._states: Dict[tuple, List] = {}  # jedi's sys.path -> [its shared state, scripts it served]
        # Where the environment's own files live: answers read from there are covered by the
        # environment's identity; files elsewhere (the project's) are each checked for changes.
        self._environment_dirs = tuple(os.path.join(os.path.abspath(p), "") for p in self._environment_folders())
        self._environment_id: Optional[str] = None
        self.notes: Dict[str, str] = {}  # path -> why inference stopped early there (take_notes)
        self._class_cache: Dict[Tuple[str, int], Tuple[bool, FrozenSet[str]]] = {}
        self._return_cache: Dict[Tuple[str, int, int], Tuple[Optional[Value], FrozenSet[str]]] = {}
        self._module_files: Dict[tuple, Optional[str]] = {}
        self._cut_short = False  # a class resolution under way met the depth limit
        # path -> the file as last read, the most recently used last
        self._file_cache: "collections.OrderedDict[str, _ReadFile]" = collections.OrderedDict()
        self._warmed = threading.Event()
        self._since_trim = 0  # files since trim_memory last dropped jedi's state

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
            script = None
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
                _freeze_long_lived()
        self._warmed.set()

    def for_file(self, text: str, path: str, source, tree: Optional[ast.Module] = None,
                 nodes=None) -> "FileInference":
        return FileInference(self, text, path, source, tree, nodes)

    def new_script(self, text: str, path: str):
        """A jedi Script of ``text``. With ``share_states``, on the inference state of the earlier
        scripts whose jedi ``sys.path`` is the same (it depends on the file's folder): torch and
        the standard library, as jedi understood them for those, are not inferred again (a tenth
        of the default mode's time on the benchmark corpus). Imports resolve alike for all of
        them, as in one Python process. A state serves SCRIPTS_PER_STATE scripts, then a fresh
        one starts: it holds on to every script's tree until then."""
        script = self._jedi.Script(code=text, path=path, project=self.project, environment=self.environment)
        if not self.share_states:
            return script
        fresh = jedi_access.state_of(script)
        try:
            key = jedi_access.state_key(script)
        except Exception:  # jedi's internals moved: no sharing
            log.debug("jedi sys.path unavailable", exc_info=True)
            return script
        shared = self._states.get(key)
        if shared is None or shared[1] >= SCRIPTS_PER_STATE:
            self._states.pop(key, None)
            while len(self._states) >= SHARED_STATES:
                del self._states[next(iter(self._states))]  # the oldest
            self._states[key] = [fresh, 1]
        else:
            shared[1] += 1
            jedi_access.share_state(script, shared[0])
        return script

    def done_with(self, script, spoiled: bool = False) -> None:
        """A script's questions are over. Its shared state forgets the project's modules (its own
        among them): their files may change, and a later file must load them again for
        :meth:`loaded_files` to see that its answers depend on them. ``spoiled``: a question was
        cut short, and jedi may have kept a partial answer: the state is not shared any more."""
        if script is None or not self.share_states:
            return
        jedi_access.forget_parsed(script.path)  # its tree (kept by path for the diff parser): not checked again
        self._bound_parsed()
        state = jedi_access.state_of(script)
        key = next((k for k, (shared, _) in self._states.items() if shared is state), None)
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

    def _bound_parsed(self) -> None:
        """Keep the parsed trees of at most PROJECT_TREES_KEPT of the project's modules, the most
        recently used: a run over many files would otherwise keep every module any of them imports."""
        def least_recently_used(kept):
            project = sorted(entry for entry in kept if entry[1] is not None and self.is_project_file(str(entry[1])))
            return [path for _, path in project[:max(len(project) - PROJECT_TREES_KEPT, 0)]]
        jedi_access.drop_parsed(least_recently_used)

    def trim_memory(self, limit: int) -> bool:
        """Between two files of a run that shares states: when this process holds more than
        ``limit`` bytes, drop what jedi and this layer keep (the shared states, the parsed trees of
        the project's modules, the files read for base resolution); the next question starts a
        fresh state (jedi's trip into torch again, not counted in a file's budget). The caller
        collects the garbage. Answers kept per process (classes, helpers) stay: they are small.
        True when something was dropped."""
        self._since_trim += 1
        if not self.share_states or self._since_trim < FILES_BETWEEN_TRIMS:
            return False  # memory freed by the last trim is reused before the process grows again
        resident = resident_memory()
        if resident is None or resident <= limit:
            return False
        self._since_trim = 0
        self._states.clear()
        self._file_cache.clear()
        jedi_access.drop_parsed(lambda kept: [path for _, path in kept  # the project modules parso keeps
                                              if path is None or self.is_project_file(str(path))])
        self._warmed.clear()
        return True

    def _project_value(self, value) -> bool:
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

    def close(self) -> None:
        """End jedi's interpreter now (a process about to fork must not hand it to its children)."""
        jedi_access.end_interpreter(self.environment)

    @property
    def environment_id(self) -> str:
        """What the answers depend on besides the project's files: the analysed environment (its
        interpreter, how it is used, its sys.path and when each folder of it last changed: an
        install or upgrade changes its site-packages folder) and jedi's version."""
        if self._environment_id is None:
            folders = []
            for path in self.sys_path:
                try:
                    folders.append((path, os.stat(path).st_mtime_ns))
                except OSError:
                    folders.append((path, None))
            self._environment_id = fingerprint(jedi.__version__, self.python, self.read_only, self.torch_source,
                                               folders)
        return self._environment_id

    def is_project_file(self, path: str) -> bool:
        """A file the answers may depend on that the environment's identity does not cover."""
        return path.endswith((".py", ".pyi")) and not os.path.abspath(path).startswith(self._environment_dirs)

    def loaded_files(self, script) -> Optional[Set[str]]:
        """The modules jedi read to answer a script's questions (None: jedi did not say)."""
        try:
            files = jedi_access.loaded_files(script)
        except Exception:  # jedi's internals moved: answers are then not kept on disk
            return None
        return {f for f in files if self.is_project_file(f)}

    # -- classes in other files -------------------------------------------------------------
    def class_is_module(self, path: str, line: int, depth: int = 0, read: Optional[Set[str]] = None) -> bool:
        """Whether the class defined at ``path:line`` derives from nn.Module. The files the answer
        was read from are added to ``read``."""
        key = (path, line)
        if key not in self._class_cache:
            if self.failure is not None:
                return False
            self._class_cache[key] = (False, frozenset([path]))  # cycles resolve to "no"
            files = {path}
            outer, self._cut_short = self._cut_short, False
            try:
                result = self._resolve_class(path, line, depth, files)
            except BaseException:  # a timeout, the budget: no answer, not "no"
                del self._class_cache[key]
                self._cut_short = outer
                raise
            if self._cut_short and not result:
                del self._class_cache[key]  # the depth limit's "no", not the class's: ask again later
                if read is not None:
                    read.update(files)
                return False  # _cut_short stays set: the callers' "no" is not final either
            self._cut_short = outer
            self._class_cache[key] = (result, frozenset(files))
        result, files = self._class_cache[key]
        if read is not None:
            read.update(files)
        return result

    def _resolve_class(self, path: str, line: int, depth: int, read: Set[str]) -> bool:
        if depth > _MAX_BASE_DEPTH:
            self._cut_short = True
            return False
        read_file = self._read_file(path)
        if read_file.tree is None:
            return False
        text, classes, import_nodes = read_file.text, read_file.classes, read_file.import_nodes
        node = next((c for c in classes if c.lineno == line), None)
        if node is None:
            return False
        imports = read_file.imports
        by_name = read_file.classes_by_name
        script = None
        for base in node.bases:
            qualified = imports.qualify(base)
            if qualified is not None and (qualified in tn.MODULE_BASES or tn.is_module_class(qualified)):
                return True
            if isinstance(base, ast.Name) and base.id in by_name and by_name[base.id] is not node:
                if self.class_is_module(path, by_name[base.id].lineno, depth + 1, read):
                    return True
                continue
            if _builtin_class(base, read_file.bindings):
                continue  # str, object, Exception...: never a Module
            found = self.base_from_files(path, import_nodes, base, depth + 1, read)
            if found is not None:
                if found:
                    return True
                continue
            if script is None:
                script = self._jedi.Script(code=text, path=path, project=self.project, environment=self.environment)
            try:
                if self._base_is_module(script, base, text, depth + 1, read):
                    return True
            finally:
                read.update(self.loaded_files(script) or ())
        return False

    # -- bases found by reading files, before asking jedi -----------------------------------------
    def base_from_files(self, path: str, import_nodes, base: ast.expr, depth: int, read: Set[str]) -> Optional[bool]:
        """Whether a base imported by the file at ``path`` is a Module, found by following the
        imports through the files they name (absolute ones on the project's and the environment's
        path, relative ones from the file's folder). None when that cannot tell (a star import,
        a name defined under a condition, a module that is not a plain file): jedi is asked then."""
        dotted = dotted_name(base)
        if dotted is None or depth > _MAX_BASE_DEPTH:
            return None
        head, _, rest = dotted.partition(".")
        for node in reversed(import_nodes):  # the last import of a name wins
            for alias in node.names:
                if isinstance(node, ast.Import):
                    local = alias.asname or alias.name.split(".", 1)[0]
                    target = alias.name if alias.asname else local
                else:
                    local, target = alias.asname or alias.name, "%s.%s" % (node.module, alias.name) \
                        if node.module else alias.name
                if local != head or alias.name == "*":
                    continue
                full = target + ("." + rest if rest else "")
                if isinstance(node, ast.ImportFrom) and node.level:
                    folder = os.path.dirname(path)
                    for _ in range(node.level - 1):
                        folder = os.path.dirname(folder)
                    return self._dotted_is_module(full, (folder,), depth, read)
                folders = self._search_path(path)
                if full.startswith(_NEVER_MODULE_PACKAGES) and self._from_environment(full, folders):
                    return False  # stubs and compiled classes, typing's: jedi reads no Module there
                return self._dotted_is_module(full, folders, depth, read)
        return None

    def _from_environment(self, dotted: str, folders: Tuple[str, ...]) -> bool:
        """Whether the top-level package of ``dotted`` is the environment's (not a project folder
        of the same name that comes first on the search path)."""
        top = dotted.split(".", 1)[0]
        for folder in folders:
            stem = os.path.join(folder, top)
            if os.path.isdir(stem) or any(os.path.exists(stem + suffix) for suffix in (".py", ".pyi")):
                return os.path.join(os.path.abspath(folder), "").startswith(self._environment_dirs)
        return False

    def _search_path(self, path: str) -> Tuple[str, ...]:
        """Where absolute imports of a file are found, in jedi's order: the project root, the
        environment's sys.path, then the file's folders below the root that are not packages."""
        parents = []
        folder = os.path.dirname(os.path.abspath(path))
        while folder.startswith(os.path.join(self.root, "")) and folder not in parents:
            if not os.path.isfile(os.path.join(folder, "__init__.py")):
                parents.append(folder)
            folder = os.path.dirname(folder)
        folders = [self.root] + [p for p in self.sys_path if p != self.root]
        return tuple(folders + [p for p in reversed(parents) if p not in folders])

    def _dotted_is_module(self, dotted: str, folders: Tuple[str, ...], depth: int, read: Set[str]) -> Optional[bool]:
        parts = dotted.split(".")
        if len(parts) < 2:
            return None
        module = self._module_file(parts[:-1], folders)
        if module is None:
            return None
        answer = self._name_is_module(module, parts[-1], depth, read)
        return None if answer is _ABSENT else answer

    def _module_file(self, parts: List[str], folders: Tuple[str, ...]) -> Optional[str]:
        key = (tuple(parts), folders)
        if key not in self._module_files:
            found = None
            if parts[0] == "torch" and self.reads_stubs:
                stem = os.path.join(TORCH_STUBS, *parts[1:])
                stubs = (stem + ".pyi", os.path.join(stem, "__init__.pyi"))
                found = next((candidate for candidate in stubs if os.path.isfile(candidate)), None)
                folders = ()  # torch is the stubs', whatever the folders hold
            for folder in folders:
                stem = os.path.join(folder, *parts)
                for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
                    if os.path.isfile(candidate):
                        found = candidate
                        break
                if found is not None or os.path.isdir(stem) or os.path.exists(stem + ".pyi"):
                    break  # found, or something else (a namespace package, a stub) that jedi should read
                if any(os.path.exists(stem + suffix) for suffix in _COMPILED_SUFFIXES):
                    break
            self._module_files[key] = found
        return self._module_files[key]

    def _name_is_module(self, module: str, name: str, depth: int, read: Set[str]) -> Optional[bool]:
        """Whether ``name`` at the top level of the file ``module`` is a Module class; None when the
        file cannot tell, _ABSENT when the file does not define it."""
        qualified = tn.canonical("%s.%s" % (self._module_name(module), name))
        if qualified in tn.MODULE_BASES or tn.is_module_class(qualified):
            return True  # torch.nn.Module itself (its own file gives it no base), a torch layer
        if qualified.split(".", 1)[0] in STDLIB or qualified in _NOT_MODULES or qualified.startswith("torch._C."):
            return False  # Enum, NamedTuple, Protocol, torch.Tensor, compiled classes: never a Module
        if depth > _MAX_BASE_DEPTH:
            return None
        tree = self._read_file(module).tree
        if tree is None:
            return None
        read.add(module)
        found = None
        stars = []  # star imports after the last definition found: they may rebind the name
        for stmt in tree.body:
            if isinstance(stmt, ast.ClassDef) and stmt.name == name:
                found, stars = stmt, []
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                if any(alias.name == "*" for alias in stmt.names):
                    stars.append(stmt)
                if any((alias.asname or alias.name.split(".", 1)[0]) == name for alias in stmt.names):
                    found, stars = stmt, []
            elif _binds(stmt, name):
                imported = _never_module_import(stmt, name)
                if imported is None:
                    return None  # an assignment, a function, a definition under a condition
                found, stars = imported, []  # `if is_available(): from torch._C.x import name`
        for star in reversed(stars):  # `from .modules import *`: the last one that has it wins
            answer = self._star_import(module, star, name, depth + 1, read)
            if answer is not _ABSENT:
                return answer
        if isinstance(found, ast.ClassDef):
            return self.class_is_module(module, found.lineno, depth, read)
        if found is not None:
            answer = self.base_from_files(module, [found], ast.Name(id=name), depth + 1, read)
            return None if answer is _ABSENT else answer
        return _ABSENT

    def _star_import(self, module: str, star: ast.ImportFrom, name: str, depth: int,
                     read: Set[str]) -> Optional[bool]:
        """``name`` through ``from X import *`` in ``module``: X's own answer, when X is a file
        that exports it (its literal ``__all__``, else its public names)."""
        if not star.module and not star.level:
            return None
        if star.level:
            folder = os.path.dirname(module)
            for _ in range(star.level - 1):
                folder = os.path.dirname(folder)
            folders: Tuple[str, ...] = (folder,)
        else:
            folders = self._search_path(module)
        target = self._module_file(star.module.split(".") if star.module else ["__init__"], folders)
        if target is None:
            return None
        tree = self._read_file(target).tree
        if tree is None:
            return None
        read.add(target)
        exported = _literal_all(tree)
        if exported is _UNKNOWN_ALL:
            return None
        if exported is not None and name not in exported or exported is None and name.startswith("_"):
            return _ABSENT
        return self._name_is_module(target, name, depth, read)

    def _module_name(self, module: str) -> str:
        """The dotted name a module file is imported by (from the deepest folder of sys.path or the
        project root holding it): site-packages/torch/nn/modules/module.py is torch.nn.modules.module."""
        best = ""
        for folder in [self.root] + self.sys_path:
            folder = os.path.join(os.path.abspath(folder), "")
            if module.startswith(folder) and len(folder) > len(best):
                best = folder
        parts = Path(module[len(best):]).with_suffix("").parts
        if parts and parts[0] == os.path.basename(TORCH_STUBS):
            parts = ("torch",) + parts[1:]
        if parts and parts[-1] == "__init__":
            parts = parts[:-1]
        return ".".join(parts)

    def _base_is_module(self, script, base: ast.expr, text: str, depth: int, read: Set[str]) -> bool:
        line, column = _last_token(base, text)
        if line is None:
            return False
        try:
            definitions = script.goto(line, column, follow_imports=True)
        except Exception:
            log.debug("jedi goto failed", exc_info=True)
            return False
        for definition in definitions:
            if definition.type != "class":
                continue
            full_name = tn.canonical(definition.full_name or "")
            if full_name in tn.MODULE_BASES or tn.is_module_class(full_name):
                return True
            if definition.module_path and definition.line and _readable_source(str(definition.module_path)):
                if self.is_project_file(str(definition.module_path)):
                    read.add(str(definition.module_path))
                if self.class_is_module(str(definition.module_path), definition.line, depth, read):
                    return True
        return False

    def _read_file(self, path: str) -> "_ReadFile":
        """Another module's file, parsed once per process while it is unchanged."""
        try:
            mtime = os.path.getmtime(path)
        except OSError:
            return _ReadFile(None, "", None)
        cached = self._file_cache.get(path)
        if cached is not None and cached.mtime == mtime:
            self._file_cache.move_to_end(path)
            return cached
        try:
            with open(path, "rb") as handle:
                text = handle.read().decode("utf-8", "replace")
            from .parsing import PARSE_LOCK  # one AST build at a time (CPython 3.11)
            with PARSE_LOCK:
                tree = ast.parse(text)
        except (SyntaxError, ValueError, OSError):
            text, tree = "", None
        self._file_cache[path] = read_file = _ReadFile(mtime, text, tree)
        self._file_cache.move_to_end(path)
        while len(self._file_cache) > READ_FILES_KEPT:
            self._file_cache.popitem(last=False)  # the least recently used
        return read_file


MOST_OF_THE_TEXT = 0.6  # a reduced text for jedi above this share of the lines: the whole text instead
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _TopLevel:
    """A file's top-level statements, for the reduced texts FileInference._script_for gives jedi:
    a function or class is kept only when needed; the rest (imports, assignments, ``if`` blocks:
    what the module runs) always is. Statements that share a line are one unit."""

    def __init__(self, tree: ast.Module, source: SourceText):
        self.source = source
        self.spans: List[Tuple[int, int]] = []  # each unit's first and last line, decorators included
        self.definers: Dict[str, List[int]] = {}  # name -> the units (functions, classes) defining it
        self.others: Set[int] = set()  # the units always kept
        self.scanned: Set[int] = set()  # the others whose words count (not `__all__ = [...]`: it
        # names every definition, and tells jedi nothing about this file's values)
        for group in line_groups(tree.body):
            index = len(self.spans)
            self.spans.append((statement_start(group[0]), max(stmt.end_lineno or stmt.lineno for stmt in group)))
            if len(group) == 1 and isinstance(group[0], (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.definers.setdefault(group[0].name, []).append(index)
                continue
            self.others.add(index)
            if not all(_assigns_all(stmt) for stmt in group):
                self.scanned.add(index)
        self.firsts = [first for first, _ in self.spans]

    def holding(self, line: int) -> Optional[int]:
        """The unit holding ``line``, or None (a line between units)."""
        index = bisect.bisect_right(self.firsts, line) - 1
        return index if index >= 0 and line <= self.spans[index][1] else None

    def closure(self, start: Set[int]) -> Set[int]:
        """``start``, the others, and every definition whose name is a word of what is kept."""
        kept = set(start) | self.others
        pending = list((set(start) - self.others) | self.scanned)
        words: Set[str] = set()
        while pending:
            first, last = self.spans[pending.pop()]
            for word in set(_WORD.findall(self._text(first, last))) - words:
                words.add(word)
                for index in self.definers.get(word, ()):
                    if index not in kept:
                        kept.add(index)
                        pending.append(index)
        return kept

    def lines(self, kept: Set[int]) -> int:
        return sum(self.spans[i][1] - self.spans[i][0] + 1 for i in kept)

    def text_of(self, kept: Set[int]) -> str:
        """The text with the lines of every unit not in ``kept`` blank."""
        pieces, line = [], 1
        for index in sorted(kept):
            first, last = self.spans[index]
            pieces.append("\n" * (first - line))
            pieces.append(self._text(first, last))
            line = last + 1
        return "".join(pieces)

    def _text(self, first: int, last: int) -> str:
        starts, text = self.source.line_starts, self.source.text
        return text[starts[first - 1]: starts[last] if last < len(starts) else len(text)]


def _assigns_all(stmt: ast.stmt) -> bool:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    return isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and any(
        isinstance(t, ast.Name) and t.id == "__all__" for t in targets)


class _ReadFile:
    """A module file read to resolve bases, with what base resolution looks up in it (found on
    first use: one walk of the tree, not one per class or base asked about)."""

    def __init__(self, mtime: Optional[float], text: str, tree: Optional[ast.Module]):
        self.mtime, self.text, self.tree = mtime, text, tree
        self._classes: Optional[List[ast.ClassDef]] = None
        self._import_nodes: Optional[list] = None
        self._imports = None
        self._by_name: Optional[Dict[str, ast.ClassDef]] = None
        self._bindings: Optional[Dict[str, List[str]]] = None

    @property
    def bindings(self) -> Dict[str, List[str]]:
        """See :func:`_bindings`."""
        if self._bindings is None:
            self._bindings = _bindings(self.tree) if self.tree is not None else {"*": ["*"]}
        return self._bindings

    def _walk(self) -> None:
        self._classes, self._import_nodes = [], []
        for node in _statement_walk(self.tree) if self.tree is not None else ():
            if isinstance(node, ast.ClassDef):
                self._classes.append(node)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                self._import_nodes.append(node)

    @property
    def classes(self) -> List[ast.ClassDef]:
        if self._classes is None:
            self._walk()
        return self._classes

    @property
    def import_nodes(self) -> list:
        """Every Import/ImportFrom, in ast.walk's order."""
        if self._import_nodes is None:
            self._walk()
        return self._import_nodes

    @property
    def imports(self):
        if self._imports is None:
            self._imports = collect_imports(self.tree, self.import_nodes)
        return self._imports

    @property
    def classes_by_name(self) -> Dict[str, ast.ClassDef]:
        if self._by_name is None:
            self._by_name = {c.name: c for c in self.classes}
        return self._by_name


class FileInference:
    """jedi's view of one file's text; created per check, asked only about unknowns.

    Answers are kept by question (``c:line:col:type`` for an expression, ``b:line:col`` for a
    base class); with a disk cache they are loaded before the first question and, when jedi had
    to be asked, stored by :meth:`finish` with the project files they were read from.
    """

    def __init__(self, project: JediInference, text: str, path: str, source, tree: Optional[ast.Module] = None,
                 nodes=None):
        self.project = project
        self.text = text
        # The tree the check is using: the file's, or a reduced copy of it (torchlint.incremental)
        # that holds every statement binding a name the check asks about, and every import.
        self._tree = tree
        self._nodes = nodes  # that tree's scopes.NodeTable, when the check built one
        self.path = path if os.path.isabs(path) else os.path.abspath(path)
        self.source = source  # SourceText: ast byte columns -> jedi code-point columns
        self._script = None
        self._answers: Dict[str, object] = {}  # question -> answer, as stored (see _encode)
        self._asked = False  # jedi answered something not stored yet
        self._read: Set[str] = set()  # files of other modules the answers came from
        self.spent = 0.0  # seconds of jedi on this file
        self.note: Optional[str] = None  # why inference stopped early on this file, for the user
        self._cache_key: Optional[str] = None
        self._import_nodes: Optional[list] = None  # of this text, found on the first base asked about
        self._bindings: Optional[Dict[str, List[str]]] = None  # see _bindings, found on first use
        self._units: Optional[_TopLevel] = None  # see _script_for
        self._kept: Optional[Set[int]] = None  # top-level statements the script's text holds (None: all)
        self._unknowable: Dict[tuple, str] = {}  # see _of_an_unknowable_parameter
        if project.cache is not None:
            self._cache_key = project.cache.key(project.environment_id, self.path, text)
            self._answers = project.cache.load(self._cache_key) or {}

    @property
    def script(self):
        if self._script is None:
            self._script = self.project.new_script(self.text, self.path)
        return self._script

    def _script_for(self, node: ast.AST):
        """The jedi Script to ask about ``node``. In a run that shares states (the CLI), its text
        keeps, of the file's top-level functions and classes, the one holding ``node`` and those
        whose names appear as words (in strings and comments too) in what it keeps, transitively;
        the other lines are blank, so no position moves. jedi parses the text before its first
        answer, and seldom needs all of it. A later question outside what is kept, or a kept part
        that is most of the file, gets the whole text: a second reduced text would parse again
        much of what the first one did."""
        if not self.project.share_states or (self._script is not None and self._kept is None):
            return self.script
        if self._units is None:
            tree = self._checked_tree()
            if tree is None:
                return self.script
            self._units = _TopLevel(tree, self.source)
        unit = self._units.holding(getattr(node, "lineno", 0))
        if self._script is not None and (unit is None or unit in self._kept):
            return self._script
        kept = None if self._script is not None else self._units.closure({unit} if unit is not None else set())
        if kept is None or self._units.lines(kept) > MOST_OF_THE_TEXT * self.source.line_count:
            self._kept = None
            self._script = self.project.new_script(self.text, self.path)
            return self._script
        self._kept = kept
        self._script = self.project.new_script(self._units.text_of(kept), self.path)
        return self._script

    # -- hooks the syntactic layer calls --------------------------------------------------------
    def is_module_base(self, info, base: ast.expr) -> bool:
        key = "b:%d:%d" % (base.lineno, base.col_offset)
        if isinstance(self._answers.get(key), bool):
            return self._answers[key]
        if self.project.failure is not None or self.note is not None:
            return False
        found = False if _builtin_class(base, self._file_bindings()) else self._base_from_files(base)
        if found is not None:
            self._remember(key, found)  # with the files it was read from: a warm run reads none
            return found
        try:
            answer = self._ask(lambda: self.project._base_is_module(self._script_for(base), base, self.text, 1,
                                                                    self._read),
                               into_torch=False)
        except BudgetSpent:
            return False
        except Exception:  # the interpreter timed out, or a jedi bug: names alone then
            log.debug("jedi base resolution failed in %s", self.path, exc_info=True)
            return False
        self._remember(key, bool(answer))
        return bool(answer)

    def _base_from_files(self, base: ast.expr) -> Optional[bool]:
        """A base resolved by reading the files its import names (no jedi); None: ask jedi."""
        if self._import_nodes is None:
            tree = self._checked_tree()
            if tree is None:
                return None
            if self._nodes is not None:  # the same nodes in the same order, without a walk
                nodes = self._nodes
                self._import_nodes = nodes.in_walk_order(nodes.positions_of(ast.Import) +
                                                         nodes.positions_of(ast.ImportFrom))
            else:
                self._import_nodes = [n for n in _statement_walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
        try:
            return self.project.base_from_files(self.path, self._import_nodes, base, 1, self._read)
        except (OSError, ValueError, RecursionError):
            return None

    def classify(self, node: ast.expr, scope) -> Optional[Value]:
        if not self.project.torch_available or not isinstance(node, (ast.Name, ast.Attribute, ast.Call)):
            return None
        key = "c:%d:%d:%s" % (node.lineno, node.col_offset, type(node).__name__)
        stored = self._answers.get(key, False)
        if stored is None:
            return None  # asked before: jedi could not tell
        if stored is not False and _decode(stored) is not None:
            return _decode(stored)
        if self.project.failure is not None or self.note is not None or self._never_a_value(node) \
                or self._of_an_unknowable_parameter(node):
            return None
        try:
            value = self._ask(lambda: self._classify(node))
        except BudgetSpent:
            return None
        except Exception:  # jedi has its own bugs; an unknown is always a safe answer
            log.debug("jedi inference failed at %s:%s", self.path, node.lineno, exc_info=True)
            value = None
        if self.project.failure is None:  # an answer cut short by a timeout is not one to keep
            self._remember(key, _encode(value))
        return value

    def _file_bindings(self) -> Dict[str, List[str]]:
        if self._bindings is None:
            tree = self._checked_tree()
            self._bindings = _bindings(tree, self._nodes) if tree is not None else {"*": ["*"]}
        return self._bindings

    def _checked_tree(self) -> Optional[ast.Module]:
        if self._tree is None:
            from .parsing import parse  # the tree the check is using (kept for a while)
            self._tree, _ = parse(self.text, self.path)
        return self._tree

    def _never_a_value(self, node: ast.expr) -> bool:
        """Questions whose answer names already give: jedi would say "unknown" (None). A module
        (a name bound only by ``import x``), and a new instance of a builtin or standard-library
        class that is neither a tensor nor a plain value (``list(...)``, ``defaultdict(deque)``):
        :meth:`_value_of_class` knows no such class. Only for names nothing else in the file binds."""
        bindings = self._file_bindings()
        if isinstance(node, ast.Name):
            kinds = bindings.get(node.id)
            return bool(kinds) and all(kind.startswith("import ") for kind in kinds)
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        if isinstance(func, ast.Name):
            kinds = bindings.get(func.id)
            if not kinds:
                return "*" not in bindings and "builtins." + func.id in _NEVER_VALUE_CLASSES
            return len(kinds) == 1 and kinds[0].startswith("from ") and kinds[0][5:] in _NEVER_VALUE_CLASSES
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            kinds = bindings.get(func.value.id) or ()
            return len(kinds) == 1 and kinds[0].startswith("import ") \
                and "%s.%s" % (kinds[0][7:], func.attr) in _NEVER_VALUE_CLASSES
        return False

    def _of_an_unknowable_parameter(self, node: ast.expr) -> bool:
        """``config.hidden_size``, ``config.get(...)``, ``getattr(config, "x", 0)`` where ``config`` is a
        parameter jedi infers nothing for, so that it answers "unknown" (None) without being asked.
        jedi infers a parameter of a function it has not seen called (dynamic_params is off) from
        its annotation, its docstring, a ``# type:`` comment, pytest's fixtures, its default, or, for
        a method's first parameter, the class. Here: none of those (a default of ``None`` gives no
        attribute but dunders), no decorator, and no other binding of the name in the function."""
        if self._nodes is None:
            return False
        func = node.func if isinstance(node, ast.Call) else None
        root = node
        getattr_call = isinstance(func, ast.Name) and func.id == "getattr" and 2 <= len(node.args) <= 3 \
            and not node.keywords and "getattr" not in self._file_bindings() and "*" not in self._file_bindings()
        if getattr_call:
            root = node.args[0]  # the builtin: jedi's getattr looks the name up on what it infers the object is
        attrs = []
        while True:
            if isinstance(root, ast.Attribute):
                attrs.append(root.attr)
                root = root.value
            elif isinstance(root, ast.Call):
                root = root.func
            elif isinstance(root, ast.Subscript):
                root = root.value
            else:
                break
        if not isinstance(root, ast.Name) or root is node:
            return False
        parents = self._nodes.parent
        function = parents.get(id(root))
        while function is not None and not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = parents.get(id(function))
        if function is None:
            return False
        key = (id(function), root.id)
        cached = self._unknowable.get(key)
        if cached is None:
            cached = self._unknowable[key] = _unknowable_parameter(function, root.id, parents, self.source)
        if cached == "default-none":  # None's attributes are its dunders
            if getattr_call:
                name = node.args[1]
                attrs.append(name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else "__")
            return not any(a.startswith("__") for a in attrs)
        return cached == "unknowable"

    def finish(self) -> None:
        """The check is over: leave the budget note for the owner, store what jedi was asked
        about this text (when a disk cache is in use)."""
        if self.note is not None:
            self.project.notes[self.path] = self.note
        cache = self.project.cache
        keep = cache is not None and self._asked and self.project.failure is None
        loaded = self.project.loaded_files(self._script) if keep and self._script is not None else set()
        self.project.done_with(self._script)
        if not keep or loaded is None:  # None: cannot tell what the answers depend on (this run only)
            return
        read = (self._read | loaded) - {self.path}
        dependencies = [d for d in (dependency(p) for p in read if self.project.is_project_file(p)) if d]
        if len(dependencies) < len([p for p in read if self.project.is_project_file(p)]):
            return  # a file the answers came from is gone already
        cache.store(self._cache_key, self._answers, dependencies)

    def _remember(self, key: str, answer) -> None:
        self._answers[key] = answer
        self._asked = True

    def _ask(self, question, into_torch: bool = True):
        """Run one jedi question within what is left of the file's budget. Past the budget the
        file's remaining questions are not asked (BudgetSpent) and :attr:`note` says so.
        ``into_torch``: the question is about values, which sends jedi into torch."""
        budget = self.project.budget
        if into_torch:
            self.project.warm()  # jedi's first trip into torch is the process's cost, not this file's
        started = time.monotonic()
        try:
            with within_deadline(None if budget is None else max(budget - self.spent, 0.0)):
                return question()
        except BudgetSpent:
            self._spoiled()
            self._stop(budget)
            raise
        except Exception:  # jedi failed midway: what it kept may be partial
            self._spoiled()
            raise
        finally:
            self.spent += time.monotonic() - started
            if budget is not None and self.spent >= budget and self.note is None:
                self._stop(budget)

    def _spoiled(self) -> None:
        """A question failed midway: its state is not shared any more, and its script, whose
        tree jedi no longer keeps, is not asked again (a later question gets a fresh one)."""
        self.project.done_with(self._script, spoiled=True)
        self._script, self._kept = None, None

    def _stop(self, budget: float) -> None:
        self.note = ("type inference stopped after %.3g s (the per-file budget, --infer-budget); "
                     "the rest of this file was checked by names alone" % budget)
        self._asked = False  # an incomplete set of answers: not kept on disk

    def _classify(self, node: ast.expr) -> Optional[Value]:
        target = node.func if isinstance(node, ast.Call) else node
        line, column = _last_token(target, self.text, self.source)
        if line is None:
            return None
        names = self._script_for(node).infer(line, column)
        if not names:
            return None
        if isinstance(node, ast.Call):
            if len(names) == 1 and names[0].type == "function":
                return self._returned(names[0])
            results = []
            for name in names:
                if name.type == "function":
                    results.extend(name.execute())
                elif name.type == "class":
                    results.append(name)  # constructing: an instance of that class
                else:
                    return None  # calling an instance: Module.__call__ is the syntactic layer's business
            names = results
            if not names:
                return None
            return self._values(names, constructed=True)
        return self._values(names, constructed=False)

    def _returned(self, function) -> Optional[Value]:
        """What a helper returns. jedi executes it without the call's arguments, so the answer is
        the function's own: one helper defined in another file is executed once per process."""
        module_path = str(function.module_path or "")
        key = (module_path, function.line or 0, function.column or 0)
        if not module_path or os.path.abspath(module_path) == self.path or not function.line:
            return self._values(function.execute(), constructed=True)
        if key not in self.project._return_cache:
            read: Set[str] = {module_path}
            outer, self._read = self._read, read
            try:
                value = self._values(function.execute(), constructed=True)
            finally:
                self._read = outer
            # Everything this file's jedi state has read so far: more than the helper needs,
            # which only makes a later change elsewhere re-ask more often.
            read |= self.project.loaded_files(self.script) or set()
            read.discard(self.path)  # the file that asked first: not what the helper depends on
            self.project._return_cache[key] = (value, frozenset(read))
        value, read = self.project._return_cache[key]
        self._read.update(read)
        return value

    def _values(self, names, constructed: bool) -> Optional[Value]:
        if not names:
            return None
        values = set()
        for name in names:
            if name.type not in ("instance", "class") or (name.type == "class" and not constructed):
                return None
            values.add(self._value_of_class(name))
        if len(values) == 1:
            value = values.pop()
            return value if value.kind is not Kind.UNKNOWN else None
        return None

    def _value_of_class(self, name) -> Value:
        full_name = name.full_name or ""
        if full_name in _TENSOR_CLASSES:
            return Value(Kind.TENSOR)
        canonical = tn.canonical(full_name)
        if canonical == "torch.nn.Parameter":
            return Value(Kind.PARAMETER)
        if canonical == "torch.nn.Buffer":
            return Value(Kind.BUFFER)
        if full_name in _PLAIN_TYPES:
            return OTHER
        if tn.is_module_class(canonical):
            return Value(Kind.MODULE, module_class=canonical)
        module_path = str(name.module_path or "")
        if _readable_source(module_path) and name.line \
                and self.project.class_is_module(module_path, name.line, read=self._read):
            local = full_name.rsplit(".", 1)[-1] if os.path.abspath(module_path) == self.path else full_name
            return Value(Kind.MODULE, module_class=local)
        if module_path and self.project.is_project_file(module_path):
            self._read.add(module_path)
        return Value(Kind.UNKNOWN)


def _encode(value: Optional[Value]):
    """A Value as plain JSON data (None: jedi could not tell)."""
    if value is None:
        return None
    return [value.kind.value, value.requires_grad, value.factory, value.module_class, value.empty]


def _decode(data) -> Optional[Value]:
    """The Value _encode wrote, or None for anything else (a damaged entry: ask again)."""
    try:
        kind, requires_grad, factory, module_class, empty = data
        if not all(isinstance(x, (str, type(None))) for x in (factory, module_class)):
            return None
        return Value(Kind(kind), bool(requires_grad), factory, module_class, bool(empty))
    except (TypeError, ValueError):
        return None


_COMPILED_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES) + (".so", ".pyd")
_NOT_MODULES = frozenset(["torch.Tensor", "torch._tensor.Tensor", "torch._C.TensorBase", "torch._C._TensorBase"])
_UNKNOWN_ALL = frozenset()  # an __all__ that is not a plain literal list


def _literal_all(tree: ast.Module):
    """A module's ``__all__`` when it is a literal list or tuple of strings, _UNKNOWN_ALL when it is
    computed, None when there is none."""
    found = None
    for stmt in tree.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(
            stmt, (ast.AugAssign, ast.AnnAssign)) else []
        if not any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            continue
        value = stmt.value
        if isinstance(stmt, ast.Assign) and isinstance(value, (ast.List, ast.Tuple)) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts):
            found = frozenset(e.value for e in value.elts)
        else:
            return _UNKNOWN_ALL
    return found


_ABSENT = object()  # a file that does not define the name asked about
_STATEMENT_LEVELS = (ast.stmt, ast.excepthandler, ast.match_case)  # what statements are found under


def _statement_walk(tree: ast.AST):
    """The statements of a tree (classes, imports...) in ast.walk's order, without going into
    expressions, which hold none: a fraction of the nodes."""
    todo = collections.deque([tree])
    while todo:
        node = todo.popleft()
        todo.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, _STATEMENT_LEVELS))
        yield node


# Classes whose new instances jedi's answer (_value_of_class) always calls unknown: builtins and
# standard-library classes that are neither tensors, Modules nor plain values (int, str: OTHER).
_NEVER_VALUE_CLASSES = frozenset(["builtins." + name for name in (
    "list", "tuple", "set", "frozenset", "dict", "bytearray", "object", "type", "slice", "memoryview",
    "enumerate", "zip", "map", "filter", "reversed", "super", "property", "staticmethod", "classmethod")] + [
    "collections.defaultdict", "collections.OrderedDict", "collections.deque", "collections.Counter",
    "functools.partial", "contextlib.ExitStack", "pathlib.Path", "io.BytesIO", "io.StringIO",
    "argparse.ArgumentParser", "threading.Thread", "threading.Event", "queue.Queue",
    "weakref.WeakKeyDictionary", "weakref.WeakValueDictionary", "weakref.WeakSet"])


# Absolute names whose classes jedi finds only in stubs (.pyi) or typing's helpers: never a Module.
_NEVER_MODULE_PACKAGES = ("torch._C.", "typing_extensions.")


def _builtin_class(base: ast.expr, bindings: Dict[str, List[str]]) -> bool:
    """A base that is a builtin class (``str``, ``Exception``) by its name, nothing in the file
    binding that name."""
    return isinstance(base, ast.Name) and "*" not in bindings and base.id not in bindings \
        and isinstance(getattr(builtins, base.id, None), type)


def _bindings(tree: ast.Module, nodes=None) -> Dict[str, List[str]]:
    """How each name is bound anywhere in a file: ``"import torch.nn"`` (``import torch.nn as x``:
    a module), ``"from collections.deque"`` (an absolute ``from`` import), or ``"other"`` (an
    assignment, a definition, a parameter, a relative import...). Key ``"*"``: a star import.
    ``nodes``: the tree's scopes.NodeTable, whose lists by node type spare a walk of the tree."""
    if nodes is not None:
        def of_type(cls):
            return map(nodes.nodes.__getitem__, nodes.positions_of(cls))
    else:
        by_type: Dict[type, List[ast.AST]] = {}
        for node in ast.walk(tree):
            by_type.setdefault(type(node), []).append(node)
        of_type = lambda cls: by_type.get(cls, ())  # noqa: E731
    found: Dict[str, List[str]] = {}
    for node in of_type(ast.Import):
        for alias in node.names:
            local = alias.asname or alias.name.split(".", 1)[0]
            found.setdefault(local, []).append("import " + (alias.name if alias.asname else local))
    for node in of_type(ast.ImportFrom):
        for alias in node.names:
            if alias.name == "*":
                found.setdefault("*", []).append("*")
                continue
            kind = "from %s.%s" % (node.module, alias.name) if node.module and not node.level else "other"
            found.setdefault(alias.asname or alias.name, []).append(kind)
    for node in of_type(ast.Name):
        if node.ctx.__class__ is not ast.Load:
            found.setdefault(node.id, []).append("other")
    for cls in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
        for node in of_type(cls):
            found.setdefault(node.name, []).append("other")
    for node in of_type(ast.arg):
        found.setdefault(node.arg, []).append("other")
    for cls in (ast.Global, ast.Nonlocal):
        for node in of_type(cls):
            for name in node.names:
                found.setdefault(name, []).append("other")
    for node in of_type(ast.ExceptHandler):
        if node.name:
            found.setdefault(node.name, []).append("other")
    for cls, field in _MATCH_BINDINGS:
        for node in of_type(cls):
            name = getattr(node, field, None)
            if isinstance(name, str):
                found.setdefault(name, []).append("other")
    return found


# Match patterns that bind a name, and the field that holds it.
_MATCH_BINDINGS = tuple((getattr(ast, cls), field) for cls, field in (
    ("MatchAs", "name"), ("MatchStar", "name"), ("MatchMapping", "rest")) if hasattr(ast, cls))


def _binds(stmt: ast.stmt, name: str) -> bool:
    """Whether a top-level statement other than a class or an import may bind ``name``."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return stmt.name == name
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Delete)):
        # A name stored or deleted (a target, a walrus): not one only read, as in
        # `Name.push_to_hub = copy_func(Name.push_to_hub)`, which leaves the class bound to Name.
        return any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)
                   for n in ast.walk(stmt))
    if isinstance(stmt, (ast.If, ast.Try, ast.With, ast.For, ast.While)) or type(stmt).__name__ in ("TryStar", "Match"):
        return any(isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name
                   or isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
                   or isinstance(n, ast.alias) and (n.asname or n.name.split(".", 1)[0]) == name
                   for n in ast.walk(stmt))
    return False


def _never_module_import(stmt: ast.stmt, name: str) -> Optional[ast.ImportFrom]:
    """When every binding of ``name`` in a compound statement (an ``if``, a ``try``) is an absolute
    import from a package whose classes are never Modules (_NEVER_MODULE_PACKAGES): one of those
    imports. None when anything else may bind it there."""
    found = None
    for node in ast.walk(stmt):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name \
                or isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
            return None
        if isinstance(node, ast.Import) and any((a.asname or a.name.split(".", 1)[0]) == name for a in node.names):
            return None
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            if node.level or not node.module or not (node.module + ".").startswith(_NEVER_MODULE_PACKAGES):
                return None
            found = node
    return found


def _last_token(node: ast.expr, text: str, source=None) -> Tuple[Optional[int], int]:
    """jedi's (line, column) of the last name in ``a.b.c`` / ``name``: where inference looks."""
    if isinstance(node, ast.Name):
        line, byte_col = node.lineno, node.col_offset
    elif isinstance(node, ast.Attribute):
        line = node.end_lineno
        byte_col = node.end_col_offset - len(node.attr.encode("utf-8"))
    else:
        return None, 0
    source = source if source is not None else SourceText(text)
    return line, source.column(line, byte_col)


def _unknowable_parameter(function, name: str, parents, source) -> str:
    """Whether jedi can infer nothing for parameter ``name`` of ``function`` inside it: "unknowable",
    "default-none" (its default is None, which has no attributes but dunders), or "no"."""
    if function.decorator_list or function.name.startswith("test"):
        return "no"  # a decorator may wrap it; pytest's plugin infers fixtures for test functions
    args = function.args
    positional = args.posonlyargs + args.args
    param = next((a for a in positional + args.kwonlyargs if a.arg == name), None)
    if param is None or param.annotation is not None:
        return "no"
    if isinstance(parents.get(id(function)), ast.ClassDef) and positional and positional[0] is param:
        return "no"  # a method's self (or cls): the class's instance
    if param in positional:
        index = positional.index(param) - (len(positional) - len(args.defaults))
        default = args.defaults[index] if index >= 0 else None
    else:
        default = args.kw_defaults[args.kwonlyargs.index(param)]
    if default is not None and not (isinstance(default, ast.Constant) and default.value is None):
        return "no"
    doc = ast.get_docstring(function, clean=False)
    if doc and re.search(r"\b%s\b" % re.escape(name), doc):
        return "no"  # jedi reads parameter types from docstrings
    body_line = function.body[0].lineno if function.body else function.lineno
    if "type:" in "".join(source.line(n) for n in range(function.lineno, body_line + 1)):
        return "no"  # a type comment
    for node in ast.walk(function):  # any other binding of the name in the function, nested code too
        if node is param:
            continue
        if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load) \
                or isinstance(node, ast.arg) and node.arg == name \
                or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name \
                or isinstance(node, ast.alias) and (node.asname or node.name.split(".", 1)[0]) == name \
                or isinstance(node, ast.ExceptHandler) and node.name == name \
                or isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            return "no"
        for cls, field in _MATCH_BINDINGS:
            if isinstance(node, cls) and getattr(node, field, None) == name:
                return "no"
    return "default-none" if default is not None else "unknowable"


def resident_memory() -> Optional[int]:
    """This process's resident memory now, in bytes (None where it cannot be read: not Linux)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
