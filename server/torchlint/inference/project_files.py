"""Module bases found by reading the project's and the environment's files, without jedi.

``class Block(MyBase)``: the import of ``MyBase`` names a module; that module's file, found on
the search path as jedi would find it, says whether ``MyBase`` is a class deriving from
nn.Module, through its own imports, re-exports, star imports and the names it binds to others
(``PreTrainedTokenizer = PythonBackend``), however deep. Each file is parsed once while it is
unchanged. A package no folder of the search path holds has no Module (jedi finds nothing
there). What the files cannot tell (a name bound under a condition, a module that is not a plain
file) is left to the caller: :class:`ProjectFiles` answers it "not a Module"
(:meth:`ProjectFiles._base_asker`); the jedi layer (:mod:`.layer`) asks jedi.
"""
from __future__ import annotations

import ast
import builtins
import collections
import enum
import importlib.machinery
import os
from pathlib import Path
from typing import Callable, Dict, FrozenSet, Iterable, Iterator, List, Literal, Optional, Sequence, Set, Tuple, Type, Union, cast

from ..analysis import torch_names as tn
from ..analysis.imports import ImportMap, collect_imports
from ..analysis.modules import generic_origin
from .inference_cache import Dependency, dependency
from .project_index import ProjectIndex
from .jedi_access import STDLIB, typeshed_stdlib
from ..analysis.parsing import shared_tree
from ..analysis.forward import BaseClass, read_class
from ..analysis.inference_seam import ProjectFunction
from ..analysis.scopes import NodeT, NodeTable, build_index, dotted_name, nodes_by_type, release

# Other modules' files kept parsed for base resolution and the files' answers (ProjectFiles.read_file)
# in a CLI run. A file read again costs several times its parse (the tables built from its tree
# again, freeing the tree). A worker past its memory limit drops them first
# (JediInference.trim_memory). Measured: benchmarks/README.md#tuned-constants.
READ_FILES_KEPT = 192
# Where no memory limit drops them (the language server, whose jedi layer shares no states; same page).
READ_FILES_KEPT_UNTRIMMED = 64
_MAX_BASE_DEPTH = 12  # classes and re-exports followed from one base (torch's reach 8)

ImportNode = Union[ast.Import, ast.ImportFrom]
_Defined = Union[ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef]  # what _defined finds
_DEFINED = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# Whether a base of a class in another file is a Module, where the files cannot tell: (the base,
# the depth reached, the files the answer is read from, added to).
BaseAsker = Callable[[ast.expr, int, Set[str]], bool]


class _Absent(enum.Enum):
    ABSENT = "absent"


_ABSENT = _Absent.ABSENT  # a file that does not define the name asked about
# What a file says about a name: a Module or not, None when it cannot tell, _ABSENT.
_FileAnswer = Union[bool, None, Literal[_Absent.ABSENT]]


