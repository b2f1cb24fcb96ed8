"""TL102 unregistered-container: a plain list/tuple/dict of modules or parameters on a Module."""
from __future__ import annotations

import ast

from ..analysis.findings import Severity
from ..analysis.scopes import dotted_name
from ..analysis.values import CONTAINER_KINDS, Kind, Value
from .base import Rule

_WRAPPERS = {
    Kind.MODULE_LIST: "torch.nn.ModuleList",
    Kind.MODULE_DICT: "torch.nn.ModuleDict",
    Kind.PARAMETER_LIST: "torch.nn.ParameterList",
    Kind.PARAMETER_DICT: "torch.nn.ParameterDict",
}
_WHAT = {
    Kind.MODULE_LIST: "list of modules",
    Kind.MODULE_DICT: "dict of modules",
    Kind.PARAMETER_LIST: "list of parameters",
    Kind.PARAMETER_DICT: "dict of parameters",
}


class UnregisteredContainer(Rule):
    code = "TL102"
    name = "unregistered-container"
    summary = "plain list/tuple/dict of modules or parameters on a Module: invisible to parameters() and .to()"
    severity = Severity.WARNING

    def check(self, ctx):
        for cls in ctx.module_classes:
            init = cls.method_scopes.get("__init__")
            if init is None:
                continue
            registered = ctx.registered_names(cls)
            for binding in cls.attr_assignments:
                if binding.scope is not init or binding.value is None or binding.name in registered:
                    continue
                value = _container_value(ctx, binding, init)
                if value is None or _registered_later(ctx, binding, init) or _hidden_on_purpose(ctx, binding):
                    continue
                yield _finding(ctx, binding, value)


def _container_value(ctx, binding, init):
    node = binding.value
    value = ctx.classify(node, init)
    if value.kind in CONTAINER_KINDS:
        return value
    if value.kind is Kind.OTHER and value.empty and isinstance(node, (ast.List, ast.Dict)):
        # self.layers = [] ... self.layers.append(nn.Linear(...)) in a loop; self.heads = {} ...
        # self.heads[name] = nn.Linear(...)
        own = "%s.%s" % (init.self_name, binding.name)
        added = [call.args[0] for call in init.appends.get(own, ())] + _items_set(init, own)
        kinds = {_new_object(ctx, item, init) for item in added}
        dict_like = isinstance(node, ast.Dict)
        if kinds == {Kind.MODULE}:
            return Value(Kind.MODULE_DICT if dict_like else Kind.MODULE_LIST, empty=True)
        if kinds == {Kind.PARAMETER}:
            return Value(Kind.PARAMETER_DICT if dict_like else Kind.PARAMETER_LIST, empty=True)
    repeated = _repeated(node)
    if repeated is not None and ctx.classify(repeated, init).kind is Kind.MODULE_LIST:
        return Value(Kind.MODULE_LIST)  # n * [nn.Linear(...)]: one layer, n times
    if _nested(ctx, node, init):
        return _NESTED
    return None


_NESTED = Value(Kind.MODULE_LIST, module_class="<nested lists>")  # a list of lists of modules


def _items_set(init, own: str):
    """Values of `self.heads[key] = value` in __init__ (loops included)."""
    values = []
    for stmt in init.statements:
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Subscript) and dotted_name(target.value) == own:
                    values.append(stmt.value)
    return values


def _new_object(ctx, node, init):
    """The kind of a new module or parameter put into a container: a call building one, or a local
    name every assignment of which builds one (`layer = nn.Linear(...)`, then `append(layer)`)."""
    if isinstance(node, ast.Call):
        return ctx.classify(node, init).kind
    if isinstance(node, ast.Name):
        bindings = init.locals.get(node.id, ())
        if bindings and all(isinstance(b.value, ast.Call) for b in bindings):
            kinds = {ctx.classify(b.value, init).kind for b in bindings}
            return kinds.pop() if len(kinds) == 1 else Kind.UNKNOWN
    return Kind.UNKNOWN


