"""TL101 unregistered-tensor: a tensor stored as a plain attribute of a Module."""
from __future__ import annotations

import ast
import enum
import re
from typing import Dict, Iterator, List, Literal, Optional, Tuple, Union, cast

from ..analysis import torch_names as tn
from ..analysis.construction import Construction, always_after, always_before, exclusive
from ..analysis.context import FileContext
from ..analysis.dtypes import INTEGRAL, dtype_family, is_zero_dim
from ..analysis.forward import bases_read, forward_elsewhere
from ..analysis.findings import Edit, Finding, Fix, Position, Range, Severity
from ..analysis.flow import argument_values, calls_a_module, callee_parameter, enclosing_statement, loads_of, loads_seeing
from ..analysis.scopes import Binding, ClassInfo, FunctionDefinition, Scope
from ..analysis.source import apply_edits, last_line, statement_start
from ..analysis.values import TENSOR_KINDS, Kind, Value, keyword as keyword_argument
from .base import Rule


# Attributes frameworks read as plain tensors by design (Lightning's model summary input).
_PLAIN_BY_CONVENTION = frozenset(["example_input_array"])


class UnregisteredTensor(Rule):
    code = "TL101"
    name = "unregistered-tensor"
    summary = "tensor stored as a plain Module attribute: not trained, not saved, not moved by .to()"
    severity = Severity.WARNING
    grading = ("warning when `forward` computes with it; error when it requires grad; hint when each use moves it "
               "or it is a 0-dim constant `forward` takes as a number")

    def find(self, ctx: FileContext) -> Iterator[Finding]:
        for cls in ctx.module_classes:
            if not cls.attr_assignments or ctx.moves_own_state(cls):
                continue
            built = ctx.construction(cls)  # __init__ and the methods only construction runs
            if built is None:
                continue
            registered = ctx.registered_names(cls)
            for binding in cls.attr_assignments:
                if binding.scope not in built or binding.value is None or binding.name in registered \
                        or binding.name in _PLAIN_BY_CONVENTION:
                    continue
                if not ctx.show_all and _quiet_whatever_inferred(ctx, cls, binding, built):
                    continue
                value, branches = _tensor_value(ctx, binding)
                if value is None:
                    continue  # MOVED_PARAMETER belongs to TL103
                other = _registered_elsewhere(ctx, cls, binding)
                if other is True or _reassigned_elsewhere(ctx, cls, binding.name, value, built):
                    continue
                zero_dim = all(is_zero_dim(ctx, b, binding.scope) for b, v in branches if v.kind is Kind.TENSOR)
                uses = Uses.of(ctx, cls, binding.name, built)
                severity = ctx.graded(_grade(value, uses, zero_dim))
                if severity is not None:
                    yield _finding(ctx, binding, value, branches, uses, severity, built, other, zero_dim)


_REGISTERING = (Kind.PARAMETER, Kind.BUFFER, Kind.MODULE)


def _branches(node: ast.expr) -> List[ast.expr]:
    """The values a conditional expression may give (the node itself for any other expression)."""
    if isinstance(node, ast.IfExp):
        return _branches(node.body) + _branches(node.orelse)
    return [node]


def _tensor_value(ctx: FileContext, binding: Binding) -> Tuple[Optional[Value], List[Tuple[ast.expr, Value]]]:
    """The value of a binding that holds a plain tensor on some path, and its (branch, value) pairs
    (one pair, or one per arm of a conditional expression); (None, ...) when no path holds one."""
    assert binding.value is not None  # (an assignment's: find skips the others)
    branches = [(node, ctx.classify(node, binding.scope)) for node in _branches(binding.value)]
    tensors = [value for _, value in branches if value.kind is Kind.TENSOR]
    if not tensors:
        return None, branches
    if len(branches) == 1:
        return tensors[0], branches
    return Value(Kind.TENSOR, requires_grad=any(v.requires_grad for v in tensors), factory=tensors[0].factory), \
        branches


def _quiet_whatever_inferred(ctx: FileContext, cls: ClassInfo, binding: Binding, built: Construction) -> bool:
    """No finding here whatever the jedi layer would answer, so it is not asked: names alone find
    no tensor on any path, the jedi layer's tensors never require grad unless the value moves one
    or calls requires_grad_ (see _may_gain_grad), and a tensor that does not require grad and
    that nothing reads but for its shape or a host copy is quiet (_grade)."""
    assert binding.value is not None
    with ctx.classifier.names_only():
        kinds = {ctx.classify(node, binding.scope).kind for node in _branches(binding.value)}
        if Kind.UNKNOWN not in kinds or kinds & TENSOR_KINDS:
            return False  # (names alone tell, and the jedi layer is not asked anyway; or a tensor)
        if _may_gain_grad(binding.value, binding.scope):
            return False
        uses = Uses.of(ctx, cls, binding.name, built, unknown_index_is_tensor=True)
    return _grade(Value(Kind.TENSOR), uses) is None


_GAINS_GRAD = tn.MOVE_METHODS | {"requires_grad_"}


def _may_gain_grad(value: ast.expr, scope: Scope, budget: int = 64) -> bool:
    """Whether ``value``, or a local name's assigned value it reads (transitively), calls a method that
    makes what the jedi layer answers into something that requires grad (a Parameter moved,
    requires_grad_()). True when it reads more than ``budget`` bindings."""
    pending, seen = [value], set()
    while pending:
        expr = pending.pop()
        for node in ast.walk(expr):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _GAINS_GRAD:
                return True
            if isinstance(node, ast.Name) and node.id not in seen:
                seen.add(node.id)
                owner: Optional[Scope] = scope
                while owner is not None and node.id not in owner.locals:
                    owner = owner.parent
                for bound in owner.locals[node.id] if owner is not None else ():
                    budget -= 1
                    if budget < 0:
                        return True
                    if bound.value is not None:
                        pending.append(bound.value)
    return False