class ProjectFiles:
    """Module bases resolved by reading files: those of the project (under ``root``) and of the
    environment (``sys_path``; ``environment_dirs``: where the environment's own files live,
    each ending in a separator). ``torch_stubs``: the folder of torchlint's stubs of torch, read
    in place of torch's package when ``reads_stubs``. Answers are kept per class, and files per
    path while unchanged, for as long as this object lives (the last ``files_kept`` read)."""

    def __init__(self, root: str, sys_path: List[str], environment_dirs: Tuple[str, ...], torch_stubs: str,
                 reads_stubs: bool, files_kept: int) -> None:
        self.root = root
        self.files_kept = files_kept
        self.sys_path = sys_path
        self.environment_dirs = environment_dirs
        self.torch_stubs = torch_stubs
        self.reads_stubs = reads_stubs
        self._class_cache: Dict[Tuple[str, int], Tuple[bool, FrozenSet[str]]] = {}
        self._module_files: Dict[Tuple[Tuple[str, ...], Tuple[str, ...]], Optional[str]] = {}
        self._importable_tops: Dict[Tuple[str, Tuple[str, ...]], bool] = {}  # see importable
        # (module file, name) -> (_name_is_module's answer, the files it read, as they were then)
        self._names: Dict[Tuple[str, str], Tuple[_FileAnswer, Tuple[Dependency, ...]]] = {}
        self._cut_short = False  # a class resolution under way met the depth limit
        # path -> the file as last read, the most recently used last
        self._file_cache: "collections.OrderedDict[str, _ReadFile]" = collections.OrderedDict()
        # What the project's other files read and subclass (read at the first question)
        self.project_index = ProjectIndex(root, environment_dirs)
        # path -> the files its last checks' answers about classes of other files were read from;
        # and the paths whose checks asked the project index: any saved file may change those.
        self.read_for: Dict[str, Set[str]] = {}
        self.index_askers: Set[str] = set()

    @property
    def failure(self) -> Optional[str]:
        """Why answers stopped (None: reading files never stops; the jedi layer's can)."""
        return None

    def readable_source(self, path: str) -> bool:
        """A file whose classes are read here: Python source, or torchlint's torch stubs."""
        return path.endswith(".py") or path.endswith(".pyi") and path.startswith(os.path.join(self.torch_stubs, ""))

    def _base_asker(self, path: str, text: str) -> BaseAsker:
        """What decides the bases of a class in ``path`` that the files cannot settle: here, none
        is a Module (as for names alone); the jedi layer asks jedi."""
        return lambda base, depth, read: False

    # -- classes in other files -------------------------------------------------------------
    def class_is_module(self, path: str, line: int, depth: int = 0, read: Optional[Set[str]] = None) -> bool:
        """Whether the class defined at ``path:line`` derives from nn.Module. The files the answer
        was read from are added to ``read``."""
        key = (path, line)
        if key not in self._class_cache:
            if self.failure is not None:
                return False
            self._class_cache[key] = (False, frozenset([path]))  # cycles resolve to "no"
            files: Set[str] = {path}
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
        result, read_from = self._class_cache[key]
        if read is not None:
            read.update(read_from)
        return result

    def _resolve_class(self, path: str, line: int, depth: int, read: Set[str]) -> bool:
        if depth > _MAX_BASE_DEPTH:
            self._cut_short = True
            return False
        read_file = self.read_file(path)
        if read_file.tree is None:
            return False
        text, classes, import_nodes = read_file.text, read_file.classes, read_file.import_nodes
        node = next((c for c in classes if c.lineno == line), None)
        if node is None:
            return False
        imports = read_file.imports
        by_name = read_file.classes_by_name
        # Made for the first base the files cannot settle, then asked about the others too.
        ask: Optional[BaseAsker] = None
        for base in map(generic_origin, node.bases):
            qualified = imports.qualify(base)
            if qualified is not None and (qualified in tn.MODULE_BASES or tn.is_module_class(qualified)):
                return True
            if isinstance(base, ast.Name) and base.id in by_name and by_name[base.id] is not node:
                if self.class_is_module(path, by_name[base.id].lineno, depth + 1, read):
                    return True
                continue
            if is_builtin_class(base, lambda: read_file.bindings):
                continue  # str, object, Exception...: never a Module
            found = self.base_from_files(path, import_nodes, base, depth + 1, read)
            if found is not None:
                if found:
                    return True
                continue
            if ask is None:
                ask = self._base_asker(path, text)
            if ask(base, depth + 1, read):
                return True
        return False

    # -- bases found by reading files, before asking jedi -----------------------------------------
    def base_from_files(self, path: str, import_nodes: Sequence[ImportNode], base: ast.expr, depth: int,
                        read: Set[str]) -> Optional[bool]:
        """Whether a base imported by the file at ``path`` is a Module, found by following the
        imports through the files they name (absolute ones on the project's and the environment's
        path, relative ones from the file's folder). None when that cannot tell (a star import,
        a name defined under a condition, a module that is not a plain file): jedi is asked then."""
        if depth > _MAX_BASE_DEPTH:
            return None
        imported = _imported_as(import_nodes, base)
        if imported is None:
            return None
        node, full = imported
        if isinstance(node, ast.ImportFrom) and node.level:
            return self._dotted_is_module(full, self._import_folders(path, node), depth, read)
        folders = self.search_path(path)
        if full.startswith(_NEVER_MODULE_PACKAGES) and self._from_environment(full, folders):
            return False  # stubs and compiled classes, typing's: jedi reads no Module there
        if not self.importable(full.split(".", 1)[0], folders):
            return False  # (`transformers.x` where transformers is not installed): jedi finds no class
        return self._dotted_is_module(full, folders, depth, read)

    def missing_package(self, path: str, import_nodes: Sequence[ImportNode], base: ast.expr) -> Optional[str]:
        """The dotted name a base of the file at ``path`` is imported as, when its package is not
        installed where the file's absolute imports are found; else None."""
        imported = _imported_as(import_nodes, base)
        if imported is None or isinstance(imported[0], ast.ImportFrom) and imported[0].level:
            return None
        full = imported[1]
        return full if not self.importable(full.split(".", 1)[0], self.search_path(path)) else None

    def _from_environment(self, dotted: str, folders: Tuple[str, ...]) -> bool:
        """Whether the top-level package of ``dotted`` is the environment's (not a project folder
        of the same name that comes first on the search path)."""
        top = dotted.split(".", 1)[0]
        for folder in folders:
            if _holds(folder, top, (".py", ".pyi")):
                return os.path.join(os.path.abspath(folder), "").startswith(self.environment_dirs)
        return False

    def importable(self, top: str, folders: Tuple[str, ...]) -> bool:
        """Whether jedi may find a top-level module or package ``top`` from ``folders``: one of
        them holds it (a package, a namespace package, a module, a stub, a compiled module, a
        ``-stubs`` package), it is the standard library's (typeshed has its stubs), or a folder is
        an archive (jedi reads zipped packages). Without it jedi finds no value there: its
        typeshed stubs of other packages serve only packages that are found."""
        key = (top, folders)
        if key not in self._importable_tops:
            self._importable_tops[key] = top in STDLIB or top in typeshed_stdlib() or any(
                os.path.isfile(folder) or _holds(folder, top, (".py", ".pyi", "-stubs") + _COMPILED_SUFFIXES)
                for folder in folders)
        return self._importable_tops[key]

    def _import_folders(self, path: str, node: ImportNode) -> Tuple[str, ...]:
        """Where an import of the file at ``path`` is looked up: a relative one in the package
        folder its dots name, any other on the project's and the environment's path."""
        if isinstance(node, ast.ImportFrom) and node.level:
            folder = os.path.dirname(path)
            for _ in range(node.level - 1):
                folder = os.path.dirname(folder)
            return (folder,)
        return self.search_path(path)

    def search_path(self, path: str) -> Tuple[str, ...]:
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
        module = self.module_file(parts[:-1], folders)
        if module is None:
            return None
        answer = self._name_is_module(module, parts[-1], depth, read)
        return None if answer is _ABSENT else answer

    def module_file(self, parts: List[str], folders: Tuple[str, ...]) -> Optional[str]:
        key = (tuple(parts), folders)
        if key not in self._module_files:
            found = None
            if parts[0] == "torch" and self.reads_stubs:
                stem = os.path.join(self.torch_stubs, *parts[1:])
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

    def _name_is_module(self, module: str, name: str, depth: int, read: Set[str]) -> _FileAnswer:
        """Whether ``name`` at the top level of the file ``module`` is a Module class; None when the
        file cannot tell, _ABSENT when the file does not define it. The answer is kept while
        the files it was read from are unchanged (inference_cache.dependency), and so is None: a
        module whose tree was dropped since (``files_kept``) is not parsed again for a name it
        already gave, "cannot tell" included (figures: benchmarks/README.md, round ten)."""
        kept = self._names.get((module, name))
        if kept is not None and all(dependency(stamp[0]) == stamp for stamp in kept[1]):
            read.update(stamp[0] for stamp in kept[1])
            return kept[0]
        files: Set[str] = set()
        outer, self._cut_short = self._cut_short, False
        answer = self._find_name(module, name, depth, files)
        if not self._cut_short:  # (None too: the files cannot tell, as often as it is asked)
            stamps = [dependency(path) for path in sorted(files)]
            if None not in stamps:
                self._names[(module, name)] = (answer, tuple(cast(Dependency, stamp) for stamp in stamps))
        self._cut_short = self._cut_short or outer
        read.update(files)
        return answer

    def _find_name(self, module: str, name: str, depth: int, read: Set[str]) -> _FileAnswer:
        qualified = tn.canonical("%s.%s" % (self._module_name(module), name))
        if qualified in tn.MODULE_BASES or tn.is_module_class(qualified):
            return True  # torch.nn.Module itself (its own file gives it no base), a torch layer
        if qualified.split(".", 1)[0] in STDLIB or qualified in _NOT_MODULES or qualified.startswith("torch._C."):
            return False  # Enum, NamedTuple, Protocol, torch.Tensor, compiled classes: never a Module
        if depth > _MAX_BASE_DEPTH:
            self._cut_short = True  # the depth limit's "cannot tell", not the file's
            return None
        read_file = self.read_file(module)
        read.add(module)  # (an unparsable file too: its "cannot tell" is kept while it is unchanged)
        if read_file.tree is None:
            return None
        found: Union[ast.ClassDef, ImportNode, ast.Assign, None] = None
        stars: List[ast.ImportFrom] = []  # star imports after the last definition found: they may rebind the name
        conditional: List[ImportNode] = []  # the name's imports under a condition after it
        for stmt in read_file.top_level.binding(name):
            if isinstance(stmt, ast.ClassDef) and stmt.name == name:
                found, stars, conditional = stmt, [], []
            elif isinstance(stmt, ast.Assign) and _an_alias(stmt, name, read_file.top_level):
                found, stars, conditional = stmt, [], []
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                if isinstance(stmt, ast.ImportFrom) and any(alias.name == "*" for alias in stmt.names):
                    stars.append(stmt)
                if any((alias.asname or alias.name.split(".", 1)[0]) == name for alias in stmt.names):
                    found, stars, conditional = stmt, [], []
            else:  # anything else TopLevelNames lists here may bind the name (an `if`, a `try`, an assignment)
                imports = _imports_only(stmt, name)
                if imports is None:
                    return None  # an assignment, a function, a definition under a condition
                conditional += imports  # `if TYPE_CHECKING: from .x import name`
        if conditional:  # (a star import may bind it too: what jedi makes of it is not followed here)
            return None if stars or isinstance(found, ast.Assign) \
                else self._conditional_imports(module, found, conditional, name, depth, read)
        for star in reversed(stars):  # `from .modules import *`: the last one that has it wins
            answer = self._star_import(module, star, name, depth + 1, read)
            if answer is not _ABSENT:
                return answer
        if isinstance(found, ast.ClassDef):
            return self.class_is_module(module, found.lineno, depth, read)
        if isinstance(found, ast.Assign):  # `PreTrainedTokenizer = PythonBackend`: the other name's class
            if isinstance(found.value, ast.Name):
                answer = self._name_is_module(module, found.value.id, depth + 1, read)
                return None if answer is _ABSENT else answer
            return self.base_from_files(module, read_file.import_nodes, found.value, depth + 1, read)
        if found is not None:
            return self.base_from_files(module, [found], ast.Name(id=name), depth + 1, read)
        return _ABSENT

    def _conditional_imports(self, module: str, before: Union[ast.ClassDef, ImportNode, None],
                             imports: List[ImportNode], name: str, depth: int, read: Set[str]) -> Optional[bool]:
        """``name`` in ``module`` bound by imports under a condition (``if TYPE_CHECKING:`` in a
        package's lazy ``__init__``, ``try:``/``except ImportError:``) after ``before``, its last
        binding outside them (None: none). Which of them jedi counts depends on what it makes of the
        conditions, and it calls the name a Module when any it counts is one: so "no" when none of
        them is (whichever jedi counts, or none), else None: jedi is asked."""
        candidates: List[Union[ast.ClassDef, ImportNode]] = [before] if before is not None else []
        candidates += imports
        for candidate in candidates:
            if isinstance(candidate, ast.ClassDef):
                answer: _FileAnswer = self.class_is_module(module, candidate.lineno, depth, read)
            else:
                answer = self.base_from_files(module, [candidate], ast.Name(id=name), depth + 1, read)
            if answer is not False:
                return None
        return False

    def _star_import(self, module: str, star: ast.ImportFrom, name: str, depth: int,
                     read: Set[str]) -> _FileAnswer:
        """``name`` through ``from X import *`` in ``module``: X's own answer, when X is a file
        that exports it (its literal ``__all__``, else its public names)."""
        target = self._star_target(module, star, name, read)
        if not isinstance(target, str):
            return target
        return self._name_is_module(target, name, depth, read)

    def _star_target(self, module: str, star: ast.ImportFrom, name: str,
                     read: Set[str]) -> Union[str, None, Literal[_Absent.ABSENT]]:
        """The file ``from X import *`` in ``module`` takes ``name`` from, when X is a file that
        exports it (its literal ``__all__``, else its public names); _ABSENT when it does not, None
        when that cannot be told."""
        if not star.module and not star.level:
            return None
        folders = self._import_folders(module, star)
        target = self.module_file(star.module.split(".") if star.module else ["__init__"], folders)
        if target is None:
            return None
        tree = self.read_file(target).tree
        if tree is None:
            return None
        read.add(target)
        exported = _literal_all(tree)
        if exported is _UNKNOWN_ALL:
            return None
        if exported is not None and name not in exported or exported is None and name.startswith("_"):
            return _ABSENT
        return target

    # -- classes of the project's files, read (analysis.forward.BaseClass) ---------------------
    def bases_in_project(self, path: str, import_nodes: Sequence[ImportNode], base: ast.expr,
                         read: Set[str]) -> Optional[List[BaseClass]]:
        """A base imported by the file at ``path`` and the bases it has in turn, each read from
        the project file defining it, depth first (the lookup order of single inheritance); None
        when one is not a class of the project's files (a library's, one found under a condition,
        one with a metaclass) or the chain ends anywhere but nn.Module or object. The files read
        are added to ``read``."""
        found = self._definition(path, import_nodes, base, 1, read)
        if found is None:
            return None
        chain: List[BaseClass] = []
        seen: Set[Tuple[str, int]] = set()
        todo = [found]
        while todo:
            module, node = todo.pop()
            if (module, node.lineno) in seen:
                continue
            seen.add((module, node.lineno))
            if len(seen) > _MAX_BASE_DEPTH or node.keywords:
                return None
            read_file = self.read_file(module)
            summary = self._classes_read(module, read_file).get(node.lineno)
            if summary is None:
                return None
            chain.append(summary)
            following = []
            for parent in node.bases:
                if read_file.imports.qualify(parent) == "torch.nn.Module":
                    continue
                if isinstance(parent, ast.Name) and parent.id in read_file.classes_by_name \
                        and read_file.classes_by_name[parent.id] is not node:
                    following.append((module, read_file.classes_by_name[parent.id]))
                    continue
                if isinstance(parent, ast.Name) and parent.id == "object" \
                        and is_builtin_class(parent, lambda: read_file.bindings):
                    continue
                definition = self._definition(module, read_file.import_nodes, parent, 1, read)
                if definition is None:
                    return None
                following.append(definition)
            todo.extend(reversed(following))
        return chain

    def checks_reading(self, path: str) -> Set[str]:
        """The checked files whose answers may change now that ``path`` was saved: those whose
        classes' bases were read from it, and those that asked the project index (which is told)."""
        path = os.path.abspath(path)
        self.project_index.changed(path)
        return {checked for checked, files in list(self.read_for.items()) if path in files} | set(self.index_askers)

    def in_project(self, path: str) -> bool:
        """A Python file of the project: under its root, not in the environment (a virtual
        environment inside the project)."""
        return path.endswith(".py") and path.startswith(os.path.join(self.root, "")) \
            and not path.startswith(self.environment_dirs)

    def _definition(self, path: str, import_nodes: Sequence[ImportNode], base: ast.expr, depth: int,
                    read: Set[str]) -> Optional[Tuple[str, ast.ClassDef]]:
        """The class statement of a project file that an imported ``base`` of the file at ``path``
        names, through imports, relative imports, re-exports and star imports (as base_from_files
        follows them); None when it is not found there or not for certain."""
        found = self._defined(path, import_nodes, base, depth, read, (ast.ClassDef,))
        return (found[0], found[1]) if found is not None and isinstance(found[1], ast.ClassDef) else None

    def function_in_project(self, path: str, import_nodes: Sequence[ImportNode], func: ast.expr,
                            method: Optional[str], read: Set[str]) -> Optional[ProjectFunction]:
        """The function (or, with ``method``, the method of the class) that the imported name
        ``func`` of the file at ``path`` stands for, read from the project file defining it, as
        _definition follows names; None when it is not a plain function of the project's files (a
        library's, one bound under a condition, a decorated one: what it runs is not its body)."""
        if method is None:
            found = self._defined(path, import_nodes, func, 1, read, _FUNCTIONS)
            if found is None or isinstance(found[1], ast.ClassDef):
                return None
            module, node = found[0], found[1]
        else:
            owner = self._definition(path, import_nodes, func, 1, read)
            if owner is None:
                return None
            module, cls = owner
            bound = [stmt for stmt in cls.body if _class_binds(stmt, method)]
            if len(bound) != 1 or not isinstance(bound[0], _FUNCTIONS):
                return None  # not defined by the class itself (a base's), or bound more than once
            node = bound[0]
        if node.decorator_list:
            return None
        read_file = self.read_file(module)
        if read_file.tree is None:
            return None
        return ProjectFunction(module, read_file.text, read_file.tree, node)

    def read_imports(self, path: str) -> Optional[List[ImportNode]]:
        """The imports of a project file as read (None: it does not parse)."""
        read_file = self.read_file(path)
        return read_file.import_nodes if read_file.tree is not None else None

    def _defined(self, path: str, import_nodes: Sequence[ImportNode], base: ast.expr, depth: int,
                 read: Set[str], kinds: Tuple[type, ...]) -> Optional[Tuple[str, _Defined]]:
        """See _definition: the statement of one of ``kinds`` that ``base`` names."""
        if depth > _MAX_BASE_DEPTH:
            return None
        imported = _imported_as(import_nodes, base)
        if imported is None:
            return None
        node, full = imported
        folders = self._import_folders(path, node)
        parts = full.split(".")
        if len(parts) < 2:
            return None
        module = self.module_file(parts[:-1], folders)
        if module is None:
            return None
        return self._named_definition(module, parts[-1], depth, read, kinds)

    def _named_definition(self, module: str, name: str, depth: int, read: Set[str],
                          kinds: Tuple[type, ...]) -> Optional[Tuple[str, _Defined]]:
        """The statement (one of ``kinds``) ``name`` at the top level of ``module`` stands for (see
        _definition)."""
        if depth > _MAX_BASE_DEPTH or not self.in_project(module):
            return None  # (a library's file is never read here: its classes are not the project's)
        read_file = self.read_file(module)
        read.add(module)
        if read_file.tree is None:
            return None
        found: Union[_Defined, ImportNode, ast.Assign, None] = None
        stars: List[ast.ImportFrom] = []
        for stmt in read_file.top_level.binding(name):
            if isinstance(stmt, _DEFINED) and isinstance(stmt, kinds) and stmt.name == name \
                    or isinstance(stmt, ast.Assign) and _an_alias(stmt, name, read_file.top_level):
                found, stars = stmt, []
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                if isinstance(stmt, ast.ImportFrom) and any(alias.name == "*" for alias in stmt.names):
                    stars.append(stmt)
                if any((alias.asname or alias.name.split(".", 1)[0]) == name for alias in stmt.names):
                    found, stars = stmt, []
            else:
                return None  # bound under a condition, by a function, an assignment
        if stars:
            if found is not None:
                return None  # a star import after it may bind the name again
            for star in reversed(stars):  # the last one that has it wins
                target = self._star_target(module, star, name, read)
                if target is None:
                    return None
                if isinstance(target, str):
                    return self._named_definition(target, name, depth + 1, read, kinds)
            return None
        if isinstance(found, _DEFINED):
            return module, found
        if isinstance(found, ast.Assign):
            if isinstance(found.value, ast.Name):
                return self._named_definition(module, found.value.id, depth + 1, read, kinds)
            return self._defined(module, read_file.import_nodes, found.value, depth + 1, read, kinds)
        if found is not None:
            return self._defined(module, [found], ast.Name(id=name), depth + 1, read, kinds)
        return None

    def _classes_read(self, module: str, read_file: "_ReadFile") -> Dict[int, BaseClass]:
        """What each class of a project file says of its instances, by its line: read once per
        file while it is unchanged."""
        if read_file.classes_read is None:
            table: Dict[int, BaseClass] = {}
            if read_file.tree is not None:
                index = build_index(read_file.tree, NodeTable(read_file.tree))
                assert index.nodes is not None
                for info in index.classes:
                    table[info.node.lineno] = read_class(index.nodes, info, module, read_file.imports)
                release(index)
            read_file.classes_read = table
        return read_file.classes_read

    def _module_name(self, module: str) -> str:
        """The dotted name a module file is imported by (from the deepest folder of sys.path or the
        project root holding it): site-packages/torch/nn/modules/module.py is torch.nn.modules.module."""
        best = ""
        for folder in [self.root] + self.sys_path:
            folder = os.path.join(os.path.abspath(folder), "")
            if module.startswith(folder) and len(folder) > len(best):
                best = folder
        parts = Path(module[len(best):]).with_suffix("").parts
        if parts and parts[0] == os.path.basename(self.torch_stubs):
            parts = ("torch",) + parts[1:]
        if parts and parts[-1] == "__init__":
            parts = parts[:-1]
        return ".".join(parts)

    def read_file(self, path: str) -> _ReadFile:
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
            tree = shared_tree(text, path)
        except OSError:
            tree = None
        if tree is None:
            text = ""
        self._file_cache[path] = read_file = _ReadFile(mtime, text, tree)
        self._file_cache.move_to_end(path)
        while len(self._file_cache) > self.files_kept:
            self._file_cache.popitem(last=False)  # the least recently used
        return read_file


