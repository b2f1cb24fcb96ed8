"""Which classes of a file are ``nn.Module`` subclasses.

A class is a Module when a base resolves (through the file's imports) to
``torch.nn.Module``, to any ``torch.nn`` layer, to a known third-party Module
base, or to another Module class of the same file, however deep. Bases the file
cannot resolve are left to the jedi layer (``external_bases``).
"""
from __future__ import annotations

import ast
import builtins
from typing import Callable, Dict, List, Optional

from . import torch_names as tn
from .imports import ImportMap
from .scopes import ClassInfo, class_chain


def resolve_modules(classes: List[ClassInfo], imports: ImportMap,
                    external: Optional[Callable[[ClassInfo, ast.expr], bool]] = None) -> Dict[str, ClassInfo]:
    """Mark ``is_module`` on each class; returns classes by name (the last definition wins)."""
    by_name: Dict[str, ClassInfo] = {}
    for info in classes:
        by_name[info.name] = info
        info.bases = []
        for base in map(generic_origin, info.node.bases):
            qualified = imports.qualify(base)
            if qualified is not None:
                info.bases.append(qualified)
            elif isinstance(base, ast.Name):
                info.bases.append(base.id)

    # Fixed point: a class is a Module once any base is.
    changed = True
    while changed:
        changed = False
        for info in classes:
            if info.is_module:
                continue
            for base_name in info.bases:
                local = by_name.get(base_name)
                if (local is not None and local is not info and local.is_module) or (
                        local is None and (base_name in tn.MODULE_BASES or tn.is_module_class(base_name))):
                    info.is_module = True
                    changed = True
                    break
    if external is not None:
        for info in classes:
            if info.is_module:
                continue
            if any(by_name.get(b) is not None and by_name[b].is_module for b in info.bases):
                info.is_module = True  # an earlier class of this file, just found to be a Module: no question
                continue
            unresolved = [b for b in map(generic_origin, info.node.bases) if _unresolved(b, info, by_name, imports)]
            if any(external(info, base) for base in unresolved):
                info.is_module = True
        # a local subclass of a class that the jedi layer found to be a Module
        changed = True
        while changed:
            changed = False
            for info in classes:
                if not info.is_module and any(by_name.get(b) is not None and by_name[b].is_module for b in info.bases):
                    info.is_module = changed = True
    return by_name


def _unresolved(base: ast.expr, info: ClassInfo, by_name: Dict[str, ClassInfo], imports: ImportMap) -> bool:
    """A base that names cannot settle: not a class of this file, not a builtin, not a known torch name."""
    if isinstance(base, ast.Name) and (base.id in by_name or base.id in _BUILTIN_NAMES):
        return False
    if not isinstance(base, (ast.Name, ast.Attribute)):
        return False  # Generic[T], calls: nothing jedi could jump to
    qualified = imports.qualify(base)
    if qualified is not None and qualified.startswith(("typing.", "typing_extensions.")):
        return False  # Generic, Protocol: never a Module
    return qualified is None or not (qualified in tn.MODULE_BASES or tn.is_module_class(qualified))


def generic_origin(base: ast.expr) -> ast.expr:
    """The class a base names: `Learner[Policy]` (a generic class given its parameters) names `Learner`."""
    if isinstance(base, ast.Subscript) and isinstance(base.value, (ast.Name, ast.Attribute)):
        return base.value
    return base


_BUILTIN_NAMES = frozenset(dir(builtins))


def moves_own_state(info: ClassInfo, by_name: Dict[str, ClassInfo]) -> bool:
    """Classes that override ``_apply`` move their own tensors (torchmetrics style)."""
    return any("_apply" in cls.methods for cls in class_chain(info, by_name))
