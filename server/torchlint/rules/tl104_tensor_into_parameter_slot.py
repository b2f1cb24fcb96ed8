"""TL104 tensor-into-parameter-slot: a plain tensor assigned where a Module holds a Parameter."""
from __future__ import annotations

import ast
from typing import Optional, Tuple

from ..analysis import torch_names as tn
from ..analysis.findings import Severity
from ..analysis.scopes import encloses
from ..analysis.values import Kind
from .base import Rule

PLAIN_TENSOR = (Kind.TENSOR, Kind.MOVED_PARAMETER)


class TensorIntoParameterSlot(Rule):
    code = "TL104"
    name = "tensor-into-parameter-slot"
    summary = "plain tensor assigned to an attribute that holds an nn.Parameter: raises TypeError"
    severity = Severity.ERROR

    def check(self, ctx):
        for target, value, stmt, scope in ctx.index.attribute_stores:
            if _lost_by_move(ctx, value):
                continue
            # Most stores are plainly no tensor: ask the slow (jedi) layer about a value only
            # when names already know it is a tensor, or already see a parameter slot there.
            with ctx.classifier.names_only():
                named = ctx.classify(value, scope).kind
                slot_seen = named is Kind.UNKNOWN and _slot(ctx, target, stmt, scope) is not False
                if named not in PLAIN_TENSOR and not slot_seen:
                    continue
            if named not in PLAIN_TENSOR and ctx.classify(value, scope).kind not in PLAIN_TENSOR:
                continue
            origin = _slot(ctx, target, stmt, scope)
            if origin is not False:
                yield _finding(ctx, target, value, stmt, origin, scope)
        yield from _plain_registrations(ctx)


def _plain_registrations(ctx):
    """`self.register_parameter("w", torch.rand(3))`: a plain tensor where only a Parameter or None goes."""
    for call in ctx.index.calls:
        func = call.func
        scope = ctx.index.call_scopes.get(id(call))
        if not (isinstance(func, ast.Attribute) and func.attr == "register_parameter" and len(call.args) == 2
                and scope is not None and scope.is_self(func.value)):
            continue
        value = call.args[1]
        if ctx.classify(value, scope).kind not in PLAIN_TENSOR:
            continue
        parameter, import_edit = ctx.spell("torch.nn.Parameter")
        message = ("`register_parameter(%s, ...)` is given a plain tensor: it raises TypeError at run time "
                   "(only an nn.Parameter or None can be registered)" % ctx.text(call.args[0]))
        fix = ctx.fix("Wrap in `%s(...)`" % parameter, ctx.wrap(value, parameter + "(", ")") + [import_edit],
                      safe=True, preferred=True)
        yield ctx.finding("TL104", message, call, TensorIntoParameterSlot.severity, (fix,))


def _slot(ctx, target: ast.Attribute, stmt, scope):
    if scope.is_self(target.value) and scope.cls is not None and scope.cls.is_module:
        return _own_slot(ctx, scope, target.attr, stmt)
    return _slot_of(ctx, target, scope)


def _lost_by_move(ctx, value: ast.expr) -> bool:
    """`nn.Parameter(t).cuda()` itself: TL103 reports it, and its fix mends this assignment too."""
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and isinstance(value.func.value, ast.Call) and ctx.qualify(value.func.value.func) == "torch.nn.Parameter")


def _unregistered(ctx, cls, attr: str) -> bool:
    """`del self._parameters["weight"]` (weight_norm style): the name is a plain attribute now."""
    return any(attr in info.unregistered for info in ctx.class_chain(cls))


def _own_slot(ctx, scope, attr: str, stmt):
    """`self.<attr> = t` in a method: False when it is no parameter slot, else (where it became one, why)."""
    cls = scope.cls
    if _unregistered(ctx, cls, attr) or any(attr in info.registered_buffers for info in ctx.class_chain(cls)):
        return False
    places = []  # (statement or call, method scope) that put a Parameter there
    for info in ctx.class_chain(cls):
        if attr in info.registered_parameters:
            node = info.registered_parameters[attr]
            places.append((node, _scope_of(info, node)))
    mixed = False
    for binding in ctx.classifier.class_attribute_bindings(cls, attr):
        if binding.value is None:
            continue
        kind = ctx.classify(binding.value, binding.scope).kind
        if kind is Kind.PARAMETER:
            places.append((binding.stmt, binding.scope))
        elif binding.scope.name == "__init__" and kind in PLAIN_TENSOR + (Kind.BUFFER,):
            mixed = True  # a Parameter under one option, a tensor under another
    if not places and scope.name != "__init__":
        places = _inherited_from_layer(ctx, cls, attr)
    if not places:
        return False
    if scope.name == "__init__":
        earlier = [node for node, where in places if where is scope and _runs_before(ctx, node, stmt)]
        return _registered_here(earlier[0], attr) if earlier else False
    if mixed:
        return False
    place = places[0][0]
    return place if isinstance(place, tuple) else _registered_here(place, attr)


