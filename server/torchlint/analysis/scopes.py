"""One pass over the syntax tree that indexes what the rules ask about.

The walk records, per function (or the module body, or a class body), every binding
of a local name and every ``name.append(...)``; per class, every ``self.<attr> = value``.
Rules then read these indexes instead of walking the tree again.

A class body is a scope of its own, as in Python: the names it binds are class
attributes, not names of the function or module around it. Its methods' scopes hang
from the enclosing scope, since a method does not see the class body's names.
"""
from __future__ import annotations

import ast
import collections
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple, Type, TypeVar, Union, cast

FunctionNode = (ast.FunctionDef, ast.AsyncFunctionDef)
FunctionDefinition = Union[ast.FunctionDef, ast.AsyncFunctionDef]  # (the type of FunctionNode's)
ScopeNode = Union[ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef]  # what has a Scope
# Statements that hold blocks of statements (besides functions and classes).
_COMPOUND = frozenset(cls for cls in vars(ast).values() if isinstance(cls, type) and issubclass(cls, ast.stmt)
                      and any(f in cls._fields for f in ("body", "orelse", "finalbody", "handlers", "cases"))
                      and cls not in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))


@dataclass
class Binding:
    """``target = value`` inside a scope (a local name or ``self.<attr>``)."""

    name: str
    value: Optional[ast.expr]  # None for loop targets, params and other non-assignments
    stmt: ast.stmt
    scope: "Scope"
    annotation: Optional[ast.expr] = None
    iter_of: Optional[ast.expr] = None  # set for `for name in <iter_of>`
    unpack_index: Optional[int] = None  # position in `for a, b in ...`