class TextLines:
    """A file's text (``text``), split into lines on first use: what a question reads a few of."""

    text: Optional[str]
    _lines: Optional[List[str]] = None

    def lines(self, first: int, last: int) -> List[str]:
        """Lines ``first`` to ``last`` (1-based) of the file's text."""
        if self._lines is None:
            self._lines = (self.text or "").splitlines()
        return self._lines[first - 1:last]


class _ReadFile(TextLines):
    """A module file read to resolve bases, with what base resolution looks up in it (found on
    first use: one walk of the tree, not one per class or base asked about)."""

    text: str

    def __init__(self, mtime: Optional[float], text: str, tree: Optional[ast.Module]) -> None:
        self.mtime, self.text, self.tree = mtime, text, tree
        self._classes: Optional[List[ast.ClassDef]] = None
        self._import_nodes: Optional[List[ImportNode]] = None
        self._imports: Optional[ImportMap] = None
        self._by_name: Optional[Dict[str, ast.ClassDef]] = None
        self.name_bindings: Optional[Dict[str, List[str]]] = None
        self._top_level: Optional[TopLevelNames] = None
        self.classes_read: Optional[Dict[int, BaseClass]] = None  # see ProjectFiles._classes_read

    @property
    def top_level(self) -> TopLevelNames:
        if self._top_level is None:
            self._top_level = TopLevelNames(self.tree if self.tree is not None else ast.Module(body=[], type_ignores=[]))
        return self._top_level

    @property
    def bindings(self) -> Dict[str, List[str]]:
        """See :func:`name_bindings`."""
        if self.name_bindings is None:
            self.name_bindings = name_bindings(self.tree) if self.tree is not None else {"*": ["*"]}
        return self.name_bindings

    def _walk(self) -> Tuple[List[ast.ClassDef], List[ImportNode]]:
        classes: List[ast.ClassDef] = []
        import_nodes: List[ImportNode] = []
        for node in statement_walk(self.tree) if self.tree is not None else ():
            if isinstance(node, ast.ClassDef):
                classes.append(node)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                import_nodes.append(node)
        self._classes, self._import_nodes = classes, import_nodes
        return classes, import_nodes

    @property
    def classes(self) -> List[ast.ClassDef]:
        return self._classes if self._classes is not None else self._walk()[0]

    @property
    def import_nodes(self) -> List[ImportNode]:
        """Every Import/ImportFrom, in ast.walk's order."""
        return self._import_nodes if self._import_nodes is not None else self._walk()[1]

    @property
    def imports(self) -> ImportMap:
        """(Only asked of a file that parsed.)"""
        if self._imports is None:
            assert self.tree is not None
            self._imports = collect_imports(self.tree, self.import_nodes)
        return self._imports

    @property
    def classes_by_name(self) -> Dict[str, ast.ClassDef]:
        if self._by_name is None:
            self._by_name = {c.name: c for c in self.classes}
        return self._by_name


