"""TL301 legacy-constructor: torch.FloatTensor(...) & co, torch.Tensor(...) and Variable(...)."""
from __future__ import annotations

import ast
from typing import Iterator, List, Optional, Set, Tuple, cast

from ..analysis import torch_names as tn
from ..analysis.context import FileContext
from ..analysis.findings import Edit, Finding, Fix, Range, Severity
from ..analysis.scopes import Binding, ClassInfo, FunctionDefinition, Scope, called_method
from ..analysis.values import Kind, keyword
from .cleanups import drop_torch_imports_left_unused
from .base import Rule, shorten

# Expressions that can take `.method()` or stand in for a call without parentheses.
# (Not constants: `3.detach()` does not parse.)
_ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.List, ast.Dict, ast.Set,
          ast.ListComp, ast.DictComp, ast.SetComp)


# Factories that make a tensor from numbers only (no tensor argument to inherit a graph from).
_CREATION_FACTORIES = frozenset("torch." + name for name in """
zeros ones empty full rand randn randint randperm arange linspace logspace eye
""".split())


class LegacyConstructor(Rule):
    code = "TL301"
    name = "legacy-constructor"
    cleanups = (drop_torch_imports_left_unused,)
    summary = "legacy tensor constructor (torch.FloatTensor, torch.Tensor(...), Variable): deprecated"
    severity = Severity.HINT
    grading = "hint (deprecated); warning when the call changes a tensor's dtype or refuses a GPU device"

    def find(self, ctx: FileContext) -> Iterator[Finding]:
        for call in ctx.index.calls:
            qualified = ctx.qualify(call.func)
            if qualified not in tn.LEGACY_CONSTRUCTORS:
                continue
            if qualified == "torch.autograd.Variable":
                yield _variable(ctx, call)
            else:
                yield _typed(ctx, call, qualified)


# -- torch.FloatTensor(...), torch.cuda.LongTensor(...), torch.Tensor(...) ----------------------

def _typed(ctx: FileContext, call: ast.Call, qualified: str) -> Finding:
    name = ctx.text(call.func)
    dtype = tn.TYPED_CONSTRUCTORS.get(qualified.rsplit(".", 1)[1])  # None for torch.Tensor: default dtype
    on_cuda = qualified.startswith("torch.cuda.")
    scope = ctx.index.call_scopes.get(id(call))
    shape = _argument_shape(ctx, call, scope)

    # What the modern call needs besides data or sizes, for the message.
    needs = (", dtype=%s" % dtype if dtype else "") + (', device="cuda"' if on_cuda else "")
    fixes = []
    why_none = ""
    if shape == "data":
        needs_dtype = dtype is not None or not _float_literal(call.args[0])
        fixes.append(_rewrite(ctx, call, "torch.tensor", dtype, needs_dtype, on_cuda, "the data", safe=True))
        modern = "`torch.tensor(data%s)`" % needs
    elif shape in ("empty", "sizes"):
        zeroed = _zeroed_right_after(ctx, call)
        if zeroed is not None:
            # `torch.FloatTensor(n).zero_()` is `torch.zeros(n, ...)`: one call, nothing left uninitialised.
            fix = _rewrite(ctx, call, "torch.zeros", dtype, dtype is not None, on_cuda, "the sizes", safe=True)
            end = ctx.range(call).end
            fixes.append(ctx.fix(fix.title, list(fix.edits) + [ctx.replace(Range(end, ctx.range(zeroed).end), "")],
                                 safe=True))
            modern = "`torch.zeros(*sizes%s)`" % needs
        else:
            fixes.append(_rewrite(ctx, call, "torch.empty", dtype, dtype is not None, on_cuda, "the sizes",
                                  safe=True))
            modern = "`torch.empty(*sizes%s)`" % needs
    elif shape == "shape-like":
        # `torch.FloatTensor((x.shape[0], 1, 1))` builds a 3-element tensor from those numbers, though it
        # reads like a shape (seen in the wild, with the bug). What the call does is the data reading (it
        # comes first); what the code may have meant is the shape reading. Both unsafe.
        fixes.append(_rewrite(ctx, call, "torch.tensor", dtype, True, on_cuda, "it as data, as it runs now",
                              safe=False))
        fixes.append(_rewrite(ctx, call, "torch.empty", dtype, dtype is not None, on_cuda,
                              "it as a shape, a change of behaviour", safe=False))
        modern = ("`torch.tensor(data%s)` (what this call does: a tensor of these numbers), or "
                  "`torch.empty(shape%s)` if a shape was meant" % (needs, needs))
    elif shape == "tensor":
        # A tensor given to the constructor: it is returned as is when its dtype matches (else the call
        # raises): `torch.as_tensor` does the same without raising. Unsafe: it converts where the call raised.
        fixes.append(_rewrite(ctx, call, "torch.as_tensor", dtype, True, on_cuda, "the tensor", safe=False))
        modern = "`torch.as_tensor(t%s)`" % needs
    else:
        # One argument neither names nor syntax can read: data to convert, or a size? A guess either way
        # breaks the code half the time (a bias of n values becomes one number), so no fix.
        modern = "`torch.tensor(data%s)` for data or `torch.empty(*sizes%s)` for sizes" % (needs, needs)
        why_none = ("; no fix offered: torchlint cannot tell whether `%s` is data or a size, and the legacy "
                    "constructor reads it as whichever it holds at run time" % shorten(ctx.text(call.args[0]), 30))
    if fixes:
        fixes[0] = ctx.fix(fixes[0].title, fixes[0].edits, fixes[0].is_safe, preferred=True)
    changes = _behaviour_change(ctx, call, qualified, name)
    if changes:
        message = "`%s(...)` %s; use %s%s" % (name, changes, modern, why_none)
        return ctx.finding(message, call.func, fixes, severity=Severity.WARNING, deprecated=True)
    message = "`%s(...)` is a legacy constructor (deprecated): use %s%s" % (name, modern, why_none)
    return ctx.finding(message, call.func, fixes, deprecated=True)


