"""What building a Module runs, and in which order, as far as syntax can tell.

``__init__`` often hands part of its work to helper methods (``self.make_schedule()``), and a
base class's ``__init__`` may call a method the subclass defines. :func:`construction` lists the
methods that only construction runs (called from ``__init__``, from the bases' ``__init__``
through ``super().__init__()``, or from other such helpers, and named nowhere else), and tells
which of their statements may run before ``nn.Module.__init__`` has: torch refuses to register a
parameter, buffer or submodule there.

The helpers at the end answer path questions inside one function: whether two statements are on
branches that exclude each other, and whether some statement of a set runs on every path after
(or before) a given one.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Set, Tuple, cast

from .context import FileContext
from .forward import method_table
from .scopes import ClassInfo, FunctionDefinition, Index, Scope

# The base ``__init__`` a class's own runs: its class and its scope.
BaseInit = Tuple[ClassInfo, Scope]

_TRY = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)


@dataclass
class Construction:
    """The methods construction runs: ``__init__`` (the class's own or an in-file base's), the
    bases' ``__init__`` it reaches through ``super().__init__()``, and the helpers they call that
    nothing else names."""

    scopes: Dict[int, Scope] = field(default_factory=dict)  # id(scope) -> scope
    early: Set[int] = field(default_factory=set)  # ids of the scopes that may start before Module.__init__
    module_init: Dict[int, Optional[int]] = field(default_factory=dict)  # id(scope) -> index in its body
    parent_of: Dict[int, ast.AST] = field(default_factory=dict)  # the file's parent table
    body_positions: Dict[int, Dict[int, int]] = field(default_factory=dict)  # id(method) -> id(stmt) -> index

    def __contains__(self, scope: Scope) -> bool:
        return id(scope) in self.scopes

    def runs_early(self, scope: Scope, stmt: ast.AST) -> bool:
        """``stmt`` (a statement of ``scope``, one of the construction's) may run before
        ``nn.Module.__init__`` has: it precedes the method's own ``super().__init__()`` call (or the
        method has none) in a method that may itself start before it."""
        if id(scope) not in self.early:
            return False
        at = self.module_init.get(id(scope))
        return at is None or self.top_level_index(scope, stmt) < at

    def module_init_call(self, scope: Scope) -> Optional[ast.stmt]:
        """The ``super().__init__(...)`` statement at the top of ``scope``'s body, if any."""
        at = self.module_init.get(id(scope))
        return scope.node.body[at] if at is not None else None

    def top_level_index(self, scope: Scope, node: ast.AST) -> int:
        """The index in ``scope``'s body of the statement that holds ``node``."""
        root = scope.node
        parent = self.parent_of.get(id(node))
        while parent is not None and parent is not root:
            node, parent = parent, self.parent_of.get(id(parent))
        positions = self.body_positions.get(id(root))
        if positions is None:  # built once per method: a call per attribute stays linear
            positions = self.body_positions[id(root)] = {id(stmt): i for i, stmt in enumerate(root.body)}
        return positions.get(id(node), len(root.body))


