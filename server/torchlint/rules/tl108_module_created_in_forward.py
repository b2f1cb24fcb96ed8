"""TL108 module-created-in-forward: a layer or nn.Parameter made in forward (or a method it
calls) and stored on the module: an optimizer built before the first batch never updates it."""
from __future__ import annotations

import ast
from typing import Iterator, List, Optional, Tuple, cast

from ..analysis.context import FileContext
from ..analysis.findings import Edit, Finding, Fix, Position, Range, Severity
from ..analysis.forward import may_hold_parameters
from ..analysis.scopes import ClassInfo, Scope
from ..analysis.source import last_line
from ..analysis.values import Kind, Value
from .base import Rule, shorten

# Layers whose first argument is the input's width, and the lazy layer that infers it.
_LAZY = {
    "torch.nn.Linear": ("torch.nn.LazyLinear", "in_features"),
    "torch.nn.Conv1d": ("torch.nn.LazyConv1d", "in_channels"),
    "torch.nn.Conv2d": ("torch.nn.LazyConv2d", "in_channels"),
    "torch.nn.Conv3d": ("torch.nn.LazyConv3d", "in_channels"),
    "torch.nn.ConvTranspose1d": ("torch.nn.LazyConvTranspose1d", "in_channels"),
    "torch.nn.ConvTranspose2d": ("torch.nn.LazyConvTranspose2d", "in_channels"),
    "torch.nn.ConvTranspose3d": ("torch.nn.LazyConvTranspose3d", "in_channels"),
    "torch.nn.BatchNorm1d": ("torch.nn.LazyBatchNorm1d", "num_features"),
    "torch.nn.BatchNorm2d": ("torch.nn.LazyBatchNorm2d", "num_features"),
    "torch.nn.BatchNorm3d": ("torch.nn.LazyBatchNorm3d", "num_features"),
    "torch.nn.InstanceNorm1d": ("torch.nn.LazyInstanceNorm1d", "num_features"),
    "torch.nn.InstanceNorm2d": ("torch.nn.LazyInstanceNorm2d", "num_features"),
    "torch.nn.InstanceNorm3d": ("torch.nn.LazyInstanceNorm3d", "num_features"),
}
_REGISTER = frozenset(["register_parameter", "add_module", "register_module"])


class ModuleCreatedInForward(Rule):
    code = "TL108"
    name = "module-created-in-forward"
    summary = ("`self.head = nn.Linear(...)` / `nn.Parameter(...)` made in forward: an optimizer built before the "
               "first batch never updates it")
    severity = Severity.ERROR

    def find(self, ctx: FileContext) -> Iterator[Finding]:
        seen = set()
        for cls in ctx.module_classes:
            reached = ctx.forward_reach(cls)
            if reached is None:
                continue
            for method, scope in reached.methods.items():
                if method == "__init__" or scope.self_name is None:
                    continue
                for stmt in scope.statements:
                    if id(stmt) in seen:
                        continue
                    made = _creation(ctx, scope, stmt)
                    if made is None:
                        continue
                    seen.add(id(stmt))
                    yield _finding(ctx, cls, method, scope, stmt, *made)


def _creation(ctx: FileContext, scope: Scope, stmt: ast.stmt) -> Optional[Tuple[str, ast.expr, ast.Call, Value]]:
    """(attribute, the node to report, the constructor call, its Value) when the statement stores a
    new layer that holds parameters, or a new nn.Parameter, on self."""
    node: ast.expr
    value: Optional[ast.expr]
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if len(targets) != 1 or not isinstance(targets[0], ast.Attribute) or not scope.is_self(targets[0].value):
            return None
        name, node, value = targets[0].attr, targets[0], stmt.value
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr in _REGISTER and scope.is_self(func.value)
                and len(call.args) == 2 and isinstance(call.args[0], ast.Constant)
                and isinstance(call.args[0].value, str)):
            return None
        name, node, value = call.args[0].value, call, call.args[1]
    else:
        return None
    if not isinstance(value, ast.Call):
        return None  # an existing object (self.heads[i], a module handed in): nothing new
    found = ctx.classify(value, scope)
    if found.kind is Kind.PARAMETER or (found.kind is Kind.MODULE and may_hold_parameters(ctx, found.module_class)):
        return name, node, value, found
    return None