_FLOAT_CONSTRUCTORS = frozenset(["Tensor", "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor"])


def _behaviour_change(ctx: FileContext, call: ast.Call, qualified: str, name: str) -> Optional[str]:
    """What the legacy call does that the code likely does not mean, or None."""
    device = keyword(call, "device")
    if device is not None and not (isinstance(device, ast.Constant) and device.value == "cpu"):
        return "accepts only CPU devices: it raises for a `device=` on the GPU"
    if len(call.args) != 1 or call.keywords:
        return None
    arg = call.args[0]
    scope = ctx.index.call_scopes.get(id(call))
    kind = ctx.classify(arg, scope).kind
    floating = qualified.rsplit(".", 1)[1] in _FLOAT_CONSTRUCTORS
    if kind in (Kind.TENSOR, Kind.PARAMETER) and not (
            qualified in _DEFAULT_DTYPE_CONSTRUCTORS and _FreshFloat(ctx).read(arg, scope, 8, set())):
        return ("converts the tensor it is given: %s, and a CUDA tensor raises"
                % ("an integer tensor becomes floating point (large values rounded)" if floating
                   else "its dtype changes"))
    if floating and isinstance(arg, ast.Name) and _caller_tensor(ctx, scope, arg.id):
        return ("turns the caller's `%s` into floating point: an integer tensor (token ids, timesteps) is "
                "silently converted, large values rounded, and a CUDA tensor raises" % arg.id)
    return None


# The constructors that return a CPU tensor of the default float dtype as it is (float32, the
# default unless the program changes it).
_DEFAULT_DTYPE_CONSTRUCTORS = frozenset(["torch.Tensor", "torch.FloatTensor"])
# Factories whose tensor has the default float dtype on the CPU unless told otherwise.
_DEFAULT_FLOAT_FACTORIES = frozenset("torch." + n for n in "zeros ones empty rand randn linspace logspace".split())
# Functions and methods whose result has the dtype and device of their (first) tensor argument.
_SAME_KIND_FUNCTIONS = frozenset("torch." + n for n in """
abs sqrt exp log sin cos tanh sigmoid reshape flatten squeeze unsqueeze transpose clamp clone
ones_like zeros_like rand_like randn_like empty_like
""".split())
_SAME_KIND_METHODS = frozenset("""
abs sqrt exp log sin cos tanh sigmoid reshape view flatten squeeze unsqueeze transpose permute t clamp clone
contiguous detach expand repeat neg
""".split())
_TENSOR_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)