def construction(ctx: FileContext, cls: ClassInfo) -> Optional[Construction]:
    """The methods that building ``cls`` runs, or None when no ``__init__`` is in the file."""
    table = method_table(ctx, cls)
    if "__init__" not in table:
        return None
    entry_info, entry = table["__init__"]
    result = Construction(parent_of=ctx.nodes.parent)
    result.early.add(id(entry))
    # The __init__ methods: the entry, and the in-file bases' it reaches through super().__init__()
    # (which start before Module.__init__ when the call does).
    info, scope = entry_info, entry
    while scope is not None and id(scope) not in result.scopes:
        result.scopes[id(scope)] = scope
        at, target = _module_init(ctx, scope, info)
        result.module_init[id(scope)] = at
        if target is None:
            break
        if id(scope) in result.early:
            result.early.add(id(target[1]))
        info, scope = target
    # The helpers: methods named by construction's methods and by nothing else (a fixed point).
    used = {scope_id: _self_attributes(ctx, scope) for scope_id, scope in result.scopes.items()}
    if not any(name in table and name != "__init__" for names in used.values() for name, _ in names):
        return result  # __init__ calls no method of the class: the common case, decided here
    refs = _references(ctx, ctx.class_chain(cls), table)
    # `<instance>.<method>` in the class (`qprelu.set_weight(w)` in a classmethod) or elsewhere in the file.
    through_instances = {node.attr for node in ctx.nodes.under(cls.node, ast.Attribute)
                         if not (isinstance(node.value, ast.Name) and node.value.id == "self")}
    changed = True
    while changed:
        changed = False
        for scope_id in list(result.scopes):
            for name, _ in used[scope_id]:
                if name not in table or name == "__init__":
                    continue
                helper = table[name][1]
                if id(helper) in result.scopes or helper.self_name is None or cast(FunctionDefinition, helper.node).decorator_list:
                    continue  # static and class methods, properties and other decorated methods are left out
                if any(id(s) not in result.scopes for s, _ in refs.get(name, ())) \
                        or name in through_instances or ctx.attribute_read_outside(cls.node, name):
                    continue  # also named by another method, or through an instance: not construction's alone
                result.scopes[id(helper)] = helper
                result.module_init[id(helper)] = None
                used[id(helper)] = _self_attributes(ctx, helper)
                changed = True
    # A helper may start before Module.__init__ when a statement that names it may run then.
    changed = True
    while changed:
        changed = False
        for name, sites in refs.items():
            helper = table[name][1]
            if id(helper) in result.scopes and id(helper) not in result.early and any(
                    result.runs_early(scope, node) for scope, node in sites):
                result.early.add(id(helper))
                changed = True
    return result


def _self_attributes(ctx: FileContext, scope: Scope) -> List[Tuple[str, ast.Attribute]]:
    if scope.self_name is None:
        return []
    return [(node.attr, node) for node in ctx.nodes.under(scope.node, ast.Attribute) if scope.is_self(node.value)]


def _references(ctx: FileContext, chain: List[ClassInfo], table: Dict[str, BaseInit]) -> Dict[str, List[Tuple[Scope, ast.Attribute]]]:
    """``self.<method>`` in every method of the class chain, by method name."""
    refs: Dict[str, List[Tuple[Scope, ast.Attribute]]] = {}
    for info in chain:
        for scope in info.method_scopes.values():
            for name, node in _self_attributes(ctx, scope):
                if name in table:
                    refs.setdefault(name, []).append((scope, node))
    return refs


def _module_init(ctx: FileContext, scope: Scope, info: ClassInfo) -> Tuple[Optional[int], Optional[BaseInit]]:
    """The index in ``scope``'s body of its ``super().__init__(...)`` (or ``Base.__init__(self)``)
    statement (None when it has none at its top), and the in-file base ``__init__`` that call runs,
    as (class, scope), or None when it is torch's (or a class outside the file)."""
    for at, stmt in enumerate(scope.node.body):
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "__init__"):
            continue
        owner = call.func.value
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
            return at, _first_init(ctx, info.bases[:1])
        if call.args and scope.is_self(call.args[0]) and isinstance(owner, (ast.Name, ast.Attribute)):
            return at, _first_init(ctx, [owner.id] if isinstance(owner, ast.Name) else [])
    return None, None


def _first_init(ctx: FileContext, bases: List[str]) -> Optional[BaseInit]:
    """The ``__init__`` that runs for a class of these bases (the first in the file), or None."""
    for base in bases:
        if base in ctx.classes:
            for info in ctx.class_chain(ctx.classes[base]):
                if "__init__" in info.method_scopes:
                    return info, info.method_scopes["__init__"]
    return None


# -- paths inside one function --------------------------------------------------------------------

