"""What the verification child needs to know before it runs anything: how to import the
file (as a module of its package, or by path) and how to build a class that needs
constructor arguments.

Both are read from the source, never by importing it (this runs in the language
server and the CLI, which never import torch nor the user's code):

* ``import_plan``: the package root found by walking up ``__init__.py`` (a ``src/``
  layout ends the walk at ``src``), or the nearest ``import-roots`` folder of
  ``[tool.torchlint.verify]``; ``None`` for a standalone script, which loads by path.
* ``find_constructors``: literal call sites of the class (the same file, its
  ``if __name__ == "__main__":`` block, its package's other files, tests folders near
  the package) and factory functions that return it, as Python expressions the child
  evaluates in the namespace of the class's module. Only expressions whose leaves are
  literals or names that module defines or imports qualify: anything else could mean
  something else there.
"""
from __future__ import annotations

import ast
import builtins
import os
import re
import time
from dataclasses import dataclass, field
from typing import (Callable, Container, Dict, Iterable, Iterator, List, Literal, Optional, Protocol, Sequence, Set,
                    Tuple, TypeVar, Union, cast)

from ..analysis.context import FileContext
from ..analysis.parsing import parse
from ..analysis.scopes import Binding, ClassInfo, FunctionDefinition, Index, Scope, build_index, dotted_name
from ..config import VerifyConfig
from ..settings import ClassRecipe
from ..files import display_path, read_regular_file
from .protocol import Constructor, JsonObject

MAX_CANDIDATES = 6  # per class: the child tries them in order, each a construction
MAX_MADE_UP_FACTORIES = 2  # of them, factories called with made-up arguments (resnet18, resnet34...)
MAX_SCANNED_FILES = 400  # files looked at (a cheap text test) per verification
# Besides these counts, a caller may give the scan a deadline (time.monotonic()): files not
# reached by then are not read (the editor's lens does, so a huge workspace cannot hang it).
MAX_SCANNED_FOLDERS = 2000
MAX_FILE_BYTES = 1_000_000
MAX_EXPRESSION = 2000  # characters
MAX_INLINE_DEPTH = 6  # `dim = width * 2` chains followed to their literals
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules", "build", "dist", ".tox", ".nox",
                          ".venv", "venv", "env", ".mypy_cache", ".pytest_cache", "site-packages", ".eggs"})
TEST_DIRS = ("tests", "test", "testing")
_BUILTINS = frozenset(dir(builtins))


# -- importing ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ImportPlan:
    """``root`` first on sys.path, then ``import module``; both None: load the file by path."""

    root: Optional[str] = None
    module: Optional[str] = None
    extra_paths: Tuple[str, ...] = ()

    def request(self) -> Optional[JsonObject]:
        return {"root": self.root, "module": self.module} if self.module else None


def module_name(path: str, root: str) -> Optional[str]:
    """``root/pkg/sub/models.py`` -> ``pkg.sub.models`` (``__init__.py`` -> its package); None
    when a part is not an identifier (``my-models/``) or the file is not under root."""
    relative = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    if relative.startswith(os.pardir + os.sep) or relative == os.pardir or os.path.isabs(relative):
        return None
    parts = relative.split(os.sep)
    stem, extension = os.path.splitext(parts[-1])
    if extension not in (".py", ".pyw"):
        return None
    parts[-1] = stem
    if parts[-1] == "__init__":
        parts.pop()
    if not parts or not all(part.isidentifier() for part in parts):
        return None
    return ".".join(parts)


def package_root(path: str) -> Optional[str]:
    """The folder above the outermost package holding the file (walking up ``__init__.py``)."""
    folder = os.path.dirname(os.path.abspath(path))
    top = None
    while os.path.isfile(os.path.join(folder, "__init__.py")) and os.path.basename(folder).isidentifier():
        top = folder
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return os.path.dirname(top) if top is not None else None


