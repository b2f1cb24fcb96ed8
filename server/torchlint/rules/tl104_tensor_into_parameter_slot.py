"""TL104 tensor-into-parameter-slot: a plain tensor assigned where a Module holds a Parameter."""
from __future__ import annotations

import ast
from typing import Iterator, List, Literal, Optional, Tuple, Union

from ..analysis import torch_names as tn
from ..analysis.context import FileContext
from ..analysis.findings import Finding, Fix, Severity
from ..analysis.scopes import ClassInfo, Scope, encloses
from ..analysis.source import Located, first_line, last_line
from ..analysis.values import Kind
from .cleanups import merge_no_grad_blocks
from .base import Rule

PLAIN_TENSOR = (Kind.TENSOR, Kind.MOVED_PARAMETER)


class TensorIntoParameterSlot(Rule):
    code = "TL104"
    name = "tensor-into-parameter-slot"
    cleanups = (merge_no_grad_blocks,)
    summary = "plain tensor assigned to an attribute that holds an nn.Parameter: raises TypeError"
    severity = Severity.ERROR

    def find(self, ctx: FileContext) -> Iterator[Finding]:
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


def _plain_registrations(ctx: FileContext) -> Iterator[Finding]:
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
        yield ctx.finding(message, call, (fix,))


# Where an attribute became a parameter slot, and why: the node, and what happened there.
Origin = Tuple[Located, str]
# A registration of a Parameter: the call or statement, or an origin outside the class's methods; the
# method it is in (None outside one).
Place = Tuple[Union[ast.stmt, ast.expr, Origin], Optional[Scope]]


def _slot(ctx: FileContext, target: ast.Attribute, stmt: ast.stmt, scope: Scope) -> Union[Literal[False], None, Origin]:
    """False when ``target`` is no parameter slot, else where it became one (None: unknown)."""
    if scope.is_self(target.value) and scope.cls is not None and scope.cls.is_module:
        return _own_slot(ctx, scope, target.attr, stmt)
    return _slot_of(ctx, target, scope)


def _lost_by_move(ctx: FileContext, value: ast.expr) -> bool:
    """`nn.Parameter(t).cuda()` itself: TL103 reports it, and its fix mends this assignment too."""
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and isinstance(value.func.value, ast.Call) and ctx.qualify(value.func.value.func) == "torch.nn.Parameter")


def _unregistered(ctx: FileContext, cls: ClassInfo, attr: str) -> bool:
    """`del self._parameters["weight"]` (weight_norm style): the name is a plain attribute now."""
    return any(attr in info.unregistered for info in ctx.class_chain(cls))


def _own_slot(ctx: FileContext, scope: Scope, attr: str, stmt: ast.stmt) -> Union[Literal[False], Origin]:
    """`self.<attr> = t` in a method: False when it is no parameter slot, else (where it became one, why)."""
    cls = scope.cls
    assert cls is not None  # (a method of a Module class: _slot)
    if _unregistered(ctx, cls, attr) or any(attr in info.registered_buffers for info in ctx.class_chain(cls)):
        return False
    places: List[Place] = []  # (statement or call, method scope) that put a Parameter there
    for info in ctx.class_chain(cls):
        if attr in info.registered_parameters:
            node = info.registered_parameters[attr]
            places.append((node, _scope_of(info, node)))
    plain: List[Scope] = []  # the methods that assign it a plain tensor or a buffer
    for binding in ctx.classifier.class_attribute_bindings(cls, attr):
        if binding.value is None:
            continue
        kind = ctx.classify(binding.value, binding.scope).kind
        if kind is Kind.PARAMETER:
            places.append((binding.stmt, binding.scope))
        elif kind in PLAIN_TENSOR + (Kind.BUFFER,):
            plain.append(binding.scope)
    if not places and scope.name != "__init__":
        places = _inherited_from_layer(ctx, cls, attr)
    if not places:
        return False
    built = ctx.construction(cls) if scope.name != "__init__" else None
    if scope.name == "__init__" or built is not None and scope in built:
        earlier = [node for node, where in places
                   if where is scope and not isinstance(node, tuple) and _runs_before(ctx, node, stmt)]
        if earlier:
            return _registered_here(earlier[0], attr)
        # A helper only construction runs (`self.initialize_beta()`): a Parameter it makes later
        # does not count; one made elsewhere (before the call, in __init__) may.
        places = [(node, where) for node, where in places if where is not scope]
        if scope.name == "__init__" or not places:
            return False
    if any(where is not scope and (where.name == "__init__" or built is not None and where in built)
           for where in plain):
        return False  # construction makes it a Parameter under one option, a tensor under another
    place = places[0][0]
    return place if isinstance(place, tuple) else _registered_here(place, attr)