class _FreshFloat:
    """Whether an expression is a CPU tensor of the default float dtype that the function itself
    made: `torch.zeros(b, n)`, `torch.randn(n) * 1e-3`, a name bound only to such, their indexing
    and shape changes. What `torch.Tensor(...)` / `torch.FloatTensor(...)` return as they are."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx

    def read(self, node: ast.expr, scope: Optional[Scope], depth: int, visiting: Set[Tuple[int, str]]) -> bool:
        if depth <= 0:
            return False
        if isinstance(node, ast.Call):
            if any(k.arg in ("dtype", "device", "out") for k in node.keywords):
                return False
            qualified = self.ctx.qualify(node.func)
            if qualified in _DEFAULT_FLOAT_FACTORIES:
                return True
            if qualified in _SAME_KIND_FUNCTIONS:
                return bool(node.args) and self.read(node.args[0], scope, depth - 1, visiting)
            func = node.func
            return not qualified and isinstance(func, ast.Attribute) and func.attr in _SAME_KIND_METHODS \
                and self.read(func.value, scope, depth - 1, visiting)
        if isinstance(node, ast.BinOp) and isinstance(node.op, _TENSOR_OPERATORS):
            sides = [s for s in (node.left, node.right)
                     if not (isinstance(s, ast.Constant) and type(s.value) in (int, float))]
            return bool(sides) and all(self.read(s, scope, depth - 1, visiting) for s in sides)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return self.read(node.operand, scope, depth - 1, visiting)
        if isinstance(node, ast.Subscript):
            return self.read(node.value, scope, depth - 1, visiting)
        if isinstance(node, ast.Name):
            return self._name(node.id, scope, depth, visiting)
        return False

    def _name(self, name: str, scope: Optional[Scope], depth: int, visiting: Set[Tuple[int, str]]) -> bool:
        if scope is None or name not in scope.locals:
            return False  # a parameter, a global, a name of an enclosing function: not made here
        if (id(scope), name) in visiting:
            return True  # `x = x.reshape(...)`: fresh if every other binding is
        bindings = scope.locals[name]
        if len(bindings) > 8 or any(b.value is None or b.unpack_index is not None or b.iter_of is not None
                                    or isinstance(b.stmt, ast.AugAssign) for b in bindings):
            return False
        visiting = visiting | {(id(scope), name)}
        return all(b.value is not None and self.read(b.value, b.scope, depth - 1, visiting) for b in bindings)


def _caller_tensor(ctx: FileContext, scope: Optional[Scope], name: str) -> bool:
    """``name`` is a parameter of the enclosing function annotated as a tensor, never re-bound in it."""
    bindings = scope.locals.get(name, ()) if scope is not None else ()
    if len(bindings) != 1 or bindings[0].value is not None or bindings[0].annotation is None:
        return False
    annotation = bindings[0].annotation
    names = {ctx.qualify(n) for n in ast.walk(annotation) if isinstance(n, (ast.Name, ast.Attribute))}
    return "torch.Tensor" in names and isinstance(bindings[0].stmt, (ast.FunctionDef, ast.AsyncFunctionDef))


def _zeroed_right_after(ctx: FileContext, call: ast.Call) -> Optional[ast.Call]:
    """The `.zero_()` call made on the constructor's result, if any: `torch.FloatTensor(3).zero_()`."""
    for other in ctx.calls_on(call):
        if called_method(other).attr == "zero_" and not other.args and not other.keywords:
            text = ctx.source.segment(Range(ctx.range(call).end, ctx.range(other).end))
            return None if "#" in text else other
    return None


def _argument_shape(ctx: FileContext, call: ast.Call, scope: Optional[Scope]) -> Optional[str]:
    """How the legacy constructor reads its arguments: 'data', 'sizes', 'empty' (no argument),
    'shape-like' (a literal tuple that looks like a shape), 'tensor' or 'ambiguous'."""
    args = call.args
    if not args:
        return "empty"
    if len(args) > 1:
        return "sizes"
    arg = args[0]
    if isinstance(arg, ast.Starred):
        return "sizes"  # `*shape`: each element a size
    if isinstance(arg, (ast.List, ast.Tuple)) and any(_is_size(elt) for elt in arg.elts):
        return "shape-like"
    if ctx.classify(arg, scope).kind in (Kind.TENSOR, Kind.PARAMETER, Kind.MOVED_PARAMETER):
        return "tensor"
    return _Reader(ctx).read(arg, scope, 4) or "ambiguous"