def import_plan(path: str, workspace_root: Optional[str] = None, import_roots: Sequence[str] = (),
                extra_paths: Sequence[str] = ()) -> ImportPlan:
    """How the child imports ``path``: as the project does.

    The nearest configured import root holding the file wins (namespace packages, odd
    layouts); else the package root found through ``__init__.py``; else by path. The
    workspace root, the ``src`` folder's parent and the file's own folder are appended to
    sys.path (after everything else) so absolute imports of the project and a script's
    sibling imports resolve as they do when the project runs."""
    path = os.path.abspath(path)
    root = module = None
    for candidate in sorted((os.path.abspath(r) for r in import_roots), key=len, reverse=True):
        name = module_name(path, candidate)
        if name is not None:
            root, module = candidate, name
            break
    if module is None:
        found = package_root(path)
        if found is not None:
            root, module = found, module_name(path, found)
            if module is None:
                root = None
    extra: List[str] = []
    for folder in list(extra_paths) + list(import_roots):
        extra.append(os.path.abspath(folder))
    if root is not None and os.path.basename(root) == "src":
        extra.append(os.path.dirname(root))  # the project above a src/ layout (its tests, its scripts)
    if workspace_root:
        extra.append(os.path.abspath(workspace_root))
    if module is None:
        extra.append(os.path.dirname(path))  # a script's sibling imports (`python script.py` puts it first)
    unique = []
    for folder in extra:
        if folder != root and folder not in unique:
            unique.append(folder)
    return ImportPlan(root, module, tuple(unique))


# -- constructor arguments --------------------------------------------------------------------

@dataclass
class ParsedFile:
    """One parsed file that may mention the class."""

    path: str
    tree: ast.Module
    module: Optional[str]  # its dotted name, when importable
    index: Index
    top_names: Set[str] = field(default_factory=set)
    functions: Dict[str, ast.FunctionDef] = field(default_factory=dict)  # module-level defs

    @classmethod
    def load(cls, path: str, module: Optional[str]) -> Optional["ParsedFile"]:
        try:
            data = read_regular_file(path, MAX_FILE_BYTES)  # never a FIFO's read, which would block
        except OSError:
            return None
        if len(data) > MAX_FILE_BYTES:
            return None
        text = data.decode("utf-8", "replace")
        tree, _ = parse(text, path)
        if tree is None:
            return None
        found = cls(path, tree, module, build_index(tree))
        found.top_names = top_level_names(tree)
        found.functions = {stmt.name: stmt for stmt in tree.body if isinstance(stmt, ast.FunctionDef)}
        return found

    def scope_of(self, call: ast.Call) -> Scope:
        return self.index.call_scopes.get(id(call), self.index.module_scope)


def top_level_names(tree: ast.Module) -> Set[str]:
    """Names a module defines or imports at its top level (also inside top-level if/try blocks,
    not inside ``if __name__ == "__main__":``, which does not run when it is imported)."""
    names: Set[str] = set()
    stack = [stmt for stmt in tree.body if not (isinstance(stmt, ast.If) and _is_main_test(stmt.test))]
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, ast.Import):
            names.update(a.asname or a.name.split(".", 1)[0] for a in stmt.names)
        elif isinstance(stmt, ast.ImportFrom):
            names.update(a.asname or a.name for a in stmt.names if a.name != "*")
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        for block in ("body", "orelse", "finalbody"):
            if isinstance(stmt, (ast.If, ast.Try, ast.With)) or (block == "orelse" and isinstance(stmt, ast.For)):
                stack.extend(getattr(stmt, block, []) or [])
        for handler in getattr(stmt, "handlers", []) or []:
            stack.extend(handler.body)
    return names


