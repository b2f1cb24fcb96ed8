"""What the rules about objects that took a model's parameters share (TL202's optimizer, TL205's
wrappers and copies): which statements re-bind a layer or parameter of the model with a new one,
directly or through the project's functions they call with it, and where a statement can be moved
below such a re-binding. Not a rule (rules/__init__ loads only ``tlNNN_*`` modules)."""
from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from typing import FrozenSet, Iterator, List, Optional, Set, Tuple

from ..analysis import torch_names as tn
from ..analysis.context import FileContext
from ..analysis.findings import Position
from ..analysis.scopes import ClassInfo, Scope, block_chain, dotted_name
from ..analysis.source import last_line
from ..analysis.values import Kind

# torch.nn layers that hold no parameters: swapping one in (`model.fc = nn.Identity()`) leaves
# nothing for the optimizer to miss.
PARAMETER_FREE = frozenset("torch.nn." + name for name in """
Identity Flatten Unflatten Dropout Dropout1d Dropout2d Dropout3d AlphaDropout FeatureAlphaDropout
ReLU ReLU6 LeakyReLU GELU SiLU Mish ELU CELU SELU Sigmoid Tanh Hardtanh Hardswish Hardsigmoid
Softplus Softsign Softmax LogSoftmax Softmin Tanhshrink Threshold GLU LogSigmoid
MaxPool1d MaxPool2d MaxPool3d AvgPool1d AvgPool2d AvgPool3d AdaptiveAvgPool1d AdaptiveAvgPool2d
AdaptiveAvgPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d Upsample PixelShuffle
PixelUnshuffle ZeroPad1d ZeroPad2d ZeroPad3d
""".split())


def rebinding(ctx: FileContext, scope: Scope, stmt: ast.stmt, roots: Set[str]
              ) -> Optional[Tuple[ast.expr, str, str, Kind]]:
    """(target node, target text, root, value kind) when ``stmt`` re-binds, under one of ``roots``
    (dotted names: "model", "self.net"), a layer or parameter with a new one: `model.fc = ...`,
    `model.fc.weight = ...`, `model.classifier[6] = ...`."""
    if not isinstance(stmt, ast.Assign):
        return None
    for target in stmt.targets:
        if isinstance(target, ast.Attribute):
            owner = dotted_name(target)
        elif isinstance(target, ast.Subscript):
            owner = dotted_name(target.value)
        else:
            continue
        if owner is None:
            continue
        text = ctx.text(target)
        root = next((r for r in sorted(roots) if owner == r or owner.startswith(r + ".")), None)
        if root is None or _reuses(ctx, stmt.value, text) or not _constructs(ctx, scope, stmt.value, depth=3):
            continue
        value = ctx.classify(stmt.value, scope)
        kind = value.kind if value.kind in (Kind.MODULE, Kind.PARAMETER) else _built_elsewhere(ctx, stmt.value)
        if kind is None or value.module_class in PARAMETER_FREE:
            continue
        return target, text, root, kind
    return None


def _built_elsewhere(ctx: FileContext, value: ast.expr) -> Optional[Kind]:
    """Module for `QuantLinear.from_float(model.fc)` (a `from_*` constructor of a class) or a
    function of this file whose every `return` builds a module; else None."""
    if not isinstance(value, ast.Call):
        return None
    func = value.func
    if isinstance(func, ast.Attribute) and func.attr.startswith("from_") and isinstance(func.value, ast.Name) \
            and func.value.id[:1].isupper():
        return Kind.MODULE
    if isinstance(func, ast.Name):
        for scope in ctx.module_functions(func.id):
            returns = [n for n in ast.walk(scope.node) if isinstance(n, ast.Return) and n.value is not None]
            if returns and all(ctx.classify(r.value, scope).kind is Kind.MODULE for r in returns):
                return Kind.MODULE
    return None