def _guard(ctx: FileContext, scope: Scope, stmt: ast.stmt, name: str) -> Optional[ast.If]:
    """The `if self.<name> is None:` (or `not hasattr(self, "name")`, `not self.<name>`) whose body
    makes it: it runs on the first call only."""
    parent = ctx.parent(stmt)
    if not isinstance(parent, ast.If) or stmt not in parent.body:
        return None
    test = parent.test
    if isinstance(test, ast.BoolOp):
        tests = test.values
    else:
        tests = [test]
    for part in tests:
        if isinstance(part, ast.Compare) and len(part.ops) == 1 and isinstance(part.ops[0], ast.Is) \
                and (_is_attr(scope, part.left, name) or _getattr(scope, part.left, name)) \
                and isinstance(part.comparators[0], ast.Constant) and part.comparators[0].value is None:
            return parent
        if isinstance(part, ast.UnaryOp) and isinstance(part.op, ast.Not):
            operand = part.operand
            if _is_attr(scope, operand, name):
                return parent
            if isinstance(operand, ast.Call) and isinstance(operand.func, ast.Name) and operand.func.id == "hasattr" \
                    and len(operand.args) == 2 and isinstance(operand.args[1], ast.Constant) \
                    and operand.args[1].value == name:
                return parent
    return None


def _getattr(scope: Scope, node: ast.expr, name: str) -> bool:
    """`getattr(self, "name", None)`."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
        and len(node.args) >= 2 and scope.is_self(node.args[0]) and isinstance(node.args[1], ast.Constant) \
        and node.args[1].value == name


def _is_attr(scope: Scope, node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == name and scope.is_self(node.value)


def _finding(ctx: FileContext, cls: ClassInfo, method: str, scope: Scope, stmt: ast.stmt, name: str, node: ast.expr,
             call: ast.Call, value: Value) -> Finding:
    guard = _guard(ctx, scope, stmt, name)
    where = "forward" if method == "forward" else "`%s()` (which forward calls)" % method
    when = "on the first call" if guard is not None else "on every call"
    made = shorten(ctx.text(call), 40)
    if value.kind is Kind.PARAMETER:
        what = "a new nn.Parameter `%s` %s" % (made, when)
    else:
        what = "a layer with parameters (`%s`) %s" % (made, when)
    message = ("`%s.%s` is made in %s: %s, after an optimizer built from model.parameters() took its list, so "
               "it never updates it; DistributedDataParallel, .to(device) and checkpoints taken before then miss "
               "it too" % (scope.self_name, name, where, what))
    fix, reason = _move_to_init(ctx, cls, scope, stmt, name, call, value, guard)
    if fix is None:
        message += " (no fix: %s)" % reason
        return ctx.finding(message, node)
    return ctx.finding(message, node, (fix,))


def _reads(call: ast.Call) -> Tuple[List[ast.Name], List[ast.Attribute]]:
    """The plain names and the `<name>.<attr>` reads of a constructor call's arguments."""
    names, attributes = [], []
    for argument in list(call.args) + [k.value for k in call.keywords]:
        for node in ast.walk(argument):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                names.append(node)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                attributes.append(node)
    return names, attributes


