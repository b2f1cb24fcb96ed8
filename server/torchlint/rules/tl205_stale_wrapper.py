"""TL205 stale-wrapper: a layer or parameter of a model re-bound after DistributedDataParallel,
FSDP, AveragedModel or an EMA copy took the model's parameters; and a DDP model's `.module`
called directly in a training step."""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Iterator, List, Optional, Set, Tuple

from ..analysis.context import FileContext
from ..analysis.findings import Finding, Fix, Position, Range, Related, Severity
from ..analysis.scopes import Scope, dotted_name, encloses
from ..analysis.source import last_line
from ..analysis.values import Kind
from .base import Rule
from .rebinding import Through, can_move_below, line_after, mentioned_between, rebinding, rebinding_through_call

# What each wrapper is, by its qualified name.
_WRAPPERS = {
    "torch.nn.parallel.DistributedDataParallel": "ddp",
    "torch.nn.parallel.distributed.DistributedDataParallel": "ddp",
    "torch.distributed.fsdp.FullyShardedDataParallel": "fsdp",
    "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel": "fsdp",
    "torch.distributed.fsdp.fully_shard": "fully_shard",
    "torch.distributed._composable.fsdp.fully_shard": "fully_shard",
    "torch.optim.swa_utils.AveragedModel": "averaged",
    "copy.deepcopy": "copy",
}
_NAMES = {"ddp": "DistributedDataParallel", "fsdp": "FullyShardedDataParallel", "fully_shard": "fully_shard",
          "averaged": "AveragedModel", "copy": "copy.deepcopy"}
# A deepcopy kept as a running average (an EMA model, a mean teacher) by its name; any other copy
# counts only where its parameters are zipped with the model's.
_AVERAGE_NAME = re.compile(r"ema|averag|swa|polyak|shadow|momentum", re.IGNORECASE)
_NO_GRAD = frozenset(["torch.no_grad", "torch.inference_mode", "torch.autograd.grad_mode.no_grad"])


@dataclass
class _Wrap:
    """`ddp = DDP(model)`, `fully_shard(model)`, `ema = copy.deepcopy(model)`: where, what, of which model."""

    stmt: ast.stmt
    position: int  # index in scope.statements
    kind: str  # a value of _WRAPPERS
    target: str  # what holds the wrapper or copy ("ddp", "self.ema"; the model itself for fully_shard)
    root: str  # the model it took ("model", "self.net")
    roots: Set[str]  # where a re-binding of the model's layers is written after it


class StaleWrapper(Rule):
    code = "TL205"
    name = "stale-wrapper"
    summary = ("layer or parameter re-bound after DistributedDataParallel / FSDP / AveragedModel / an EMA copy took "
               "the model: never synchronised or averaged; `ddp.module(x)` skips DDP's gradient sync")
    severity = Severity.WARNING

    def find(self, ctx: FileContext) -> Iterator[Finding]:
        for scope in ctx.index.scopes:
            statements = scope.statements
            reported: Set[int] = set()
            wraps = [w for w in (_wrap(ctx, scope, i, s) for i, s in enumerate(statements)) if w is not None]
            for wrap in wraps:
                for position in range(wrap.position + 1, len(statements)):
                    stmt = statements[position]
                    if _rewrapped(ctx, stmt, wrap):
                        break  # wrapped (or copied) again: that one is checked on its own
                    if id(stmt) in reported or not encloses(ctx.index, wrap.stmt, stmt):
                        continue
                    rebound = rebinding(ctx, scope, stmt, wrap.roots)
                    through = None if rebound is not None else \
                        rebinding_through_call(ctx, scope, stmt, wrap.roots, wrap.target)
                    if rebound is None and through is None or not _used_after(ctx, scope, wrap, position):
                        continue
                    reported.add(id(stmt))
                    if through is not None:
                        yield _finding_through(ctx, wrap, through)
                    elif rebound is not None:
                        yield _finding(ctx, scope, wrap, stmt, *rebound)
            yield from _bypasses(ctx, scope, [w for w in wraps if w.kind == "ddp"])


