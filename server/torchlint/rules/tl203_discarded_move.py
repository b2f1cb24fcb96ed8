"""TL203 discarded-move: `t.cuda()` / `t.to(dev)` / `t.float()` as a bare statement on a tensor."""
from __future__ import annotations

import ast
from typing import Iterator, List, Optional, Set, cast

from ..analysis import torch_names as tn
from ..analysis.context import FileContext
from ..analysis.findings import Finding, Range, Severity
from ..analysis.scopes import Scope
from ..analysis.values import Kind
from .base import Rule, shorten


class DiscardedMove(Rule):
    code = "TL203"
    name = "discarded-move"
    summary = "tensor .to()/.cuda()/.float() result thrown away: tensors, unlike Modules, do not move in place"
    severity = Severity.WARNING

    def find(self, ctx: FileContext) -> Iterator[Finding]:
        for stmt, scope in ctx.index.expr_statements:
            call = stmt.value
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
                continue
            method = call.func.attr
            if method not in tn.MOVE_METHODS or (method == "type" and not call.args and not call.keywords):
                continue  # `.type()` with no argument only returns the type name
            receiver = call.func.value
            if not _assignable(receiver):
                continue
            # Only plain tensors: a Module moves in place, and on a Parameter the usual fix,
            # `p = p.cuda()`, would store a plain tensor where the Parameter was (TL104).
            kind = ctx.classify_at(receiver, scope, stmt).kind
            if kind is not Kind.TENSOR and not (kind is Kind.UNKNOWN and isinstance(receiver, ast.Name)
                                                and (_narrowed(ctx, receiver.id, stmt)
                                                     or _unpacked_from_torch_loader(ctx, scope, receiver.id))):
                continue
            yield _finding(ctx, stmt, call, receiver, scope)


def _unpacked_from_torch_loader(ctx: FileContext, scope: Scope, name: str) -> bool:
    """Every binding of ``name`` unpacks a batch of a torch DataLoader: `for x, y in loader`,
    `for i, (x, y) in enumerate(loader)`, `x, y = next(iter(loader))` or `x, y = batch` where
    `batch` is one. The loader must be known to be torch's (built by `DataLoader(...)`, or a
    name annotated `DataLoader`): another library's loader (fastai's) may yield anything, and
    its own `.to()` works in place; what a name says is no evidence."""
    bindings = scope.locals.get(name, ())
    if not bindings:
        return False
    for binding in bindings:
        target = _target_of(binding.stmt)
        path = _path_to(target, name) if target is not None else None
        if not path:  # not unpacked (`for batch in loader`: a batch may be a list or a dict)
            return False
        if binding.iter_of is not None:
            if not _iterates_torch_loader(ctx, binding.iter_of, path, scope, unpacked=True):
                return False
        elif not _torch_loader_batch(ctx, getattr(binding.stmt, "value", None), scope):
            return False
    return True


def _target_of(stmt: ast.stmt) -> Optional[ast.expr]:
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return stmt.target
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        return stmt.targets[0]
    return None


def _path_to(target: ast.expr, name: str) -> Optional[List[int]]:
    """The positions leading to ``name`` in an unpacking target (`i, (x, y)`: y is [1, 1]);
    None where it is not there, or starred (a list)."""
    if isinstance(target, ast.Name):
        return [] if target.id == name else None
    if isinstance(target, (ast.Tuple, ast.List)):
        for position, elt in enumerate(target.elts):
            inner = _path_to(elt, name)
            if inner is not None:
                return None if isinstance(elt, ast.Starred) else [position] + inner
    return None


def _iterates_torch_loader(ctx: FileContext, source: ast.expr, path: List[int], scope: Scope,
                           unpacked: bool) -> bool:
    """`for <target> in source`, the name at ``path`` of the target: a batch of a torch
    DataLoader (``unpacked``: an element of the batch, not the batch itself)."""
    if isinstance(source, ast.Call) and isinstance(source.func, ast.Name) and source.func.id == "enumerate" \
            and len(source.args) == 1 and not source.keywords and "enumerate" not in _visible_locals(scope):
        if not path or path[0] != 1:
            return False  # the count, or the (count, batch) pair
        source, path = source.args[0], path[1:]
    return bool(path) == unpacked and _is_torch_loader(ctx, source, scope)


