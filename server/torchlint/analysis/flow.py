"""Where a value goes and where it comes from inside one function, as far as syntax can tell.

Rules that follow a tensor from the line that makes it to the line that uses it
(TL105, TL204) ask which assignment of a local name reaches a use
(:func:`reaching_binding`), which answers ``None`` rather than guess when control flow
makes it unclear, and which statement holds a node (:func:`enclosing_statement`, with the
file's parent table). Rules that follow a value out of the expression that reads it (TL101)
ask which reads of a local may see an assignment (:func:`loads_seeing`), which function
of the file an argument goes to (:func:`callee_parameter`), whether a call goes
through a Module (:func:`calls_a_module`: ``self.cell(...)``, a layer taken from a loop over a
ModuleList), and what the calls of a method in its class pass for a parameter (:func:`argument_values`).
"""
from __future__ import annotations

import ast
from bisect import bisect_left, bisect_right
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Tuple

from .scopes import Binding, Index, NodeTable, Scope, block_chain
from .values import Kind, Value

if TYPE_CHECKING:  # (context imports this module)
    from .context import FileContext

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


def loads_seeing(ctx: FileContext, scope: Scope, name: str, stmt: ast.stmt) -> List[ast.Name]:
    """The reads of local ``name`` in the function's own code that may see the value ``stmt``
    assigns to it: those it reaches (:func:`reaching_binding`), and later ones where control flow
    leaves unclear which assignment they see (``m = self.mask`` in an ``else`` before ``return m``)."""
    found = []
    parents = ctx.nodes.parent
    for load in loads_of(ctx.nodes, scope, name):
        use = enclosing_statement(load, parents)
        if use is None or use is stmt:
            continue  # (`x = x + 1`: the read is of the value before)
        binding = reaching_binding(ctx.index, scope, name, use)
        if binding is not None and binding.stmt is stmt \
                or binding is None and (use.lineno, use.col_offset) > (stmt.lineno, stmt.col_offset):
            found.append(load)
    return found


def callee_parameter(ctx: FileContext, call: ast.Call, argument: ast.AST) -> Optional[Tuple[Scope, str]]:
    """The function of this file that ``call`` runs and the parameter ``argument`` (one of the
    call's arguments, a keyword or its value) binds: a module-level function, or a static method
    called through its class (``Model._score(x, table=t)``); None for any other call."""
    func = call.func
    scopes: List[Scope] = []
    if isinstance(func, ast.Name):
        scopes = ctx.module_functions(func.id)
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ctx.classes:
        method = ctx.classes[func.value.id].method_scopes.get(func.attr)
        node = method.node if method is not None else None
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list):
            scopes = [method] if method is not None else []
    if len(scopes) != 1 or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    function = scopes[0].node
    assert isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))  # (a function's scope)
    positional = [a.arg for a in function.args.posonlyargs + function.args.args]
    for position, given in enumerate(call.args):
        if given is argument:
            return (scopes[0], positional[position]) if position < len(positional) else None
    named = [a.arg for a in function.args.args + function.args.kwonlyargs]
    for keyword in call.keywords:
        if (keyword is argument or keyword.value is argument) and keyword.arg in named:
            return scopes[0], keyword.arg
    return None


# Containers whose items are Modules that Module.__call__ runs: torch's registering containers,
# and plain lists or dicts of new layers (TL102's).
_MODULE_CONTAINERS = frozenset(["torch.nn.ModuleList", "torch.nn.ModuleDict", "torch.nn.Sequential"])


def calls_a_module(ctx: FileContext, scope: Scope, call: ast.Call) -> bool:
    """Whether ``call`` runs a Module or a method of the class: ``self.cell(...)`` (a submodule or
    a method of its own), ``self.blocks[i](...)``, a local holding a layer (``layer = self.conv``),
    a loop's or a comprehension's variable over a container of layers (``for head in
    self.heads``, ``enumerate``/``zip``/``.values()``/``.items()`` of one)."""
    func = call.func
    if isinstance(func, ast.Attribute) and scope.is_self(func.value):
        return True
    if isinstance(func, ast.Subscript):
        return _holds_modules(ctx, scope, func.value)
    if not isinstance(func, ast.Name):
        return False
    source = _comprehension_source(ctx, func.id, call)
    if source is not None:
        return _items_are_modules(ctx, scope, *source)
    if func.id in ctx.classes:
        return False  # building a Module, not running one
    stmt = enclosing_statement(call, ctx.nodes.parent)
    binding = reaching_binding(ctx.index, scope, func.id, stmt) if stmt is not None else None
    if binding is None:
        return False
    if binding.iter_of is not None:
        return _items_are_modules(ctx, scope, binding.iter_of, binding.unpack_index)
    if binding.value is None:
        return False
    if isinstance(binding.value, ast.Subscript):
        return _holds_modules(ctx, scope, binding.value.value)
    value = ctx.classify(binding.value, scope)
    return value.kind is Kind.MODULE and value.module_class not in _MODULE_CONTAINERS | {None}