def _registered_elsewhere(ctx: FileContext, cls: ClassInfo, binding: Binding) -> Union[Literal[True], Kind, None]:
    """True when an nn.Parameter / nn.Buffer / Module assigned to the same name makes this tensor
    harmless: in another method (the author's business, as before), or in the same method on every
    path through this assignment (before it, or after it). Otherwise the kind that registers the
    name on another path only (a branch, an arm of a conditional), or None."""
    scope, elsewhere, marks = binding.scope, None, set()
    for other in ctx.classifier.class_attribute_bindings(cls, binding.name):
        if other is binding or other.value is None:
            continue
        kinds = [ctx.classify(node, other.scope).kind for node in _branches(other.value)]
        registering = [kind for kind in kinds if kind in _REGISTERING]
        if not registering:
            continue
        if other.scope is not scope:
            return True
        if len(registering) == len(kinds):
            marks.add(id(other.stmt))
        elsewhere = elsewhere or registering[0]
    if marks:
        marked = lambda stmt: id(stmt) in marks  # noqa: E731
        if always_after(ctx.index, scope, binding.stmt, marked) or always_before(ctx.index, scope, binding.stmt, marked):
            return True
    return elsewhere


# Reads that do not compute with the values on a device: metadata, and copies to the host.
_NEUTRAL = frozenset(["shape", "dtype", "device", "ndim", "is_cuda", "size", "dim", "numel", "cpu", "numpy",
                      "tolist", "item", "clone"])
# Calls on the attribute that change it in place (an nn.Parameter there would be a leaf modified in place).
_IN_PLACE_OK = frozenset(["requires_grad_", "share_memory_"])


def _reassigned_elsewhere(ctx: FileContext, cls: ClassInfo, attr: str, value: Value, built: Construction) -> bool:
    """The author manages this tensor on purpose, so construction only declares it: another method
    re-assigns it (run-time state, caches, `self.x = self.x.to(device)`)."""
    for other in ctx.classifier.class_attribute_bindings(cls, attr):
        if other.scope in built or other.value is None:
            continue
        if ctx.classify(other.value, other.scope).kind in (Kind.PARAMETER, Kind.BUFFER, Kind.MODULE):
            continue
        if not value.requires_grad or _moves(other.value):
            return True
    return False


class Use(enum.IntEnum):
    """What one read does with the tensor, weakest first: of the places a value followed out of
    the read reaches, the strongest decides."""

    INIT = 0  # read by construction (to build something else)
    NEUTRAL = 1  # its shape, dtype, a host copy, `is None`: not its values on a device
    PASSED = 2  # handed to code this rule does not follow
    WRITE = 3  # changed in place (recorded as such: below the uses that grade)
    INDEX = 4  # indexes another tensor (`x[:, self.order]`): a CUDA tensor takes CPU indices
    MOVED = 5  # moved (`.to(x.device)`) before any use
    SCALAR = 6  # computed with as a number (a 0-dim tensor works from the CPU there)
    COMPUTED = 7  # computed with on its device


