"""Import aliases: which local name means which torch object.

``import torch as T``, ``from torch import nn, randn``, ``import torch.nn as tnn``,
``from torch.nn import Module as M``: after :func:`collect_imports`, ``qualify``
turns ``T.nn.Linear`` or ``tnn.Linear`` into ``torch.nn.Linear``. ``from torch.nn import *``
binds what the module exports, read from the torch stubs torchlint ships (torch is never
imported), so names alone read ``Linear`` as ``torch.nn.Linear`` there too.
"""
from __future__ import annotations

import ast
import functools
import os
from typing import Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

from .scopes import dotted_name
from .torch_names import canonical


class ImportMap:
    def __init__(self) -> None:
        self.names: Dict[str, str] = {}  # local name -> qualified name
        self.first_import_line = 0  # where a new import can go (0: top of file)

    def qualify(self, node: ast.AST) -> Optional[str]:
        """The canonical dotted name an expression refers to, if it comes from an import."""
        dotted = dotted_name(node)
        if dotted is None:
            return None
        first, dot, rest = dotted.partition(".")
        base = self.names.get(first)
        if base is None:
            return None
        return canonical(base + dot + rest)

    def spelling(self, qualified: str) -> Optional[str]:
        """The shortest way this file can already write ``qualified`` (None: needs an import)."""
        best = None
        for local, target in self.names.items():
            if qualified == target:
                candidate = local
            elif qualified.startswith(target + "."):
                candidate = local + qualified[len(target):]
            elif canonical(target) == qualified:
                candidate = local
            else:
                continue
            if best is None or len(candidate) < len(best):
                best = candidate
        return best


TORCH_STUBS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "stubs", "torch-stubs")


def _stub_file(module: str) -> Optional[str]:
    parts = module.split(".")
    if parts[0] != "torch":
        return None
    folder = os.path.join(TORCH_STUBS, *parts[1:])
    for candidate in (os.path.join(folder, "__init__.pyi"), folder + ".pyi"):
        if os.path.isfile(candidate):
            return candidate
    return None


def _listed_names(value: ast.expr) -> List[str]:
    if isinstance(value, (ast.List, ast.Tuple)):
        return [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


@functools.lru_cache(maxsize=None)
def star_exports(module: str, depth: int = 0, defined_only: bool = False) -> FrozenSet[str]:
    """The names ``from <module> import *`` binds, for torch's modules (empty for others, or
    where the stubs lack the module): its ``__all__``, else its public top-level names
    (``defined_only``: those it defines itself, not the names it imports)."""
    path = _stub_file(module)
    if path is None or depth > 4:
        return frozenset()
    try:
        with open(path, encoding="utf-8") as file:
            tree = ast.parse(file.read())
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    listed: List[str] = []
    public: Set[str] = set()
    has_all = False
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in stmt.targets):
            has_all, listed = True, _listed_names(stmt.value)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == "__all__":
            listed += _listed_names(stmt.value)
        elif isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            public.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            public.update(t.id for t in targets if isinstance(t, ast.Name))
        elif defined_only:
            continue
        elif isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                if alias.name == "*":
                    public |= star_exports(_absolute(module, path, stmt), depth + 1)
                else:
                    public.add(alias.asname or alias.name)
        elif isinstance(stmt, ast.Import):
            public.update(alias.asname or alias.name.split(".", 1)[0] for alias in stmt.names)
    if not has_all:
        return frozenset(name for name in public if not name.startswith("_"))
    # torch's own ``__all__`` grows at import time by the public names of the star imports its
    # stub keeps under ``if TYPE_CHECKING:`` (``torch._C._VariableFunctions``: zeros, cat...).
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node not in tree.body and any(a.name == "*" for a in node.names):
            listed += star_exports(_absolute(module, path, node), depth + 1, defined_only=True)
    return frozenset(name for name in listed if not name.startswith("_"))  # private: never a rule's


def _absolute(module: str, path: str, stmt: ast.ImportFrom) -> str:
    """The module a (possibly relative) ``from ... import`` in ``module``'s stub names."""
    if not stmt.level:
        return stmt.module or ""
    package = module.split(".")
    if not path.endswith("__init__.pyi"):
        package = package[:-1]
    package = package[: len(package) - (stmt.level - 1)]
    return ".".join(package + ([stmt.module] if stmt.module else []))


def _names_the_file_binds(tree: ast.Module) -> Set[str]:
    """Top-level names the file defines or assigns itself: they win over a star import's."""
    bound: Set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            bound.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.With)):
            for node in ast.walk(stmt):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    bound.add(node.id)
    return bound


def _bindings(node: ast.stmt) -> List[Tuple[str, Optional[str]]]:
    """(local name, qualified name) for each name an import binds; None for a relative import's."""
    if isinstance(node, ast.Import):
        return [(alias.asname, alias.name) if alias.asname else (alias.name.split(".", 1)[0],) * 2
                for alias in node.names]
    assert isinstance(node, ast.ImportFrom)
    absolute = node.module if node.module and not node.level else None
    return [(alias.asname or alias.name, f"{absolute}.{alias.name}" if absolute else None) for alias in node.names]


def collect_imports(tree: ast.Module, import_nodes: Iterable[ast.stmt]) -> ImportMap:
    """``import_nodes``: every Import/ImportFrom of the file, in source order."""
    imports = ImportMap()
    top_level = {id(stmt) for stmt in tree.body}
    starred: Set[str] = set()  # names bound by a torch star import and not re-bound since
    for node in import_nodes:
        if isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names):
            exports = star_exports(node.module) if node.module and not node.level else frozenset()
            if not exports:
                # Another module's star import may bind any name: what torch's bound is unknown now.
                for name in starred:
                    del imports.names[name]
                starred.clear()
            for name in exports:
                imports.names[name] = f"{node.module}.{name}"
                starred.add(name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for local, target in _bindings(node):
                if target is not None:
                    imports.names[local] = target
                elif local in starred:  # a relative import re-binds a name torch's star bound
                    del imports.names[local]
                starred.discard(local)
        if id(node) in top_level and not imports.first_import_line:
            imports.first_import_line = node.lineno
    for name in starred & _names_the_file_binds(tree):
        del imports.names[name]
    return imports