_COMPILED_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES) + (".so", ".pyd")
_NOT_MODULES = frozenset(["torch.Tensor", "torch._tensor.Tensor", "torch._C.TensorBase", "torch._C._TensorBase"])
_UNKNOWN_ALL: FrozenSet[str] = frozenset()  # an __all__ that is not a plain literal list


def _literal_all(tree: ast.Module) -> Optional[FrozenSet[str]]:
    """A module's ``__all__`` when it is a literal list or tuple of strings, _UNKNOWN_ALL when it is
    computed, None when there is none."""
    found = None
    for stmt in tree.body:
        if not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            continue
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if not any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            continue
        value = stmt.value
        names = [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)] \
            if isinstance(value, (ast.List, ast.Tuple)) else []
        if isinstance(stmt, ast.Assign) and isinstance(value, (ast.List, ast.Tuple)) and len(names) == len(value.elts):
            found = frozenset(names)
        else:
            return _UNKNOWN_ALL
    return found


_STATEMENT_LISTS = ("body", "handlers", "orelse", "finalbody", "cases")  # the fields that hold statements
_statement_fields: Dict[type, Tuple[str, ...]] = {}  # per node class: those of its fields, in ast.walk's order


def statement_walk(tree: ast.AST) -> Iterator[ast.AST]:
    """The statements of a tree (classes, imports...) in ast.walk's order, read from the fields
    that hold statements (a body, the handlers...), never going into expressions, which hold
    none: a fraction of the nodes."""
    todo = collections.deque([tree])
    popleft, extend = todo.popleft, todo.extend
    while todo:
        node = popleft()
        cls = node.__class__
        fields = _statement_fields.get(cls)
        if fields is None:
            fields = _statement_fields[cls] = tuple(field for field in cls._fields if field in _STATEMENT_LISTS)
        for field in fields:
            children = getattr(node, field, None)
            if children.__class__ is list:  # (not the one expression an ast.Expression root holds)
                extend(children)
        yield node