def _inherited_from_layer(ctx, cls, attr: str):
    """`class MaskedLinear(nn.Linear)`: the torch base class registers `weight` and `bias`."""
    for info in ctx.class_chain(cls):
        for base in info.node.bases:
            layer = ctx.qualify(base)
            if attr in tn.LAYER_PARAMETERS.get(layer, ()):
                note = "`%s` is a Parameter of the base class %s" % (attr, layer.replace("torch.nn.", "nn."))
                return [((base, note), None)]
    return []


def _registered_here(node, attr: str):
    return node, "`%s` becomes a Parameter here" % attr


def _scope_of(info, node) -> Optional[object]:
    for scope in info.method_scopes.values():
        if scope.node.lineno <= node.lineno <= scope.node.end_lineno:
            return scope
    return None


def _runs_before(ctx, node, stmt) -> bool:
    """An earlier statement in a block that encloses ``stmt`` (not the other branch of an if)."""
    if node.lineno >= stmt.lineno:
        return False
    earlier = _statement_of(ctx, node)
    if earlier is None:
        return False
    return encloses(ctx.index, earlier, stmt)


def _statement_of(ctx, node):
    """A register_parameter(...) call is recorded as the call; find its statement."""
    if isinstance(node, ast.stmt):
        return node
    for stmt, _ in ctx.index.expr_statements:
        if stmt.value is node:
            return stmt
    return None


def _slot_of(ctx, target: ast.Attribute, scope):
    """`<module>.<attr> = t` on a layer or a Module class of this file with that parameter: False when it is
    no parameter slot, else (where it became one, why) or None when that place is unknown."""
    owner = ctx.classify(target.value, scope)
    if owner.kind is not Kind.MODULE or owner.module_class is None:
        return False
    attr = target.attr
    if attr in tn.LAYER_PARAMETERS.get(owner.module_class, ()):
        built = _constructed_at(ctx, target.value, scope)
        if built is None:
            return None
        layer = owner.module_class.replace("torch.nn.", "nn.")
        return built, "the %s is built here; it registers `%s` as a Parameter" % (layer, attr)
    cls = ctx.classes.get(owner.module_class)
    if cls is None or not cls.is_module or _unregistered(ctx, cls, attr):
        return False
    if ctx.classifier.attribute_of(cls, attr).kind is not Kind.PARAMETER:
        return False
    for info in ctx.class_chain(cls):
        if attr in info.registered_parameters:
            return _registered_here(info.registered_parameters[attr], attr)
    for binding in ctx.classifier.class_attribute_bindings(cls, attr):
        if binding.value is not None and ctx.classify(binding.value, binding.scope).kind is Kind.PARAMETER:
            return _registered_here(binding.stmt, attr)
    return None


def _constructed_at(ctx, owner: ast.expr, scope) -> Optional[ast.AST]:
    """Where the layer was built: `layer = nn.Linear(...)` or `self.fc = nn.Linear(...)`."""
    if isinstance(owner, ast.Name):
        while scope is not None:
            bindings = scope.locals.get(owner.id)
            if bindings:
                return bindings[0].stmt if len(bindings) == 1 else None
            scope = scope.parent
        return None
    if isinstance(owner, ast.Attribute):
        holder = ctx.classify(owner.value, scope)
        if scope is not None and scope.is_self(owner.value) and scope.cls is not None:
            cls = scope.cls
        elif holder.kind is Kind.MODULE:
            cls = ctx.classes.get(holder.module_class or "")
        else:
            cls = None
        if cls is not None:
            for binding in ctx.classifier.class_attribute_bindings(cls, owner.attr):
                if binding.value is not None and ctx.classify(binding.value, binding.scope).kind is Kind.MODULE:
                    return binding.stmt
    return None


