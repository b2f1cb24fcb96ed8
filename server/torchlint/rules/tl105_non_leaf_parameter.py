"""TL105 non-leaf-parameter: `torch.randn(3, requires_grad=True).cuda()` (or `* 0.01`) used as a weight."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Tuple, cast

from ..analysis import torch_names as tn
from ..analysis.context import FileContext
from ..analysis.findings import Edit, Finding, Fix, Range, Severity
from ..analysis.flow import device_or_dtype, enclosing_statement, loads_of, reaching_binding
from ..analysis.scopes import ClassInfo, Scope, called_method
from ..analysis.values import Kind, keyword
from .base import Rule, shorten

# Factories that take requires_grad=True and return a leaf.
_FACTORIES = frozenset("torch." + n for n in """
tensor as_tensor zeros ones empty full rand randn arange linspace logspace eye normal empty_strided
zeros_like ones_like empty_like full_like rand_like randn_like
""".split())
# Conversions that return the tensor itself when it already has that dtype (or is on the CPU).
_DTYPE_METHODS = {"float": "torch.float32", "double": "torch.float64", "half": "torch.float16",
                  "bfloat16": "torch.bfloat16"}
_DTYPE_SPELLINGS = {"torch.float": "torch.float32", "torch.double": "torch.float64", "torch.half": "torch.float16"}
# Methods whose result is no longer a tensor that requires grad (or is the same leaf).
_NOT_COPIES = frozenset("""
cpu contiguous detach detach_ requires_grad_ type long int short byte char bool
""".split())
_ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript)
_IN_A_LIST = "in a plain list"  # how a sink message says the tensor is an element of a list attribute


@dataclass
class _NonLeaf:
    factory: ast.Call  # the factory called with requires_grad=True (or its `.requires_grad_()`)
    op: ast.expr  # the first operation on it: its result is not a leaf
    value: ast.expr  # the expression whose value is the non-leaf (where the fix appends)
    operands: List[ast.expr] = field(default_factory=list)  # other inputs of the operations
    single_use: bool = True  # names between the factory and value are read once: the fix may edit them


class NonLeafParameter(Rule):
    code = "TL105"
    name = "non-leaf-parameter"
    summary = "a requires_grad=True tensor put through .cuda()/.to()/arithmetic: the result is not a leaf"
    severity = Severity.ERROR

    def find(self, ctx: FileContext) -> Iterator[Finding]:
        reported = set()
        for value, scope, stmt, sink, sink_node in _sinks(ctx):
            found = _non_leaf(ctx, value, scope, stmt, 0)
            if found is None or id(found.value) in reported:
                continue
            reported.add(id(found.value))
            yield _finding(ctx, found, scope, sink, sink_node)


# -- where a non-leaf does harm ----------------------------------------------------------------
def _sinks(ctx: FileContext) -> Iterator[Tuple[ast.expr, Scope, ast.stmt, str, ast.expr]]:
    """(expression, scope, statement, what happens there, node) for each place a tensor is used as
    a weight: an optimizer's parameters, a `.grad` read, an attribute of a Module."""
    for call in ctx.index.calls:
        if tn.is_optimizer_class(ctx.qualify(call.func) or ""):
            scope = ctx.index.call_scopes[id(call)]
            stmt = _statement_of(ctx, scope, call)
            if stmt is None:
                continue
            sink = "it is passed to `%s`, which raises \"ValueError: can't optimize a non-leaf Tensor\"" % ctx.text(call.func)
            for element in _optimized(ctx, call, scope, stmt):
                yield element, scope, stmt, sink, call
    grad_reads = _grad_reads(ctx)
    for scope in ctx.index.scopes if grad_reads else ():
        for node in grad_reads.get(id(scope.node), ()):
            read_in = enclosing_statement(node, ctx.nodes.parent)
            if read_in is not None:
                sink = "its `.grad`, read on line %d, stays None" % node.lineno
                yield node.value, scope, read_in, sink, node
    for target, stored, stmt, scope in ctx.index.attribute_stores:
        comprehended = _comprehended(stored, scope)
        if comprehended is not None:
            values, what = [comprehended], _IN_A_LIST
        elif isinstance(stored, (ast.List, ast.Tuple)):
            values, what = [e for e in stored.elts if not isinstance(e, ast.Starred)], _IN_A_LIST
        else:
            values, what = [stored], "a plain tensor attribute"
        values = [v for v in values if _non_leaf(ctx, v, scope, stmt, 0) is not None]
        if not values:
            continue  # cheap first: most stores are not non-leaves, and classifying may ask jedi
        if scope.cls is not None and scope.cls.is_module and scope.is_self(target.value):
            if _wrapped_later(ctx, scope.cls, target.attr, stmt):
                continue
            owner = "the Module"
        elif ctx.classify(target.value, scope).kind is Kind.MODULE:
            owner = "a Module"
        else:
            continue
        sink = ("it is stored on %s as `%s`: %s, never a parameter, so the optimizer never "
                "trains it" % (owner, ctx.text(target), what))
        for value in values:
            yield value, scope, stmt, sink, target