def _reuses(ctx: FileContext, value: ast.expr, target: str) -> bool:
    """The value holds the object already there: `model.fc`, `model.fc.to(dev)`, a torch wrapper
    (`nn.DataParallel(model.fc)`, `nn.Sequential(model.fc, nn.ReLU())`) or a call this file cannot
    see into (`convert_sync_batchnorm(model.fc)`).

    Reading an attribute of it (`nn.Linear(model.fc.in_features, 10)`), slicing or cloning its
    weight (`nn.Parameter(model.fc.weight[:k].clone())`), or a `from_*` constructor / a helper of
    this file that builds a new module from it, makes something new.
    """
    def is_target(node: ast.expr) -> bool:
        return isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) and ctx.text(node) == target

    node = value
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in tn.MOVE_METHODS:
        node = node.func.value
    if is_target(node):
        return True
    if _built_elsewhere(ctx, value) is not None:
        return False
    for parent in ast.walk(value):
        if not isinstance(parent, ast.Call):
            continue
        arguments = list(parent.args) + [k.value for k in parent.keywords]
        if any(is_target(_unmoved(a)) for a in arguments):
            qualified = ctx.qualify(parent.func) or ""
            if qualified.startswith("torch.") and qualified != "torch.nn.Parameter":
                return True  # a wrapper holding the same module
            if not qualified.startswith("torch."):
                return True  # something this file cannot see into: it may return the same object
    return False


def _unmoved(node: ast.expr) -> ast.expr:
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in tn.MOVE_METHODS:
        node = node.func.value
    return node


def _constructs(ctx: FileContext, scope: Scope, value: ast.expr, depth: int) -> bool:
    """The value is a new object (`nn.Linear(...)`, `head` bound to one), not an existing one that the
    optimizer may already hold (`model.encoder.weight` for weight tying)."""
    if depth == 0:
        return False
    if isinstance(value, ast.Call):
        func = value.func
        if isinstance(func, ast.Attribute) and func.attr in tn.MOVE_METHODS:
            return _constructs(ctx, scope, func.value, depth - 1)  # modules move in place
        return True
    if isinstance(value, ast.Name):
        bindings = scope.locals.get(value.id, ())
        return bool(bindings) and all(b.value is not None and _constructs(ctx, scope, b.value, depth - 1)
                                      for b in bindings)
    return False


def can_move_below(ctx: FileContext, built: ast.stmt, stmt: ast.stmt) -> bool:
    """Moving ``built`` (what took the parameters) below the re-binding ``stmt`` changes nothing
    else: a plain `name = ...` (or a call of its own: `fully_shard(model)`) on its own lines, in
    the same block as the re-binding (the caller checked that nothing uses it in between)."""
    if isinstance(built, ast.Assign):
        if len(built.targets) != 1 or not isinstance(built.targets[0], ast.Name):
            return False
    elif not isinstance(built, ast.Expr):
        return False
    if block_chain(ctx.index, built) != block_chain(ctx.index, stmt):
        return False
    return ctx.stands_alone(built) and ctx.stands_alone(stmt)


def line_after(ctx: FileContext, stmt: ast.stmt) -> Tuple[Position, str]:
    """Where a new line goes after ``stmt``, and the text that must precede it there."""
    newline = ctx.source.newline()
    if last_line(stmt) < ctx.source.line_count:
        return Position(last_line(stmt) + 1, 0), ""
    return Position(last_line(stmt), len(ctx.source.line(last_line(stmt)))), newline


def mentioned_between(ctx: FileContext, scope: Scope, target: str, first: int, last: int) -> bool:
    """``target`` (a name or `self.opt`) appears on a line strictly between ``first`` and ``last``."""
    return any(isinstance(node, (ast.Name, ast.Attribute)) and first < node.lineno < last
               and dotted_name(node) == target for node in ast.walk(scope.node))


# -- re-bindings in the functions a statement calls with the model ---------------------------------

# How far calls are followed from a statement: functions deep (the call's own is the first), and
# function bodies read in all (each function once per set of roots).
FOLLOW_DEPTH = 3
FOLLOW_BUDGET = 16


@dataclass(frozen=True)
class Through:
    """A statement's call of the project's function that re-binds a layer of the model it is
    given, directly or through the functions it calls in turn."""

    call: ast.Call  # the statement's call
    helpers: Tuple[str, ...]  # the functions followed, the call's first, the one that re-binds last
    path: Optional[str]  # the file of the one that re-binds; None: the checked file
    inner: ast.stmt  # its re-binding (a statement of that file)
    text: str  # the target re-bound, as that function writes it (`net.fc`)
    kind: Kind

    def where(self, ctx: FileContext) -> str:
        """"line 7" in the checked file, else "surgery.py:3" (the path from the checked file's folder)."""
        if self.path is None:
            return "line %d" % self.inner.lineno
        return "%s:%d" % (os.path.relpath(self.path, os.path.dirname(os.path.abspath(ctx.path))), self.inner.lineno)

    def place(self, ctx: FileContext) -> str:
        """Where the re-binding is, from the call: "line 7", "in `reset_head`, surgery.py:3"."""
        if len(self.helpers) == 1:
            return self.where(ctx)
        return "in `%s`, %s" % ("` -> `".join(self.helpers[1:]), self.where(ctx))