# Layers whose first two positional arguments are integer sizes (`nn.Linear(in_features, out_features)`).
_SIZED_LAYERS = frozenset("torch.nn." + n for n in """
Linear Bilinear Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d Embedding EmbeddingBag
BatchNorm1d BatchNorm2d BatchNorm3d InstanceNorm1d InstanceNorm2d InstanceNorm3d GroupNorm RNN LSTM GRU
RNNCell LSTMCell GRUCell MultiheadAttention PixelShuffle
""".split())
# Factories whose positional arguments are sizes when there are several of them.
_SIZE_FACTORIES = frozenset("torch." + n for n in "zeros ones empty rand randn".split()) | tn.LEGACY_CONSTRUCTORS
# Array constructors of numpy: their result is data.
_NUMPY_ARRAYS = frozenset("numpy." + n for n in """
array asarray zeros ones empty full eye arange linspace stack concatenate load loadtxt
""".split())
_DATA_METHODS = frozenset(["tolist", "numpy", "values", "to_numpy"])
_INT_ANNOTATIONS = frozenset(["int"])
_DATA_ANNOTATIONS = frozenset("""list tuple List Tuple Sequence Iterable ndarray numpy.ndarray np.ndarray
typing.List typing.Tuple typing.Sequence""".split())
# Parameter names that hold a count or a width by convention (`out_channels`, `num_classes`, `n`).
_SIZE_NAME_SUFFIXES = ("_channels", "_features", "_dim", "_planes")
_SIZE_NAME_PREFIXES = ("num_", "n_")
_SIZE_NAMES = frozenset("n dim channels features planes hidden_size batch_size vocab_size".split())