def _wrapped_later(ctx: FileContext, cls: ClassInfo, attr: str, stmt: ast.stmt) -> bool:
    """`self.w = nn.Parameter(self.w)` or register_parameter("w", ...) elsewhere in the class:
    the tensor stored here is only a draft of the parameter."""
    if attr in ctx.registered_names(cls):
        return True
    for other in ctx.classifier.class_attribute_bindings(cls, attr):
        if other.stmt is not stmt and other.value is not None and \
                ctx.classify(other.value, other.scope).kind in (Kind.PARAMETER, Kind.BUFFER, Kind.MODULE,
                                                                Kind.PARAMETER_LIST):
            return True
    return False


def _grad_reads(ctx: FileContext) -> Dict[int, List[ast.Attribute]]:
    """id(scope node) -> the `name.grad` reads in that function's (or class's, or the module's)
    own code, not in the functions, classes or lambdas inside it; in the order a stack walk from
    its last statement meets them (the node table's order)."""
    table = ctx.nodes
    nodes, owners = cast(List[ast.Attribute], table.nodes), table.owners  # (read at ast.Attribute positions)
    reads: Dict[int, List[ast.Attribute]] = {}
    for position in table.positions_of(ast.Attribute):
        node = nodes[position]
        if node.attr == "grad" and isinstance(node.value, ast.Name) and isinstance(node.ctx, ast.Load) \
                and owners[position] is not None:
            reads.setdefault(id(owners[position]), []).append(node)
    return reads


def _statement_of(ctx: FileContext, scope: Scope, node: ast.Call) -> Optional[ast.stmt]:
    return enclosing_statement(node, ctx.nodes.parent)


def _optimized(ctx: FileContext, call: ast.Call, scope: Scope, stmt: ast.stmt) -> List[ast.expr]:
    """The tensors an optimizer call is given: `[w, b]`, `[{"params": [w]}, ...]`, or a list name."""
    params = call.args[0] if call.args else keyword(call, "params")
    if params is None:
        return []
    if isinstance(params, ast.Name):
        binding = reaching_binding(ctx.index, scope, params.id, stmt)
        if binding is None:
            return []
        comprehended = _comprehended(binding.value, scope)
        if comprehended is not None:
            return [comprehended]
        if not isinstance(binding.value, (ast.List, ast.Tuple)):
            return []
        appended = [c.args[0] for c in scope.appends.get(params.id, ())]
        stmt = binding.stmt
        params = ast.List(elts=list(binding.value.elts) + appended, ctx=ast.Load())
    comprehended = _comprehended(params, scope)
    if comprehended is not None:
        return [comprehended]
    if not isinstance(params, (ast.List, ast.Tuple)):
        return []
    found = []
    for element in params.elts:
        if isinstance(element, ast.Dict):
            for key, value in zip(element.keys, element.values):
                if isinstance(key, ast.Constant) and key.value == "params":
                    found.extend(value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value])
        elif not isinstance(element, ast.Starred):
            found.append(element)
    return found


def _comprehended(node: Optional[ast.AST], scope: Scope) -> Optional[ast.expr]:
    """The element of `[torch.ones(2, requires_grad=True).to(dev) for _ in range(n)]` (a list
    comprehension or a generator): each tensor it makes. None when the element reads a loop
    variable that is also a local of the function (the syntactic pass would take the local's value)."""
    if not isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        return None
    targets = {n.id for generator in node.generators for n in ast.walk(generator.target) if isinstance(n, ast.Name)}
    if targets & set(scope.locals):
        return None
    return node.elt


