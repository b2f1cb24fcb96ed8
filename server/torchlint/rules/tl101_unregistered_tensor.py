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
                if _registered_elsewhere(ctx, cls, binding) or _reassigned_elsewhere(ctx, cls, binding.name, value):
                    continue
                uses = Uses.of(ctx, cls, binding.name)
                severity = ctx.graded(_grade(value, uses))
                if severity is not None:
                    yield _finding(ctx, binding, value, uses, severity)


def _registered_elsewhere(ctx, cls, binding) -> bool:
    """nn.Parameter / nn.Buffer assigned to the same name anywhere in the class."""
    for other in ctx.classifier.class_attribute_bindings(cls, binding.name):
        if other is not binding and other.value is not None:
            if ctx.classify(other.value, other.scope).kind in (Kind.PARAMETER, Kind.BUFFER, Kind.MODULE):
                return True
    return False


# Reads that do not compute with the values on a device: metadata, and copies to the host.
_NEUTRAL = frozenset(["shape", "dtype", "device", "ndim", "is_cuda", "size", "dim", "numel", "cpu", "numpy",
                      "tolist", "item", "clone"])
# Calls on the attribute that change it in place (an nn.Parameter there would be a leaf modified in place).
_IN_PLACE_OK = frozenset(["requires_grad_", "share_memory_"])


def _reassigned_elsewhere(ctx, cls, attr: str, value) -> bool:
    """The author manages this tensor on purpose, so __init__ only declares it: another method
    re-assigns it (run-time state, caches, `self.x = self.x.to(device)`)."""
    for other in ctx.classifier.class_attribute_bindings(cls, attr):
        if other.scope.name == "__init__" or other.value is None:
            continue
        if ctx.classify(other.value, other.scope).kind in (Kind.PARAMETER, Kind.BUFFER, Kind.MODULE):
            continue
        if not value.requires_grad or _moves(other.value):
            return True
    return False