def _comprehension_source(ctx: FileContext, name: str, node: ast.AST) -> Optional[Tuple[ast.expr, Optional[int]]]:
    """The iterable a comprehension around ``node`` binds ``name`` from, and its position when the
    target unpacks (``for i, head in enumerate(...)``); None when no comprehension binds it."""
    parents = ctx.nodes.parent
    current = parents.get(id(node))
    while current is not None and not isinstance(current, ast.stmt):
        if isinstance(current, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            for generator in current.generators:
                target = generator.target
                if isinstance(target, ast.Name) and target.id == name:
                    return generator.iter, None
                if isinstance(target, ast.Tuple):
                    for position, element in enumerate(target.elts):
                        if isinstance(element, ast.Name) and element.id == name:
                            return generator.iter, position
        current = parents.get(id(current))
    return None


def _items_are_modules(ctx: FileContext, scope: Scope, iterable: ast.expr, position: Optional[int]) -> bool:
    """Whether iterating ``iterable`` (taking item ``position`` of each, when unpacked) gives Modules."""
    if isinstance(iterable, ast.Call):
        func = iterable.func
        name = func.id if isinstance(func, ast.Name) else ""
        if name == "enumerate" and iterable.args and position == 1:
            return _items_are_modules(ctx, scope, iterable.args[0], None)
        if name == "zip" and position is not None and position < len(iterable.args) \
                and not any(isinstance(a, ast.Starred) for a in iterable.args):
            return _items_are_modules(ctx, scope, iterable.args[position], None)
        if name == "reversed" and len(iterable.args) == 1:
            return _items_are_modules(ctx, scope, iterable.args[0], position)
        if isinstance(func, ast.Attribute) and not iterable.args:
            if func.attr == "values" and position is None or func.attr == "items" and position == 1:
                return _holds_modules(ctx, scope, func.value)
        return False
    if isinstance(iterable, ast.Subscript) and isinstance(iterable.slice, ast.Slice):
        return _items_are_modules(ctx, scope, iterable.value, position)
    return position is None and _holds_modules(ctx, scope, iterable)


def _holds_modules(ctx: FileContext, scope: Scope, container: ast.expr) -> bool:
    """A container of layers: `self.blocks` whose known assignments are all ModuleLists (or plain
    lists of new layers), or an expression classified as one."""
    if isinstance(container, ast.Attribute) and scope.is_self(container.value) and scope.cls is not None:
        values = [ctx.classify(b.value, b.scope) for b in ctx.classifier.class_attribute_bindings(scope.cls, container.attr)
                  if b.value is not None]
        known = [v for v in values if v.kind not in (Kind.UNKNOWN, Kind.OTHER)]
        return bool(known) and all(_is_module_container(v) for v in known)
    return _is_module_container(ctx.classify(container, scope))


def _is_module_container(value: Value) -> bool:
    return value.kind in (Kind.MODULE_LIST, Kind.MODULE_DICT) \
        or (value.kind is Kind.MODULE and value.module_class in _MODULE_CONTAINERS)


def argument_values(ctx: FileContext, scope: Scope, name: str) -> Optional[List[Tuple[ast.expr, Scope]]]:
    """What the class's own calls of the method ``scope`` pass for its parameter ``name``, with the
    caller's scope; None when ``name`` is no parameter of a method, or a call's arguments cannot be
    matched to it (``*args``, ``**kwargs``) or leave it to its default."""
    method, cls = scope.node, scope.cls
    if cls is None or not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    positional = [a.arg for a in method.args.posonlyargs + method.args.args][1:]  # (after self)
    keyword_only = [a.arg for a in method.args.kwonlyargs]
    if name not in positional and name not in keyword_only:
        return None
    values = []
    for call, caller in ctx.method_calls(cls, scope.name):
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return None
        given = [k.value for k in call.keywords if k.arg == name]
        if not given and name in positional and positional.index(name) < len(call.args):
            given = [call.args[positional.index(name)]]
        if not given:
            return None
        values.append((given[0], caller))
    return values
