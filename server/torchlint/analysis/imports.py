"""Import aliases: which local name means which torch object.

``import torch as T``, ``from torch import nn, randn``, ``import torch.nn as tnn``,
``from torch.nn import Module as M``: after :func:`collect_imports`, ``qualify``
turns ``T.nn.Linear`` or ``tnn.Linear`` into ``torch.nn.Linear``.
"""
from __future__ import annotations

import ast
from typing import Dict, Iterable, Optional

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


def collect_imports(tree: ast.Module, import_nodes: Iterable[ast.stmt]) -> ImportMap:
    """``import_nodes``: every Import/ImportFrom of the file, in source order."""
    imports = ImportMap()
    top_level = {id(stmt) for stmt in tree.body}
    for node in import_nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    imports.names[alias.asname] = alias.name
                else:
                    root = alias.name.split(".", 1)[0]
                    imports.names[root] = root
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if alias.name != "*":
                    imports.names[alias.asname or alias.name] = node.module + "." + alias.name
        if id(node) in top_level and not imports.first_import_line:
            imports.first_import_line = node.lineno
    return imports
