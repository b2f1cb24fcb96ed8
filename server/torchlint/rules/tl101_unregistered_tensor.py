"""TL101 unregistered-tensor: a tensor stored as a plain attribute of a Module."""
from __future__ import annotations

import ast

from ..analysis import torch_names as tn
from ..analysis.findings import Range, Severity
from ..analysis.values import Kind
from .base import Rule


# Attributes frameworks read as plain tensors by design (Lightning's model summary input).
_PLAIN_BY_CONVENTION = frozenset(["example_input_array"])


class UnregisteredTensor(Rule):
    code = "TL101"
    name = "unregistered-tensor"
    summary = "tensor stored as a plain Module attribute: not trained, not saved, not moved by .to()"
    severity = Severity.WARNING

    def check(self, ctx):
        for cls in ctx.module_classes:
            init = cls.method_scopes.get("__init__")
            if init is None or ctx.moves_own_state(cls):
                continue
            registered = ctx.registered_names(cls)
            for binding in cls.attr_assignments:
                if binding.scope is not init or binding.value is None or binding.name in registered \
                        or binding.name in _PLAIN_BY_CONVENTION:
                    continue
                value = ctx.classify(binding.value, init)
                if value.kind is not Kind.TENSOR:
                    continue  # MOVED_PARAMETER belongs to TL103
                if _registered_elsewhere(ctx, cls, binding) or _handled_by_hand(ctx, cls, binding.name, value):
                    continue
                yield _finding(ctx, binding, value)


def _registered_elsewhere(ctx, cls, binding) -> bool:
    """nn.Parameter / nn.Buffer assigned to the same name anywhere in the class."""
    for other in ctx.classifier.class_attribute_bindings(cls, binding.name):
        if other is not binding and other.value is not None:
            if ctx.classify(other.value, other.scope).kind in (Kind.PARAMETER, Kind.BUFFER, Kind.MODULE):
                return True
    return False


_MOVES = frozenset(["to", "cuda", "cpu", "type", "type_as"])


def _handled_by_hand(ctx, cls, attr: str, value) -> bool:
    """The author manages this tensor's device on purpose, so __init__ only declares it:
    another method re-assigns it (run-time state, caches, `self.x = self.x.to(device)`), or
    every read of it outside __init__ moves it first (`self.bins.to(x.device)`)."""
    for other in ctx.classifier.class_attribute_bindings(cls, attr):
        if other.scope.name == "__init__" or other.value is None:
            continue
        if ctx.classify(other.value, other.scope).kind in (Kind.PARAMETER, Kind.BUFFER, Kind.MODULE):
            continue
        if not value.requires_grad or _moves(other.value):
            return True
    reads = moved = 0
    for info in ctx.class_chain(cls):
        for name, scope in info.method_scopes.items():
            if name == "__init__" or scope.self_name is None:
                continue
            for node in ast.walk(scope.node):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MOVES:
                    moved += _is_self_attr(node.func.value, scope, attr)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                    reads += _is_self_attr(node, scope, attr)
    return reads > 0 and reads == moved


def _is_self_attr(node, scope, attr: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == attr and scope.is_self(node.value)


def _moves(node) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _MOVES
               for n in ast.walk(node))


def _prefers_parameter(value, attr: str) -> bool:
    if value.requires_grad:
        return True
    if any(word in attr.lower() for word in tn.WEIGHT_LIKE_NAMES):
        return True
    factory = (value.factory or "").rsplit(".", 1)[-1]
    return bool(factory) and factory not in tn.CONSTANT_FACTORIES


def _finding(ctx, binding, value):
    stmt, attr, self_name = binding.stmt, binding.name, binding.scope.self_name
    target = "%s.%s" % (self_name, attr)
    if value.requires_grad:
        severity = Severity.ERROR
        message = ("`%s` requires grad but is a plain tensor attribute: it is not in parameters(), so the "
                   "optimizer never updates it, and it is not saved or moved by .to()" % target)
    else:
        severity = Severity.WARNING
        message = ("`%s` holds a tensor the Module does not register: it is not in parameters() or "
                   "state_dict(), and .to()/.cuda() leave it behind" % target)

    parameter, import_edit = ctx.spell("torch.nn.Parameter")
    wrap = ctx.fix("Wrap in `%s(...)` (trainable parameter)" % parameter,
                   ctx.wrap(binding.value, parameter + "(", ")") + [import_edit], safe=False)
    fixes = [wrap]
    single_target = isinstance(stmt, ast.AnnAssign) or (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1)
    if single_target and ctx.stands_alone(stmt) and _first_binding(ctx, binding):
        # `self.x = (<value>)` -> `self.register_buffer("x", (<value>))`: replace up to the `=`, close at the end.
        head = _through_equals(ctx, stmt)
        end = ctx.range(stmt).end
        call = ctx.replace(head, '%s.register_buffer("%s", ' % (self_name, attr))
        fixes.append(ctx.fix('Register as a buffer: `register_buffer("%s", ...)`' % attr,
                             [call, ctx.replace(Range(end, end), ")")], safe=False))
        fixes.append(ctx.fix('Register as a non-persistent buffer (moved by .to(), not saved)',
                             [call, ctx.replace(Range(end, end), ", persistent=False)")],
                             # Safe only where a buffer is the likely intent: --fix must not freeze a weight.
                             safe=not _prefers_parameter(value, attr)))
    preferred = 0 if _prefers_parameter(value, attr) or len(fixes) == 1 else 1
    fixes = [ctx.fix(f.title, f.edits, f.is_safe, preferred=(i == preferred)) for i, f in enumerate(fixes)]
    return ctx.finding("TL101", message, stmt, severity, fixes)


def _through_equals(ctx, stmt) -> Range:
    """From the statement's start through `=` and the spaces after it."""
    after = stmt.annotation if isinstance(stmt, ast.AnnAssign) else stmt.targets[0]
    start = ctx.range(stmt).start
    offset = ctx.source.offset(ctx.range(after).end)
    text = ctx.source.text
    offset = text.index("=", offset) + 1
    while text[offset] in " \t":
        offset += 1
    return Range(start, ctx.source.position(offset))


def _first_binding(ctx, binding) -> bool:
    """register_buffer raises when the attribute already exists: only offer it on the first assignment."""
    return all(other.stmt.lineno >= binding.stmt.lineno
               for other in binding.scope.cls.attr_assignments
               if other.name == binding.name and other.scope is binding.scope)
