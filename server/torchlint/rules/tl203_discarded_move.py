"""TL203 discarded-move: `t.cuda()` / `t.to(dev)` / `t.float()` as a bare statement on a tensor."""
from __future__ import annotations

import ast

from ..analysis import torch_names as tn
from ..analysis.findings import Range, Severity
from ..analysis.values import Kind
from .base import Rule


class DiscardedMove(Rule):
    code = "TL203"
    name = "discarded-move"
    summary = "tensor .to()/.cuda()/.float() result thrown away: tensors, unlike Modules, do not move in place"
    severity = Severity.WARNING

    def check(self, ctx):
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
            # Only plain tensors: a Module moves in place, and a Parameter needs another fix (TL104).
            if ctx.classify_at(receiver, scope, stmt).kind is not Kind.TENSOR:
                continue
            yield _finding(ctx, stmt, call, receiver, scope)


def _assignable(node: ast.expr) -> bool:
    """A name or `obj.attr` chain that `x = x.to(dev)` can re-bind (not `x.data`, `x.T`, `x[0]`)."""
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.Attribute) and node.attr not in tn.TENSOR_PROPERTIES:
        return isinstance(node.value, (ast.Name, ast.Attribute))
    return False


def _finding(ctx, stmt, call, receiver, scope):
    target = ctx.text(receiver)
    what = "moved" if call.func.attr in ("to", "cuda", "cpu") else "converted"
    message = ("`%s` returns a %s copy and this statement throws it away: `%s` is unchanged "
               "(tensors do not move in place, unlike Modules)" % (_short(ctx.text(call)), what, target))
    fixes = []
    # `x = x.cuda()` inside a function makes `x` local: only offer it where `x` is already local.
    if not isinstance(receiver, ast.Name) or receiver.id in scope.locals:
        start = ctx.range(call).start
        assign = ctx.replace(Range(start, start), "%s = " % target)
        fixes.append(ctx.fix("Keep the result: `%s = %s`" % (target, _short(ctx.text(call))), [assign],
                             safe=True, preferred=True))
    return ctx.finding("TL203", message, call, Severity.WARNING, fixes)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 50 else text[:47] + "..."