class _Portable:
    """Rewrites an argument so that it means the same in the class's module, or gives up (None).

    Leaves may be literals; names the class's module defines or imports; a call site's
    locals and module constants with a single literal-made assignment (inlined); a
    factory's parameters with a default (the default, inlined)."""

    def __init__(self, site: ParsedFile, target: ParsedFile, scope: Scope) -> None:
        self.site, self.target, self.scope = site, target, scope

    def __call__(self, node: ast.expr, scope: Optional[Scope] = None, depth: int = 0) -> Optional[ast.expr]:
        if depth > MAX_INLINE_DEPTH:
            return None
        scope = scope or self.scope
        if isinstance(node, ast.Constant):
            return node
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            elts = every_one([self(e, scope, depth) for e in node.elts])
            if elts is None or any(isinstance(e, ast.Starred) for e in elts):
                return None
            # (a set has no ctx: a copy made with one would warn from Python 3.13)
            return ast.Set(elts=elts) if isinstance(node, ast.Set) else type(node)(elts=elts, ctx=ast.Load())
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                return None
            keys = every_one([self(cast(ast.expr, k), scope, depth) for k in node.keys])  # (no `**`: above)
            values = every_one([self(v, scope, depth) for v in node.values])
            return None if keys is None or values is None else ast.Dict(keys=list(keys), values=values)
        if isinstance(node, ast.UnaryOp):
            operand = self(node.operand, scope, depth)
            return None if operand is None else ast.UnaryOp(op=node.op, operand=operand)
        if isinstance(node, ast.BinOp):
            left, right = self(node.left, scope, depth), self(node.right, scope, depth)
            return None if left is None or right is None else ast.BinOp(left=left, op=node.op, right=right)
        if isinstance(node, ast.Name):
            return self._name(node, scope, depth)
        if isinstance(node, ast.Attribute):
            base: ast.expr = node
            while isinstance(base, ast.Attribute):
                base = base.value
            if not isinstance(base, ast.Name) or not self._known_in_target(base.id):
                return None  # `cfg.dim`: an object's attribute is not a literal
            return node
        if isinstance(node, ast.Call):
            func = self(node.func, scope, depth + 1) if isinstance(node.func, (ast.Name, ast.Attribute)) else None
            if func is None or not isinstance(func, (ast.Name, ast.Attribute)):
                return None
            args = every_one([self(a, scope, depth + 1) for a in node.args])
            keywords = [(k.arg, self(k.value, scope, depth + 1)) for k in node.keywords]
            values = every_one([value for _, value in keywords])
            if args is None or any(isinstance(a, ast.Starred) for a in args) or any(
                    name is None for name, _ in keywords) or values is None:
                return None
            return ast.Call(func=func, args=args,
                            keywords=[ast.keyword(arg=n, value=v) for (n, _), v in zip(keywords, values)])
        return None

    def _known_in_target(self, name: str) -> bool:
        return name in self.target.top_names or name in _BUILTINS

    def _name(self, node: ast.Name, scope: Optional[Scope], depth: int) -> Optional[ast.expr]:
        if scope is not None and scope.parent is not None and node.id in scope.locals:
            return self._local(node.id, scope, depth)
        if self.site is self.target and node.id in self.target.top_names:
            return node
        value = _single_value(self.site.index.module_scope, node.id)
        if value is not None:  # a module constant of the call site's file: carry its value over
            return self(value, self.site.index.module_scope, depth + 1)
        if self._known_in_target(node.id):
            return node
        return None

    def _local(self, name: str, scope: Scope, depth: int) -> Optional[ast.expr]:
        bindings = scope.locals[name]
        function = cast(FunctionDefinition, scope.node)  # (a local of a function: _name)
        if any(b.value is None and b.stmt is function for b in bindings):  # a parameter
            default = _parameter_default(function, name)
            if default is None or len(bindings) > 1:
                return None
            return self(default, scope.parent, depth + 1)
        value = _single_value(scope, name)
        return None if value is None else self(value, scope, depth + 1)


ExprT = TypeVar("ExprT", bound=ast.expr)


def every_one(items: Sequence[Optional[ExprT]]) -> Optional[List[ExprT]]:
    """The items when none is None (each one was made), else None."""
    made = [item for item in items if item is not None]
    return made if len(made) == len(items) else None