class _Reader:
    """Reads one constructor argument as 'sizes' (an int, a torch.Size) or 'data' (a list, a tuple, an
    array), following a name to what it is bound to; None when that cannot be told."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx

    def read(self, node: Optional[ast.expr], scope: Optional[Scope], depth: int) -> Optional[str]:
        if depth <= 0 or node is None:
            return None
        if isinstance(node, ast.Constant):
            return "sizes" if type(node.value) is int else None
        if isinstance(node, (ast.List, ast.Tuple, ast.ListComp)):
            return "data"
        if _is_size(node):
            return "sizes"
        if isinstance(node, ast.BinOp):
            return self._arithmetic(node, scope, depth)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Name):
            return self._name(node.id, scope, depth)
        if isinstance(node, ast.Attribute) and scope is not None and scope.is_self(node.value) \
                and scope.cls is not None:
            return self._self_attribute(scope.cls, node.attr, depth)
        return None

    def _arithmetic(self, node: ast.BinOp, scope: Optional[Scope], depth: int) -> Optional[str]:
        sides = (node.left, node.right)
        if any(isinstance(s, ast.Constant) and type(s.value) is float for s in sides):
            return "data"  # a float (or an array of floats): never a size
        if isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.Pow)) \
                and all(self.read(s, scope, depth - 1) == "sizes" and not _is_shape(s) for s in sides):
            return "sizes"  # int arithmetic: `2 * hidden`, `dim // heads`
        return None

    def _call(self, node: ast.Call) -> Optional[str]:
        qualified = self.ctx.qualify(node.func) or ""
        if qualified in _NUMPY_ARRAYS or qualified.startswith("numpy.random."):
            return "data"
        if isinstance(node.func, ast.Name) and node.func.id in ("list", "tuple", "sorted") and not qualified:
            return "data"
        if isinstance(node.func, ast.Attribute) and node.func.attr in _DATA_METHODS:
            return "data"
        return None

    def _name(self, name: str, scope: Optional[Scope], depth: int) -> Optional[str]:
        while scope is not None and name not in scope.locals:
            scope = scope.parent
        if scope is None:
            return None
        readings = {self._binding(b, depth) for b in scope.locals[name][:8]}
        return readings.pop() if len(readings) == 1 and len(scope.locals[name]) <= 8 else None

    def _binding(self, binding: Binding, depth: int) -> Optional[str]:
        if binding.annotation is not None:
            annotated = _annotation_reading(binding.annotation)
            if annotated is not None:
                return annotated
        if isinstance(binding.stmt, ast.AugAssign):
            # `n += 1`: an int stays an int (the other bindings of the name must say int too).
            stmt = binding.stmt
            int_step = isinstance(stmt.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod))
            return "sizes" if int_step and self.read(stmt.value, binding.scope, depth - 1) == "sizes" else None
        if binding.value is not None:
            return self.read(binding.value, binding.scope, depth - 1)
        if binding.iter_of is not None:
            loop = binding.iter_of
            is_range = isinstance(loop, ast.Call) and isinstance(loop.func, ast.Name) and loop.func.id == "range"
            return "sizes" if is_range and binding.unpack_index is None else None
        function = binding.stmt
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return self._parameter(function, binding)
        return None

    def _parameter(self, function: FunctionDefinition, binding: Binding) -> Optional[str]:
        """A function's parameter: its default, or how the function uses it (a layer's width, a size
        among several, `range(n)`), or a name that only ever means a count."""
        name = binding.name
        default = _default_of(function, name)
        if default is not None and not (isinstance(default, ast.Constant) and default.value is None):
            reading = self.read(default, None, 1)
            if reading is not None:
                return reading
        for call in self.ctx.nodes.under(function, ast.Call):
            if any(isinstance(a, ast.Name) and a.id == name for a in call.args) and self._used_as_size(call, name):
                return "sizes"
        if name in _SIZE_NAMES or name.endswith(_SIZE_NAME_SUFFIXES) or name.startswith(_SIZE_NAME_PREFIXES):
            return "sizes"
        return None

    def _used_as_size(self, call: ast.Call, name: str) -> bool:
        positions = [i for i, a in enumerate(call.args) if isinstance(a, ast.Name) and a.id == name]
        if isinstance(call.func, ast.Name) and call.func.id == "range" and not self.ctx.qualify(call.func):
            return True
        qualified = self.ctx.qualify(call.func) or ""
        if qualified in _SIZED_LAYERS:
            return any(i < 2 for i in positions)
        if qualified in _SIZE_FACTORIES:
            return len(call.args) > 1 and not any(isinstance(a, ast.Starred) for a in call.args)
        return False

    def _self_attribute(self, cls: ClassInfo, attr: str, depth: int) -> Optional[str]:
        bindings = [b for b in self.ctx.classifier.class_attribute_bindings(cls, attr) if b.value is not None]
        if not bindings or len(bindings) > 8:
            return None
        readings = {self.read(b.value, b.scope, depth - 1) for b in bindings}
        return readings.pop() if len(readings) == 1 else None


def _is_shape(node: ast.expr) -> bool:
    """`x.shape` / `x.size()`: a torch.Size (a size for the constructor, but not an int to compute with)."""
    return (isinstance(node, ast.Attribute) and node.attr == "shape") or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size"
        and not node.args)


def _annotation_reading(annotation: ast.expr) -> Optional[str]:
    base = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    text = ast.unparse(base)
    if text in _INT_ANNOTATIONS:
        return "sizes"
    if text in _DATA_ANNOTATIONS:
        return "data"
    return None


def _default_of(function: FunctionDefinition, name: str) -> Optional[ast.expr]:
    args = function.args
    positional = args.posonlyargs + args.args
    defaults = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults):]], args.defaults))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    return defaults.get(name)


def _is_size(node: ast.expr) -> bool:
    """`x.size()`, `x.shape`, `x.size(0)`, `x.shape[1]`, `len(xs)`, `int(n)`: a size or a torch.Size."""
    if isinstance(node, ast.Subscript):
        node = node.value
        return isinstance(node, ast.Attribute) and node.attr == "shape"
    if isinstance(node, ast.Attribute):
        return node.attr == "shape"
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute):
            return func.attr in ("size", "numel", "dim")
        return isinstance(func, ast.Name) and func.id in ("len", "int")
    return False


def _float_literal(node: ast.expr) -> bool:
    """A literal of numbers with at least one float: torch.tensor() infers the default float dtype for it."""
    leaves = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, (ast.List, ast.Tuple)):
            stack.extend(item.elts)
        elif isinstance(item, ast.UnaryOp) and isinstance(item.op, (ast.USub, ast.UAdd)):
            stack.append(item.operand)
        elif isinstance(item, ast.Constant) and type(item.value) in (int, float):
            leaves.append(item.value)
        else:
            return False
    return any(type(v) is float for v in leaves)


def _rewrite(ctx: FileContext, call: ast.Call, function: str, dtype: Optional[str], needs_dtype: bool, on_cuda: bool,
             reading: str, safe: bool) -> Fix:
    """Replace the constructor's name with ``function`` and append dtype=/device= to its arguments."""
    spelled, import_edit = ctx.spell(function)
    edits = [ctx.replace(call.func, spelled), import_edit]
    extra = []
    given = {kw.arg for kw in call.keywords}
    if needs_dtype and "dtype" not in given:
        if dtype is None:
            default, default_import = ctx.spell("torch.get_default_dtype")
            extra.append("dtype=%s()" % default)
            edits.append(default_import)
        else:
            spelled_dtype, dtype_import = ctx.spell(dtype)
            extra.append("dtype=%s" % spelled_dtype)
            edits.append(dtype_import)
    if on_cuda and "device" not in given:
        extra.append('device="cuda"')

    if call.args or call.keywords:
        if not call.args:
            # Only keywords: add the size of an empty 1-d tensor, as the legacy constructor made.
            first = ctx.range(call.keywords[0]).start
            edits.append(ctx.replace(Range(first, first), "0, "))
        if extra:
            last = max(ctx.range(a).end for a in list(call.args) + list(call.keywords))
            edits.append(ctx.replace(Range(last, last), ", " + ", ".join(extra)))
    else:
        parentheses = Range(ctx.range(call.func).end, ctx.range(call).end)
        edits.append(ctx.replace(parentheses, "(%s)" % ", ".join(["0"] + extra)))

    shown = "%s(%s)" % (spelled, ", ".join(["..."] + extra))
    title = "Use `%s` (reads %s)" % (shown, reading)
    return ctx.fix(title, _unique(edits), safe=safe)


