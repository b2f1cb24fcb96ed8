"""Where a value goes and where it comes from inside one function, as far as syntax can tell.

Rules that follow a tensor from the line that makes it to the line that uses it
(TL105, TL204) ask which assignment of a local name reaches a use
(:func:`reaching_binding`), which answers ``None`` rather than guess when control flow
makes it unclear, and which statement holds a node (:func:`enclosing_statement`, with the
file's parent table).
"""
from __future__ import annotations

import ast
from bisect import bisect_left, bisect_right
from typing import Callable, Dict, List, Optional, Tuple

from .scopes import Binding, Index, NodeTable, Scope, block_chain

_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def enclosing_statement(node: ast.AST, parent_of: Dict[int, ast.AST]) -> Optional[ast.stmt]:
    walked: Optional[ast.AST] = node
    while walked is not None and not isinstance(walked, ast.stmt):
        walked = parent_of.get(id(walked))
    return walked


def _position(stmt: ast.stmt) -> Tuple[int, int]:
    return (stmt.lineno, stmt.col_offset)


def _is_rebinding(binding: Binding) -> bool:
    # `t += x` on a tensor works in place: the name still holds the same object.
    return not isinstance(binding.stmt, ast.AugAssign)


def reaching_binding(index: Index, scope: Scope, name: str, use: ast.stmt) -> Optional[Binding]:
    """The one assignment of local ``name`` whose value ``use`` sees, when that is plain to see:
    the nearest earlier binding, in the same or an enclosing block, with no other binding of the
    name between them, and none later in a loop around the use (the next turn would see that one).
    Logarithmic in the name's bindings (a function that rebinds ``x`` on each of N lines stays
    linear): they are sorted once per scope and name.
    """
    ordered = scope.ordered_locals.get(name)
    if ordered is None:
        bindings = sorted((b for b in scope.locals.get(name, ()) if _is_rebinding(b)), key=lambda b: _position(b.stmt))
        ordered = scope.ordered_locals[name] = ([_position(b.stmt) for b in bindings], bindings)
    positions, bindings = ordered
    at = _position(use)
    before = bisect_left(positions, at)  # bindings[:before] are earlier than the use
    if not before:
        return None
    nearest = bindings[bisect_left(positions, positions[before - 1])]  # of one statement's, the first
    use_chain = block_chain(index, use)
    # A parameter is bound at the top of the function: in no block of it.
    nearest_chain = [] if _is_parameter(nearest) else block_chain(index, nearest.stmt)
    if use_chain[len(use_chain) - len(nearest_chain):] != nearest_chain:
        return None  # assigned in a branch the use is not inside
    loops = _enclosing_loops(index, use, stop=None if _is_parameter(nearest) else nearest.stmt)
    for loop in loops:  # a later binding inside a loop around the use: the next turn sees it
        end = (loop.end_lineno, loop.end_col_offset)
        for later in range(bisect_right(positions, at), bisect_right(positions, end)):
            if _inside(index, bindings[later].stmt, loop):
                return None
    return nearest


def _is_parameter(binding: Binding) -> bool:
    return binding.value is None and isinstance(binding.stmt, (ast.FunctionDef, ast.AsyncFunctionDef))


def _enclosing_loops(index: Index, stmt: ast.stmt, stop: Optional[ast.stmt]) -> List[ast.stmt]:
    """Loops around ``stmt`` that do not also hold ``stop`` (loops entered after ``stop`` ran)."""
    loops: List[ast.stmt] = []
    entry = index.blocks.get(id(stmt))
    while entry is not None:
        owner, _ = entry
        if isinstance(owner, _LOOPS) and (stop is None or not _inside(index, stop, owner)):
            loops.append(owner)
        entry = index.blocks.get(id(owner))
    return loops


def _inside(index: Index, stmt: ast.stmt, block_owner: ast.stmt) -> bool:
    return any(owner == id(block_owner) for owner, _ in block_chain(index, stmt))


def loads_of(nodes: NodeTable, scope: Scope, name: str) -> List[ast.Name]:
    """Every read of ``name`` in the function's own body (not in nested functions or classes),
    from the file's node table, the last first."""
    return nodes.own_loads(scope.node, name)


def device_or_dtype(node: ast.expr, qualify: Callable[[ast.AST], Optional[str]]) -> Optional[str]:
    """Whether an argument of ``.to()`` names a device or a dtype, when its spelling says so:
    "device", "dtype" or None. ``qualify`` is the file's import resolver."""
    qualified = qualify(node) or ""
    if qualified.startswith("torch.") and qualified[6:] in _DTYPES:
        return "dtype"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return "device"
    if isinstance(node, ast.Call) and qualify(node.func) == "torch.device":
        return "device"
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    lowered = name.lower()
    if "dtype" in lowered:
        return "dtype"
    if lowered in ("device", "dev") or lowered.endswith("device"):
        return "device"
    return None


_DTYPES = frozenset("""
float16 float32 float64 bfloat16 half float double complex64 complex128 cfloat cdouble
int8 int16 int32 int64 uint8 uint16 uint32 uint64 long int short char byte bool
""".split())