# -- what is a non-leaf ------------------------------------------------------------------------
def _non_leaf(ctx: FileContext, node: ast.expr, scope: Scope, stmt: ast.stmt, depth: int) -> Optional[_NonLeaf]:
    if depth > 8:
        return None
    if isinstance(node, ast.Name):
        binding = reaching_binding(ctx.index, scope, node.id, stmt)
        if binding is None or binding.value is None:
            return None
        return _non_leaf(ctx, binding.value, scope, binding.stmt, depth + 1)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        receiver, method = node.func.value, node.func.attr
        leaf = _grad_leaf(ctx, receiver, scope, stmt, depth)
        if leaf is not None:
            factory, single_use = leaf
            if not _copies(ctx, factory, node):
                return None
            return _NonLeaf(factory, node, node, list(node.args) + [k.value for k in node.keywords], single_use)
        inner = _non_leaf(ctx, receiver, scope, stmt, depth + 1)
        if inner is not None and method in tn.TENSOR_METHODS and method not in ("detach", "detach_"):
            inner.value = node
            inner.operands += list(node.args) + [k.value for k in node.keywords]
            return inner
        return None
    if isinstance(node, ast.BinOp):
        for side, other in ((node.left, node.right), (node.right, node.left)):
            leaf = _grad_leaf(ctx, side, scope, stmt, depth)
            if leaf is not None:
                return _NonLeaf(leaf[0], node, node, [other], leaf[1])
            inner = _non_leaf(ctx, side, scope, stmt, depth + 1)
            if inner is not None:
                inner.value = node
                inner.operands.append(other)
                return inner
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        leaf = _grad_leaf(ctx, node.operand, scope, stmt, depth)
        if leaf is not None:
            return _NonLeaf(leaf[0], node, node, [], leaf[1])
        inner = _non_leaf(ctx, node.operand, scope, stmt, depth + 1)
        if inner is not None:
            inner.value = node
        return inner
    return None


def _grad_leaf(ctx: FileContext, node: ast.expr, scope: Scope, stmt: ast.stmt, depth: int
              ) -> Optional[Tuple[ast.Call, bool]]:
    """(factory call, read once) when ``node`` is a fresh leaf that requires grad."""
    if isinstance(node, ast.Call):
        qualified = ctx.qualify(node.func)
        requires = keyword(node, "requires_grad")
        if qualified in _FACTORIES and isinstance(requires, ast.Constant) and requires.value is True:
            return node, True
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "requires_grad_" and _asks_grad(node) \
                and isinstance(func.value, ast.Call) and ctx.qualify(func.value.func) in _FACTORIES \
                and keyword(func.value, "requires_grad") is None:
            return node, True  # torch.randn(3).requires_grad_(): a leaf that requires grad, too
        return None
    if isinstance(node, ast.Name) and depth < 8:
        binding = reaching_binding(ctx.index, scope, node.id, stmt)
        if binding is None or binding.value is None:
            return None
        leaf = _grad_leaf(ctx, binding.value, scope, binding.stmt, depth + 1)
        if leaf is None:
            return None
        reads = [load for load in loads_of(ctx.nodes, scope, node.id)
                 if reaching_binding(ctx.index, scope, node.id, _statement_holding(ctx, load)) is binding]
        return leaf[0], leaf[1] and len(reads) == 1
    return None


def _statement_holding(ctx: FileContext, load: ast.Name) -> ast.stmt:
    """The statement a read of a name in a function's own code is in."""
    return cast(ast.stmt, enclosing_statement(load, ctx.nodes.parent))


def _asks_grad(call: ast.Call) -> bool:
    flag = call.args[0] if call.args else keyword(call, "requires_grad")
    return flag is None or (isinstance(flag, ast.Constant) and flag.value is True)


def _created_by(factory: ast.Call) -> ast.Call:
    """The factory call itself, also when the origin is `factory(...).requires_grad_()`."""
    func = factory.func
    if isinstance(func, ast.Attribute) and func.attr == "requires_grad_":
        return cast(ast.Call, func.value)  # (a factory's call: _grad_leaf)
    return factory


def _copies(ctx: FileContext, factory: ast.Call, call: ast.Call) -> bool:
    """Whether the method returns a new tensor (not the leaf itself, and still requiring grad)."""
    method = called_method(call).attr
    if method in _NOT_COPIES or method.endswith("_") or method not in tn.TENSOR_METHODS:
        return False  # in place on a leaf that requires grad raises at once: loud, not ours
    if method == "cuda":
        return True
    dtype = keyword(_created_by(factory), "dtype")
    own = _dtype(ctx, dtype) if dtype is not None else "torch.float32"
    if method in _DTYPE_METHODS:
        return not call.args and _DTYPE_METHODS[method] != own
    if method == "to":
        for arg in list(call.args) + [k.value for k in call.keywords if k.arg in ("device", "dtype")]:
            role = device_or_dtype(arg, ctx.qualify)
            if role == "device":
                return True  # a copy wherever the device is not the CPU: the GPU run breaks
            if role == "dtype":
                if _dtype(ctx, arg) != own:
                    return True
        return False  # `.to(x)`, `.to(other)`: cannot tell
    return True


def _dtype(ctx: FileContext, node: ast.expr) -> str:
    qualified = ctx.qualify(node) or ctx.text(node)
    return _DTYPE_SPELLINGS.get(qualified, qualified)


