"""TL204 tensor-created-without-device: `torch.arange(n)` in forward, combined with the input."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Set, Tuple, Union, cast

from ..analysis import torch_names as tn
from ..analysis.context import FileContext
from ..analysis.findings import Edit, Finding, Range, Severity
from ..analysis.flow import enclosing_statement, loads_of, reaching_binding
from ..analysis.forward import PARAMETER_LAYERS
from ..analysis.scopes import ClassInfo, FunctionDefinition, Scope, called_method
from ..analysis.values import Kind, keyword
from .base import Rule, shorten

# Factories that make a tensor from sizes or Python data, on the default device unless told.
_FACTORIES = frozenset("torch." + n for n in """
zeros ones empty full rand randn randint randperm arange linspace logspace eye tensor as_tensor
tril_indices triu_indices empty_strided
""".split())
# Their `x.new_*` twins, which take x's device (and dtype).
_NEW_METHODS = {"torch.zeros": "new_zeros", "torch.ones": "new_ones", "torch.empty": "new_empty",
                "torch.full": "new_full", "torch.tensor": "new_tensor"}
# Calls that bring a tensor to another device: what follows is no longer on the CPU.
_MOVES = (tn.DEVICE_MOVES - {"cpu"}) | {"pin_memory"}
# Tensor methods that keep the device of the tensor they are called on.
_KEEP_DEVICE = (tn.TENSOR_METHODS - tn.DEVICE_MOVES - {"pin_memory"}) | frozenset(
    "masked_fill_ index_select expand unsqueeze_ split chunk unbind tensor_split".split())
_REDUCTIONS = frozenset("sum mean max min amax amin norm prod std var all any item".split())
# torch functions whose result is on the device of their (first) tensor argument, besides the
# tensor methods of the same name: `torch.exp(t)`, `torch.unsqueeze(t, -1)`.
_ELEMENTWISE = frozenset("""
sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh exp exp2 expm1 log log2 log10 log1p
sqrt rsqrt sigmoid logit erf erfc erfinv abs neg sign sgn floor ceil round trunc frac reciprocal
square clamp clip where softmax log_softmax relu cumsum cumprod flip fliplr flipud roll rot90 tril
triu diag diagonal squeeze unsqueeze flatten reshape transpose permute movedim swapaxes t narrow
repeat_interleave tile nan_to_num sort argsort topk cummax cummin logcumsumexp diff
""".split())
# torch functions whose result is on the device of their first argument, in `_on_model_device`.
_DEVICE_FOLLOWING = (tn.TENSOR_FACTORIES | _ELEMENTWISE) - frozenset(
    "from_numpy frombuffer asarray scalar_tensor".split())  # these make CPU tensors of anything
# torch functions that take several tensors and return tensors on their (common) device.
_GATHERING = frozenset("""
cat concat concatenate stack hstack vstack dstack column_stack meshgrid broadcast_tensors
cartesian_prod block_diag
""".split())
# The first input of `forward` is the batch, on the model's device, unless it says otherwise.
_NOT_THE_BATCH = ("len", "size", "shape", "count", "num", "device", "dtype", "steps")
# Names followed through locals before giving up: bounds the work in long methods.
_MAX_HOPS = 10
# torch functions (and tensor methods) whose tensor arguments must all be on one device.
_COMBINING = frozenset("""
cat concat concatenate stack hstack vstack where matmul mm bmm einsum add sub mul div maximum minimum
masked_fill gather index_select outer cdist lerp addcmul addcdiv baddbmm addmm eq ne lt le gt ge
logical_and logical_or bitwise_and bitwise_or pow atan2 fmod remainder take_along_dim bucketize
searchsorted masked_scatter masked_select mul_ add_ sub_ div_ masked_fill_ copysign
""".split())
# torch.nn.functional calls whose tensor arguments are all used together (not placeholders).
_FUNCTIONAL_COMBINING = frozenset("torch.nn.functional." + n for n in """
linear bilinear embedding conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d
layer_norm group_norm rms_norm batch_norm instance_norm scaled_dot_product_attention cosine_similarity
pairwise_distance grid_sample cross_entropy nll_loss mse_loss l1_loss smooth_l1_loss huber_loss
binary_cross_entropy binary_cross_entropy_with_logits kl_div prelu
""".split())
_BINARY = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.MatMult,
           ast.BitAnd, ast.BitOr, ast.BitXor)


@dataclass
class _Meeting:
    node: Union[ast.expr, ast.stmt]  # the operation that combines the tensor with the device's
    partner: str  # what it meets, as the message says it
    device: str  # an expression of the right device, valid where the factory is, for the fix
    tensor: str  # a tensor on that device (for x.new_zeros)


class TensorCreatedWithoutDevice(Rule):
    code = "TL204"
    name = "tensor-created-without-device"
    summary = "tensor made in forward without device= and combined with the input: fails on the first GPU run"
    severity = Severity.WARNING

    def find(self, ctx: FileContext) -> Iterator[Finding]:
        if any(ctx.qualify(call.func) == "torch.set_default_device" for call in ctx.index.calls):
            return  # factories follow the default device the program sets
        for cls in ctx.module_classes:
            reached = ctx.forward_reach(cls)
            if reached is None:
                continue
            methods: Dict[str, _Method] = {}
            for name, scope in reached.methods.items():
                methods[name] = _Method(ctx, cls, scope, methods)
            try:
                for method in list(methods.values()):
                    yield from method.findings()
            finally:
                methods.clear()  # each method holds the table: a cycle that would keep the file's tree


class _Method:
    def __init__(self, ctx: FileContext, cls: ClassInfo, scope: Scope,
                 methods: Optional[Dict[str, _Method]] = None) -> None:
        self.ctx, self.cls, self.scope = ctx, cls, scope
        self.function = cast(FunctionDefinition, scope.node)  # (forward and the methods it reaches)
        self.methods = methods if methods is not None else {}  # the other methods forward reaches, by name
        self.parent_of = ctx.nodes.parent
        self._evidence: Optional[Set[str]] = None  # the inputs the code puts on the model's device
        self._factory_stmt: Optional[ast.stmt] = None  # the statement of the factory being followed
        # (id, name) of the assignments already followed from it (loops re-bind)
        self._followed: Set[Tuple[int, str]] = set()

    def findings(self) -> Iterator[Finding]:
        table = self.ctx.nodes
        calls = cast(List[ast.Call], table.nodes)  # (read at ast.Call positions)
        factories = [p for p in table.positions_under(self.scope.node, ast.Call)
                     if self.ctx.qualify(calls[p].func) in _FACTORIES]
        for node in cast(List[ast.Call], table.in_walk_order(factories)):
            qualified = cast(str, self.ctx.qualify(node.func))  # (a factory's name)
            if not self._on_default_device(node, qualified):
                continue
            if self._guarded(node):
                continue
            self._factory_stmt = enclosing_statement(node, self.parent_of)
            self._followed = set()
            meeting = self._follow(node, depth=0)
            if meeting is None:
                continue
            yield self._finding(node, qualified, meeting)

    # -- the factory -----------------------------------------------------------------------
    def _on_default_device(self, call: ast.Call, qualified: str) -> bool:
        if any(k.arg is None or k.arg in ("device", "out") for k in call.keywords):
            return False  # device= given (or **kwargs that may hold it)
        if any(isinstance(a, ast.Starred) for a in call.args):
            return False
        if qualified in ("torch.tensor", "torch.as_tensor"):
            # A scalar makes a 0-dim tensor, which CUDA operations accept from the CPU; a tensor
            # argument keeps its own device (as_tensor). Only literal lists are sure to be new.
            data = call.args[0] if call.args else keyword(call, "data")
            return isinstance(data, (ast.List, ast.Tuple, ast.ListComp)) and _not_empty(data)
        if qualified in ("torch.zeros", "torch.ones", "torch.empty", "torch.rand", "torch.randn", "torch.full"):
            size = call.args[0] if call.args else keyword(call, "size")
            if isinstance(size, (ast.Tuple, ast.List)) and not size.elts:
                return False  # torch.zeros(()): a 0-dim scalar
            sizes = size.elts if isinstance(size, (ast.Tuple, ast.List)) else call.args
            if qualified != "torch.full" and any(isinstance(n, ast.Constant) and n.value == 0 for n in sizes):
                return False  # torch.empty([0]): an empty placeholder, often for an argument that goes unused
        if qualified == "torch.randint" and len(call.args) >= 2 and isinstance(call.args[-1], ast.Tuple) \
                and not call.args[-1].elts:
            return False
        return True

    def _guarded(self, node: Optional[ast.AST]) -> bool:
        """Inside a branch that tests the device (`if x.is_cuda:` / `if device.type == "cpu":`), or
        a `with torch.device(...)` block: the author handles devices there."""
        while node is not None and node is not self.scope.node:
            parent = self.parent_of.get(id(node))
            if isinstance(parent, (ast.If, ast.IfExp, ast.While)) and node is not parent.test \
                    and _mentions_device(parent.test):
                return True
            if isinstance(parent, (ast.With, ast.AsyncWith)) and any(
                    _mentions_device(item.context_expr) for item in parent.items):
                return True
            node = parent
        return False

    # -- where the tensor goes -------------------------------------------------------------
    def _follow(self, node: ast.expr, depth: int) -> Optional[_Meeting]:
        """Climb from the new tensor through what keeps it on the CPU to the operation that
        meets a tensor of the model's device; None when it is moved, escapes or is unclear.
        ``depth`` counts the local names and helper results followed on the way."""
        if depth > _MAX_HOPS:
            return None
        while True:
            parent = self.parent_of.get(id(node))
            if isinstance(parent, ast.Attribute) and parent.value is node:
                call = self.parent_of.get(id(parent))
                if not (isinstance(call, ast.Call) and call.func is parent):
                    return None  # .shape, .device...: not the tensor
                method = parent.attr
                if method in _MOVES or (method in _REDUCTIONS and not call.args and not call.keywords):
                    return None  # moved, or reduced to a 0-dim tensor (CUDA operations accept those)
                if method in _COMBINING:
                    for arg in call.args:
                        meeting = self._meets(arg, call)
                        if meeting is not None:
                            return meeting
                if method not in _KEEP_DEVICE:
                    return None
                node = call
            elif isinstance(parent, ast.BinOp) and isinstance(parent.op, _BINARY):
                other = parent.right if parent.left is node else parent.left
                meeting = self._meets(other, parent)
                if meeting is not None:
                    return meeting
                node = parent
            elif isinstance(parent, ast.Compare) and len(parent.comparators) == 1:
                other = parent.comparators[0] if parent.left is node else parent.left
                meeting = self._meets(other, parent)
                if meeting is not None:
                    return meeting
                node = parent  # `mask == 0`: a new tensor, on the CPU still
            elif isinstance(parent, ast.UnaryOp):
                node = parent
            elif isinstance(parent, ast.Subscript) and parent.value is node:
                node = parent
            elif isinstance(parent, (ast.List, ast.Tuple)):
                call = self.parent_of.get(id(parent))
                if not (isinstance(call, ast.Call) and parent in call.args):
                    return None
                if self._combines(call):
                    for other in parent.elts:
                        meeting = self._meets(other, call) if other is not node else None
                        if meeting is not None:
                            return meeting
                if not self._gathers(call):
                    return None
                node = call  # `torch.cat([pad, other_new])`: all on the CPU still
            elif isinstance(parent, ast.Call) and node in parent.args:
                meeting = self._call_meeting(parent, node)
                if meeting is not None or not self._keeps_device(parent, node):
                    return meeting
                node = parent  # `torch.exp(t)`, `torch.meshgrid(a, b)`: still on the CPU
            elif isinstance(parent, ast.Assign) and parent.value is node and len(parent.targets) == 1 \
                    and isinstance(parent.targets[0], ast.Name):
                return self._follow_name(parent.targets[0].id, parent, depth)
            elif isinstance(parent, ast.Assign) and parent.value is node and len(parent.targets) == 1 \
                    and isinstance(parent.targets[0], (ast.Tuple, ast.List)) \
                    and all(isinstance(t, ast.Name) for t in parent.targets[0].elts):
                for target in parent.targets[0].elts:  # `grid_x, grid_y = torch.meshgrid(...)`
                    meeting = self._follow_name(cast(ast.Name, target).id, parent, depth)
                    if meeting is not None:
                        return meeting
                return None
            elif isinstance(parent, ast.AugAssign) and parent.value is node:
                return self._meets(parent.target, parent)
            elif isinstance(parent, ast.Return):
                return self._follow_return(depth)
            else:
                return None

    def _follow_return(self, depth: int) -> Optional[_Meeting]:
        """A helper's result, followed at its callers (`mask = self._causal_mask(t)` in forward);
        the fix needs a device this method can name: its own input, or the Module's weight."""
        table = self.ctx.nodes
        for caller in self.methods.values():
            nodes = cast(List[ast.Call], table.nodes)  # (read at ast.Call positions)
            calls = [p for p in table.positions_under(caller.scope.node, ast.Call)
                     if isinstance(nodes[p].func, ast.Attribute) and called_method(nodes[p]).attr == self.scope.name
                     and caller.scope.is_self(called_method(nodes[p]).value)]
            for call in cast(List[ast.Call], table.in_walk_order(calls)):
                # Its inputs are not ours to name; what it followed for its own factories is not ours either.
                saved = caller._factory_stmt, caller._followed
                caller._factory_stmt, caller._followed = None, set()
                try:
                    meeting = caller._follow(call, depth + 2)
                finally:
                    caller._factory_stmt, caller._followed = saved
                if meeting is None:
                    continue
                device, tensor = self._device_for(meeting.tensor)
                if not (tensor in self._own_inputs() or tensor.startswith("%s." % self.scope.self_name)):
                    continue  # only the caller can name that device
                return _Meeting(meeting.node, meeting.partner, device, tensor)
        return None

    def _own_inputs(self) -> Set[str]:
        args = self.function.args
        return {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs if a.arg != self.scope.self_name}

    def _follow_name(self, name: str, binding_stmt: ast.stmt, depth: int) -> Optional[_Meeting]:
        if (id(binding_stmt), name) in self._followed or depth >= _MAX_HOPS:
            return None  # `x = torch.exp(self.A) * x` in a loop: each assignment is followed once
        self._followed.add((id(binding_stmt), name))
        for load in loads_of(self.ctx.nodes, self.scope, name):
            use = enclosing_statement(load, self.parent_of)
            if use is None or use is binding_stmt:
                continue
            binding = reaching_binding(self.ctx.index, self.scope, name, use)
            if binding is None or binding.stmt is not binding_stmt:
                continue
            if isinstance(use, ast.AugAssign) and isinstance(use.target, ast.Name) and use.target.id == name:
                meeting = self._meets(use.value, use)  # `mask += x`: in place, on the CPU tensor
            else:
                meeting = self._follow(load, depth + 1)
            if meeting is not None:
                return meeting
        return None

    def _combines(self, call: ast.Call) -> bool:
        qualified = self.ctx.qualify(call.func) or ""
        return qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in _COMBINING

    def _gathers(self, call: ast.Call) -> bool:
        """`torch.cat` / `torch.stack` / `torch.meshgrid`...: the result is where the tensors are."""
        qualified = self.ctx.qualify(call.func) or ""
        return qualified.startswith("torch.") and qualified[6:] in _GATHERING

    def _keeps_device(self, call: ast.Call, node: ast.AST) -> bool:
        """The call's result is a tensor on the device of ``node``, one of its arguments."""
        if self._gathers(call):
            return True
        if not call.args or call.args[0] is not node:
            return False
        qualified = self.ctx.qualify(call.func) or ""
        if qualified.startswith("torch.nn.functional."):
            return True  # `F.softmax(t)`, `F.pad(t, ...)`: tensors in, a tensor out, on that device
        if not qualified.startswith("torch."):
            return False
        name = qualified[6:]
        if name in _REDUCTIONS and len(call.args) == 1 and not call.keywords:
            return False  # `torch.sum(t)`: a 0-dim tensor, accepted by CUDA operations
        return name in _ELEMENTWISE or (name in _KEEP_DEVICE and name not in _MOVES)

    def _call_meeting(self, call: ast.Call, node: ast.AST) -> Optional[_Meeting]:
        func = call.func
        weight = self._parameter_layer(func)
        if weight is not None and call.args and call.args[0] is node:
            return _Meeting(call, "the weights of `%s`" % self.ctx.text(func), *self._device_for(weight))
        if isinstance(func, ast.Attribute) and func.attr in _COMBINING and self.ctx.qualify(func) is None:
            return self._meets(func.value, call)  # `att.masked_fill(mask, ...)`
        qualified = self.ctx.qualify(func) or ""
        if qualified in _FUNCTIONAL_COMBINING or self._combines(call):
            for other in list(call.args) + [k.value for k in call.keywords]:
                if other is not node:
                    meeting = self._meets(other, call)
                    if meeting is not None:
                        return meeting
        return None

    def _parameter_layer(self, func: ast.expr) -> Optional[str]:
        """`self.embed` when it holds a torch layer with a weight: the text of that weight."""
        if not (isinstance(func, ast.Attribute) and self.scope.is_self(func.value)):
            return None
        value = self.ctx.classify(func, self.scope)
        if value.kind is not Kind.MODULE or value.module_class not in PARAMETER_LAYERS:
            return None
        names = tn.LAYER_PARAMETERS.get(value.module_class or "")
        return "%s.%s" % (self.ctx.text(func), names[0]) if names else None

    def _meets(self, other: ast.AST, operation: Union[ast.expr, ast.stmt]) -> Optional[_Meeting]:
        found = self._on_model_device(other, enclosing_statement(operation, self.parent_of), 0)
        if found is None:
            return None
        what, tensor = found
        return _Meeting(operation, what, *self._device_for(tensor))

    # -- what is on the model's device -----------------------------------------------------
    def _on_model_device(self, node: ast.AST, stmt: Optional[ast.stmt], depth: int) -> Optional[Tuple[str, str]]:
        """When ``node`` is surely on the model's device: how the message names it, and a tensor
        on that device that exists from the method's start (an input, a weight). Else None."""
        if depth > 6 or stmt is None:
            return None
        ctx = self.ctx
        if isinstance(node, ast.Name):
            binding = reaching_binding(ctx.index, self.scope, node.id, stmt)
            if binding is None:
                return None
            if binding.value is None:
                if isinstance(binding.stmt, ast.Assign) and binding.unpack_index is not None:
                    found = self._on_model_device(binding.stmt.value, binding.stmt, depth + 1)  # q, k, v = ...
                    return ("`%s`, computed from %s" % (node.id, _origin(found[0])), found[1]) if found else None
                return ("the input `%s`" % node.id, node.id) if self._input_on_device(node.id) else None
            found = self._on_model_device(binding.value, binding.stmt, depth + 1)
            return ("`%s`, computed from %s" % (node.id, _origin(found[0])), found[1]) if found else None
        if isinstance(node, ast.Attribute):
            if self.scope.is_self(node.value):
                kind = self._registered_kind(node.attr)
                return ("the %s `%s`" % (kind, ctx.text(node)), ctx.text(node)) if kind else None
            if node.attr in ("T", "mT", "data"):
                return self._on_model_device(node.value, stmt, depth + 1)
            if ctx.classify(node, self.scope).kind is Kind.PARAMETER and _rooted_at_self(node, self.scope):
                return "the parameter `%s`" % ctx.text(node), ctx.text(node)
            return None
        if isinstance(node, ast.Subscript):
            return self._on_model_device(node.value, stmt, depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, _BINARY):
            left = self._on_model_device(node.left, stmt, depth + 1)
            if left is not None and not self._by_convention(left[1]):
                return left
            return self._on_model_device(node.right, stmt, depth + 1) or left  # `x + self.bias`: the weight
        if isinstance(node, ast.UnaryOp):
            return self._on_model_device(node.operand, stmt, depth + 1)
        if isinstance(node, ast.Call):
            func = node.func
            weight = self._parameter_layer(func)
            if weight is not None:
                value = ctx.classify(node, self.scope)
                return ("the output of `%s`" % ctx.text(func), weight) if value.kind is Kind.TENSOR else None
            qualified = ctx.qualify(func) or ""
            if not qualified and isinstance(func, ast.Attribute) and func.attr in _KEEP_DEVICE:
                return self._on_model_device(func.value, stmt, depth + 1)  # `t.unsqueeze(0)`
            if (qualified.startswith("torch.nn.functional.") or (
                    qualified.startswith("torch.") and qualified[6:] in _DEVICE_FOLLOWING
                    and qualified not in _FACTORIES)) and node.args:
                first = node.args[0]
                elements = first.elts if isinstance(first, (ast.List, ast.Tuple)) else [first]
                for element in elements:
                    found = self._on_model_device(element, stmt, depth + 1)
                    if found is not None:
                        return found
        return None

    def _registered_kind(self, attr: str) -> Optional[str]:
        """'parameter' / 'buffer' for what the Module registers (and so moves with .to())."""
        for info in self.ctx.class_chain(self.cls):
            if attr in info.registered_parameters:
                return "parameter"
            if attr in info.registered_buffers:
                return "buffer"
        value = self.ctx.classifier.attribute_of(self.cls, attr)
        if value.kind is Kind.PARAMETER:
            return "parameter"
        if value.kind is Kind.BUFFER:
            return "buffer"
        return None

    def _input_on_device(self, name: str) -> bool:
        """A parameter of the method that is a tensor on the model's device: it goes through one
        of the model's layers or the code reads its `.device` to place tensors (what the fix may
        name), or it is the first input of `forward` (the batch) and neither its name nor its
        annotation says it is something else (`lengths`, `n: int`)."""
        return self._used_on_device(name) or name == _batch_input(self.scope)

    def _by_convention(self, name: str) -> bool:
        """Only the batch convention says this input is on the model's device."""
        return name == _batch_input(self.scope) and not self._used_on_device(name)

    def _used_on_device(self, name: str) -> bool:
        if self._evidence is None:
            evidence = self._evidence = set()
            table = self.ctx.nodes
            attributes = cast(List[ast.Attribute], table.nodes)  # (read at ast.Attribute positions)
            positions = table.positions_under(self.scope.node, ast.Call) + [
                p for p in table.positions_under(self.scope.node, ast.Attribute) if attributes[p].attr == "device"]
            for node in table.in_walk_order(positions):
                if isinstance(node, ast.Call) and node.args and self._parameter_layer(node.func) is not None:
                    root = _root_name(node.args[0])
                    if root is not None:
                        evidence.add(root)
                elif isinstance(node, ast.Attribute) and node.attr == "device" and isinstance(node.value, ast.Name):
                    parent = self.parent_of.get(id(node))
                    if isinstance(parent, ast.keyword) and parent.arg == "device":
                        evidence.add(node.value.id)
                    elif isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute) \
                            and parent.func.attr == "to":
                        evidence.add(node.value.id)
        return name in self._evidence

    # -- the fix ---------------------------------------------------------------------------
    def _device_for(self, tensor: str) -> Tuple[str, str]:
        """(device expression, tensor expression) for the fix: an input of the method the code
        itself puts on the model's device (what authors write), else the weight or input the
        meeting found."""
        args = self.function.args
        for arg in args.posonlyargs + args.args + args.kwonlyargs:
            if arg.arg != self.scope.self_name and self._used_on_device(arg.arg) and self._holds_tensor(arg.arg):
                return "%s.device" % arg.arg, arg.arg
        return "%s.device" % tensor, tensor

    def _holds_tensor(self, name: str) -> bool:
        """The name still holds a tensor on the device where the factory is (not `x = x.size(0)`)."""
        if self._factory_stmt is None:
            return False
        binding = reaching_binding(self.ctx.index, self.scope, name, self._factory_stmt)
        if binding is None:
            return False
        if binding.value is None:
            return binding.unpack_index is None
        return self._on_model_device(binding.value, binding.stmt, 0) is not None

    def _finding(self, call: ast.Call, qualified: str, meeting: _Meeting) -> Finding:
        ctx = self.ctx
        spelled = shorten(ctx.text(call))
        line = ctx.range(meeting.node).start.line
        where = "here" if line == ctx.range(call).start.line else "on line %d" % line
        message = ("`%s` is created on the default device (the CPU): it has no `device=`, and it meets %s %s. "
                   "This works on the CPU and fails with \"Expected all tensors to be on the same device\" on the "
                   "first GPU run" % (spelled, meeting.partner, where))
        fixes = [ctx.fix("Create it on the same device: `device=%s`" % meeting.device,
                         [_add_keyword(ctx, call, "device=%s" % meeting.device)], safe=True, preferred=True)]
        method = _NEW_METHODS.get(qualified)
        if method is not None and not any(k.arg == "requires_grad" for k in
                                                                          call.keywords):
            typed = keyword(call, "dtype") is not None
            title = "Use `%s.%s(...)`" % (meeting.tensor, method)
            if not typed:
                title += " (also takes `%s`'s dtype)" % meeting.tensor
            fixes.append(ctx.fix(title, [ctx.replace(call.func, "%s.%s" % (meeting.tensor, method))], safe=typed))
        related = () if where == "here" else (ctx.related(meeting.node, "it meets %s here" % meeting.partner),)
        return ctx.finding(message, call, fixes, related)