def _single_value(scope: Scope, name: str) -> Optional[ast.expr]:
    bindings: List[Binding] = scope.locals.get(name, [])
    if len(bindings) != 1 or bindings[0].iter_of is not None:
        return None
    return bound_value(bindings[0])


def bound_value(binding: Binding) -> Optional[ast.expr]:
    """What a binding assigned: its value, or its element of a literal tuple (``B, N, C = 2, 24, 64``)."""
    if binding.value is not None:
        return binding.value
    stmt = binding.stmt
    if binding.unpack_index is not None and binding.iter_of is None and isinstance(stmt, ast.Assign) \
            and isinstance(stmt.value, (ast.Tuple, ast.List)) and len(stmt.targets) == 1 \
            and isinstance(stmt.targets[0], (ast.Tuple, ast.List)) \
            and len(stmt.targets[0].elts) == len(stmt.value.elts) \
            and not any(isinstance(e, ast.Starred) for e in stmt.targets[0].elts):
        return stmt.value.elts[binding.unpack_index]
    return None


def _parameter_default(function: FunctionDefinition, name: str) -> Optional[ast.expr]:
    args = function.args
    positional = args.posonlyargs + args.args
    for arg, default in zip(positional[len(positional) - len(args.defaults):], args.defaults):
        if arg.arg == name:
            return default
    for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults):
        if arg.arg == name:
            return kw_default
    return None


def _required_parameters(function: ast.FunctionDef) -> List[str]:
    args = function.args
    positional = args.posonlyargs + args.args
    required = [a.arg for a in positional[:len(positional) - len(args.defaults)]]
    required += [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is None]
    return required