def _repeated(node):
    """`n * [x]` / `[x] * n`: the list."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for side in (node.left, node.right):
            if isinstance(side, ast.List):
                return side
    return None


def _nested(ctx, node, init) -> bool:
    """A list (or comprehension) of lists of new modules: `[[nn.Linear(...) for _ in r] for _ in r]`."""
    if isinstance(node, ast.ListComp):
        inner = [node.elt]
    elif isinstance(node, (ast.List, ast.Tuple)) and node.elts:
        inner = node.elts
    else:
        return False
    return all(isinstance(elt, (ast.List, ast.ListComp)) and ctx.classify(elt, init).kind is Kind.MODULE_LIST
               for elt in inner)


def _registered_later(ctx, binding, init) -> bool:
    """`self.blocks = nn.ModuleList(self.blocks)`, or the same objects handed to a registered container."""
    own = "%s.%s" % (init.self_name, binding.name)
    source_name = binding.value.id if isinstance(binding.value, ast.Name) else None
    for other in init.cls.attr_assignments:
        if other.scope is init and other is not binding and other.name == binding.name and other.value is not None:
            if ctx.classify(other.value, init).kind is Kind.MODULE:
                return True
    for call in init.calls:
        if isinstance(call.func, ast.Attribute) and call.func.attr in ("add_module", "register_module") \
                or isinstance(call.func, ast.Name) and call.func.id == "setattr":
            if _registers_members(ctx, call, init, own, source_name):
                return True  # this container's modules registered one by one: say nothing
            continue
        qualified = ctx.qualify(call.func) or ""
        registers = qualified.startswith("torch.nn.") or (
            isinstance(call.func, ast.Attribute) and call.func.attr == "extend")
        if not registers:
            continue
        for arg in list(call.args) + [k.value for k in call.keywords]:
            inner = arg.value if isinstance(arg, ast.Starred) else arg
            if dotted_name(inner) == own or (source_name and isinstance(inner, ast.Name) and inner.id == source_name):
                return True
    return False


def _registers_members(ctx, call, init, own: str, source_name) -> bool:
    """`self.add_module(name, m)` / `setattr(self, name, m)` registers what the container holds: `m`
    reads the container (`self.layers[i]`), is a loop variable over it, or is appended to it."""
    args = call.args[1:] if isinstance(call.func, ast.Attribute) else call.args[2:]
    if not args:
        return False
    module = args[0]
    names = {n.id for n in ast.walk(module) if isinstance(n, ast.Name)}
    if any(dotted_name(n) == own for n in ast.walk(module)) or (source_name and source_name in names):
        return True
    appended = {a.id for c in init.appends.get(own, ()) for a in c.args if isinstance(a, ast.Name)}
    if names & appended:
        return True
    for name in names:
        for binding in init.locals.get(name, ()):
            loop = binding.iter_of
            if loop is not None and any(dotted_name(n) == own or (source_name and isinstance(n, ast.Name)
                                                                  and n.id == source_name)
                                        for n in ast.walk(loop)):
                return True
    return False


def _hidden_on_purpose(ctx, binding) -> bool:
    """A one-element list with a comment: the known idiom for keeping a module out of parameters()."""
    value = binding.value
    if not (isinstance(value, ast.List) and len(value.elts) == 1):
        return False
    if not isinstance(value.elts[0], ast.Call):
        return True  # [existing_module]: a reference, not a new layer
    own = "%s.%s" % (binding.scope.self_name, binding.name)
    if binding.scope.appends.get(own):
        return False  # appended to later: a container of layers, not one module kept out of sight
    stmt = binding.stmt
    lines = [ctx.source.line(n) for n in range(stmt.lineno, stmt.end_lineno + 1)]
    if stmt.lineno > 1:
        lines.append(ctx.source.line(stmt.lineno - 1))
    return any("#" in line for line in lines)


def _finding(ctx, binding, value):
    target = "%s.%s" % (binding.scope.self_name, binding.name)
    wrapper, import_edit = ctx.spell(_WRAPPERS[value.kind])
    what = _WHAT[value.kind]
    if value.kind in (Kind.MODULE_LIST, Kind.MODULE_DICT):
        message = ("`%s` is a plain %s: their parameters are not in parameters() (the optimizer never sees "
                   "them), not in state_dict(), and .to()/.cuda() do not move them" % (target, what))
    else:
        message = ("`%s` is a plain %s: they are not registered, so the optimizer never sees them and "
                   "state_dict() does not save them" % (target, what))
    node = binding.value
    if value is _NESTED:
        # nn.ModuleList takes modules, not lists: each inner list becomes a ModuleList too.
        edits = ctx.wrap(node, "%s(%s(row) for row in " % (wrapper, wrapper), ")")
    elif value.empty and isinstance(node, (ast.List, ast.Dict)):
        edits = [ctx.replace(node, wrapper + "()")]
    elif isinstance(node, ast.Tuple) and not _parenthesised(ctx, node):
        edits = ctx.wrap(node, wrapper + "((", "))")
    else:
        edits = ctx.wrap(node, wrapper + "(", ")")
    fix = ctx.fix("Wrap in `%s`" % wrapper, edits + [import_edit], safe=False, preferred=True)
    return ctx.finding("TL102", message, binding.stmt, Severity.WARNING, [fix])


def _parenthesised(ctx, node) -> bool:
    return ctx.text(node).startswith("(")