def _add_keyword(ctx: FileContext, call: ast.Call, text: str) -> Edit:
    arguments = list(call.args) + list(call.keywords)
    if arguments:
        last = max(arguments, key=lambda n: (n.end_lineno, n.end_col_offset))
        at = ctx.range(last).end
        return ctx.replace(Range(at, at), ", " + text)
    end = ctx.range(call).end
    at = type(end)(end.line, end.column - 1)  # just inside the closing parenthesis
    return ctx.replace(Range(at, at), text)


def _mentions_device(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        name = sub.attr if isinstance(sub, ast.Attribute) else sub.id if isinstance(sub, ast.Name) else None
        if name is not None and ("device" in name.lower() or name in ("is_cuda", "cuda", "is_mps", "mps")):
            return True
        if isinstance(sub, ast.Constant) and sub.value in ("cpu", "cuda", "mps"):
            return True
    return False


def _batch_input(scope: Scope) -> Optional[str]:
    """The first input of `forward`, when nothing says it is not a tensor of the batch."""
    if scope.name != "forward" or scope.self_name is None:
        return None
    args = cast(FunctionDefinition, scope.node).args
    positional = args.posonlyargs + args.args
    if len(positional) < 2 or positional[0].arg != scope.self_name:
        return None
    first = positional[1]
    annotation = first.annotation
    if annotation is not None and "Tensor" not in ast.unparse(annotation):
        return None  # `n: int`, `shape: Tuple[int, int]`
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    default = defaults[1]
    if default is not None and not (isinstance(default, ast.Constant) and default.value is None):
        return None  # `steps=4`: a setting
    lowered = first.arg.lower()
    if any(part in lowered for part in _NOT_THE_BATCH) or lowered == "n":
        return None
    return first.arg


def _not_empty(node: ast.AST) -> bool:
    return not isinstance(node, (ast.List, ast.Tuple)) or bool(node.elts)


def _origin(what: str) -> str:
    """"the input `x`" out of "`h`, computed from the input `x`": messages name the origin once."""
    return what.rsplit(", computed from ", 1)[-1]


def _rooted_at_self(node: ast.AST, scope: Scope) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return scope.is_self(node)


def _root_name(node: ast.AST) -> Optional[str]:
    """`x` in `x`, `x[:, 0]`, `x.transpose(1, 2)`, `x.view(b, -1)[0]`: the tensor a layer is given."""
    while True:
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _KEEP_DEVICE:
            node = node.func.value
        else:
            return node.id if isinstance(node, ast.Name) else None