class Uses:
    """How the methods of a class read ``self.<attr>`` (the evidence TL101 grades on)."""

    def __init__(self):
        self.computed_in_forward = 0  # torch computes with it as it is, in forward or what forward calls
        self.computed_elsewhere = 0  # the same in other methods (or forward is not in this file)
        self.passed_on = 0  # returned, stored, handed to another function: what happens there is unseen
        self.moved = 0  # `self.x.to(y.device)` and the like: the author moves it at each use
        self.written_in_place = False  # `self.x.add_(...)`, `self.x[i] = ...`, `self.x += ...`
        self.as_weight = False  # multiplied into the input or given as a weight: a learnable factor
        self.forward_seen = False  # the class's forward is in this file
        self.read_in_init = False  # __init__ reads it (to build other attributes)

    @classmethod
    def of(cls, ctx, info, attr: str) -> "Uses":
        uses = cls()
        methods = {}
        for owner in ctx.class_chain(info):
            for name, scope in owner.method_scopes.items():
                methods.setdefault(name, scope)
        forward = ctx.forward_reach(info)
        reachable = set(forward.methods) if forward is not None else None
        uses.forward_seen = forward is not None
        computed = {}
        for name, scope in methods.items():
            if scope.self_name is None:
                continue
            parents = ctx.nodes.parent
            for node in _reads(ctx, scope, attr):
                use = uses._read(ctx, name, node, parents)
                if name != "__init__" and use == "computed":
                    computed[name] = computed.get(name, 0) + 1
        for name, count in computed.items():
            if uses.moved:
                uses.passed_on += count  # moved by hand elsewhere: the author manages its device
            elif reachable is not None and name in reachable:
                uses.computed_in_forward += count
            else:
                uses.computed_elsewhere += count
        return uses

    def _read(self, ctx, method, node, parents) -> str:
        """Record one read; returns "computed" for a use on the tensor's device."""
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.written_in_place = True  # `self.x[...] = v` is a store on the subscript, so this is `del`
            return "write"
        # Climb through views and indexing: `self.x[:t].view(...).to(dev)` is still a moved read.
        current, parent = node, parents.get(id(node))
        while True:
            if isinstance(parent, ast.Subscript) and parent.value is current:
                if isinstance(parent.ctx, (ast.Store, ast.Del)):
                    self.written_in_place = True
                    return "write"
                current, parent = parent, parents.get(id(parent))
                continue
            if isinstance(parent, ast.Attribute) and parent.value is current:
                call = parents.get(id(parent))
                is_call = isinstance(call, ast.Call) and call.func is parent
                if is_call and parent.attr in tn.DEVICE_MOVES:
                    if method != "__init__":
                        self.moved += 1
                    return "moved"
                if is_call and parent.attr.endswith("_") and parent.attr not in _IN_PLACE_OK:
                    self.written_in_place = True
                    return "write"
                if parent.attr in _NEUTRAL:
                    return "neutral"
                if is_call and parent.attr in _VIEW_METHODS:
                    current, parent = call, parents.get(id(call))
                    continue
                if not is_call and parent.attr in ("T", "mT", "H", "mH", "data", "real", "imag"):
                    current, parent = parent, parents.get(id(parent))
                    continue
                return "computed" if is_call else "neutral"
            break
        if isinstance(parent, ast.keyword):  # f(x, weight=self.w): the call decides
            current, parent = parent, parents.get(id(parent))
        if isinstance(parent, ast.AugAssign) and parent.target is current:
            self.written_in_place = True
            return "write"
        if method == "__init__":
            self.read_in_init = True
            return "init"
        if isinstance(parent, ast.BinOp) and isinstance(parent.op, (ast.Mult, ast.MatMult)):
            self.as_weight = True
        if isinstance(parent, ast.Call) and (
                any(k is current and k.arg in ("weight", "bias") for k in parent.keywords)
                or (len(parent.args) > 1 and parent.args[1] is current and _functional_layer(parent))):
            self.as_weight = True
        if isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.Compare)) or (
                isinstance(parent, ast.Subscript) and parent.slice is current):
            return "computed"
        if isinstance(parent, ast.Call) and current is not parent.func:
            qualified = ctx.qualify(parent.func) or ""
            submodule = isinstance(parent.func, ast.Attribute) and isinstance(parent.func.value, ast.Name) \
                and parent.func.value.id == "self"  # self.proj(x, self.t): through Module.__call__
            if qualified.startswith("torch.") or submodule:
                return "computed"
        if isinstance(parent, ast.List) or isinstance(parent, ast.Tuple):
            holder = parents.get(id(parent))
            if isinstance(holder, ast.Call) and (ctx.qualify(holder.func) or "").startswith("torch."):
                return "computed"  # torch.cat([x, self.t])
        self.passed_on += 1
        return "passed"


# Calls that return a view of the same values: where the result goes decides the use.
_VIEW_METHODS = frozenset("""
view view_as reshape reshape_as expand expand_as unsqueeze squeeze flatten unflatten permute transpose t
contiguous narrow select chunk split detach float half double long int bool
""".split())