class Uses:
    """How the methods of a class read ``self.<attr>`` (the evidence TL101 grades on)."""

    def __init__(self) -> None:
        self.computed_in_forward = 0  # torch computes with it as it is, in forward or what forward calls
        self.scalar_in_forward = 0  # of those, uses as a scalar: a keyword argument, elementwise arithmetic
        self.computed_elsewhere = 0  # the same in other methods (or forward is not in this file)
        self.passed_on = 0  # returned, stored, handed to another function: what happens there is unseen
        self.moved = 0  # `self.x.to(y.device)` and the like: the author moves it at each use
        self.indexes = 0  # it indexes another tensor (`x[:, self.order + 1]`): copied to its device at each use
        self.written_in_place = False  # `self.x.add_(...)`, `self.x[i] = ...`, `self.x += ...`
        self.as_weight = False  # matmul-ed with the input or given as a weight or bias: a learnable factor
        self.multiplied = False  # `x * self.t`: a weight unless it is built as a 0/1 mask
        self.added = False  # `x + self.t` as it is (not indexed): a bias when it is built like one
        self.trained = False  # given to an optimizer, or `requires_grad_()` / `.requires_grad = True` elsewhere
        self.forward_seen = False  # the class's forward is in this file
        self.bases_elsewhere = False  # a base outside the file (not nn.Module) may define forward (or is not read)
        self.other_methods = False  # the class has methods that construction does not run
        self.read_in_init = False  # construction reads it (to build other attributes)
        self.returned = 0  # forward returns it (through locals and the methods it calls)
        self.run_from_outside: List[str] = []  # no forward: the methods other code calls that compute with it
        self.construction = Construction()  # the methods building the module run
        self.follow_budget = _FOLLOW_BUDGET  # reads still to follow out of the reads of the attribute

    @classmethod
    def of(cls, ctx: FileContext, info: ClassInfo, attr: str, built: Construction,
           unknown_index_is_tensor: bool = False) -> "Uses":
        """``built``: the class's construction (its methods' reads are not uses of the module).
        ``unknown_index_is_tensor``: an index names alone cannot tell counts as a tensor (uses at
        least those a later answer could find)."""
        uses = cls()
        uses.construction = built
        methods: Dict[str, Scope] = {}
        for owner in ctx.class_chain(info):
            for name, scope in owner.method_scopes.items():
                methods.setdefault(name, scope)
        forward = ctx.forward_reach(info)
        reachable = set(forward.methods) if forward is not None else None
        uses.forward_seen = forward is not None
        uses.bases_elsewhere = forward_elsewhere(ctx, info)
        if not uses.bases_elsewhere:  # the bases of other files, read: their methods count as the file's do
            outside = bases_read(ctx, info) or ()
            uses.other_methods = any(name != "__init__" for base in outside for name in base.methods)
        if forward is None and not uses.bases_elsewhere:
            # No forward at all: the module is run through its methods, and those that code outside
            # the class calls (`self.student.interact(x)` in another Module's forward) run as forward would.
            reachable = {name for name in methods if ctx.attribute_read_outside(info.node, name)}
        computed: Dict[str, int] = {}  # method -> its reads that compute with the tensor (scalar: as a number)
        scalar: Dict[str, int] = {}
        for name, scope in methods.items():
            if scope.self_name is None:
                continue
            parents = ctx.nodes.parent
            in_init = scope in built
            uses.other_methods = uses.other_methods or not in_init
            for node in _reads(ctx, scope, attr):
                use = uses._read(ctx, scope, in_init, node, parents, unknown_index_is_tensor)
                if not in_init and use in (Use.COMPUTED, Use.SCALAR):
                    computed[name] = computed.get(name, 0) + 1
                    if use is Use.SCALAR:
                        scalar[name] = scalar.get(name, 0) + 1
        if forward is None and reachable:
            uses.run_from_outside = sorted(name for name in computed if name in reachable)
        for name, count in computed.items():
            if uses.moved:
                uses.passed_on += count  # moved by hand elsewhere: the author manages its device
            elif reachable is not None and name in reachable:
                uses.computed_in_forward += count
                uses.scalar_in_forward += scalar.get(name, 0)
            else:
                uses.computed_elsewhere += count
        return uses

    def _read(self, ctx: FileContext, scope: Scope, in_init: bool, node: ast.expr,
              parents: Dict[int, ast.AST], unknown_index_is_tensor: bool = False, depth: int = 0) -> Use:
        """Record one read (``node``: `self.<attr>`, or a read of a local or a call's result that
        holds its value), and say what it is: COMPUTED for a use on the tensor's device (SCALAR when the
        use takes it as a number: a keyword argument, elementwise arithmetic, a comparison).
        ``depth``: how many locals, returns and calls were followed to reach ``node``."""
        if isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del)):
            self.written_in_place = True  # `self.x[...] = v` is a store on the subscript, so this is `del`
            return Use.WRITE
        if _given_to_optimizer(ctx, node, parents):
            self.trained = True
        climbed = self._climb(ctx, scope, in_init, node, parents, unknown_index_is_tensor)
        if isinstance(climbed, Use):
            return climbed
        return self._use(ctx, scope, in_init, *climbed, parents, unknown_index_is_tensor, depth)

    def _climb(self, ctx: FileContext, scope: Scope, in_init: bool, node: ast.expr, parents: Dict[int, ast.AST],
               unknown_index_is_tensor: bool) -> Union[Use, Tuple[ast.AST, Optional[ast.AST], bool, bool]]:
        """Climb from the read through views and indexing: `self.x[:t].view(...).to(dev)` is still a
        moved read. The use, when the climb decides it; else (the node reached, its parent, whether no
        view, index or attribute is between them and the read, whether a part of it is used)."""
        current: Optional[ast.AST] = node
        parent = parents.get(id(node))
        as_is = True  # no view, index or attribute between the read and its use
        indexed = False  # a part of it is used (a table's rows, positions up to a length)
        while True:
            if isinstance(parent, ast.Subscript) and parent.value is current:
                if isinstance(parent.ctx, (ast.Store, ast.Del)):
                    self.written_in_place = True
                    return Use.WRITE
                if not in_init and _tensor_index(ctx, parent.slice, scope, unknown_index_is_tensor) \
                        and not _moved_to(parent.slice, node):
                    return Use.COMPUTED  # `self.table[t]` with a tensor `t`: indexed where `t` is, before any move
                current, parent, as_is, indexed = parent, parents.get(id(parent)), False, True
                continue
            if isinstance(parent, ast.Call) and parent.args and parent.args[0] is current \
                    and ctx.qualify(parent.func) in _SAME_DATA_FUNCTIONS:
                # `torch.clone(torch.as_tensor(self.m)).to(x.device)` (monai's Wasserstein Dice loss)
                if keyword_argument(parent, "device") is not None:
                    if not in_init:
                        self.moved += 1
                    return Use.MOVED
                current, parent, as_is = parent, parents.get(id(parent)), False
                continue
            if isinstance(parent, ast.Attribute) and parent.value is current:
                call = parents.get(id(parent))
                is_call = isinstance(call, ast.Call) and call.func is parent
                if (is_call and parent.attr == "requires_grad_") or (
                        parent.attr == "requires_grad" and isinstance(parent.ctx, ast.Store)):
                    self.trained = True
                if is_call and parent.attr in tn.DEVICE_MOVES:
                    if not in_init:
                        self.moved += 1
                    return Use.MOVED
                if is_call and parent.attr.endswith("_") and parent.attr not in _IN_PLACE_OK:
                    self.written_in_place = True
                    return Use.WRITE
                if parent.attr in _NEUTRAL:
                    return Use.NEUTRAL
                if is_call and parent.attr in _VIEW_METHODS:
                    current, parent, as_is = call, parents.get(id(call)), False
                    continue
                if not is_call and parent.attr in ("T", "mT", "H", "mH", "data", "real", "imag"):
                    current, parent, as_is = parent, parents.get(id(parent)), False
                    continue
                return Use.COMPUTED if is_call else Use.NEUTRAL
            assert current is not None  # (the climb stops at a node with a parent)
            return current, parent, as_is, indexed

    def _use(self, ctx: FileContext, scope: Scope, in_init: bool, current: ast.AST, parent: Optional[ast.AST],
             as_is: bool, indexed: bool, parents: Dict[int, ast.AST], unknown_index_is_tensor: bool,
             depth: int) -> Use:
        """What the read's use is, where the climb from it ended (``current``, under ``parent``)."""
        keyword = isinstance(parent, ast.keyword)
        if isinstance(parent, ast.keyword):  # f(x, weight=self.w): the call decides
            current, parent = parent, parents.get(id(parent))
        if isinstance(parent, ast.AugAssign) and parent.target is current:
            self.written_in_place = True
            return Use.WRITE
        if in_init:
            self.read_in_init = True
            return Use.INIT
        if isinstance(parent, ast.BinOp):
            operand = parent.right if parent.left is current else parent.left
            if isinstance(parent.op, ast.MatMult):
                self.as_weight = True
            elif isinstance(parent.op, ast.Mult):
                self.multiplied = True
            elif isinstance(parent.op, (ast.Add, ast.Sub)) and not indexed and not isinstance(operand, ast.Constant):
                self.added = True
        if isinstance(parent, ast.Call) and (
                any(k is current and k.arg in ("weight", "bias") for k in parent.keywords)
                or _weight_argument(parent, current)):
            self.as_weight = True
        if isinstance(parent, ast.Compare) and all(isinstance(op, (ast.Is, ast.IsNot)) for op in parent.ops):
            return Use.NEUTRAL  # `self.x is not None`: the object, not its values
        if _only_indexes(current, parent, parents):
            self.indexes += 1
            return Use.INDEX
        scalar = Use.SCALAR if as_is else Use.COMPUTED
        if isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.Compare)):
            elementwise = not (isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.MatMult))
            return scalar if elementwise else Use.COMPUTED
        if isinstance(parent, ast.Subscript) and parent.slice is current:
            return Use.COMPUTED
        if isinstance(parent, ast.Call) and current is not parent.func:
            # torch.where(m, x, self.t), torch.vmap(f)(self.t, x); through Module.__call__:
            # self.proj(x, self.t), head(x, self.mask) for head in self.heads
            func = parent.func.func if isinstance(parent.func, ast.Call) else parent.func
            if (ctx.qualify(func) or "").startswith("torch.") or calls_a_module(ctx, scope, parent):
                return scalar if keyword else Use.COMPUTED
            if isinstance(parent.func, ast.Attribute) and parent.func.attr in _COMBINING_METHODS:
                return Use.COMPUTED  # scores.masked_fill(self.mask, ...): with the receiver's values
        holder, held = parent, current
        while isinstance(holder, (ast.List, ast.Tuple, ast.Starred)) or (
                isinstance(holder, ast.Dict) and any(v is held for v in holder.values)):
            held, holder = holder, parents.get(id(holder))  # torch.cat([x, self.t]), return x, self.t
        if held is not current:
            if isinstance(holder, ast.Call) and held is not holder.func and (
                    (ctx.qualify(holder.func) or "").startswith("torch.") or calls_a_module(ctx, scope, holder)):
                return Use.COMPUTED  # torch.cat([x, self.t]), self.lstm(x, (h, self.c0))
        followed = self._follow(ctx, scope, current, held, holder, parents, unknown_index_is_tensor, depth)
        if followed is not None:
            return scalar if followed is Use.SCALAR else followed
        self.passed_on += 1
        return Use.PASSED

    def _follow(self, ctx: FileContext, scope: Scope, read: ast.AST, held: ast.AST, holder: Optional[ast.AST],
                parents: Dict[int, ast.AST], unknown_index_is_tensor: bool, depth: int) -> Optional[Use]:
        """Where the value goes when ``held`` (``read``, or a tuple, list or dict holding it) ends
        the read: returned (from forward: its callers compute with it; from another method:
        followed to its calls), stored in a local (followed to its reads), handed as it is to a
        function of this file (followed into it). The strongest use among those found; None when
        it goes elsewhere, too deep, or past the class's budget of followed reads."""
        if depth >= _FOLLOW_DEPTH or self.follow_budget <= 0:
            return None
        nexts: List[Tuple[ast.expr, Scope]] = []
        if isinstance(holder, ast.Return):
            if scope.name == "forward":
                self.returned += 1
                return Use.SCALAR  # (as a number when it is a 0-dim tensor: see _grade)
            cls = scope.cls
            nexts = list(ctx.method_calls(cls, scope.name)) if cls is not None else []
        elif isinstance(holder, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
            targets = holder.targets if isinstance(holder, ast.Assign) else [holder.target]
            target = targets[0] if len(targets) == 1 else None
            if isinstance(target, ast.Tuple) and isinstance(held, ast.Tuple) and len(target.elts) == len(held.elts):
                # `h, c = x, self.c0`: the target at the position of the element holding the read
                target = next((t for t, e in zip(target.elts, held.elts) if e is read or read in ast.walk(e)), None)
            stmt = enclosing_statement(holder, parents)
            if not isinstance(target, ast.Name) or stmt is None:
                return None
            nexts = [(load, scope) for load in loads_seeing(ctx, scope, target.id, stmt)]
            if not nexts:
                return Use.NEUTRAL  # a local nothing reads
        elif held is read:
            parameter = callee_parameter(ctx, holder, held) if isinstance(holder, ast.Call) else None
            if parameter is not None:
                callee, name = parameter
                nexts = [(load, callee) for load in loads_of(ctx.nodes, callee, name)]
        best = None
        self.follow_budget -= len(nexts)
        for expr, where in nexts:
            use = self._read(ctx, where, where in self.construction, expr, parents, unknown_index_is_tensor,
                             depth + 1)
            best = use if best is None else max(best, use)
        return best


# How far a value is followed out of the expression that reads it (locals, returns, calls), and
# how many reads are followed for one attribute at most (a helper returning it, called from many
# places whose results are read many times, stays linear).
_FOLLOW_DEPTH = 4
_FOLLOW_BUDGET = 256
# Tensor methods that compute their tensor arguments with the receiver's values (on its device).
_COMBINING_METHODS = frozenset("""
masked_fill masked_fill_ masked_scatter masked_select index_select index_add index_copy gather scatter
scatter_add where matmul mm bmm mul mul_ div div_ sub sub_ lerp addcmul addcdiv
""".split())


def _only_indexes(current: Optional[ast.AST], parent: Optional[ast.AST], parents: Dict[int, ast.AST]) -> bool:
    """The read's value only indexes another tensor: ``x[self.order]``, ``x[:, self.order + k]``
    (through arithmetic with numbers and the tuple of a multi-dimensional index). Indexing a CUDA
    tensor with CPU indices works: the indices are copied over at each use."""
    while isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.Tuple)):
        if isinstance(parent, ast.BinOp) and not isinstance(
                parent.right if parent.left is current else parent.left, (ast.Constant, ast.Attribute)):
            return False  # (combined with something computed: that is the use)
        current, parent = parent, parents.get(id(parent))
    return isinstance(parent, ast.Subscript) and parent.slice is current and not isinstance(parent.ctx, ast.Store)