def _unique(edits: List[Optional[Edit]]) -> List[Edit]:
    """Several spellings may need the same `import torch`: keep one of each edit."""
    seen, kept = set(), []
    for edit in edits:
        if edit is not None and edit not in seen:
            seen.add(edit)
            kept.append(edit)
    return kept


# -- torch.autograd.Variable(...) -----------------------------------------------------------

def _variable(ctx: FileContext, call: ast.Call) -> Finding:
    name = ctx.text(call.func)
    message = ("`%s(...)` is deprecated: since PyTorch 0.4 tensors track gradients themselves, and "
               "`%s(x)` only returns a detached alias of `x`" % (name, name))
    fixes = []
    requires_grad = call.args[1] if len(call.args) > 1 else keyword(call, "requires_grad")
    understood = (len(call.args) in (1, 2, 3) and not any(isinstance(a, ast.Starred) for a in call.args)
                  and all(kw.arg in ("requires_grad", "volatile") for kw in call.keywords))
    if understood:
        fixes.append(_unwrap_variable(ctx, call, requires_grad))
    return ctx.finding(message, call.func, fixes, deprecated=True)


def _unwrap_variable(ctx: FileContext, call: ast.Call, requires_grad: Optional[ast.expr]) -> Fix:
    """`Variable(x)` -> `x`; `Variable(x, requires_grad=g)` -> `x.detach().requires_grad_(g)`.

    `volatile=` is dropped: it has had no effect since PyTorch 0.4.
    """
    data = call.args[0]
    value = ctx.classify(data, ctx.index.call_scopes.get(id(call)))
    wants_grad = requires_grad is not None and not (
        isinstance(requires_grad, ast.Constant) and requires_grad.value is False)
    # Variable() always detaches; leave .detach() out only for a fresh tensor that needs no grad
    # (anything else, a model's output say, may carry a graph that Variable() used to cut).
    known_plain = value.kind is Kind.TENSOR and not value.requires_grad and value.factory in _CREATION_FACTORIES
    may_require_grad = not (_fresh(ctx, data) or known_plain)
    suffix = ""
    if wants_grad:
        detach = "" if _fresh(ctx, data) else ".detach()"
        argument = "" if isinstance(requires_grad, ast.Constant) and requires_grad.value is True \
            else ctx.text(cast(ast.expr, requires_grad))  # (given: wants_grad)
        suffix = "%s.requires_grad_(%s)" % (detach, argument)
    elif may_require_grad:
        suffix = ".detach()"
    needs_parentheses = not isinstance(data, _ATOMS)
    call_range, data_range = ctx.range(call), ctx.range(data)
    before = "(" if needs_parentheses else ""
    after = (")" if needs_parentheses else "") + suffix
    edits = [ctx.replace(Range(call_range.start, data_range.start), before),
             ctx.replace(Range(data_range.end, call_range.end), after)]
    shown = "%s%s%s" % (before, shorten(ctx.text(data), 40), after)
    return ctx.fix("Replace with `%s`" % shown, edits, safe=True, preferred=True)


def _fresh(ctx: FileContext, node: ast.expr) -> bool:
    """A new tensor that nothing else refers to and that needs no grad: `torch.randn(3).type(dtype)`."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in tn.MOVE_METHODS:
        node = node.func.value
    return (isinstance(node, ast.Call) and ctx.qualify(node.func) in _CREATION_FACTORIES
            and keyword(node, "requires_grad") is None)