class CandidateFinder:
    def __init__(self, target: ParsedFile, class_name: str) -> None:
        self.target = target
        self.class_name = class_name
        self.candidates: List[Constructor] = []
        self._seen: Set[str] = set()

    def add(self, candidate: Constructor) -> None:
        key = candidate.expression or candidate.factory or ""
        if key and key not in self._seen and len(self.candidates) < MAX_CANDIDATES:
            self._seen.add(key)
            self.candidates.append(candidate)

    # -- which calls build the class -------------------------------------------------------
    def callee_names(self, site: ParsedFile) -> Tuple[Set[str], Set[str]]:
        """(names that mean the class in ``site``, names of modules that hold it there)."""
        if site is self.target:
            return {self.class_name}, set()
        names, modules = set(), set()
        target_module = self.target.module or os.path.splitext(os.path.basename(self.target.path))[0]
        for stmt in ast.walk(site.tree):
            if isinstance(stmt, ast.ImportFrom):
                source = absolute_module(stmt, site.module, os.path.basename(site.path) == "__init__.py")
                if source is None:
                    continue
                for alias in stmt.names:
                    if alias.name == self.class_name and may_reexport(source, target_module):
                        names.add(alias.asname or alias.name)
                    elif source + "." + alias.name == target_module:
                        modules.add(alias.asname or alias.name)
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.name == target_module and alias.asname:
                        modules.add(alias.asname)
        return names, modules

    def builds_class(self, call: ast.Call, names: Set[str], modules: Set[str]) -> bool:
        func = call.func
        if isinstance(func, ast.Name):
            return func.id in names
        if isinstance(func, ast.Attribute) and func.attr == self.class_name:
            base = func.value
            if isinstance(base, ast.Name) and base.id in modules:
                return True
            target_module = self.target.module or ""
            dotted = dotted_name(base)
            return dotted is not None and bool(dotted) and (dotted == target_module
                                                            or target_module.endswith("." + dotted))
        return False

    def portable_call(self, site: ParsedFile, call: ast.Call) -> Optional[str]:
        scope = site.scope_of(call)
        portable = _Portable(site, self.target, scope)
        var_keyword = getattr(getattr(scope.node, "args", None), "kwarg", None)
        args = []
        for arg in call.args:
            if isinstance(arg, ast.Starred):
                return None
            value = portable(arg)
            if value is None:
                return None
            args.append(value)
        keywords = []
        for keyword in call.keywords:
            if keyword.arg is None:
                # A factory passing on its own **kwargs: empty when the factory is called bare.
                if var_keyword is not None and isinstance(keyword.value, ast.Name) \
                        and keyword.value.id == var_keyword.arg:
                    continue
                return None
            value = portable(keyword.value)
            if value is None:
                return None
            keywords.append(ast.keyword(arg=keyword.arg, value=value))
        text = ast.unparse(ast.Call(func=ast.Name(id=self.class_name, ctx=ast.Load()), args=args, keywords=keywords))
        return text if len(text) <= MAX_EXPRESSION else None

    # -- what a file says ------------------------------------------------------------------
    def scan(self, site: ParsedFile, where: str) -> None:
        names, modules = self.callee_names(site)
        if not names and not modules:
            return
        display = where
        builders = [call for call in site.index.calls if self.builds_class(call, names, modules)]
        factories = self.factories(site, names, modules)
        factory_calls = {id(call) for function, call in factories}
        main_calls = [c for c in builders if in_main_block(site.tree, c)]
        other_calls = [c for c in builders if c not in main_calls and id(c) not in factory_calls]
        for call in main_calls:  # the author's own demo first
            self._call_site(site, call, display, "the `__main__` block")
        for function, factory_call in factories:
            self._factory(site, function, factory_call, display)
        for call in other_calls:
            self._call_site(site, call, display, "a call site")

    def _call_site(self, site: ParsedFile, call: ast.Call, where: str, what: str) -> None:
        text = self.portable_call(site, call)
        if text is not None:
            self.add(Constructor("%s:%d, %s" % (where, call.lineno, what), expression=text))

    def _factory(self, site: ParsedFile, function: ast.FunctionDef, call: Optional[ast.Call], where: str) -> None:
        origin = "%s:%d, factory %s()" % (where, function.lineno, function.name)
        if not _required_parameters(function):
            if site is self.target:
                offline = _without_downloads(function)
                self.add(Constructor(origin, expression="%s(%s)" % (function.name, ", ".join(
                    "%s=%s" % item for item in offline))))
                return
            if site.module:
                self.add(Constructor(origin, factory="%s:%s" % (site.module, function.name)))
                return
        if call is not None:  # the factory needs arguments: its own call of the class may not
            text = self.portable_call(site, call)
            if text is not None:
                self.add(Constructor("%s:%d, the call in factory %s()" % (where, call.lineno, function.name),
                                     expression=text))
                return
        made_up = [c for c in self.candidates if c.made_up]
        if site is self.target and len(made_up) < MAX_MADE_UP_FACTORIES:  # (`def resnet18(num_classes)`)
            self.add(Constructor(origin, expression="%s(%s)" % (function.name, ", ".join(
                "%s=%s" % item for item in _without_downloads(function))), made_up=True))

    def factories(self, site: ParsedFile, names: Set[str], modules: Set[str]
                 ) -> List[Tuple[ast.FunctionDef, Optional[ast.Call]]]:
        """Module-level functions that return the class: `return C(...)`, `m = C(...); return m`,
        `-> C`, or `return other_factory(...)` of one of those (the call of C, when seen)."""
        found: Dict[str, Optional[ast.Call]] = {}
        changed = True
        while changed:
            changed = False
            for name, function in site.functions.items():
                if name in found:
                    continue
                hit = self._returns_class(function, names, modules, found)
                if hit is not False:
                    found[name] = hit
                    changed = True
        return [(site.functions[name], call) for name, call in found.items()]

    def _returns_class(self, function: ast.FunctionDef, names: Set[str], modules: Set[str],
                       known: Container[str]) -> Union[ast.Call, None, Literal[False]]:
        """The call of the class the function returns (None: it returns one, call unseen); False: not a factory."""
        assigned: Dict[str, ast.Call] = {}
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                    and self.builds_class(node.value, names, modules):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        assigned[target.id] = node.value
        for node in ast.walk(function):
            if not isinstance(node, ast.Return) or node.value is None:
                continue
            value = node.value
            if isinstance(value, ast.Call) and self.builds_class(value, names, modules):
                return value
            if isinstance(value, ast.Name) and value.id in assigned:
                return assigned[value.id]
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in known:
                return None
        returns = function.returns
        if returns is not None:
            spelled = returns.value if isinstance(returns, ast.Constant) and isinstance(returns.value, str) else (
                dotted_name(returns) or "")
            if spelled.rsplit(".", 1)[-1] == self.class_name:
                return None
        return False