def _finding(ctx, target: ast.Attribute, value: ast.expr, stmt, origin: Optional[Tuple[ast.AST, str]], scope):
    name = ctx.text(target)
    message = ("`%s` holds a registered nn.Parameter: assigning a plain tensor to it raises TypeError at run "
               "time (Module.__setattr__ accepts only a Parameter or None there)" % name)
    related = (ctx.related(*origin),) if origin else ()
    alone = isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and ctx.stands_alone(stmt)
    derived = _mentions(value, target)
    in_forward = _in_forward(ctx, scope)
    same_shape = _same_shape(ctx, target, value, scope) if not derived else _keeps_shape(value, target)
    parameter, import_edit = ctx.spell("torch.nn.Parameter")
    replace = ctx.fix("Replace the parameter: wrap in `%s(...)` (a new tensor the optimizer may not know)"
                      % parameter, ctx.wrap(value, parameter + "(", ")") + [import_edit], safe=False)
    copy = None
    if alone and same_shape is not False:
        block, no_grad_import = ctx.no_grad_block(stmt, "%s.copy_(%s)" % (name, ctx.text(value)))
        copy = ctx.fix("Copy into the existing parameter: `with %s(): %s.copy_(...)`%s"
                       % (ctx.spell("torch.no_grad")[0], name, "" if same_shape else " (the shapes must match)"),
                       [ctx.replace(stmt, block), no_grad_import], safe=False)
    if derived and in_forward:
        # A differentiable result of the parameter itself, in forward: copying it back would change
        # the weights on every call and cut the graph; a new Parameter would drop the trained one.
        # Where no local can stand in (assigned under a branch or a loop), no fix: a new Parameter
        # made in forward would leave the trained one behind on every call.
        local = _local_rewrite(ctx, target, stmt, scope)
        fixes = [local] if local is not None else []
        message += ("; it is computed from the parameter itself in forward, so it is neither a copy nor a new "
                    "parameter: keep it in a local variable")
    elif copy is not None and (same_shape or derived):
        fixes = [copy, replace]
    else:
        fixes = [replace] + ([copy] if copy is not None else [])
    fixes = [ctx.fix(f.title, f.edits, f.is_safe, preferred=(i == 0)) for i, f in enumerate(fixes)]
    return ctx.finding("TL104", message, stmt, TensorIntoParameterSlot.severity, fixes, related)


def _mentions(value: ast.expr, target: ast.Attribute) -> bool:
    wanted = ast.dump(target.value), target.attr
    return any(isinstance(n, ast.Attribute) and (ast.dump(n.value), n.attr) == wanted for n in ast.walk(value))


# Operations on the parameter that keep its shape: elementwise arithmetic and functions.
_SHAPE_CHANGING = frozenset("""
view reshape flatten unflatten transpose permute t T mT squeeze unsqueeze expand repeat sum mean prod amax amin
max min norm matmul mm bmm einsum cat stack narrow select index_select gather chunk split
""".split())


def _keeps_shape(value: ast.expr, target: ast.Attribute):
    """True when a value computed from the parameter keeps its shape (elementwise), None when unsure."""
    for node in ast.walk(value):
        if isinstance(node, ast.Subscript) or (isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult)):
            return None
        name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
        if name in _SHAPE_CHANGING:
            return None
    return True


def _same_shape(ctx, target: ast.Attribute, value: ast.expr, scope):
    """True / False when both shapes are known from literal sizes (`nn.Linear(3, 4).weight` and
    `torch.ones(4, 3)`), else None."""
    wanted = _layer_parameter_shape(ctx, target, scope)
    given = _factory_shape(ctx, value)
    if wanted is None or given is None:
        return None
    return wanted == given


def _layer_parameter_shape(ctx, target: ast.Attribute, scope):
    built = _constructed_at(ctx, target.value, scope)
    call = getattr(built, "value", None)
    if not isinstance(call, ast.Call) or ctx.qualify(call.func) != "torch.nn.Linear" or len(call.args) < 2:
        return None
    sizes = [a.value for a in call.args[:2] if isinstance(a, ast.Constant) and type(a.value) is int]
    if len(sizes) != 2:
        return None
    return {"weight": (sizes[1], sizes[0]), "bias": (sizes[1],)}.get(target.attr)