def _torch_loader_batch(ctx: FileContext, value: Optional[ast.expr], scope: Scope) -> bool:
    """`next(iter(loader))`, or a name every binding of which is a batch of a torch DataLoader."""
    if isinstance(value, ast.Call) and _builtin_call(value, "next", scope):
        inner = value.args[0]
        return isinstance(inner, ast.Call) and _builtin_call(inner, "iter", scope) \
            and _is_torch_loader(ctx, inner.args[0], scope)
    if not isinstance(value, ast.Name):
        return False
    bindings = scope.locals.get(value.id, ())
    if not bindings:
        return False
    for binding in bindings:
        if binding.iter_of is not None:
            target = _target_of(binding.stmt)
            path = _path_to(target, value.id) if target is not None else None
            if path is None or not _iterates_torch_loader(ctx, binding.iter_of, path, scope, unpacked=False):
                return False
        elif binding.unpack_index is not None or not _torch_loader_batch(ctx, binding.value, scope):
            return False
    return True


def _builtin_call(call: ast.Call, builtin: str, scope: Scope) -> bool:
    return isinstance(call.func, ast.Name) and call.func.id == builtin and len(call.args) == 1 \
        and not call.keywords and builtin not in _visible_locals(scope)


def _visible_locals(scope: Optional[Scope]) -> Set[str]:
    names: Set[str] = set()
    while scope is not None:
        names.update(scope.locals)
        scope = scope.parent
    return names


def _is_torch_loader(ctx: FileContext, node: ast.expr, scope: Scope) -> bool:
    """`DataLoader(...)` of torch, or a local name (a parameter included) each binding of which is
    one or is annotated `DataLoader`."""
    if isinstance(node, ast.Call):
        return ctx.qualify(node.func) in tn.DATA_LOADERS
    if not isinstance(node, ast.Name):
        return False
    owner: Optional[Scope] = scope
    while owner is not None and node.id not in owner.locals:
        owner = owner.parent
    bindings = owner.locals.get(node.id, ()) if owner is not None else ()
    if not bindings:
        return False
    for binding in bindings:
        if binding.annotation is not None and ctx.qualify(binding.annotation) in tn.DATA_LOADERS:
            continue
        if binding.unpack_index is not None or binding.iter_of is not None \
                or not (isinstance(binding.value, ast.Call) and ctx.qualify(binding.value.func) in tn.DATA_LOADERS):
            return False
    return True


def _narrowed(ctx: FileContext, name: str, stmt: ast.Expr) -> bool:
    """Inside `if torch.is_tensor(x):` / `if isinstance(x, torch.Tensor):` (the if branch)."""
    entry = ctx.index.blocks.get(id(stmt))
    while entry is not None:
        owner, block = entry
        if isinstance(owner, ast.If) and block == "body" and _tests_tensor(ctx, owner.test, name):
            return True
        entry = ctx.index.blocks.get(id(owner))
    return False


def _tests_tensor(ctx: FileContext, test: ast.expr, name: str) -> bool:
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_tests_tensor(ctx, value, name) for value in test.values)
    if not (isinstance(test, ast.Call) and test.args and isinstance(test.args[0], ast.Name)
            and test.args[0].id == name):
        return False
    qualified = ctx.qualify(test.func)
    if qualified == "torch.is_tensor":
        return True
    if isinstance(test.func, ast.Name) and test.func.id == "isinstance" and len(test.args) == 2:
        classes = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
        return all(ctx.qualify(c) in ("torch.Tensor", "torch.nn.Parameter") for c in classes)
    return False


def _assignable(node: ast.expr) -> bool:
    """A name or `obj.attr` chain that `x = x.to(dev)` can re-bind (not `x.data`, `x.T`, `x[0]`)."""
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.Attribute) and node.attr not in tn.TENSOR_PROPERTIES:
        return isinstance(node.value, (ast.Name, ast.Attribute))
    return False


def _finding(ctx: FileContext, stmt: ast.Expr, call: ast.Call, receiver: ast.expr, scope: Scope) -> Finding:
    target = ctx.text(receiver)
    what = "moved" if cast(ast.Attribute, call.func).attr in ("to", "cuda", "cpu") else "converted"
    message = ("`%s` returns a %s copy and this statement throws it away: `%s` is unchanged "
               "(tensors do not move in place, unlike Modules)" % (shorten(ctx.text(call)), what, target))
    fixes = []
    # `x = x.cuda()` inside a function makes `x` local: only offer it where `x` is already local.
    if not isinstance(receiver, ast.Name) or receiver.id in scope.locals:
        start = ctx.range(call).start
        assign = ctx.replace(Range(start, start), "%s = " % target)
        fixes.append(ctx.fix("Keep the result: `%s = %s`" % (target, shorten(ctx.text(call))), [assign],
                             safe=True, preferred=True))
    return ctx.finding(message, call, fixes)