def _tensor_index(ctx: FileContext, index: ast.expr, scope: Scope, unknown_is_tensor: bool = False,
                  depth: int = 0) -> bool:
    """An index that is a tensor: indexing a CPU tensor with a CUDA one raises. A parameter of the
    method is one when every call of the method in the class passes one (`t = torch.randint(...)`
    then `self.p_losses(x, t)`), followed through two callers."""
    if isinstance(index, (ast.Slice, ast.Constant, ast.Tuple)):
        return False
    kind = ctx.classify(index, scope).kind
    if kind is Kind.UNKNOWN and isinstance(index, ast.Name) and depth < 2:
        passed = argument_values(ctx, scope, index.id)
        if passed:
            return all(_tensor_index(ctx, value, caller, unknown_is_tensor, depth + 1) for value, caller in passed)
    return kind in (Kind.TENSOR, Kind.PARAMETER) or unknown_is_tensor and kind is Kind.UNKNOWN


# Calls that return a view of the same values: where the result goes decides the use.
_VIEW_METHODS = frozenset("""
view view_as reshape reshape_as expand expand_as unsqueeze squeeze flatten unflatten permute transpose t
contiguous narrow select chunk split detach float half double long int bool
""".split())
# torch functions whose result holds the same values as their first argument, on its device
# unless a device= is given: the views' torch spellings (`torch.reshape(x, s)`), and copies.
_SAME_DATA_FUNCTIONS = frozenset(["torch.as_tensor", "torch.asarray", "torch.clone"]
                                 + ["torch." + n for n in _VIEW_METHODS])