def _functional_layer(call: ast.Call) -> bool:
    """F.linear(x, w), F.conv2d(x, w), torch.matmul(x, w)..."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in ("linear", "conv1d", "conv2d", "conv3d", "matmul", "mm", "bmm", "embedding", "bilinear")


def _reads(ctx, scope, attr: str):
    """Every `self.<attr>` in a method except assignments of it, in the order `ast.walk` meets them."""
    table, parents = ctx.nodes, ctx.nodes.parent
    named = [p for p in table.positions_under(scope.node, ast.Attribute) if table.nodes[p].attr == attr]
    for node in table.in_walk_order(named):
        if scope.is_self(node.value):
            parent = parents.get(id(node))
            targets = parent.targets if isinstance(parent, ast.Assign) else [getattr(parent, "target", None)]
            if isinstance(parent, (ast.Assign, ast.AnnAssign)) and any(node is t for t in targets):
                continue  # an assignment of it, not a use
            yield node


def _grade(value, uses: Uses):
    """Error when it requires grad; a warning when forward computes with it as it is; a hint when
    each use moves it, only other methods compute with it, or it is handed on to code this rule does
    not follow; quiet (None) when nothing reads it outside __init__ but for its shape or a host copy,
    and either forward is in the file or __init__ only uses it to build something else."""
    if value.requires_grad:
        return Severity.ERROR
    if uses.computed_in_forward:
        return Severity.WARNING
    if uses.computed_elsewhere or uses.moved or uses.passed_on:
        return Severity.HINT
    if not uses.forward_seen and not uses.read_in_init:
        return Severity.WARNING  # forward is not in this file (a base elsewhere may use it): no evidence either way
    return None


def _moves(node) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in tn.DEVICE_MOVES
               for n in ast.walk(node))


def _prefers_parameter(value, uses: Uses) -> bool:
    """From how the tensor is used, not its name: trainable when it requires grad, or when forward
    multiplies the input by it or passes it as a weight; a buffer when written in place or a constant."""
    if value.requires_grad:
        return True
    return uses.as_weight and not uses.written_in_place


def _finding(ctx, binding, value, uses: Uses, severity):
    stmt, attr, self_name = binding.stmt, binding.name, binding.scope.self_name
    target = "%s.%s" % (self_name, attr)
    if value.requires_grad:
        message = ("`%s` requires grad but is a plain tensor attribute: it is not in parameters(), so the "
                   "optimizer never updates it, and it is not saved or moved by .to()" % target)
    elif uses.computed_in_forward:
        message = ("`%s` holds a tensor the Module does not register, and forward computes with it: after "
                   ".to()/.cuda() it stays behind on its old device, and state_dict() does not save it" % target)
    elif uses.moved and not uses.computed_elsewhere:
        message = ("`%s` holds a tensor the Module does not register; each use moves it (`.to(...)`), so it "
                   "works, but copies it on every call: a buffer moves once with the module" % target)
    else:
        message = ("`%s` holds a tensor the Module does not register: it is not in parameters() or "
                   "state_dict(), and .to()/.cuda() leave it behind" % target)

    prefers_parameter = _prefers_parameter(value, uses)
    buffers = []
    single_target = isinstance(stmt, ast.AnnAssign) or (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1)
    if single_target and ctx.stands_alone(stmt) and _first_binding(ctx, binding):
        # `self.x = (<value>)` -> `self.register_buffer("x", (<value>))`: replace up to the `=`, close at the end.
        head = _through_equals(ctx, stmt)
        end = ctx.range(stmt).end
        call = ctx.replace(head, '%s.register_buffer("%s", ' % (self_name, attr))
        buffers.append(ctx.fix('Register as a buffer: `register_buffer("%s", ...)`' % attr,
                               [call, ctx.replace(Range(end, end), ")")], safe=False))
        buffers.append(ctx.fix('Register as a non-persistent buffer (moved by .to(), not saved)',
                               [call, ctx.replace(Range(end, end), ", persistent=False)")],
                               # Safe only where a buffer is the likely intent: --fix must not freeze a weight.
                               safe=not prefers_parameter))
    fixes = []
    if not (uses.written_in_place and buffers) or value.requires_grad:
        # Not for a tensor written in place when a buffer can be offered: changing a leaf Parameter
        # in place raises once it requires grad.
        parameter, import_edit = ctx.spell("torch.nn.Parameter")
        fixes.append(ctx.fix("Wrap in `%s(...)` (trainable parameter)" % parameter,
                             ctx.wrap(binding.value, parameter + "(", ")") + [import_edit], safe=False))
    fixes += buffers
    if prefers_parameter or not buffers:
        preferred = 0
    elif uses.moved and not uses.computed_in_forward:
        preferred = len(fixes) - 1  # the non-persistent buffer: the same behaviour, without a copy per call
    else:
        preferred = len(fixes) - 2  # the buffer
    fixes = [ctx.fix(f.title, f.edits, f.is_safe, preferred=(i == preferred)) for i, f in enumerate(fixes)]
    where = ctx.range(stmt)
    if not single_target:
        # `self.h0 = self.c0 = <value>`: one finding per target, each starting at its own target.
        where = Range(ctx.range(_target(stmt, self_name, attr) or stmt).start, where.end)
    return ctx.finding("TL101", message, where, severity, fixes)


def _target(stmt, self_name: str, attr: str):
    """The `self.<attr>` among the targets of ``stmt`` (None when it is not one of them)."""
    for target in getattr(stmt, "targets", ()):
        for node in ast.walk(target):
            if isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name) \
                    and node.value.id == self_name:
                return node
    return None


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
