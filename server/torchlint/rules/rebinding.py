"""What the rules about objects that took a model's parameters share (TL202's optimizer, TL205's
wrappers and copies): which statements re-bind a layer or parameter of the model with a new one,
and where a statement can be moved below such a re-binding. Not a rule (rules/__init__ loads only
``tlNNN_*`` modules)."""
from __future__ import annotations

import ast
from typing import Optional, Set, Tuple

from ..analysis import torch_names as tn
from ..analysis.context import FileContext
from ..analysis.findings import Position
from ..analysis.scopes import Scope, block_chain, dotted_name
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