@dataclass
class Scope:
    node: ScopeNode
    parent: Optional["Scope"]
    cls: Optional["ClassInfo"] = None  # the class whose method this is
    self_name: Optional[str] = None  # first parameter of a method
    locals: Dict[str, List[Binding]] = field(default_factory=dict)
    appends: Dict[str, List[ast.Call]] = field(default_factory=dict)  # "x" / "self.x" -> its .append(...) calls
    calls: List[ast.Call] = field(default_factory=list)  # calls in this scope's own code, in walk order
    statements: List[ast.stmt] = field(default_factory=list)  # simple statements, in order
    # name -> (positions, bindings) of its rebinding assignments sorted by position (flow.py)
    ordered_locals: Dict[str, Tuple[List[Tuple[int, int]], List[Binding]]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def name(self) -> str:
        return getattr(self.node, "name", "<module>")

    def is_self(self, node: ast.AST) -> bool:
        return self.self_name is not None and isinstance(node, ast.Name) and node.id == self.self_name


@dataclass
class ClassInfo:
    node: ast.ClassDef
    scope: Optional[Scope]  # scope the class is defined in
    methods: Dict[str, FunctionDefinition] = field(default_factory=dict)
    method_scopes: Dict[str, Scope] = field(default_factory=dict)
    attr_assignments: List[Binding] = field(default_factory=list)  # self.<attr> = value, all methods
    # register_buffer/parameter("name") and friends: the call, or the statement that registers by hand
    registered: Dict[str, Union[ast.stmt, ast.Call]] = field(default_factory=dict)
    registered_parameters: Dict[str, Union[ast.stmt, ast.Call]] = field(default_factory=dict)
    registered_buffers: Dict[str, Union[ast.stmt, ast.Call]] = field(default_factory=dict)
    unregistered: Set[str] = field(default_factory=set)  # del self._parameters["x"] and friends
    bases: List[str] = field(default_factory=list)  # qualified, or local class names
    is_module: bool = False
    # attr_assignments by name, built at the first question once they are all in (assignments_of)
    _by_name: Optional[Tuple[int, Dict[str, List[Binding]]]] = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.node.name

    def assignments_of(self, attr: str) -> List[Binding]:
        """``attr_assignments`` of ``self.<attr>``, in their order: a table built once per class
        (asking for each attribute of a class with N of them stays linear in N)."""
        if self._by_name is None or self._by_name[0] != len(self.attr_assignments):
            table: Dict[str, List[Binding]] = {}
            for binding in self.attr_assignments:
                table.setdefault(binding.name, []).append(binding)
            self._by_name = (len(self.attr_assignments), table)
        return self._by_name[1].get(attr, [])


def block_chain(index: "Index", stmt: ast.stmt) -> List[Tuple[int, str]]:
    """The nested blocks holding a statement, innermost first, as (owner id, block name)."""
    chain = []
    entry = index.blocks.get(id(stmt))
    while entry is not None:
        owner, name = entry
        chain.append((id(owner), name))
        entry = index.blocks.get(id(owner))
    return chain


def encloses(index: "Index", outer: ast.stmt, stmt: ast.stmt) -> bool:
    """``stmt`` is in the block that holds ``outer`` or in one nested in it: whenever ``stmt``
    runs, that block is running (it is not the other branch of an if)."""
    blocks, inner = block_chain(index, outer), block_chain(index, stmt)
    return len(blocks) <= len(inner) and inner[len(inner) - len(blocks):] == blocks


def class_chain(info: ClassInfo, by_name: Dict[str, ClassInfo]) -> List[ClassInfo]:
    """The class and its bases found in ``by_name`` (the classes of the same file), each once,
    depth first: the order attribute and method lookups walk them."""
    chain: List[ClassInfo] = []
    seen = set()
    stack = [info]
    while stack:
        cls = stack.pop()
        if id(cls) not in seen:
            seen.add(id(cls))
            chain.append(cls)
            stack.extend(by_name[b] for b in cls.bases if b in by_name)
    return chain


@dataclass
class Index:
    module_scope: Scope
    scopes: List[Scope]
    classes: List[ClassInfo]
    calls: List[ast.Call]
    call_scopes: Dict[int, Scope]  # id(call) -> scope
    expr_statements: List[Tuple[ast.Expr, Scope]]
    attribute_stores: List[Tuple[ast.Attribute, ast.expr, ast.stmt, Scope]]  # (target, value, stmt, scope)
    imports: List[ast.stmt]
    blocks: Dict[int, Tuple[ast.stmt, str]] = field(default_factory=dict)  # id(stmt) -> (owner stmt, block name)
    # Statements that never run: (first, last) of the rest of a block after a `raise`, `return`,
    # `continue` or `break` in it (blocks of the module's own body left out: see _walk_body).
    unreachable: List[Tuple[ast.stmt, ast.stmt]] = field(default_factory=list)
    nodes: Optional["NodeTable"] = None  # every node of the tree (the walk the index reads its calls from)


def release(index: Index) -> None:
    """Break the index's reference cycles (a scope and its bindings, a class and its method
    scopes) once a check is over: its objects, and the syntax tree they hold, are then freed at
    once instead of waiting for the cyclic collector, whose passes over tens of thousands of
    them would land in the middle of a later keystroke's analysis."""
    for scope in index.scopes:
        scope.parent = scope.cls = None
        scope.locals, scope.appends, scope.calls, scope.statements, scope.ordered_locals = {}, {}, [], [], {}
    for info in index.classes:
        info.scope = None
        info.methods, info.method_scopes, info.attr_assignments, info._by_name = {}, {}, [], None
    index.scopes, index.classes, index.calls, index.call_scopes = [], [], [], {}
    index.expr_statements, index.attribute_stores, index.imports, index.blocks = [], [], [], {}
    index.unreachable = []
    index.nodes = None


_REGISTER_METHODS = {"register_buffer": "registered_buffers", "register_parameter": "registered_parameters",
                     "register_module": None, "add_module": None}


def build_index(tree: ast.Module, nodes: Optional["NodeTable"] = None) -> Index:
    """The index of ``tree``; ``nodes``, the tree's node table, when the caller has one (its walk
    already found the calls of each statement's expressions: the index walks statements only)."""
    module_scope = Scope(tree, None)
    index = Index(module_scope, [module_scope], [], [], {}, [], [], [])
    index.nodes = nodes if nodes is not None else NodeTable(tree)
    for stmt in tree.body:
        # Not _walk_body: a `raise` in the module's own body is left alone (a reduced tree of
        # torchlint.incremental may not hold it, and each check of a chunk must agree).
        _walk_stmt(stmt, module_scope, index, None)
    return index


NodeT = TypeVar("NodeT", bound=ast.AST)
# The nodes NodeTable.expression_events yields: the calls and `name := value` of a statement.
ExpressionEvent = Union[ast.Call, ast.NamedExpr]

_TERMINATORS = frozenset([ast.Raise, ast.Return, ast.Continue, ast.Break])


def _walk_body(body: List[ast.stmt], scope: Scope, index: Index, cls: Optional[ClassInfo]) -> None:
    for position, stmt in enumerate(body):
        _walk_stmt(stmt, scope, index, cls)
        if stmt.__class__ in _TERMINATORS and position + 1 < len(body):
            # The rest of this block never runs: recorded once, from the first terminator, and
            # still indexed (the rules see it; the engine drops the findings that start in it).
            index.unreachable.append((body[position + 1], body[-1]))
            for rest in body[position + 1:]:
                _walk_stmt(rest, scope, index, cls)
            return


def _walk_stmt(stmt: ast.stmt, scope: Scope, index: Index, cls: Optional[ClassInfo]) -> None:
    nodes = index.nodes
    assert nodes is not None  # set by build_index (release drops it once the check is over)
    if isinstance(stmt, FunctionNode):
        _visit_exprs(nodes.expression_events(stmt), stmt, scope, index)
        # A method's names resolve in the scope around its class, past the class body.
        inner = Scope(stmt, scope.parent if isinstance(scope.node, ast.ClassDef) else scope)
        if cls is not None:
            cls.methods[stmt.name] = stmt
            cls.method_scopes[stmt.name] = inner
            inner.cls = cls
            args = stmt.args.posonlyargs + stmt.args.args
            is_static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in stmt.decorator_list)
            if args and not is_static:
                inner.self_name = args[0].arg
        for arg in stmt.args.posonlyargs + stmt.args.args + stmt.args.kwonlyargs:
            inner.locals.setdefault(arg.arg, []).append(Binding(arg.arg, None, stmt, inner, arg.annotation))
        index.scopes.append(inner)
        _walk_body(stmt.body, inner, index, None)
        return
    if isinstance(stmt, ast.ClassDef):
        _visit_exprs(nodes.expression_events(stmt), stmt, scope, index)
        info = ClassInfo(stmt, scope)
        index.classes.append(info)
        body = Scope(stmt, scope)
        index.scopes.append(body)
        for child in stmt.body:
            _walk_stmt(child, body, index, info)
        return
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        index.imports.append(stmt)
        return

    scope.statements.append(stmt)
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        value = stmt.value
        for target in targets:
            _record_target(target, value if not isinstance(stmt, ast.AugAssign) else None, stmt, scope, index,
                           getattr(stmt, "annotation", None))
    elif isinstance(stmt, (ast.For, ast.AsyncFor)):
        _record_target(stmt.target, None, stmt, scope, index, None, iter_of=stmt.iter)
    elif isinstance(stmt, ast.Expr):
        index.expr_statements.append((stmt, scope))
    elif isinstance(stmt, ast.Delete):
        for target in stmt.targets:
            _record_deletion(target, scope)
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        for item in stmt.items:
            if item.optional_vars is not None:
                _record_target(item.optional_vars, None, stmt, scope, index, None)

    # Expressions of this statement (not its nested blocks).
    _visit_exprs(nodes.expression_events(stmt), stmt, scope, index)
    if stmt.__class__ not in _COMPOUND:
        return  # no nested blocks (most statements)
    blocks = [(getattr(stmt, name, None) or [], name) for name in ("body", "orelse", "finalbody")]
    blocks += [(h.body, "handler%d" % i) for i, h in enumerate(getattr(stmt, "handlers", ()) or ())]
    blocks += [(c.body, "case%d" % i) for i, c in enumerate(getattr(stmt, "cases", ()) or ())]
    for children, name in blocks:
        for child in children:
            index.blocks[id(child)] = (stmt, name)
        _walk_body(children, scope, index, cls)