def _inherited_from_layer(ctx: FileContext, cls: ClassInfo, attr: str) -> List[Place]:
    """`class MaskedLinear(nn.Linear)`: the torch base class registers `weight` and `bias`."""
    for info in ctx.class_chain(cls):
        for base in info.node.bases:
            layer = ctx.qualify(base)
            if layer is not None and attr in tn.LAYER_PARAMETERS.get(layer, ()):
                note = "`%s` is a Parameter of the base class %s" % (attr, layer.replace("torch.nn.", "nn."))
                return [((base, note), None)]
    return []


def _registered_here(node: Located, attr: str) -> Origin:
    return node, "`%s` becomes a Parameter here" % attr


def _scope_of(info: ClassInfo, node: Located) -> Optional[Scope]:
    for scope in info.method_scopes.values():
        if first_line(scope.node) <= node.lineno <= last_line(scope.node):
            return scope
    return None


def _runs_before(ctx: FileContext, node: Union[ast.stmt, ast.expr], stmt: ast.stmt) -> bool:
    """An earlier statement in a block that encloses ``stmt`` (not the other branch of an if)."""
    if node.lineno >= stmt.lineno:
        return False
    earlier = _statement_of(ctx, node)
    if earlier is None:
        return False
    return encloses(ctx.index, earlier, stmt)


def _statement_of(ctx: FileContext, node: Union[ast.stmt, ast.expr]) -> Optional[ast.stmt]:
    """A register_parameter(...) call is recorded as the call; find its statement."""
    if isinstance(node, ast.stmt):
        return node
    for stmt, _ in ctx.index.expr_statements:
        if stmt.value is node:
            return stmt
    return None


def _slot_of(ctx: FileContext, target: ast.Attribute, scope: Scope) -> Union[Literal[False], None, Origin]:
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


def _constructed_at(ctx: FileContext, owner: ast.expr, scope: Optional[Scope]) -> Optional[ast.stmt]:
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
        cls: Optional[ClassInfo]
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