# Absolute names whose classes jedi finds only in stubs (.pyi) or typing's helpers: never a Module.
_NEVER_MODULE_PACKAGES = ("torch._C.", "typing_extensions.")


def is_builtin_class(base: ast.expr, bindings: Callable[[], Dict[str, List[str]]]) -> bool:
    """A base that is a builtin class (``str``, ``Exception``) by its name, nothing in the file
    binding that name. ``bindings``: the file's (:func:`name_bindings`), found only for a builtin's
    name (a walk of the whole tree, which most bases, imported, never need)."""
    if not isinstance(base, ast.Name) or not isinstance(getattr(builtins, base.id, None), type):
        return False
    found = bindings()
    return "*" not in found and base.id not in found


def _class_binds(stmt: ast.stmt, name: str) -> bool:
    """The statement of a class body binds ``name`` (a def, a nested class, an assignment; any
    other compound statement may, as far as this reads)."""
    if isinstance(stmt, _DEFINED):
        return stmt.name == name
    if isinstance(stmt, (ast.Expr, ast.Pass)):
        return False
    return any(isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store)
               for node in ast.walk(stmt))


def _imported_as(import_nodes: Sequence[ImportNode], base: ast.expr) -> Optional[Tuple[ImportNode, str]]:
    """The import that binds ``base``'s first name (the last one of the file: it wins) and the
    dotted name it gives ``base``; None for a name no import binds but a star import may."""
    dotted = dotted_name(base)
    if dotted is None:
        return None
    head, _, rest = dotted.partition(".")
    for node in reversed(import_nodes):
        for alias in node.names:
            if isinstance(node, ast.Import):
                local = alias.asname or alias.name.split(".", 1)[0]
                target = alias.name if alias.asname else local
            else:
                local, target = alias.asname or alias.name, "%s.%s" % (node.module, alias.name) \
                    if node.module else alias.name
            if local == head and alias.name != "*":
                return node, target + ("." + rest if rest else "")
    return None