# Functions that take a weight (and a bias) after their input: F.linear(x, w, b), F.conv2d(x, w, b).
_FUNCTIONAL_LAYERS = frozenset(["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                                "conv_transpose3d", "embedding", "bilinear", "layer_norm", "group_norm"])
# Products of their tensor arguments, in any order: torch.matmul(x, w), torch.einsum("ij,jk", x, w).
_PRODUCTS = frozenset(["matmul", "mm", "bmm", "mv", "einsum", "addmm", "baddbmm", "tensordot", "outer", "kron"])


def _weight_argument(call: ast.Call, argument: Optional[ast.AST]) -> bool:
    """``argument`` is a weight or bias of ``call``: F.linear(x, w, b), torch.matmul(w, x), einsum(eq, x, w)."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name in _PRODUCTS:
        return any(arg is argument for arg in call.args)
    return name in _FUNCTIONAL_LAYERS and any(arg is argument for arg in call.args[1:3])


def _given_to_optimizer(ctx: FileContext, node: ast.AST, parents: Dict[int, ast.AST]) -> bool:
    """`torch.optim.Adam([self.w], ...)`: the author trains it, whatever forward does with it."""
    current = parents.get(id(node))
    while isinstance(current, (ast.expr, ast.keyword)):
        if isinstance(current, ast.Call) and (ctx.qualify(current.func) or "").startswith("torch.optim."):
            return True
        current = parents.get(id(current))
    return False


# Words of an attribute's name that say it is learned (`self.pos_embedding`, `self.ln_gamma`).
_WEIGHT_WORDS = frozenset(["weight", "weights", "bias", "biases", "scale", "scales", "gamma", "beta", "embed",
                           "embedding", "embeddings"])


def _named_like_a_weight(attr: str) -> bool:
    return any(word in _WEIGHT_WORDS for word in re.split(r"[_\d]+", attr.lower()))


# How learned tensors start: random values, zeros or ones, or nn.init's in-place initialisations
# (`torch.full(s, v)` is left out: a given value is more often a constant, an offset to subtract).
_WEIGHT_INITS = frozenset("torch." + name for name in """
randn rand randn_like rand_like empty empty_like zeros zeros_like ones ones_like normal
""".split())
_INIT_METHODS = frozenset(["normal_", "uniform_", "fill_", "zero_", "kaiming_normal_", "kaiming_uniform_",
                           "xavier_normal_", "xavier_uniform_", "trunc_normal_", "orthogonal_"])
# What makes a 0/1 mask: a triangle, an identity, a comparison, a random draw of zeros and ones.
_MASK_MAKERS = frozenset(["tril", "triu", "eye", "bernoulli", "bool"])


def _built_like_a_weight(ctx: FileContext, value: ast.expr) -> bool:
    """Random values, zeros or ones, and nothing else torch computes (an arange, a sine table, data):
    what a bias added to the input starts as."""
    inits = others = 0
    for node in ast.walk(value):
        if not isinstance(node, ast.Call):
            continue
        qualified = ctx.qualify(node.func) or ""
        method = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        if qualified in _WEIGHT_INITS or qualified.startswith("torch.nn.init.") or method in _INIT_METHODS:
            inits += 1
        elif qualified in tn.LEGACY_CONSTRUCTORS:
            # torch.FloatTensor(n) is uninitialised memory to fill; torch.FloatTensor([0.5, 0.2]) is data
            if node.args and isinstance(node.args[0], (ast.List, ast.Tuple)):
                others += 1
            else:
                inits += 1
        elif qualified.startswith("torch."):
            others += 1
    return inits > 0 and others == 0


def _built_as_a_mask(ctx: FileContext, value: ast.expr) -> bool:
    """`torch.tril(torch.ones(n, n))`, `(torch.rand(n) > p).float()`: zeros and ones that select."""
    for node in ast.walk(value):
        if isinstance(node, ast.Compare):
            return True
        if isinstance(node, ast.Call):
            qualified = ctx.qualify(node.func) or ""
            method = node.func.attr if isinstance(node.func, ast.Attribute) else ""
            if method in _MASK_MAKERS or (qualified.startswith("torch.") and qualified[6:] in _MASK_MAKERS):
                return True
    return False


def _reads(ctx: FileContext, scope: Scope, attr: str) -> Iterator[ast.Attribute]:
    """Every `self.<attr>` in a method except assignments of it, in the order `ast.walk` meets them."""
    table, parents = ctx.nodes, ctx.nodes.parent
    for node in cast(List[ast.Attribute], table.in_walk_order(table.attributes_named(scope.node, attr))):
        if scope.is_self(node.value):
            parent = parents.get(id(node))
            targets = parent.targets if isinstance(parent, ast.Assign) else [getattr(parent, "target", None)]
            if isinstance(parent, (ast.Assign, ast.AnnAssign)) and any(node is t for t in targets):
                continue  # an assignment of it, not a use
            yield node


def _grade(value: Value, uses: Uses, zero_dim: bool = False) -> Optional[Severity]:
    """Error when it requires grad; a warning when forward computes with it as it is (a hint when it
    is a 0-dim tensor that forward only takes as a number: CUDA accepts those from the CPU); a hint
    when each use moves it, only other methods compute with it, or it is handed on to code this rule
    does not follow, or the class has no forward at all (no base outside the file) but methods
    of its own, none of which reads it; quiet (None) when nothing reads it outside construction but
    for its shape or a host copy, and either forward is in the file or construction only uses it to
    build something else."""
    if value.requires_grad:
        return Severity.ERROR
    if uses.computed_in_forward and not (zero_dim and uses.scalar_in_forward == uses.computed_in_forward):
        return Severity.WARNING
    if uses.computed_in_forward or uses.computed_elsewhere or uses.moved or uses.passed_on or uses.indexes:
        return Severity.HINT
    if not uses.forward_seen and not uses.read_in_init:
        # forward is not in this file: a base elsewhere may use it (no evidence either way). With
        # none, and methods of its own that do not read it, the class is no layer but a holder used
        # through those methods (a noise schedule): only a subclass could use it.
        return Severity.HINT if uses.other_methods and not uses.bases_elsewhere else Severity.WARNING
    return None


def _moved_to(index: ast.expr, table: ast.expr) -> bool:
    """`t.type_as(self.table)`, `t.to(self.table.device)`: an index moved to the indexed tensor's
    device, so the lookup runs wherever the table is (the rows are then moved, or not, as a read)."""
    if not (isinstance(index, ast.Call) and isinstance(index.func, ast.Attribute) and len(index.args) == 1
            and index.func.attr in ("type_as", "to")):
        return False
    target = index.args[0]
    if isinstance(target, ast.Attribute) and target.attr == "device" and index.func.attr == "to":
        target = target.value
    return ast.dump(target) == ast.dump(table)


def _moves(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in tn.DEVICE_MOVES
               for n in ast.walk(node))


def _used_like_a_weight(ctx: FileContext, binding: Binding, value: Value, uses: Uses) -> bool:
    """Whether the tensor is meant to train, from how it is used, not its name: it requires grad or
    is trained elsewhere (an optimizer, requires_grad_()), or, unless the module writes it in place
    (state, not a weight), forward combines it like a weight: matmul-ed, given as a weight or bias,
    multiplied in unless it is a 0/1 mask, added as it is when it starts random, zeros or ones."""
    if value.requires_grad or uses.trained:
        return True
    if uses.written_in_place:
        return False
    assert binding.value is not None  # (an assignment's: find skips the others)
    return uses.as_weight or (uses.multiplied and not _built_as_a_mask(ctx, binding.value)) \
        or (uses.added and _built_like_a_weight(ctx, binding.value))


def _finding(ctx: FileContext, binding: Binding, value: Value, branches: List[Tuple[ast.expr, Value]], uses: Uses,
             severity: Severity, built: Construction, other: Optional[Kind], zero_dim: bool) -> Finding:
    stmt, attr, self_name = binding.stmt, binding.name, binding.scope.self_name
    made, why_none = _fixes(ctx, binding, value, branches, uses, built, other)
    message = _message(binding, value, branches, uses, severity, other)
    single_target = isinstance(stmt, ast.AnnAssign) or (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1)
    where = ctx.range(stmt)
    if not single_target:
        # `self.h0 = self.c0 = <value>`: one finding per target, each starting at its own target.
        where = Range(ctx.range(_target(stmt, self_name, attr) or stmt).start, where.end)
    return ctx.finding(message + why_none, where, made, severity=severity)


def _message(binding: Binding, value: Value, branches: List[Tuple[ast.expr, Value]], uses: Uses,
             severity: Severity, other: Optional[Kind]) -> str:
    """What goes wrong, by what the uses show."""
    attr = binding.name
    target = "%s.%s" % (binding.scope.self_name, attr)
    path = _path(binding, branches, other)
    if value.requires_grad:
        message = ("`%s` requires grad but is a plain tensor attribute%s: it is not in parameters(), so the "
                   "optimizer never updates it, and it is not saved or moved by .to()" % (target, path))
    elif uses.computed_in_forward and severity is Severity.HINT:
        message = ("`%s` holds a tensor the Module does not register%s: a 0-dim tensor that forward only takes "
                   "as a number, which CUDA operations accept from the CPU, so it works; but .to()/.half() leave "
                   "it behind and state_dict() does not save it" % (target, path))
    elif uses.computed_in_forward and uses.returned >= uses.computed_in_forward:
        message = ("`%s` holds a tensor the Module does not register%s, and forward returns it: after "
                   ".to()/.cuda() its callers get it on its old device, and state_dict() does not save it"
                   % (target, path))
    elif uses.computed_in_forward and uses.run_from_outside:
        message = ("`%s` holds a tensor the Module does not register%s, and %s, which code outside the class "
                   "calls, computes with it: after .to()/.cuda() it stays behind on its old device, and "
                   "state_dict() does not save it" % (
                       target, path, ", ".join("`%s()`" % name for name in uses.run_from_outside)))
    elif uses.computed_in_forward:
        message = ("`%s` holds a tensor the Module does not register%s, and forward computes with it: after "
                   ".to()/.cuda() it stays behind on its old device, and state_dict() does not save it"
                   % (target, path))
    elif uses.indexes and not (uses.moved or uses.computed_elsewhere or uses.passed_on):
        message = ("`%s` holds a tensor the Module does not register%s; it only indexes other tensors "
                   "(`x[:, self.%s]`), which works from the CPU, copying it to their device at each use: a "
                   "buffer moves once with the module" % (target, path, attr))
    elif uses.moved and not uses.computed_elsewhere:
        message = ("`%s` holds a tensor the Module does not register%s; each use moves it (`.to(...)`), so it "
                   "works, but copies it on every call: a buffer moves once with the module" % (target, path))
    else:
        message = ("`%s` holds a tensor the Module does not register%s: it is not in parameters() or "
                   "state_dict(), and .to()/.cuda() leave it behind" % (target, path))
    return message


def _fixes(ctx: FileContext, binding: Binding, value: Value, branches: List[Tuple[ast.expr, Value]], uses: Uses,
           built: Construction, other: Optional[Kind]) -> Tuple[List[Fix], str]:
    """The fixes offered (the preferred one marked) and, when there is none, why."""
    stmt, attr, self_name = binding.stmt, binding.name, binding.scope.self_name
    scope = binding.scope
    tensors = [node for node, v in branches if v.kind is Kind.TENSOR]
    # nn.Parameter refuses integer and boolean tensors ("Only Tensors of floating point and complex
    # dtype can require gradients"): a buffer is the fix for those.
    integral = any(dtype_family(ctx, node, scope) == INTEGRAL for node in tensors)
    registering_arm = any(v.kind in _REGISTERING for _, v in branches)
    prefers_parameter = _used_like_a_weight(ctx, binding, value, uses) and not integral \
        and (other is None or value.requires_grad)
    # --fix must not freeze a weight: no safe buffer where the use or the name says weight (a name
    # alone leaves the choice to the use: `self.weights` of a loss is a constant). Where another path
    # makes it a Parameter, a plain tensor on this one is the author's choice of an untrained value.
    buffer_is_safe = not prefers_parameter and (integral or other is not None or not _named_like_a_weight(attr))
    single_target = isinstance(stmt, ast.AnnAssign) or (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1)
    # (title, edits, the import they need, safe)
    buffers: List[Tuple[str, List[Edit], Optional[Edit], bool]] = []
    can_buffer = single_target and ctx.stands_alone(stmt) and not registering_arm and _first_binding(ctx, binding, built)
    if can_buffer:
        # `self.x = (<value>)` -> `self.register_buffer("x", (<value>))`: replace up to the `=`, close at the end.
        head = _through_equals(ctx, stmt)
        end = ctx.range(stmt).end
        call = ctx.replace(head, '%s.register_buffer("%s", ' % (self_name, attr))
        buffers.append(('Register as a buffer: `register_buffer("%s", ...)`' % attr,
                        [call, ctx.replace(Range(end, end), ")")], None, False))
        buffers.append(('Register as a non-persistent buffer (moved by .to(), not saved)',
                        [call, ctx.replace(Range(end, end), ", persistent=False)")], None,
                        buffer_is_safe))
    fixes: List[Tuple[str, List[Edit], Optional[Edit], bool]] = []
    if not integral and (not (uses.written_in_place and buffers) or value.requires_grad):
        # Not for a tensor written in place when a buffer can be offered: changing a leaf Parameter
        # in place raises once it requires grad.
        parameter, import_edit = ctx.spell("torch.nn.Parameter")
        if registering_arm:
            # `nn.Parameter(t) if learn else t`: the other arm stays untrained, but registered.
            title, closing = "Wrap in `%s(..., requires_grad=False)` (registered, not trained)" % parameter, \
                ", requires_grad=False)"
        else:
            title, closing = "Wrap in `%s(...)` (trainable parameter)" % parameter, ")"
        edits = [edit for node in tensors for edit in ctx.wrap(node, parameter + "(", closing)]
        fixes.append((title, edits, import_edit, False))
    fixes += buffers
    why_none = ""
    if fixes and built.runs_early(scope, stmt):
        # Before Module.__init__ torch refuses both ("cannot assign buffer before Module.__init__()
        # call"): the registration goes right after `super().__init__()`, or there is no fix.
        moved = [_after_module_init(ctx, binding, built, edits) for _, edits, _, _ in fixes]
        movable = [m for m in moved if m is not None]
        if len(movable) == len(moved):
            fixes = [(title, m, import_edit, False) for (title, _, import_edit, _), m in zip(fixes, movable)]
        elif not any(built.module_init_call(s) is not None for s in built.scopes.values()):
            fixes = []
            why_none = ("; no fix offered: `__init__` calls no `super().__init__()` at the top of its body, and "
                        "torch refuses to register a parameter or a buffer before `nn.Module.__init__` has run")
        else:
            fixes = []
            why_none = ("; no fix offered: this assignment may run before `super().__init__()` has, where torch "
                        "refuses to register a parameter or a buffer, and torchlint cannot move it after that call")
    elif not fixes and integral:
        why_none = ("; no fix offered: an integer or boolean tensor cannot be an nn.Parameter, and "
                    "`register_buffer` cannot stand in for this assignment (the name may be assigned before it, "
                    "or the statement shares its line)")
    if prefers_parameter or not buffers:
        preferred = 0
    elif (uses.moved or uses.indexes) and not uses.computed_in_forward:
        preferred = len(fixes) - 1  # the non-persistent buffer: the same behaviour, without a copy per call
    else:
        preferred = len(fixes) - 2  # the buffer
    return [ctx.fix(title, list(edits) + [import_edit], safe, preferred=(i == preferred))
            for i, (title, edits, import_edit, safe) in enumerate(fixes)], why_none


def _path(binding: Binding, branches: List[Tuple[ast.expr, Value]], other: Optional[Kind]) -> str:
    """Where the plain tensor comes from, when that is not plain to see: an arm of a conditional
    expression, a branch that is not the one registering the name, a helper method."""
    if len(branches) > 1:
        return " (on one arm of the conditional expression)"
    if other is not None:
        kind = {Kind.PARAMETER: "an nn.Parameter", Kind.BUFFER: "an nn.Buffer", Kind.MODULE: "a Module"}[other]
        return " (on this path; it is %s only on another)" % kind
    if binding.scope.name != "__init__":
        return " (assigned in `%s()`, which `__init__` runs)" % binding.scope.name
    return ""


def _after_module_init(ctx: FileContext, binding: Binding, built: Construction,
                       edits: List[Edit]) -> Optional[List[Edit]]:
    """The fix's ``edits`` (inside the assignment) with the assignment moved right after
    `super().__init__()`, or None when that cannot be done without changing what it computes: the
    assignment is not at the top of `__init__` next to the call, or a statement between them reads or
    re-binds what it uses, or uses the attribute."""
    scope, stmt, value = binding.scope, binding.stmt, binding.value
    assert value is not None  # (an assignment's: find skips the others)
    method = cast(FunctionDefinition, scope.node)  # (construction's scopes are methods)
    init = built.module_init_call(scope)
    body = method.body
    if init is None or stmt not in body or not ctx.stands_alone(init) or not ctx.stands_alone(stmt):
        return None
    source = ctx.source
    between = body[body.index(stmt) + 1: body.index(init) + 1]
    loads = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
    attributes = {n.attr for n in ast.walk(value) if isinstance(n, ast.Attribute) and scope.is_self(n.value)}
    for later in between:
        for node in ast.walk(later):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) and node.id in loads:
                return None
            if isinstance(node, ast.Attribute) and scope.is_self(node.value) and (
                    node.attr == binding.name or (node.attr in attributes and not isinstance(node.ctx, ast.Load))):
                return None
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in loads:
                return None
    first, last = statement_start(stmt), last_line(stmt)
    at = body.index(stmt)
    floor = last_line(body[at - 1]) if at else max(
        [method.lineno] + [getattr(n, "end_lineno", 0) or 0 for n in ast.walk(method.args)]
        + [last_line(method.returns) if method.returns is not None else 0])
    indent = source.indent_of(stmt.lineno)
    while first - 1 > floor and source.line(first - 1).startswith(indent + "#"):
        first -= 1  # the comment lines right above it go with it
    if last_line(init) >= source.line_count:
        return None  # the call ends the file: nowhere to put a line after it
    start, stop = Position(first, 0), Position(last + 1, 0)
    text = source.text
    changed = apply_edits(text, edits)
    begin = source.offset(start)
    moved_text = changed[begin: source.offset(stop) + len(changed) - len(text)]
    after = Position(last_line(init) + 1, 0)
    return [Edit(Range(start, stop), ""), Edit(Range(after, after), moved_text)]


def _target(stmt: ast.stmt, self_name: Optional[str], attr: str) -> Optional[ast.Attribute]:
    """The `self.<attr>` among the targets of ``stmt`` (None when it is not one of them)."""
    for target in getattr(stmt, "targets", ()):
        for node in ast.walk(target):
            if isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name) \
                    and node.value.id == self_name:
                return node
    return None


def _through_equals(ctx: FileContext, stmt: ast.stmt) -> Range:
    """From the statement's start through `=` and the spaces after it."""
    after = stmt.annotation if isinstance(stmt, ast.AnnAssign) else cast(ast.Assign, stmt).targets[0]
    start = ctx.range(stmt).start
    offset = ctx.source.offset(ctx.range(after).end)
    text = ctx.source.text
    offset = text.index("=", offset) + 1
    while text[offset] in " \t":
        offset += 1
    return Range(start, ctx.source.position(offset))


def _first_binding(ctx: FileContext, binding: Binding, built: Construction) -> bool:
    """register_buffer raises when the attribute already exists: only offer it where no other
    assignment of the name may run before this one while the module is built (an earlier line of
    the same method, not on a branch that excludes this one; any line of another of its methods)."""
    here = (binding.stmt.lineno, binding.stmt.col_offset)
    cls = binding.scope.cls
    assert cls is not None  # (a method's binding of self.<name>)
    for other in ctx.classifier.class_attribute_bindings(cls, binding.name):
        if other is binding or other.scope not in built:
            continue
        if other.scope is not binding.scope:
            return False
        if (other.stmt.lineno, other.stmt.col_offset) < here and not exclusive(ctx.index, other.stmt, binding.stmt):
            return False
    return True