def _finding(ctx: FileContext, target: ast.Attribute, value: ast.expr, stmt: ast.stmt, origin: Optional[Origin],
             scope: Scope) -> Finding:
    name = ctx.text(target)
    message = ("`%s` holds a registered nn.Parameter: assigning a plain tensor to it raises TypeError at run "
               "time (Module.__setattr__ accepts only a Parameter or None there)" % name)
    related = (ctx.related(*origin),) if origin else ()
    alone = isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and ctx.stands_alone(stmt)
    derived = _mentions(value, target)
    in_forward = _in_forward(ctx, scope)
    same_shape = _same_shape(ctx, target, value, scope, stmt)
    parameter, import_edit = ctx.spell("torch.nn.Parameter")
    replace = ctx.fix("Replace the parameter: wrap in `%s(...)` (a new tensor the optimizer may not know)"
                      % parameter, ctx.wrap(value, parameter + "(", ")") + [import_edit], safe=False)
    copy = None
    if alone and same_shape:
        # copy_ only where the shape surely stays: into a parameter of another shape it raises.
        block, no_grad_import = ctx.no_grad_block(stmt, "%s.copy_(%s)" % (name, ctx.text(value)))
        copy = ctx.fix("Copy into the existing parameter: `with %s(): %s.copy_(...)`"
                       % (ctx.spell("torch.no_grad")[0], name),
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
    elif copy is not None:
        fixes = [copy, replace]
    else:
        fixes = [replace]
        if derived and alone:
            message += ("; the value may not have the parameter's shape (indexing, a reshape, or a call torchlint "
                        "cannot size), so the fix makes it a new Parameter rather than copying into the old one")
    fixes = [ctx.fix(f.title, f.edits, f.is_safe, preferred=(i == 0)) for i, f in enumerate(fixes)]
    return ctx.finding(message, stmt, fixes, related)


def _mentions(value: ast.expr, target: ast.Attribute) -> bool:
    wanted = ast.dump(target.value), target.attr
    return any(isinstance(n, ast.Attribute) and (ast.dump(n.value), n.attr) == wanted for n in ast.walk(value))


def _same_shape(ctx: FileContext, target: ast.Attribute, value: ast.expr, scope: Scope, stmt: ast.stmt
               ) -> Optional[bool]:
    """True when the value surely has the parameter's shape, dtype and device (copy_ then does what the
    assignment meant), False when it surely has another shape, None when that cannot be told."""
    shapes = _Shapes(ctx, target, scope, stmt, _layer_parameter_shape(ctx, target, scope))
    given = shapes.of(value, 4)
    if given is _SAME:
        return True
    if given is None or shapes.target is None:
        return None
    return given == shapes.target


# A shape: sizes, or _SAME (whatever the parameter's shape is); _SCALAR for a number.
Shape = Union[Tuple[int, ...], str]
_SAME = "the parameter's own shape"
_SCALAR: Tuple[int, ...] = ()
# Methods that keep the shape of the tensor they are called on.
_UNARY_METHODS = frozenset("""
abs neg exp log log1p expm1 sigmoid tanh relu sqrt rsqrt sign sin cos round floor ceil trunc reciprocal
clamp clamp_min clamp_max clip detach clone contiguous softmax log_softmax nan_to_num square erf
abs_ neg_ exp_ sigmoid_ tanh_ relu_ sqrt_ clamp_ clamp_min_ clamp_max_ clip_ zero_ fill_ normal_ uniform_
""".split())
# Methods that broadcast the tensor with their first argument.
_BINARY_METHODS = frozenset("add sub mul div pow maximum minimum add_ sub_ mul_ div_ pow_ lerp lerp_".split())
_UNARY_FUNCTIONS = frozenset("torch." + n for n in """
abs neg exp log sigmoid tanh relu sqrt rsqrt sign sin cos round floor ceil clamp clip softmax log_softmax
nn.functional.softmax nn.functional.log_softmax nn.functional.relu nn.functional.gelu nn.functional.silu
nn.functional.normalize nn.functional.sigmoid nn.functional.tanh nn.functional.softplus nn.functional.dropout
""".split())
_BINARY_FUNCTIONS = frozenset("torch." + n for n in "add sub mul div pow maximum minimum".split())
_SIZED_FACTORIES = frozenset("torch." + n for n in "zeros ones empty randn rand".split())
_LIKE_FACTORIES = frozenset("torch." + n for n in "zeros_like ones_like empty_like randn_like rand_like".split())


class _Shapes:
    """The shape of a value as far as literal sizes and shape-keeping operations tell: a tuple of ints,
    _SAME (whatever the parameter's shape is), _SCALAR for a number, or None (unknown, or changed by
    indexing, a reshape, a reduction, a matmul or a call it does not know). dtype and device
    conversions (`.half()`, `.to(...)`) answer None: copy_ would undo them."""

    def __init__(self, ctx: FileContext, target: ast.Attribute, scope: Scope, stmt: ast.stmt,
                 target_shape: Optional[Tuple[int, ...]]) -> None:
        self.ctx, self.scope, self.stmt = ctx, scope, stmt
        self.wanted = ast.dump(target.value), target.attr
        self.target = target_shape

    def of(self, node: ast.expr, depth: int) -> Optional[Shape]:
        if depth <= 0:
            return None
        if isinstance(node, ast.Constant):
            return _SCALAR if type(node.value) in (int, float) else None
        if isinstance(node, ast.Attribute):
            if (ast.dump(node.value), node.attr) == self.wanted:
                return _SAME
            if node.attr == "data":
                return self.of(node.value, depth)
            return None
        if isinstance(node, ast.UnaryOp):
            return self.of(node.operand, depth)
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.MatMult):
                return None
            return self.broadcast(self.of(node.left, depth - 1), self.of(node.right, depth - 1))
        if isinstance(node, ast.Name):
            return self._name(node, depth)
        if isinstance(node, ast.Call):
            return self._call(node, depth)
        return None  # indexing, slicing and everything else

    def _name(self, node: ast.Name, depth: int) -> Optional[Shape]:
        bindings = self.scope.locals.get(node.id, ()) if self.scope is not None else ()
        if len(bindings) != 1 or bindings[0].value is None or bindings[0].stmt.lineno >= self.stmt.lineno:
            return None
        return self.of(bindings[0].value, depth - 1)

    def _call(self, call: ast.Call, depth: int) -> Optional[Shape]:
        qualified = self.ctx.qualify(call.func)
        if qualified is not None:
            if not all(self._plain_option(k) for k in call.keywords):
                return None
            if qualified in _SIZED_FACTORIES:
                return _literal_sizes(call.args)
            if qualified == "torch.full" and len(call.args) == 2:
                return _literal_sizes(call.args[:1])
            if qualified in _LIKE_FACTORIES and len(call.args) == 1:
                return self.of(call.args[0], depth - 1)
            if qualified in _UNARY_FUNCTIONS and call.args:
                return self.of(call.args[0], depth - 1)
            if qualified in _BINARY_FUNCTIONS and len(call.args) == 2:
                return self.broadcast(self.of(call.args[0], depth - 1), self.of(call.args[1], depth - 1))
            return None
        func = call.func
        if not isinstance(func, ast.Attribute) or any(k.arg == "dtype" for k in call.keywords):
            return None
        if func.attr in _UNARY_METHODS:
            return self.of(func.value, depth - 1)
        if func.attr in _BINARY_METHODS and len(call.args) == 1:
            return self.broadcast(self.of(func.value, depth - 1), self.of(call.args[0], depth - 1))
        return None

    def _plain_option(self, keyword: ast.keyword) -> bool:
        """A factory keyword that leaves a value a Parameter takes as it is: `device=` (copy_ moves it
        to the parameter's device anyway), `requires_grad=`, the default float dtype; other
        keywords (`dim=`, `p=`) of the elementwise functions."""
        if keyword.arg == "dtype":
            return self.ctx.qualify(keyword.value) in ("torch.float", "torch.float32")
        return keyword.arg is not None

    def broadcast(self, left: Optional[Shape], right: Optional[Shape]) -> Optional[Shape]:
        """The shape two operands broadcast to, or None where it cannot be told."""
        if left is None or right is None:
            return None
        if left == _SCALAR:
            return right
        if right == _SCALAR or left == right:
            return left
        if isinstance(left, str) or isinstance(right, str):  # _SAME, the one shape in words
            if self.target is None:
                return None  # the parameter's shape next to another: larger or not, unknown
            left, right = (self.target if s is _SAME else s for s in (left, right))
            shape = self.broadcast(left, right)
            return _SAME if shape == self.target else shape
        width = max(len(left), len(right))
        left, right = (1,) * (width - len(left)) + left, (1,) * (width - len(right)) + right
        if any(a != b and 1 not in (a, b) for a, b in zip(left, right)):
            return None  # does not broadcast: it raises
        return tuple(max(a, b) for a, b in zip(left, right))