def _visit_exprs(events: List[ExpressionEvent], stmt: ast.stmt, scope: Scope, index: Index) -> None:
    """Record the calls and ``name := value`` bindings of a statement's expressions, in the order
    of ``NodeTable.expression_events``."""
    for node in events:
        if isinstance(node, ast.Call):
            index.calls.append(node)
            index.call_scopes[id(node)] = scope
            scope.calls.append(node)
            _record_registration(node, scope)  # also inside expressions: orig = self._parameters.pop("w")
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "append" and len(node.args) == 1:
                key = dotted_name(func.value)
                if key is not None:
                    scope.appends.setdefault(key, []).append(node)
        elif isinstance(node.target, ast.Name):  # an ast.NamedExpr
            scope.locals.setdefault(node.target.id, []).append(Binding(node.target.id, node.value, stmt, scope))


def _record_target(target: ast.expr, value: Optional[ast.expr], stmt: ast.stmt, scope: Scope, index: Index,
                   annotation: Optional[ast.expr], iter_of: Optional[ast.expr] = None,
                   unpack_index: Optional[int] = None) -> None:
    if isinstance(target, ast.Name):
        scope.locals.setdefault(target.id, []).append(
            Binding(target.id, value, stmt, scope, annotation, iter_of, unpack_index))
    elif isinstance(target, (ast.Tuple, ast.List)):
        for position, elt in enumerate(target.elts):
            # Unpacking: the value of each element is unknown to a syntactic pass.
            _record_target(elt.value if isinstance(elt, ast.Starred) else elt, None, stmt, scope, index, None,
                           iter_of, position)
    elif isinstance(target, ast.Attribute):
        if value is not None:
            index.attribute_stores.append((target, value, stmt, scope))
        owner = _method_owner(scope)
        if owner is not None and scope.is_self(target.value):
            owner.attr_assignments.append(Binding(target.attr, value, stmt, scope, annotation))
            if isinstance(stmt, ast.AugAssign):
                return
    elif isinstance(target, ast.Subscript):
        # self.__dict__["x"] = ... is a deliberate bypass; self._parameters["x"] = p registers.
        owner = _method_owner(scope)
        if owner is not None and isinstance(target.value, ast.Attribute) and scope.is_self(target.value.value):
            key = _string(target.slice)
            if key and target.value.attr in ("_parameters", "_buffers", "_modules"):
                owner.registered[key] = stmt
                if target.value.attr == "_parameters":
                    owner.registered_parameters[key] = stmt
                elif target.value.attr == "_buffers":
                    owner.registered_buffers[key] = stmt


