"""TL201 data-assignment: rebinding ``p.data = t`` swaps a tensor's storage behind autograd's back."""
from __future__ import annotations

import ast

from ..analysis import torch_names as tn
from ..analysis.findings import Range, Severity
from ..analysis.values import Kind
from .base import Rule

TENSOR_LIKE = (Kind.PARAMETER, Kind.TENSOR, Kind.MOVED_PARAMETER)
PARAMETER_NAMES = ("weight", "bias", "in_proj_weight", "in_proj_bias")


class DataAssignment(Rule):
    code = "TL201"
    name = "data-assignment"
    summary = "`p.data = t` bypasses autograd and the optimizer; copy in place under torch.no_grad()"
    severity = Severity.WARNING

    def check(self, ctx):
        for target, value, stmt, scope in ctx.index.attribute_stores:
            if target.attr != "data":
                continue
            holder = target.value
            if _is_tensor(ctx, holder, scope) and not _converts_itself(holder, value):
                yield _finding(ctx, target, value, stmt)


def _converts_itself(holder: ast.expr, value: ast.expr) -> bool:
    """`p.data = p.data.half()` / `p.data = p.to(device)`: a deliberate in-place conversion (what
    Module._apply used to do); copying into the old storage would undo it."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and value.func.attr in tn.MOVE_METHODS):
        return False
    receiver = value.func.value
    if isinstance(receiver, ast.Attribute) and receiver.attr == "data":
        receiver = receiver.value
    return ast.dump(receiver) == ast.dump(holder)


def _is_tensor(ctx, holder: ast.expr, scope) -> bool:
    kind = ctx.classify(holder, scope).kind
    if kind in TENSOR_LIKE:
        return True
    if kind is not Kind.UNKNOWN or not isinstance(holder, ast.Attribute):
        return False
    # `model.fc.weight.data = t`: the classifier cannot follow every model, the name can.
    name = holder.attr
    if not (name in PARAMETER_NAMES or name.startswith(("weight_", "bias_"))):
        return False
    return ctx.classify(holder.value, scope).kind in (Kind.UNKNOWN, Kind.MODULE)


def _finding(ctx, target: ast.Attribute, value: ast.expr, stmt):
    holder = ctx.text(target.value)
    message = ("`%s.data = ...` rebinds the tensor's storage behind autograd: no version tracking, a new "
               "shape, device or dtype goes through unchecked, the parameter now aliases the assigned tensor's "
               "memory, and optimizer state (momentum, Adam moments) no longer matches" % holder)
    keeps = "(keeps its shape, dtype and device)"
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and ctx.stands_alone(stmt):
        block, import_edit = ctx.no_grad_block(stmt, "%s.copy_(%s)" % (holder, ctx.text(value)))
        fix = ctx.fix("Copy in place: `with %s(): %s.copy_(...)` %s" % (ctx.spell("torch.no_grad")[0], holder, keeps),
                      [ctx.replace(stmt, block), import_edit], safe=False, preferred=True)
    elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        # `if cond: p.data = t` on one line: a block cannot go there, an expression can.
        value_range = ctx.range(value)
        fix = ctx.fix("Copy in place through `.data`: `%s.data.copy_(...)` %s" % (holder, keeps),
                      [ctx.replace(Range(ctx.range(stmt).start, value_range.start), "%s.data.copy_(" % holder),
                       ctx.replace(Range(value_range.end, value_range.end), ")")],
                      safe=False, preferred=True)
    else:
        return ctx.finding("TL201", message, stmt, DataAssignment.severity)
    return ctx.finding("TL201", message, stmt, DataAssignment.severity, (fix,))