def name_bindings(tree: ast.AST, nodes: Optional[NodeTable] = None) -> Dict[str, List[str]]:
    """How each name is bound anywhere in a file: ``"import torch.nn"`` (``import torch.nn as x``:
    a module), ``"from collections.deque"`` (an absolute ``from`` import), or ``"other"`` (an
    assignment, a definition, a parameter, a relative import...). Key ``"*"``: a star import.
    ``nodes``: the tree's scopes.NodeTable, whose lists by node type spare a walk of the tree."""
    by_type = nodes_by_type(tree) if nodes is None else {}
    node: ast.AST  # (narrowed by each loop below)

    def of_type(cls: Type[NodeT]) -> List[NodeT]:
        if nodes is not None:
            return nodes.of_type(cls)
        return cast(List[NodeT], by_type.get(cls, []))  # (the nodes of class cls)
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
    for definition in of_type(ast.FunctionDef) + of_type(ast.AsyncFunctionDef) + of_type(ast.ClassDef):
        found.setdefault(definition.name, []).append("other")
    for node in of_type(ast.arg):
        found.setdefault(node.arg, []).append("other")
    for declaration in of_type(ast.Global) + of_type(ast.Nonlocal):
        for name in declaration.names:
            found.setdefault(name, []).append("other")
    for node in of_type(ast.ExceptHandler):
        if node.name:
            found.setdefault(node.name, []).append("other")
    for cls, field in _MATCH_BINDINGS:
        for node in of_type(cls):
            bound = getattr(node, field, None)
            if isinstance(bound, str):
                found.setdefault(bound, []).append("other")
    return found


