"""TL203 discarded-move: `t.cuda()` / `t.to(dev)` / `t.float()` as a bare statement on a tensor."""
from __future__ import annotations

import ast
import re
from typing import Iterator, cast

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
                                                     or _unpacked_from_batch(scope, receiver.id))):
                continue
            yield _finding(ctx, stmt, call, receiver, scope)


# Names of what yields batches of tensors: `for x, y in train_loader`, `x, y = batch`.
_BATCH_WORDS = ("loader", "batch", "sample")
# ... but not what yields the loaders themselves (`for i, dl in enumerate(loaders)`; a fastai
# DataLoader's `.to(device)` is in place), nor a name that says it is a loader.
_LOADERS = re.compile(r"(loaders|dls)$", re.IGNORECASE)
_A_LOADER = re.compile(r"(^|_)(dl|loader|dataloader)$", re.IGNORECASE)


def _unpacked_from_batch(scope: Scope, name: str) -> bool:
    """Every binding of ``name`` unpacks a batch: `x, y = batch`, `for x, y in loader`,
    `for i, (x, y) in enumerate(loader)` (items of a data loader are tensors, not Modules)."""
    bindings = scope.locals.get(name, ())
    if not bindings or _A_LOADER.search(name):
        return False
    for binding in bindings:
        if binding.unpack_index is None:
            return False
        stmt = binding.stmt
        source = binding.iter_of if binding.iter_of is not None else getattr(stmt, "value", None)
        words = [n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(source)
                 if isinstance(n, (ast.Name, ast.Attribute))] if source is not None else []
        if not any(word in w.lower() for w in words for word in _BATCH_WORDS) or any(_LOADERS.search(w)
                                                                                  for w in words):
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