def _wrap(ctx: FileContext, scope: Scope, position: int, stmt: ast.stmt) -> Optional[_Wrap]:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Call):
        call, target = stmt.value, dotted_name(stmt.targets[0])
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call, target = stmt.value, None
    else:
        return None
    kind = _WRAPPERS.get(ctx.qualify(call.func) or "")
    model = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg in ("module", "model")),
                                                None)
    root = dotted_name(model) if model is not None else None
    if kind is None or root is None:
        return None
    if kind == "fully_shard":
        target = target or root  # sharded in place: the model itself is the wrapper
    if target is None:
        return None
    if kind == "copy" and not (_AVERAGE_NAME.search(target) or _zipped_with(scope, target, root)):
        return None  # a copy kept for something else (a frozen teacher, the best weights so far)
    roots = {root} if target != root or kind == "fully_shard" else set()
    if kind in ("ddp", "fsdp", "averaged"):
        roots.add(target + ".module")
    return _Wrap(stmt, position, kind, target, root, roots)


def _zipped_with(scope: Scope, copy: str, model: str) -> bool:
    """`zip(ema.parameters(), model.parameters())` (or state_dict()'s values) in the scope."""
    for node in ast.walk(scope.node):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "zip":
            owners = {dotted_name(_owner(a)) for a in node.args}
            if copy in owners and model in owners:
                return True
    return False