# Match patterns that bind a name, and the field that holds it.
_MATCH_BINDINGS: Tuple[Tuple[Type[ast.AST], str], ...] = tuple((getattr(ast, cls), field) for cls, field in (
    ("MatchAs", "name"), ("MatchStar", "name"), ("MatchMapping", "rest")) if hasattr(ast, cls))


def statement_binds(stmt: ast.stmt, name: str) -> bool:
    """Whether a top-level statement other than a class or an import may bind ``name``."""
    return name in _bound_names(stmt)


def _bound_names(stmt: ast.stmt) -> FrozenSet[str]:
    """The names a top-level statement other than a class or an import may bind."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return frozenset([stmt.name])
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Delete)):
        # A name stored or deleted (a target, a walrus): not one only read, as in
        # `Name.push_to_hub = copy_func(Name.push_to_hub)`, which leaves the class bound to Name.
        return frozenset(n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load))
    if isinstance(stmt, (ast.If, ast.Try, ast.With, ast.For, ast.While)) or type(stmt).__name__ in ("TryStar", "Match"):
        names = set()
        for n in ast.walk(stmt):
            if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(n.name)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names.add(n.id)
            elif isinstance(n, ast.alias):
                names.add(n.asname or n.name.split(".", 1)[0])
        return frozenset(names)
    return frozenset()


class TopLevelNames:
    """Which top-level statements of a module may bind each name (a class, an import, anything
    :func:`statement_binds` says), and its star imports: found in one pass, so that looking a name up reads
    those statements only, not the whole module each time."""

    def __init__(self, tree: ast.Module) -> None:
        self.body = tree.body
        self._by_name: Dict[str, List[int]] = {}
        self._stars: List[int] = []
        for index, stmt in enumerate(tree.body):
            if isinstance(stmt, ast.ClassDef):
                names: Iterable[str] = (stmt.name,)
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                if isinstance(stmt, ast.ImportFrom) and any(alias.name == "*" for alias in stmt.names):
                    self._stars.append(index)
                names = {alias.asname or alias.name.split(".", 1)[0] for alias in stmt.names if alias.name != "*"}
            else:
                names = _bound_names(stmt)
            for name in names:
                self._by_name.setdefault(name, []).append(index)

    def binding(self, name: str, stars: bool = True) -> List[ast.stmt]:
        """The statements that may bind ``name``, with the star imports (``stars``), in order."""
        indices = self._by_name.get(name, [])
        if stars and self._stars:
            indices = sorted(set(indices) | set(self._stars))
        return [self.body[index] for index in indices]


def _holds(folder: str, top: str, suffixes: Tuple[str, ...]) -> bool:
    """Whether ``folder`` holds a package (or namespace package) ``top``, or ``top`` followed by one
    of ``suffixes``."""
    stem = os.path.join(folder, top)
    return os.path.isdir(stem) or any(os.path.exists(stem + suffix) for suffix in suffixes)


def _an_alias(stmt: ast.Assign, name: str, top_level: TopLevelNames) -> bool:
    """Whether ``stmt`` binds ``name`` to a dotted name (``PreTrainedTokenizer = PythonBackend``,
    ``LayerNorm = nn.LayerNorm``) whose first part only statements before it bind: the value it
    has there is the one it keeps."""
    if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name) or stmt.targets[0].id != name:
        return False
    head = stmt.value
    while isinstance(head, ast.Attribute):
        head = head.value
    return isinstance(head, ast.Name) and head.id != name \
        and all(other.lineno < stmt.lineno for other in top_level.binding(head.id))


def _imports_only(stmt: ast.stmt, name: str) -> Optional[List[ImportNode]]:
    """The imports that bind ``name`` in a compound statement (an ``if``, a ``try``), when nothing
    else may bind it there (an assignment, a definition, a star import); None otherwise."""
    found: List[ImportNode] = []
    for node in ast.walk(stmt):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name \
                or isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load) \
                or isinstance(node, ast.ExceptHandler) and node.name == name \
                or isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names \
                or isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names) \
                or any(isinstance(node, cls) and getattr(node, field, None) == name for cls, field in _MATCH_BINDINGS):
            return None
        if isinstance(node, ast.Import) and any((a.asname or a.name.split(".", 1)[0]) == name for a in node.names) \
                or isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            found.append(node)
    return found