def _method_owner(scope: Scope) -> Optional[ClassInfo]:
    return scope.cls if scope.self_name else None


def _record_registration(call: ast.AST, scope: Scope) -> None:
    """self.register_buffer("x", ...) / self._parameters.pop("x") / delattr(self, "x")."""
    owner = _method_owner(scope)
    if owner is None or not isinstance(call, ast.Call) or not call.args:
        return
    func = call.func
    key = _string(call.args[0]) if call.args else None
    if isinstance(func, ast.Attribute) and scope.is_self(func.value) and key:
        if func.attr in _REGISTER_METHODS:
            owner.registered[key] = call
            kind = _REGISTER_METHODS[func.attr]
            if kind:
                getattr(owner, kind)[key] = call
    elif (isinstance(func, ast.Attribute) and func.attr == "pop" and isinstance(func.value, ast.Attribute)
          and func.value.attr in ("_parameters", "_buffers") and scope.is_self(func.value.value) and key):
        owner.unregistered.add(key)
    elif isinstance(func, ast.Name) and func.id == "delattr" and len(call.args) == 2 and scope.is_self(call.args[0]):
        name = _string(call.args[1])
        if name:
            owner.unregistered.add(name)


def _record_deletion(target: ast.AST, scope: Scope) -> None:
    owner = _method_owner(scope)
    if owner is None:
        return
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Attribute) \
            and target.value.attr in ("_parameters", "_buffers") and scope.is_self(target.value.value):
        key = _string(target.slice)
        if key:
            owner.unregistered.add(key)
    elif isinstance(target, ast.Attribute) and scope.is_self(target.value):
        owner.unregistered.add(target.attr)


def called_method(call: ast.Call) -> ast.Attribute:
    """The ``<receiver>.<method>`` that a call known to call a method calls."""
    return cast(ast.Attribute, call.func)