def _literal_sizes(args: List[ast.expr]) -> Optional[Tuple[int, ...]]:
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = args[0].elts
    sizes = [a.value for a in args if isinstance(a, ast.Constant) and type(a.value) is int]
    return tuple(sizes) if len(sizes) == len(args) and sizes else None


def _layer_parameter_shape(ctx: FileContext, target: ast.Attribute, scope: Scope) -> Optional[Tuple[int, ...]]:
    """The shape of `layer.weight` / `layer.bias` when the layer is built here with literal sizes."""
    built = _constructed_at(ctx, target.value, scope)
    call = getattr(built, "value", None)
    if not isinstance(call, ast.Call):
        return None
    layer = ctx.qualify(call.func)
    keywords = {k.arg for k in call.keywords}
    sizes = []
    for arg in call.args:
        if not (isinstance(arg, ast.Constant) and type(arg.value) is int):
            break
        sizes.append(arg.value)
    if layer == "torch.nn.Linear" and len(sizes) >= 2:
        return {"weight": (sizes[1], sizes[0]), "bias": (sizes[1],)}.get(target.attr)
    if layer == "torch.nn.Embedding" and len(sizes) >= 2:
        return {"weight": (sizes[0], sizes[1])}.get(target.attr)
    if layer in ("torch.nn.LayerNorm", "torch.nn.BatchNorm1d", "torch.nn.BatchNorm2d") and sizes:
        return (sizes[0],)
    if layer in ("torch.nn.Conv1d", "torch.nn.Conv2d") and len(sizes) >= 3 and not keywords & {"groups"}:
        kernel = (sizes[2],) * (1 if layer.endswith("1d") else 2)
        return {"weight": (sizes[1], sizes[0]) + kernel, "bias": (sizes[1],)}.get(target.attr)
    return None


def _in_forward(ctx: FileContext, scope: Scope) -> bool:
    cls = scope.cls if scope is not None else None
    if cls is None or not cls.is_module:
        return False
    forward = ctx.forward_reach(cls)
    return forward is not None and scope.name in forward.methods


def _local_rewrite(ctx: FileContext, target: ast.Attribute, stmt: ast.stmt, scope: Scope) -> Optional[Fix]:
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
    end = last_line(stmt), stmt.end_col_offset
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


def _runs_once(ctx: FileContext, stmt: ast.stmt, scope: Scope) -> bool:
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


def _works_on_parameter(ctx: FileContext, node: ast.Attribute) -> bool:
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
    child: ast.AST = node
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