_DOWNLOADS = re.compile(r"^(weights|pretrained)(_\w+)?$|_(weights|pretrained)$")


def _without_downloads(function: ast.FunctionDef) -> List[Tuple[str, str]]:
    """(parameter, value) for a factory's parameters that would fetch trained weights by default
    (``weights_backbone=Weights.DEFAULT``, ``pretrained=True``): None / False, so that building the
    model needs no network and gives its untrained layers, as the class's own defaults do."""
    args = function.args
    positional = args.posonlyargs + args.args
    pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
    pairs += [(arg, default) for arg, default in zip(args.kwonlyargs, args.kw_defaults) if default is not None]
    found = []
    for arg, default in pairs:
        if not _DOWNLOADS.search(arg.arg) or (isinstance(default, ast.Constant) and default.value in (None, False)):
            continue
        found.append((arg.arg, "False" if "pretrained" in arg.arg else "None"))
    return found


def in_main_block(tree: ast.Module, call: ast.Call) -> bool:
    for stmt in tree.body:
        if isinstance(stmt, ast.If) and _is_main_test(stmt.test) \
                and stmt.lineno <= call.lineno <= (stmt.end_lineno or stmt.lineno):
            return True
    return False


def _is_main_test(test: ast.expr) -> bool:
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators))


def absolute_module(stmt: ast.ImportFrom, module: Optional[str], is_package: bool) -> Optional[str]:
    """The absolute module an ``from X import ...`` reads (relative ones need the file's own name)."""
    if not stmt.level:
        return stmt.module
    if not module:
        return None
    parts = module.split(".")
    up = stmt.level - 1 if is_package else stmt.level  # `.` is a module's package, a package itself
    if up > len(parts) or (up == len(parts) and not stmt.module):
        return None
    return ".".join(parts[:len(parts) - up] + ([stmt.module] if stmt.module else []))


def may_reexport(source: str, target_module: str) -> bool:
    """``from source import C`` can mean the C of ``target_module``: the module itself or a
    package above it that re-exports it."""
    return source == target_module or target_module.startswith(source + ".")


# -- which files to read ---------------------------------------------------------------------

def _past(deadline: Optional[float]) -> bool:
    return deadline is not None and time.monotonic() > deadline


def _python_files(folder: str, limit: int, deadline: Optional[float] = None) -> Iterator[str]:
    count = folders = 0
    for directory, subdirs, files in os.walk(folder):
        folders += 1
        if folders > MAX_SCANNED_FOLDERS or _past(deadline):  # a data folder inside the package, or out of time
            return
        subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".py"):
                count += 1
                if count > limit:
                    return
                yield os.path.join(directory, name)