def dotted_name(node: ast.AST) -> Optional[str]:
    """``a.b.c`` as text, or None for anything that is not a plain dotted name."""
    if isinstance(node, ast.Name):
        return node.id  # the commonest case, without building a list
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id + "." + node.attr
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _string(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


# -- every node, from one walk -------------------------------------------------------------------
# Fields that hold no node of the tree's own: the shared Load/Store/Del and operator markers.
# Fields that never hold a child node, or hold the markers above, skipped without a look.
_NOT_CHILDREN = frozenset("""
ctx op ops id attr arg name module level kind type_comment is_async conversion simple tag
""".split())
_child_fields: Dict[Type[ast.AST], Tuple[str, ...]] = {}


def child_fields(cls: Type[ast.AST]) -> Tuple[str, ...]:
    """The fields of a node class that may hold child nodes, in ``_fields`` order (the order
    ``ast.iter_child_nodes`` yields them), once per class."""
    fields = _child_fields.get(cls)
    if fields is None:
        if cls is ast.Constant:
            fields = ()  # its value is a Python object, never a node
        else:
            fields = tuple(f for f in cls._fields if f not in _NOT_CHILDREN)
        _child_fields[cls] = fields
    return fields


# What the walk of NodeTable does at a node of each class (see _node_kind).
_PLAIN, _MODULE, _FUNCTION, _CLASS, _LAMBDA, _STATEMENT, _IMPORT, _ARGUMENTS = range(8)
_BLOCK_FIELDS = frozenset(["body", "orelse", "finalbody", "handlers", "cases"])
_node_kinds: Dict[type, int] = {}


def _node_kind(cls: type) -> int:
    kind = _node_kinds.get(cls)
    if kind is None:
        if cls is ast.Module:
            kind = _MODULE
        elif cls in FunctionNode:
            kind = _FUNCTION
        elif cls is ast.ClassDef:
            kind = _CLASS
        elif cls is ast.Lambda:
            kind = _LAMBDA
        elif cls in (ast.Import, ast.ImportFrom):
            kind = _IMPORT
        elif issubclass(cls, ast.stmt):
            kind = _STATEMENT
        elif cls is ast.arguments:
            kind = _ARGUMENTS
        else:
            kind = _PLAIN
        _node_kinds[cls] = kind
    return kind


def nodes_by_type(tree: ast.AST) -> Dict[type, List[ast.AST]]:
    """Every node of ``tree`` (itself included, the Load/Store/operator markers left out) by its
    class, each list in ``ast.walk``'s order: for a tree walked once for a few kinds of node,
    cheaper than ``ast.walk`` (no generator per node; benchmarks/README.md#tuned-constants). See
    NodeTable for more per node."""
    by_type: Dict[type, List[ast.AST]] = {}
    todo = collections.deque([tree])
    popleft, push, fields_of = todo.popleft, todo.append, _child_fields
    while todo:
        node = popleft()
        cls = node.__class__
        found = by_type.get(cls)
        if found is None:
            found = by_type[cls] = []
        found.append(node)
        fields = fields_of.get(cls) or child_fields(cls)
        for field in fields:
            child = getattr(node, field, None)
            if child.__class__ is list:
                for item in child:
                    if isinstance(item, ast.AST):
                        push(item)
            elif isinstance(child, ast.AST):
                push(child)
    return by_type


class NodeTable:
    """Every node of a file, from one walk: its parent, its depth, the function or class whose
    own code holds it, and the nodes of each class in the walk's order. A rule asking what a
    function or class holds (its ``self.x`` reads, its calls, its strings) reads a slice of these
    lists instead of walking the subtree again, so asking for every class and method stays linear.

    The walk is depth first, from a node's last child to its first (as a stack walk that pushes
    the children in order meets them): a subtree is one slice of the lists. The same walk
    collects, per statement, the calls and ``:=`` of its own expressions, in the order the
    index records them (``expression_events``).

    The markers ``ast.walk`` also yields (``Load``, ``Store``, operators) are left out: they are
    shared by the whole tree, so no node is their one parent.
    """

    def __init__(self, tree: ast.Module) -> None:
        nodes: List[ast.AST] = []
        depths: List[int] = []
        owners: List[Optional[ast.AST]] = []
        parent: Dict[int, ast.AST] = {}
        by_type: Dict[type, List[int]] = {}
        spans: Dict[int, Tuple[int, int]] = {}  # id(module, function, class, lambda) -> its subtree
        open_spans: List[Tuple[int, int, ast.AST]] = []  # (depth, start, node) of those whose subtree is being walked
        # id(statement) -> lists that collect the calls and `:=` of its expressions, in the order
        # the index records them; `slot` below is the list a node's calls go to (None: not recorded).
        events: Dict[int, List[List[ExpressionEvent]]] = {}
        fields_of, kinds = _child_fields, _node_kinds
        # (node, depth, owner, slot); a slot is a list, None, or a function's (defaults, kw_defaults)
        stack: List[Tuple[ast.AST, int, Optional[ast.AST], Any]] = [(tree, 0, tree, None)]
        pop, push = stack.pop, stack.append
        call, named = ast.Call, ast.NamedExpr
        while stack:
            node, depth, owner, slot = pop()
            cls = node.__class__
            position = len(nodes)
            while open_spans and open_spans[-1][0] >= depth:  # depth first: their subtrees are done
                _, start, done = open_spans.pop()
                spans[id(done)] = (start, position)
            nodes.append(node)
            depths.append(depth)
            owners.append(owner)
            indexes = by_type.get(cls)
            if indexes is None:
                indexes = by_type[cls] = []
            indexes.append(position)
            if slot is not None and (cls is call or cls is named):
                slot.append(node)
            fields = fields_of.get(cls)
            if fields is None:
                fields = child_fields(cls)
            elif not fields:
                continue  # a name, a constant: a leaf
            kind = kinds.get(cls)
            if kind is None:
                kind = _node_kind(cls)
            depth += 1
            if kind == _PLAIN:
                for name in fields:
                    value = getattr(node, name, None)
                    if value.__class__ is list:
                        for child in value:
                            if isinstance(child, ast.AST):
                                parent[id(child)] = node
                                push((child, depth, owner, slot))
                    elif isinstance(value, ast.AST):
                        parent[id(value)] = node
                        push((value, depth, owner, slot))
                continue
            if kind == _STATEMENT:
                # The index reads each field's expressions in turn; a list's items last first.
                lists = events[id(node)] = []
                for name in fields:
                    value = getattr(node, name, None)
                    if name in _BLOCK_FIELDS:
                        child_slot: Optional[List[ExpressionEvent]] = None
                    elif value is None:
                        continue
                    else:
                        child_slot = []
                        lists.append(child_slot)
                    if value.__class__ is list:
                        for child in value:
                            if isinstance(child, ast.AST):
                                parent[id(child)] = node
                                push((child, depth, owner, child_slot))
                    elif isinstance(value, ast.AST):
                        parent[id(value)] = node
                        push((value, depth, owner, child_slot))
                continue
            slots: Dict[str, Any] = {}  # field -> its slot
            if kind in (_MODULE, _FUNCTION, _CLASS, _LAMBDA):
                open_spans.append((depth - 1, position, node))
            if kind == _FUNCTION:
                # Its decorators and defaults, read by the index as one list: keyword-only
                # defaults, then defaults, then decorators, each last first.
                decorators: List[ExpressionEvent] = []
                defaults: List[ExpressionEvent] = []
                kw_defaults: List[ExpressionEvent] = []
                events[id(node)] = [kw_defaults, defaults, decorators]
                slots = {"decorator_list": decorators, "args": (defaults, kw_defaults)}
            elif kind == _CLASS:
                shared: List[ExpressionEvent] = []  # decorators, keywords, bases: one list, last first
                events[id(node)] = [shared]
                slots = {"decorator_list": shared, "keywords": shared, "bases": shared}
            elif kind == _ARGUMENTS and slot is not None:
                defaults, kw_defaults = slot  # a function's (not a lambda's): only its defaults
                slots = {"defaults": defaults, "kw_defaults": kw_defaults}
            # A function's or class's body is its own code; its decorators, defaults and bases
            # are in no one's own code, nor is a lambda's body (a walk of a function's own code
            # stops at the functions, classes and lambdas inside it).
            inner = node if kind in (_MODULE, _FUNCTION, _CLASS) else None
            for name in fields:
                value = getattr(node, name, None)
                child_owner = inner if name == "body" else None if kind != _ARGUMENTS else owner
                child_slot = slots.get(name)
                if value.__class__ is list:
                    for child in value:
                        if isinstance(child, ast.AST):
                            parent[id(child)] = node
                            push((child, depth, child_owner, child_slot))
                elif isinstance(value, ast.AST):
                    parent[id(value)] = node
                    push((value, depth, child_owner, child_slot))
        for _, start, done in open_spans:
            spans[id(done)] = (start, len(nodes))
        self.nodes = nodes
        self.depths = depths
        self.owners = owners
        self.parent = parent
        self._by_type = by_type
        self._spans = spans
        self._events = events
        self._own_loads: Dict[int, Dict[str, List[ast.Name]]] = {}
        self._attributes_by_name: Dict[int, Dict[str, List[int]]] = {}  # id(root) -> attr -> positions

    def expression_events(self, stmt: ast.stmt) -> List[ExpressionEvent]:
        """The calls and ``name := value`` in a statement's own expressions (not its nested blocks,
        lambdas, annotations of its parameters, ``except`` types or ``case`` patterns), in the
        order the index records them: its fields in turn, each from its last node to its first;
        for a function, its keyword-only defaults, defaults and decorators; for a class, its
        decorators, keywords and bases."""
        lists = self._events.get(id(stmt), ())
        if len(lists) == 1:
            return lists[0]
        return [node for events in lists for node in events]

    def positions_under(self, root: ast.AST, cls: type) -> List[int]:
        """The positions of the ``cls`` nodes in ``root``'s subtree (``root`` included), in the
        walk's order. ``root`` is the module, a function, a class or a lambda."""
        start, end = self._spans[id(root)]
        indexes = self._by_type.get(cls, [])
        return indexes[bisect_left(indexes, start):bisect_left(indexes, end)]

    def attributes_named(self, root: ast.AST, attr: str) -> List[int]:
        """The positions of the ``<expr>.attr`` nodes in ``root``'s subtree, in the walk's order:
        a table per root built once (asking for each of N names stays linear)."""
        table = self._attributes_by_name.get(id(root))
        if table is None:
            table = self._attributes_by_name[id(root)] = {}
            nodes = self.nodes
            for position in self.positions_under(root, ast.Attribute):
                table.setdefault(cast(ast.Attribute, nodes[position]).attr, []).append(position)
        return table.get(attr, [])

    def positions_of(self, cls: type) -> List[int]:
        """The positions of every ``cls`` node of the file, in the walk's order."""
        return self._by_type.get(cls, [])

    def under(self, root: ast.AST, cls: Type[NodeT]) -> List[NodeT]:
        """The nodes of class ``cls`` in ``root``'s subtree, in the walk's order: the ones
        ``ast.walk(root)`` yields, in another order."""
        nodes = cast(List[NodeT], self.nodes)  # those at these positions are of class ``cls``
        return [nodes[i] for i in self.positions_under(root, cls)]

    def in_walk_order(self, positions: Iterable[int]) -> List[ast.AST]:
        """The nodes at these positions in the order ``ast.walk`` visits them: breadth first, then
        first child to last (within one depth, the walk meets them the other way round)."""
        depths, nodes = self.depths, self.nodes
        return [nodes[i] for i in sorted(positions, key=lambda i: (depths[i], -i))]

    def own(self, scope_node: ast.AST, cls: Type[NodeT]) -> List[NodeT]:
        """The nodes of class ``cls`` in the own code of a function, class or module (its body,
        not the functions, classes and lambdas inside it), in the order a stack walk of its body
        meets them (the walk's order)."""
        owners, nodes = self.owners, cast(List[NodeT], self.nodes)  # (as in ``under``)
        return [nodes[i] for i in self.positions_under(scope_node, cls) if owners[i] is scope_node]

    def of_type(self, cls: Type[NodeT]) -> List[NodeT]:
        """Every node of class ``cls`` in the file, in the walk's order."""
        nodes = cast(List[NodeT], self.nodes)  # (as in ``under``)
        return [nodes[i] for i in self._by_type.get(cls, [])]

    def own_loads(self, scope_node: ast.AST, name: str) -> List[ast.Name]:
        """The reads of ``name`` in the own code of a function, class or module, in the order a
        stack walk from its last statement meets them (the last read first); one table per scope."""
        loads = self._own_loads.get(id(scope_node))
        if loads is None:
            loads = self._own_loads[id(scope_node)] = {}
            for node in self.own(scope_node, ast.Name):
                if isinstance(node.ctx, ast.Load):
                    loads.setdefault(node.id, []).append(node)
        return loads.get(name, [])