def block_of(index: Index, scope: Scope, stmt: ast.stmt) -> List[ast.stmt]:
    """The list of statements that holds ``stmt``: a block of a compound statement, or the body of
    ``scope``'s function."""
    entry = index.blocks.get(id(stmt))
    if entry is None:
        return scope.node.body
    owner, name = entry
    return _block(owner, name)


def _block(owner: ast.stmt, name: str) -> List[ast.stmt]:
    if name.startswith("handler"):
        return cast(ast.Try, owner).handlers[int(name[7:])].body  # (or an ast.TryStar)
    if name.startswith("case"):
        return cast(ast.Match, owner).cases[int(name[4:])].body
    block: List[ast.stmt] = getattr(owner, name)
    return block


def exclusive(index: Index, a: ast.stmt, b: ast.stmt) -> bool:
    """``a`` and ``b`` are on branches of which at most one runs: the two arms of an ``if``, two
    ``except`` handlers, a handler and the ``else`` of a ``try``, two ``case``s."""
    chain_a = _chain(index, a)
    seen = {id(owner): name for owner, name in chain_a}
    for owner, name in _chain(index, b):
        other = seen.get(id(owner))
        if other is None:
            continue
        if other == name:
            return False  # the same block: their paths share it
        if isinstance(owner, ast.If) or name.startswith("case"):
            return True
        if isinstance(owner, _TRY):
            arms = {other, name}
            return all(n.startswith("handler") or n == "orelse" for n in arms)
        return False
    return False


def _chain(index: Index, stmt: ast.stmt) -> List[Tuple[ast.stmt, str]]:
    chain = []
    entry = index.blocks.get(id(stmt))
    while entry is not None:
        chain.append(entry)
        entry = index.blocks.get(id(entry[0]))
    return chain


def always_after(index: Index, scope: Scope, stmt: ast.stmt, marks: Callable[[ast.stmt], bool]) -> bool:
    """On every path from ``stmt`` to the end of the function, a statement ``marks`` accepts runs
    after it, or the path raises. Loops may run no turn: what is inside one does not count."""
    return _always(index, scope, stmt, marks, after=True)


def always_before(index: Index, scope: Scope, stmt: ast.stmt, marks: Callable[[ast.stmt], bool]) -> bool:
    """On every path from the function's start to ``stmt``, a statement ``marks`` accepts has run."""
    return _always(index, scope, stmt, marks, after=False)


def _always(index: Index, scope: Scope, stmt: ast.stmt, marks: Callable[[ast.stmt], bool], after: bool) -> bool:
    current = stmt
    while True:
        block = block_of(index, scope, current)
        at = next(i for i, s in enumerate(block) if s is current)
        rest = block[at + 1:] if after else block[:at]
        if any(_covers(s, marks, after) for s in rest):
            return True
        entry = index.blocks.get(id(current))
        if entry is None:
            return False
        owner, name = entry
        if isinstance(owner, _TRY) and after and name != "finalbody" and _covers_block(owner.finalbody, marks, after):
            return True
        current = owner


def _covers(stmt: ast.stmt, marks: Callable[[ast.stmt], bool], after: bool) -> bool:
    """Running ``stmt`` runs a marked statement (or, looking forward, raises) on every path."""
    if marks(stmt):
        return True
    if isinstance(stmt, ast.Raise):
        return after
    if isinstance(stmt, ast.If):
        return bool(stmt.orelse) and _covers_block(stmt.body, marks, after) and _covers_block(stmt.orelse, marks, after)
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return _covers_block(stmt.body, marks, after)
    if isinstance(stmt, _TRY):
        if _covers_block(stmt.finalbody, marks, after):
            return True
        return _covers_block(stmt.body + stmt.orelse, marks, after) and all(
            _covers_block(h.body, marks, after) for h in stmt.handlers)
    return False  # loops may run no turn; match statements may match no case


def _covers_block(block: List[ast.stmt], marks: Callable[[ast.stmt], bool], after: bool) -> bool:
    return any(_covers(s, marks, after) for s in block)