def candidate_files(path: str, plan: ImportPlan, workspace_root: Optional[str],
                    deadline: Optional[float] = None) -> List[Tuple[str, Optional[str]]]:
    """(file, its module name) to look for call sites in, nearest first: the package (or the
    script's folder), then tests folders next to the package, its project and the workspace;
    at most MAX_SCANNED_FILES, and only the folders walked before ``deadline``."""
    path = os.path.abspath(path)
    files: List[Tuple[str, Optional[str]]] = []
    seen = {path}

    def add_folder(folder: str, root: Optional[str]) -> None:
        for found in _python_files(folder, MAX_SCANNED_FILES, deadline):
            if found not in seen and len(files) < MAX_SCANNED_FILES:
                seen.add(found)
                files.append((found, module_name(found, root) if root else None))

    if plan.module and plan.root:
        package = os.path.join(plan.root, plan.module.split(".", 1)[0])
        if os.path.isdir(package):
            add_folder(package, plan.root)
        else:  # a top-level module under an import root: its siblings
            add_folder(os.path.dirname(path), plan.root)
    else:
        for name in sorted(os.listdir(os.path.dirname(path))):
            found = os.path.join(os.path.dirname(path), name)
            if name.endswith(".py") and found not in seen and len(files) < MAX_SCANNED_FILES:
                seen.add(found)
                files.append((found, None))
    near = [plan.root or os.path.dirname(path)]
    if plan.root and os.path.basename(plan.root) == "src":
        near.append(os.path.dirname(plan.root))
    if workspace_root:
        near.append(os.path.abspath(workspace_root))
    for folder in near:
        for name in TEST_DIRS:
            tests = os.path.join(folder, name)
            if os.path.isdir(tests):
                add_folder(tests, package_root(os.path.join(tests, "x.py")) or folder)
    return files


def find_constructors(path: str, class_names: Sequence[str], plan: Optional[ImportPlan] = None,
                      workspace_root: Optional[str] = None, recipes: Optional[VerifyConfig] = None,
                      scan_project: bool = True, sites: Optional[Sequence[Tuple[str, Optional[str]]]] = None,
                      deadline: Optional[float] = None) -> Dict[str, List[JsonObject]]:
    """Class name -> the ways to build it, best first, as request entries.

    ``recipes``: the ``[tool.torchlint.verify]`` classes (config.VerifyConfig), tried first.
    ``scan_project``: False looks at the file alone (cheap enough for every code lens).
    ``sites``: the other files to read (default: ``candidate_files``); ``deadline``
    (time.monotonic()): the files not reached by then are left unread."""
    path = os.path.abspath(path)
    plan = plan or import_plan(path, workspace_root)
    target = ParsedFile.load(path, plan.module)
    result: Dict[str, List[JsonObject]] = {}
    finders: Dict[str, CandidateFinder] = {}
    base = workspace_root or plan.root or os.path.dirname(path)
    for name in class_names:
        finder = CandidateFinder(target, name) if target is not None else None
        recipe = recipes.recipe(name) if recipes is not None else None
        configured = _configured(name, recipe)
        if configured is not None:
            if finder is None:
                result[name] = [configured.to_dict()]
                continue
            finder.add(configured)
        if finder is not None and target is not None:  # (a finder only where the target loaded)
            finder.scan(target, display_path(path, base))
            finders[name] = finder
    if target is not None and scan_project and finders:
        pattern = re.compile(r"\b(%s)\b" % "|".join(re.escape(n) for n in finders))
        if sites is None:
            sites = candidate_files(path, plan, workspace_root, deadline)
        scan_sites(sites, pattern, base, finders.values(), deadline)
    for name, finder in finders.items():
        result[name] = [c.to_dict() for c in finder.candidates]
    return result


def _configured(name: str, recipe: Optional[ClassRecipe]) -> Optional[Constructor]:
    if recipe is None:
        return None
    origin = "[tool.torchlint.verify.classes.%s] in pyproject.toml" % name
    if recipe.factory:
        return Constructor(origin, factory=recipe.factory, before_defaults=True)
    if recipe.kwargs_json is None:
        return None  # only inputs: the class is built as without a table
    kwargs = recipe.kwargs or {}
    call = ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=[],
                    keywords=[ast.keyword(arg=k, value=_literal(v)) for k, v in kwargs.items()])
    return Constructor(origin, expression=ast.unparse(call), before_defaults=True)


def _literal(value: object) -> ast.expr:
    """A TOML value as a Python literal expression."""
    if isinstance(value, dict):
        return ast.Dict(keys=[ast.Constant(k) for k in value], values=[_literal(v) for v in value.values()])
    if isinstance(value, list):
        return ast.List(elts=[_literal(v) for v in value], ctx=ast.Load())
    return ast.Constant(cast(Union[str, int, float, bool], value))  # (a TOML scalar)