def _move_to_init(ctx: FileContext, cls: ClassInfo, scope: Scope, stmt: ast.stmt, name: str, call: ast.Call,
                  value: Value, guard: Optional[ast.If]) -> Tuple[Optional[Fix], Optional[str]]:
    """(a fix that builds it at the end of __init__ and drops it from forward, None) or (None, why not)."""
    init = cls.method_scopes.get("__init__")
    if init is None or init.self_name is None:
        return None, "the class has no __init__ of its own in this file to build it in"
    if not ctx.stands_alone(stmt) or (guard is not None and (guard.orelse or not ctx.stands_alone(guard))):
        return None, "the statement shares its lines with other code"
    names, attributes = _reads(call)
    own = [a for a in attributes if cast(ast.Name, a.value).id == scope.self_name]
    if any(a.attr == name for a in own):
        return None, ("it is made from its own previous value on each call: update it in place instead "
                      "(with torch.no_grad(): %s.%s.copy_(...))" % (scope.self_name, name))
    in_init = {b.name for info in ctx.class_chain(cls) for b in info.attr_assignments
               if b.scope.name == "__init__"}
    missing = sorted({a.attr for a in own if a.attr not in in_init})
    if missing:
        return None, "its arguments read %s, which __init__ does not set" % ", ".join(
            "%s.%s" % (scope.self_name, m) for m in missing)
    local = [n for n in names if n.id in scope.locals and n.id != scope.self_name]
    text = ctx.text(call)
    import_edit: Optional[Edit] = None
    if local:
        lazy = _lazy_call(ctx, call, value, scope)
        if lazy is None:
            return None, ("its arguments come from forward's own values (%s): build it in __init__ from the "
                          "sizes the constructor knows" % ", ".join(sorted({n.id for n in local})))
        text, import_edit = lazy
    if init.self_name != scope.self_name:
        return None, "__init__ and %s name self differently" % scope.name
    body = init.node.body
    last = body[-1]
    indent = ctx.indent(body[0])
    newline = ctx.source.newline()
    if isinstance(stmt, ast.Expr):  # self.register_parameter("w", nn.Parameter(...))
        registration = cast(ast.Call, stmt.value)
        func = cast(ast.Attribute, registration.func)
        moved = "%s.%s(%s, %s)" % (init.self_name, func.attr, ctx.text(registration.args[0]), text)
    else:
        moved = "%s.%s = %s" % (init.self_name, name, text)
    end = Position(last_line(last), len(ctx.source.line(last_line(last))))
    edits = [ctx.replace(Range(end, end), newline + indent + moved), import_edit]
    removed = guard if guard is not None and len(guard.body) == 1 else stmt
    first, final = removed.lineno, last_line(removed)
    parent = ctx.parent(removed)
    siblings = _block_of(parent, removed)
    if siblings is not None and len(siblings) == 1:
        edits.append(ctx.replace(Range(Position(first, 0), Position(final + 1, 0)), ctx.indent(removed) + "pass"
                                 + newline))
    else:
        edits.append(ctx.replace(Range(Position(first, 0), Position(final + 1, 0)), ""))
    for binding in cls.attr_assignments:  # `self.head = None` in __init__: a placeholder now replaced
        if binding.name == name and binding.scope is init and isinstance(binding.value, ast.Constant) \
                and binding.value.value is None and isinstance(binding.stmt, ast.Assign) \
                and len(binding.stmt.targets) == 1 and ctx.stands_alone(binding.stmt) \
                and binding.stmt is not last and binding.stmt.lineno != last.lineno:
            edits.append(ctx.replace(Range(Position(binding.stmt.lineno, 0),
                                           Position(last_line(binding.stmt) + 1, 0)), ""))
    title = "Build %s.%s in __init__%s" % (init.self_name, name, " as %s" % text.split("(", 1)[0]
                                           if import_edit is not None or text != ctx.text(call) else "")
    return ctx.fix(title, edits, safe=False, preferred=True), None


def _block_of(parent: Optional[ast.AST], stmt: ast.stmt) -> Optional[List[ast.stmt]]:
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and stmt in block:
            return block
    handlers: List[ast.ExceptHandler] = getattr(parent, "handlers", None) or []
    for handler in handlers:
        if stmt in handler.body:
            return handler.body
    return None


def _lazy_call(ctx: FileContext, call: ast.Call, value: Value, scope: Scope) -> Optional[Tuple[str, Optional[Edit]]]:
    """`nn.Linear(x.shape[-1], n)` -> `nn.LazyLinear(n)` when only the input's width comes from forward."""
    entry = _LAZY.get(value.module_class or "")
    if entry is None or any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    lazy, first_name = entry
    rest_args = list(call.args)
    keywords = list(call.keywords)
    if rest_args:
        rest_args.pop(0)  # the input's width: the lazy layer infers it
    elif any(k.arg == first_name for k in keywords):
        keywords = [k for k in keywords if k.arg != first_name]
    else:
        return None
    for argument in rest_args + [k.value for k in keywords]:
        if any(isinstance(n, ast.Name) and n.id in scope.locals and n.id != scope.self_name
               for n in ast.walk(argument)):
            return None  # another size from forward too: a lazy layer infers only the input's width
    spelled, import_edit = ctx.spell(lazy)
    parts = [ctx.text(a) for a in rest_args] + ["%s=%s" % (k.arg, ctx.text(k.value)) for k in keywords]
    return "%s(%s)" % (spelled, ", ".join(parts)), import_edit