def rebinding_through_call(ctx: FileContext, scope: Scope, stmt: ast.stmt, roots: Set[str],
                           holder: str) -> Optional[Through]:
    """When ``stmt`` (`f(model)`, `x = f(model)`, `model.reset_head()`) calls a function of the
    project with the model (one of ``roots``) that re-binds a layer or parameter of it, or calls
    one that does, FOLLOW_DEPTH functions deep at most: the fine-tuning helper is the common shape.
    Functions of the checked file are found by their names; those of other files only through the
    inference layer (FileContext.function_in_project). A call that is also given ``holder`` (the
    optimizer, the wrapper) is left alone: it may build or wrap again."""
    call = _statement_call(stmt)
    if call is None or _mentions(call, holder):
        return None
    found = _through(ctx, scope, call, roots, 1, [FOLLOW_BUDGET], set())
    if found is None:
        return None
    helpers, other, inner, text, kind = found
    return Through(call, helpers, None if other is ctx else other.path, inner, text, kind)


def _statement_call(stmt: ast.stmt) -> Optional[ast.Call]:
    value = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign, ast.Return)) else None
    return value if isinstance(value, ast.Call) else None


def _mentions(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, (ast.Name, ast.Attribute)) and dotted_name(n) == name for n in ast.walk(node))


_Found = Tuple[Tuple[str, ...], FileContext, ast.stmt, str, Kind]


def _through(ctx: FileContext, scope: Scope, call: ast.Call, roots: Set[str], depth: int, budget: List[int],
             seen: Set[Tuple[str, int, FrozenSet[str]]]) -> Optional[_Found]:
    for other, callee, label, inner_roots in _callees(ctx, scope, call, roots):
        key = (other.path, id(callee.node), frozenset(inner_roots))
        if key in seen:
            continue
        seen.add(key)
        if budget[0] <= 0:
            return None
        budget[0] -= 1
        for inner in callee.statements:
            rebound = rebinding(other, callee, inner, inner_roots)
            if rebound is not None:
                return (label,), other, inner, rebound[1], rebound[3]
        if depth >= FOLLOW_DEPTH:
            continue
        for inner in callee.statements:
            inner_call = _statement_call(inner)
            found = _through(other, callee, inner_call, inner_roots, depth + 1, budget, seen) \
                if inner_call is not None else None
            if found is not None:
                return ((label,) + found[0],) + found[1:]
    return None


def _callees(ctx: FileContext, scope: Scope, call: ast.Call, roots: Set[str]
             ) -> Iterator[Tuple[FileContext, Scope, str, Set[str]]]:
    """The functions ``call`` may run that are given the model, each with its file's context, its
    name, and the names its parameters give the model (or parts of it)."""
    func = call.func
    receiver = dotted_name(func.value) if isinstance(func, ast.Attribute) else None
    if receiver not in roots and not any(_holds(dotted_name(a), roots) for a in _arguments(call)):
        return  # not given the model: nothing to look up
    if isinstance(func, ast.Name):
        if func.id in scope.locals:
            return  # a local (a parameter, a function passed in): not the module's function
        found = [(ctx, s) for s in ctx.module_functions(func.id)]
        if not found:
            elsewhere = ctx.function_in_project(func)
            found = [elsewhere] if elsewhere is not None else []
        for other, callee in found:
            inner = _parameter_roots(callee, call, roots, method=False)
            if inner:
                yield other, callee, callee.name, inner
        return
    if not isinstance(func, ast.Attribute):
        return
    if isinstance(func.value, ast.Name) and receiver in roots:
        method = _own_method(ctx, scope, func.attr) if scope.is_self(func.value) \
            else _method_of_model(ctx, scope, func.value, func.attr)
        if method is not None:
            other, callee, owner = method
            self_name = callee.self_name
            if self_name is not None:
                inner = _parameter_roots(callee, call, roots, method=True) | {self_name}
                yield other, callee, "%s.%s" % (owner, func.attr), inner
        return
    if isinstance(func.value, (ast.Name, ast.Attribute)) and receiver is not None \
            and receiver.split(".")[0] not in scope.locals:
        elsewhere = ctx.function_in_project(func)  # `surgery.replace_head(model)`
        if elsewhere is not None:
            inner = _parameter_roots(elsewhere[1], call, roots, method=False)
            if inner:
                yield elsewhere[0], elsewhere[1], "%s.%s" % (receiver, func.attr), inner