# -- the finding -------------------------------------------------------------------------------
def _finding(ctx: FileContext, found: _NonLeaf, scope: Scope, sink: str, sink_node: ast.expr) -> Finding:
    op = found.op
    if isinstance(op, ast.Call):
        how = "`.%s()`" % called_method(op).attr
    elif isinstance(op, ast.BinOp):
        other = op.right if found.factory in ast.walk(op.left) else op.left
        how = "the arithmetic with `%s`" % shorten(ctx.text(other), 30)
    else:
        how = "the negation"
    message = ("`%s` is not a leaf tensor: %s makes a new tensor out of one that requires grad, "
               "and gradients go to that unreachable original; %s"
               % (shorten(ctx.text(found.value)), how, sink))
    fixes = []
    module_store = sink.startswith("it is stored on") and _IN_A_LIST not in sink
    last = _requires_grad_last(ctx, found, scope)
    if last is not None:
        fixes.append(last)
    if _IN_A_LIST not in sink:  # a Parameter in a plain list attribute is still not registered (TL102)
        parameter, import_edit = ctx.spell("torch.nn.Parameter")
        fixes.append(ctx.fix("Wrap in `%s(...)` (a leaf parameter%s)" % (
            parameter, ", registered on the Module" if module_store else ""),
            ctx.wrap(found.value, parameter + "(", ")") + [import_edit], safe=False))
    preferred = len(fixes) - 1 if module_store or last is None else 0
    fixes = [ctx.fix(f.title, f.edits, f.is_safe, preferred=(i == preferred)) for i, f in enumerate(fixes)]
    related = (ctx.related(sink_node, "used as a weight here"),)
    return ctx.finding(message, found.value, fixes, related)


def _requires_grad_last(ctx: FileContext, found: _NonLeaf, scope: Scope) -> Optional[Fix]:
    """`torch.randn(3, requires_grad=True).cuda()` -> `torch.randn(3).cuda().requires_grad_()`."""
    if not found.single_use:
        return None
    factory = found.factory
    if _created_by(factory) is not factory:  # `.requires_grad_()` in the middle: delete it there
        rng = Range(ctx.range(called_method(factory).value).end, ctx.range(factory).end)
        removal = None if "#" in ctx.source.segment(rng) else ctx.replace(rng, "")
    else:
        removal = _remove_keyword(ctx, factory, "requires_grad")
    if removal is None:
        return None
    value = found.value
    end = ctx.range(value).end
    if isinstance(value, _ATOMS):
        appends = [ctx.replace(Range(end, end), ".requires_grad_()")]
    else:
        start = ctx.range(value).start
        appends = [ctx.replace(Range(start, start), "("), ctx.replace(Range(end, end), ").requires_grad_()")]
    safe = all(_needs_no_grad(ctx, operand, scope) for operand in found.operands)
    spelled = shorten(ctx.text(value).replace(ctx.source.segment(removal.range), ""), 40)
    if not isinstance(value, _ATOMS):
        spelled = "(%s)" % spelled
    title = "Set requires_grad last: `%s.requires_grad_()`" % spelled
    if not safe:
        title += " (cuts the gradient to other tensors in the expression, if any need it)"
    return ctx.fix(title, [removal] + appends, safe=safe)


def _remove_keyword(ctx: FileContext, call: ast.Call, name: str) -> Optional[Edit]:
    """The edit that deletes `name=...` and its comma; None when a comment sits in the way."""
    arguments = list(call.args) + list(call.keywords)
    arguments.sort(key=lambda n: (n.lineno, n.col_offset))
    index = next((i for i, a in enumerate(arguments) if isinstance(a, ast.keyword) and a.arg == name), None)
    if index is None:
        return None
    target = arguments[index]
    if index > 0:
        rng = Range(ctx.range(arguments[index - 1]).end, ctx.range(target).end)
    elif len(arguments) > 1:
        rng = Range(ctx.range(target).start, ctx.range(arguments[1]).start)
    else:
        rng = ctx.range(target)
    if "#" in ctx.source.segment(rng):
        return None
    return ctx.replace(rng, "")


def _needs_no_grad(ctx: FileContext, node: ast.expr, scope: Scope) -> bool:
    """An operand that cannot carry a gradient the fix would cut: numbers, devices, dtypes."""
    if isinstance(node, ast.Constant):
        return True
    if device_or_dtype(node, ctx.qualify) is not None:
        return True
    qualified = ctx.qualify(node.func) if isinstance(node, ast.Call) else None
    if qualified is not None and qualified.startswith("math."):
        return True
    value = ctx.classify(node, scope)
    return value.kind is Kind.OTHER or (value.kind is Kind.TENSOR and not value.requires_grad)