def _owner(node: ast.expr) -> ast.expr:
    """`model` of `model.parameters()`, `model.state_dict().values()`."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value
    return node


def _rewrapped(ctx: FileContext, stmt: ast.stmt, wrap: _Wrap) -> bool:
    """The wrapper (or copy) is made again, or its variable re-bound."""
    if isinstance(stmt, ast.Assign) and any(dotted_name(t) == wrap.target for t in stmt.targets):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
            and _WRAPPERS.get(ctx.qualify(stmt.value.func) or "") == wrap.kind and stmt.value.args \
            and dotted_name(stmt.value.args[0]) == wrap.root:
        return True
    return False


def _used_after(ctx: FileContext, scope: Scope, wrap: _Wrap, position: int) -> bool:
    """The wrapper (or copy) is read after the re-binding, before it is made again (kept in an
    attribute and not made again, it outlives the scope)."""
    name = wrap.target.split(".")[0]
    for stmt in scope.statements[position + 1:]:
        if _rewrapped(ctx, stmt, wrap):
            return False
        if any(isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)
               for node in ast.walk(stmt)):
            return True
    return "." in wrap.target


def _finding_through(ctx: FileContext, wrap: _Wrap, through: Through) -> Finding:
    """A function called with the wrapped model re-binds its layer: reported on the call, the
    re-binding related where it is in this file."""
    message = "`%s(...)` replaces `%s` of `%s` (%s) after %s: %s" % (
        ctx.text(through.call.func), through.text, wrap.root, through.place(ctx), _took(wrap),
        _consequence(wrap, through.kind))
    related: Tuple[Related, ...] = (ctx.related(through.inner, "`%s` is replaced here" % through.text),) \
        if through.path is None else ()
    related += (ctx.related(wrap.stmt, "`%s` takes the parameters `%s` has at this point" % (wrap.target, wrap.root)),)
    return ctx.finding(message + " (no fix: call it before the wrapping)", through.call, (), related)


# What goes wrong with the new layer or parameter, by wrapper (%s: "layer" or "parameter"), and
# what the fix does again after the change.
_CONSEQUENCES = {
    "ddp": ("DDP does not average the new %s's gradients across processes (and its buckets, waiting for the old "
            "one's, may leave the step's other gradients unaveraged too), so each process trains its own copy"),
    "fsdp": ("the new %s is outside the sharded parameters, so its gradients are not reduced across processes and "
             "sharded checkpoints do not hold it"),
    "averaged": ("the average keeps the old %s, and update_parameters() pairs its tensors with the wrong ones of the "
                 "model (or fails where a shape changed)"),
    "copy": ("the copy keeps the old %s, and an average that zips the two models' parameters pairs the wrong tensors "
             "(or fails where a shape changed)"),
}
_CONSEQUENCES["fully_shard"] = _CONSEQUENCES["fsdp"]
_AGAIN = {"ddp": "Wrap in DistributedDataParallel", "fsdp": "Shard", "fully_shard": "Shard",
          "averaged": "Build the AveragedModel", "copy": "Copy the model"}


def _took(wrap: _Wrap) -> str:
    """How the wrapper took the model: "DistributedDataParallel on line 6 took the parameters of `model`"."""
    line = wrap.stmt.lineno
    if wrap.kind == "ddp":
        return "DistributedDataParallel on line %d took the parameters of `%s`" % (line, wrap.root)
    if wrap.kind in ("fsdp", "fully_shard"):
        return "%s on line %d sharded `%s`" % (_NAMES[wrap.kind], line, wrap.root)
    if wrap.kind == "averaged":
        return "AveragedModel on line %d copied `%s`" % (line, wrap.root)
    return "`%s` was copied from `%s` on line %d" % (wrap.target, wrap.root, line)


def _consequence(wrap: _Wrap, kind: Kind) -> str:
    return _CONSEQUENCES[wrap.kind] % ("layer" if kind is Kind.MODULE else "parameter")


def _finding(ctx: FileContext, scope: Scope, wrap: _Wrap, stmt: ast.stmt, target: ast.expr, text: str, root: str,
             kind: Kind) -> Finding:
    message = "`%s` is replaced after %s: %s" % (text, _took(wrap), _consequence(wrap, kind))
    again = _AGAIN[wrap.kind]
    line = wrap.stmt.lineno
    related = ctx.related(wrap.stmt, "`%s` takes the parameters `%s` has at this point" % (wrap.target, wrap.root))
    advice = again[0].lower() + again[1:]
    if mentioned_between(ctx, scope, wrap.target, last_line(wrap.stmt), stmt.lineno):
        message += " (no fix: `%s` is used before the change; %s again after it)" % (wrap.target, advice)
    elif not can_move_below(ctx, wrap.stmt, stmt):
        message += " (no fix: the two are not statements of their own in one block; %s after the change)" % advice
    else:
        fix = _move_below(ctx, wrap, stmt, "%s after `%s` is replaced (move line %d)" % (again, text, line))
        return ctx.finding(message, target, (fix,), (related,))
    return ctx.finding(message, target, (), (related,))


def _move_below(ctx: FileContext, wrap: _Wrap, stmt: ast.stmt, title: str) -> Fix:
    """The wrapping moved below the re-binding (unsafe: whatever ran between them saw no wrapper)."""
    newline = ctx.source.newline()
    first, last = wrap.stmt.lineno, last_line(wrap.stmt)
    lines = "".join(ctx.source.line(n) + newline for n in range(first, last + 1))
    where, lead = line_after(ctx, stmt)
    return ctx.fix(title, [ctx.replace(Range(Position(first, 0), Position(last + 1, 0)), ""),
                           ctx.replace(Range(where, where), lead + lines)], safe=False, preferred=True)


# -- calls past the wrapper --------------------------------------------------------------------

def _bypasses(ctx: FileContext, scope: Scope, wraps: List[_Wrap]) -> Iterator[Finding]:
    """`ddp.module(x)` / `ddp.module.forward(x)` after the wrapping, with gradients on (not under
    torch.no_grad()), in a scope that then calls `.backward()`: DDP's forward, which arms the
    gradient sync, is skipped."""
    if not wraps:
        return
    backward_lines = [node.lineno for node in ast.walk(scope.node) if isinstance(node, ast.Call)
                      and isinstance(node.func, ast.Attribute) and node.func.attr == "backward"]
    if not backward_lines:
        return
    by_target = {wrap.target: wrap for wrap in wraps}
    for node in ast.walk(scope.node):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "forward":
            func = func.value
        if not (isinstance(func, ast.Attribute) and func.attr == "module"):
            continue
        wrap = by_target.get(dotted_name(func.value) or "")
        if wrap is None or node.lineno <= last_line(wrap.stmt) or not any(line >= node.lineno for line in backward_lines):
            continue
        if _gradients_off(ctx, node):
            continue
        called = ctx.text(node.func)
        message = ("`%s(...)` calls the model DistributedDataParallel on line %d wraps directly: DDP's forward is "
                   "skipped, so this step's gradients are not averaged across processes (call `%s(...)`)"
                   % (called, wrap.stmt.lineno, wrap.target))
        fix = ctx.fix("Call `%s(...)`" % wrap.target, [ctx.replace(node.func, wrap.target)], safe=False,
                      preferred=True)
        yield ctx.finding(message, node.func, (fix,))


def _gradients_off(ctx: FileContext, node: ast.AST) -> bool:
    parent = ctx.parent(node)
    while parent is not None:
        if isinstance(parent, (ast.With, ast.AsyncWith)):
            for item in parent.items:
                expr = item.context_expr
                if (ctx.qualify(expr.func if isinstance(expr, ast.Call) else expr) or "") in _NO_GRAD:
                    return True
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return any((ctx.qualify(d.func if isinstance(d, ast.Call) else d) or "") in _NO_GRAD
                       for d in parent.decorator_list)  # @torch.no_grad()
        if isinstance(parent, ast.Lambda):
            break
        parent = ctx.parent(parent)
    return False
