"""TL102 unregistered-container: a plain list/tuple/dict of modules or parameters on a Module."""
from __future__ import annotations

import ast

from ..analysis.findings import Severity
from ..analysis.scopes import dotted_name
from ..analysis.values import CONTAINER_KINDS, Kind
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
    value = ctx.classify(binding.value, init)
    if value.kind in CONTAINER_KINDS:
        return value
    if value.kind is Kind.OTHER and value.empty and isinstance(binding.value, (ast.List, ast.Dict)):
        # self.layers = [] ... self.layers.append(nn.Linear(...)) in a loop
        appended = init.appends.get("%s.%s" % (init.self_name, binding.name), ())
        kinds = {ctx.classify(call.args[0], init).kind for call in appended}
        if kinds == {Kind.MODULE} and all(isinstance(c.args[0], ast.Call) for c in appended):
            return value.__class__(Kind.MODULE_LIST, empty=True)
        if kinds == {Kind.PARAMETER}:
            return value.__class__(Kind.PARAMETER_LIST, empty=True)
    return None


def _registered_later(ctx, binding, init) -> bool:
    """`self.blocks = nn.ModuleList(self.blocks)`, or the same objects handed to a registered container."""
    own = "%s.%s" % (init.self_name, binding.name)
    source_name = binding.value.id if isinstance(binding.value, ast.Name) else None
    for other in init.cls.attr_assignments:
        if other.scope is init and other is not binding and other.name == binding.name and other.value is not None:
            if ctx.classify(other.value, init).kind is Kind.MODULE:
                return True
    for call in ctx.index.calls:
        if ctx.index.call_scopes.get(id(call)) is not init:
            continue
        if isinstance(call.func, ast.Attribute) and call.func.attr in ("add_module", "register_module") \
                or isinstance(call.func, ast.Name) and call.func.id == "setattr":
            return True  # modules registered one by one (often in a loop over the list): say nothing
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


def _hidden_on_purpose(ctx, binding) -> bool:
    """A one-element list with a comment: the known idiom for keeping a module out of parameters()."""
    value = binding.value
    if not (isinstance(value, ast.List) and len(value.elts) == 1):
        return False
    if not isinstance(value.elts[0], ast.Call):
        return True  # [existing_module]: a reference, not a new layer
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
    if value.empty and isinstance(node, (ast.List, ast.Dict)):
        edits = [ctx.replace(node, wrapper + "()")]
    elif isinstance(node, ast.Tuple) and not _parenthesised(ctx, node):
        edits = ctx.wrap(node, wrapper + "((", "))")
    else:
        edits = ctx.wrap(node, wrapper + "(", ")")
    fix = ctx.fix("Wrap in `%s`" % wrapper, edits + [import_edit], safe=False, preferred=True)
    return ctx.finding("TL102", message, binding.stmt, Severity.WARNING, [fix])


def _parenthesised(ctx, node) -> bool:
    return ctx.text(node).startswith("(")