def _factory_shape(ctx, value: ast.expr):
    if not (isinstance(value, ast.Call) and ctx.qualify(value.func) in (
            "torch.zeros", "torch.ones", "torch.empty", "torch.randn", "torch.rand", "torch.full")):
        return None
    args = value.args[:-1] if ctx.qualify(value.func) == "torch.full" else value.args
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = args[0].elts
    sizes = [a.value for a in args if isinstance(a, ast.Constant) and type(a.value) is int]
    return tuple(sizes) if len(sizes) == len(args) and sizes else None


def _in_forward(ctx, scope) -> bool:
    cls = scope.cls if scope is not None else None
    if cls is None or not cls.is_module:
        return False
    forward = ctx.forward_reach(cls)
    return forward is not None and scope.name in forward.methods


def _local_rewrite(ctx, target: ast.Attribute, stmt, scope):
    """`self.w = F.softmax(self.w)` then `x * self.w` -> `w = F.softmax(self.w)` then `x * w`.

    Only plain reads after the assignment become the local; a use that works on the parameter
    itself (`self.w.data.clamp_()`, `self.w.grad`, given to an optimizer) stays `self.w`. None when
    the local could be unbound or stale at a read: the assignment in a branch or a loop, or the
    attribute assigned again or deleted in the method."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1) or not _runs_once(ctx, stmt, scope):
        return None
    names = {n.id for n in ast.walk(scope.node) if isinstance(n, ast.Name)}
    local = target.attr if target.attr not in names else target.attr + "_value"
    if local in names or not local.isidentifier():
        return None
    edits = [ctx.replace(target, local)]
    kept = 0
    wanted = ast.dump(target.value), target.attr
    end = stmt.end_lineno, stmt.end_col_offset
    for node in ast.walk(scope.node):
        if not (isinstance(node, ast.Attribute) and (ast.dump(node.value), node.attr) == wanted) or node is target:
            continue
        if not isinstance(node.ctx, ast.Load):
            return None  # assigned again or deleted: the rest of the method is not this value's
        if (node.lineno, node.col_offset) < end:
            continue  # before the assignment (or in its value): the parameter, as written
        if _works_on_parameter(ctx, node):
            kept += 1
        else:
            edits.append(ctx.replace(node, local))
    title = "Keep the result in a local variable `%s` (the parameter stays as it is and trains)" % local
    if kept:
        title += "; the uses that work on the parameter itself stay `%s`" % ctx.text(target)
    return ctx.fix(title, edits, safe=False)


def _runs_once(ctx, stmt, scope) -> bool:
    """The assignment runs exactly once per call: not under an if, a loop, a try or a match."""
    node = ctx.parent(stmt)
    while node is not None and node is not scope.node:
        if not isinstance(node, (ast.With, ast.AsyncWith)):
            return False
        node = ctx.parent(node)
    return node is scope.node


# Attributes and methods of a tensor that reach the Parameter object itself, not its value.
_PARAMETER_HANDLES = frozenset(("data", "grad", "register_hook", "retain_grad",
                                "register_post_accumulate_grad_hook"))
_TAKES_PARAMETERS = frozenset(("add_param_group", "register_parameter", "register_buffer"))


def _works_on_parameter(ctx, node: ast.Attribute) -> bool:
    """`self.w` used as the object: mutated (`.data`, `.grad`, an in-place `_` method, an item or
    attribute stored), compared by identity, or handed to something that keeps or changes it (an
    optimizer, an in-place function such as `nn.init.zeros_`, `out=`)."""
    parent = ctx.parent(node)
    if isinstance(parent, ast.Attribute):
        attr = parent.attr
        return (attr in _PARAMETER_HANDLES or not isinstance(parent.ctx, ast.Load)
                or (attr.endswith("_") and not attr.startswith("__")))
    if isinstance(parent, ast.Subscript):
        return parent.value is node and not isinstance(parent.ctx, ast.Load)
    if isinstance(parent, ast.Compare):
        return any(isinstance(op, (ast.Is, ast.IsNot)) for op in parent.ops)
    child = node
    while isinstance(parent, (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.Starred, ast.keyword)):
        if isinstance(parent, ast.keyword) and parent.arg == "out":
            return True
        child, parent = parent, ctx.parent(parent)
    if not isinstance(parent, ast.Call) or parent.func is child:
        return False
    func = parent.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    qualified = ctx.qualify(func) or ""
    return (called == "id" or called in _TAKES_PARAMETERS or qualified.startswith("torch.optim.")
            or (called.endswith("_") and not called.startswith("__")))