def _arguments(call: ast.Call) -> List[ast.expr]:
    return [a.value if isinstance(a, ast.Starred) else a for a in call.args] + [k.value for k in call.keywords]


def _holds(text: Optional[str], roots: Set[str]) -> bool:
    """``text`` is the model, a part of it, or holds it (`ddp` for `ddp.module`)."""
    return text is not None and any(text == r or text.startswith(r + ".") or r.startswith(text + ".") for r in roots)


def _own_method(ctx: FileContext, scope: Scope, name: str) -> Optional[Tuple[FileContext, Scope, str]]:
    """`self.<name>(...)` in a method: the method of its class (or of a base of this file)."""
    if scope.cls is None:
        return None
    return _method_in(ctx, scope.cls, name)


def _method_in(ctx: FileContext, cls: ClassInfo, name: str) -> Optional[Tuple[FileContext, Scope, str]]:
    for info in ctx.class_chain(cls):
        method = info.method_scopes.get(name)
        if method is not None:
            node = method.node
            decorated = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.decorator_list
            return None if decorated else (ctx, method, cls.name)
    return None


def _method_of_model(ctx: FileContext, scope: Scope, model: ast.Name, name: str
                     ) -> Optional[Tuple[FileContext, Scope, str]]:
    """The method ``name`` of the class every assignment of ``model`` in the scope builds
    (`model = Net(...)`), its file's context and the class's name; None when that is not plain."""
    bindings = scope.locals.get(model.id, [])
    classes = {ctx.text(b.value.func) if isinstance(b.value, ast.Call) else None for b in bindings}
    if len(classes) != 1 or None in classes:
        return None
    built = bindings[0].value
    assert isinstance(built, ast.Call)
    cls = built.func
    if isinstance(cls, ast.Name) and cls.id in ctx.classes:
        return None if cls.id in scope.locals else _method_in(ctx, ctx.classes[cls.id], name)
    if not isinstance(cls, (ast.Name, ast.Attribute)) or (dotted_name(cls) or ".").split(".")[0] in scope.locals:
        return None
    elsewhere = ctx.function_in_project(cls, name)
    return (elsewhere[0], elsewhere[1], ctx.text(cls)) if elsewhere is not None else None


def _parameter_roots(callee: Scope, call: ast.Call, roots: Set[str], method: bool) -> Set[str]:
    """What the callee's parameters call the model (or its parts) that ``call`` hands them: `net`
    for `replace_head(model)`, `net` for `replace_head(model.backbone)`, `net.module` for
    `replace_head(ddp)` when the root is `ddp.module`. A parameter the callee re-binds is left out."""
    node = callee.node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return set()
    positional = node.args.posonlyargs + node.args.args
    if method:
        positional = positional[1:]
    named = {a.arg for a in positional + node.args.kwonlyargs if a not in node.args.posonlyargs}
    given: List[Tuple[str, ast.expr]] = []
    for slot, argument in zip(positional, call.args):
        if isinstance(argument, ast.Starred):
            break  # where the rest go is not plain
        given.append((slot.arg, argument))
    given += [(k.arg, k.value) for k in call.keywords if k.arg is not None and k.arg in named]
    found: Set[str] = set()
    for parameter, argument in given:
        text = dotted_name(argument)
        if text is None or any(b.stmt is not node for b in callee.locals.get(parameter, ())):
            continue
        for root in roots:
            if text == root or text.startswith(root + "."):
                found.add(parameter)
            elif root.startswith(text + "."):
                found.add(parameter + root[len(text):])
    return found