def required_arguments(ctx: FileContext, info: ClassInfo) -> Optional[List[str]]:
    """The parameters the class's ``__init__`` requires besides self, from the class or a base
    of the same file (``ctx``: analysis.context.FileContext); None when the ``__init__`` is
    not in the file (an imported base's: unknown here)."""
    for cls in ctx.class_chain(info):
        function = cls.methods.get("__init__")
        if isinstance(function, ast.FunctionDef):
            required = _required_parameters(function)
            positional = function.args.posonlyargs + function.args.args
            return required[1:] if positional and required and required[0] == positional[0].arg else required
    external = [b for cls in ctx.class_chain(info) for b in cls.bases if b not in ctx.classes]
    return [] if all(b in ("torch.nn.Module", "torch.nn.modules.module.Module") for b in external) else None


class Scanner(Protocol):
    """What reads the project's files for scan_sites (a CandidateFinder, inputs' class calls)."""

    def scan(self, site: ParsedFile, where: str) -> None: ...


def scan_sites(sites: Iterable[Tuple[str, Optional[str]]], pattern: "re.Pattern[str]", base: str,
               finders: Iterable[Scanner], deadline: Optional[float], needs: str = "",
               done: Callable[[], bool] = lambda: False) -> None:
    """Hand each project file of ``sites`` that names what ``pattern`` matches (and holds ``needs``)
    to every finder's ``scan``, until the deadline or until ``done()``; oversized and unreadable
    files are skipped."""
    for site_path, site_module in sites:
        if _past(deadline) or done():
            break
        try:
            head = read_regular_file(site_path, MAX_FILE_BYTES)  # a FIFO named *.py: skipped, not waited on
        except OSError:
            continue
        text = head.decode("utf-8", "replace")
        if len(head) > MAX_FILE_BYTES or needs not in text or not pattern.search(text):
            continue
        site = ParsedFile.load(site_path, site_module)
        if site is None:
            continue
        where = display_path(site_path, base)
        for finder in finders:
            finder.scan(site, where)


# -- parents in other files ------------------------------------------------------------------------

MAX_FEEDER_FILES = 3  # other files of the project whose classes may build and feed this file's


def feeder_files(path: str, class_names: Sequence[str], plan: ImportPlan,
                 sites: Iterable[Tuple[str, Optional[str]]], deadline: Optional[float] = None
                 ) -> List[Tuple[str, str]]:
    """(file, module) of the project's other importable files that import a class of ``path``
    from its module and call it (a parent built in file A holds the class defined in file B),
    nearest first, at most MAX_FEEDER_FILES. Only for a file imported as a module of its package:
    a parent elsewhere must reach the very class object the child verifies."""
    if not plan.module or not class_names:
        return []
    target = ParsedFile.load(os.path.abspath(path), plan.module)
    if target is None:
        return []
    finders = [CandidateFinder(target, name) for name in class_names]
    pattern = re.compile(r"\b(%s)\b" % "|".join(re.escape(n) for n in class_names))
    found: List[Tuple[str, str]] = []
    for site_path, site_module in sites:
        if len(found) >= MAX_FEEDER_FILES or _past(deadline):
            break
        if not site_module or site_module == plan.module or os.path.basename(site_path) == "__init__.py":
            continue
        try:
            head = read_regular_file(site_path, MAX_FILE_BYTES)
        except OSError:
            continue
        if len(head) > MAX_FILE_BYTES or not pattern.search(head.decode("utf-8", "replace")):
            continue
        site = ParsedFile.load(site_path, site_module)
        if site is None:
            continue
        for finder in finders:
            names, modules = finder.callee_names(site)
            if (names or modules) and any(finder.builds_class(call, names, modules) for call in site.index.calls):
                found.append((site_path, site_module))
                break
    return found
