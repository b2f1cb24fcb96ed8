"""TL103 parameter-lost-by-move: ``nn.Parameter(t).cuda()`` returns a plain tensor, not the Parameter."""
from __future__ import annotations

import ast
from typing import Dict, Iterator, List, Optional, Union

from ..analysis import torch_names as tn
from ..analysis.context import FileContext
from ..analysis.findings import Edit, Finding, Fix, Range, Severity
from ..analysis.scopes import Binding, Scope, called_method
from ..analysis.source import last_line
from ..analysis.values import keyword
from .base import Rule, shorten

# Conversions with a fixed floating dtype, and those that make integers (which cannot require grad).
FLOAT_METHODS = {"half": "torch.float16", "float": "torch.float32", "double": "torch.float64",
                 "bfloat16": "torch.bfloat16"}
INTEGER_METHODS = {"long", "int", "short", "byte", "char", "bool"}
INTEGER_DTYPES = frozenset("torch." + n for n in (
    "int8 int16 int32 int64 uint8 uint16 uint32 uint64 long int short char byte bool".split()))
FLOAT_DTYPES = frozenset("torch." + n for n in (
    "float16 float32 float64 bfloat16 half float double complex64 complex128 cfloat cdouble".split()))

# Factories that take device= and dtype=. Moving their result equals creating it there.
FACTORIES = frozenset("torch." + n for n in """
tensor as_tensor zeros ones empty full rand randn randint randperm arange linspace logspace eye
zeros_like ones_like empty_like full_like rand_like randn_like randint_like empty_strided
""".split())
# Values that do not depend on where or in which dtype they are computed.
EXACT_FACTORIES = frozenset("torch." + n for n in "zeros ones empty eye zeros_like ones_like empty_like".split())
# Random factories draw from another generator on another device: other numbers for the same seed.
RANDOM_FACTORIES = frozenset("torch." + n for n in
                             "rand randn randint randperm rand_like randn_like randint_like".split())

_ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript)


class ParameterLostByMove(Rule):
    code = "TL103"
    name = "parameter-lost-by-move"
    summary = "nn.Parameter(t).cuda() / .to() / .half() returns a plain tensor: the Parameter is lost"
    severity = Severity.ERROR

    def find(self, ctx: FileContext) -> Iterator[Finding]:
        outer_move: Dict[int, ast.Call] = {}  # id(receiver call) -> the move called on its result
        for call in ctx.index.calls:
            receiver = called_method(call).value if _is_move(call) else None
            if isinstance(receiver, ast.Call):
                outer_move[id(receiver)] = call
        for call in ctx.index.calls:
            receiver = called_method(call).value if _is_move(call) else None
            if isinstance(receiver, ast.Call) and ctx.qualify(receiver.func) == "torch.nn.Parameter":
                chain = [call]
                while id(chain[-1]) in outer_move:
                    chain.append(outer_move[id(chain[-1])])
                yield _finding(ctx, receiver, chain)
        yield from _rebound_moves(ctx)


# -- w = nn.Parameter(t); if use_cuda: w = w.cuda(); self.w = w --------------------------------

def _rebound_moves(ctx: FileContext) -> Iterator[Finding]:
    """A name holding a new Parameter re-bound to its own move (`w = w.cuda()`, often under an `if`),
    then stored (`self.w = w`, `register_parameter(..., w)`, `params.append(w)`): on that path the
    stored value is the plain moved copy."""
    for scope in ctx.index.scopes:
        for name, bindings in scope.locals.items():
            for binding in bindings:
                chain = _self_move_chain(binding)
                if chain is None or not _made_as_parameter(ctx, bindings, binding):
                    continue
                store = _stored_after(ctx, scope, name, binding.stmt)
                if store is not None and not any(binding.stmt.lineno < other.stmt.lineno < store.lineno
                                                 for other in bindings):
                    yield _rebound_finding(ctx, binding, chain, store)  # (nothing re-binds it before)


def _self_move_chain(binding: Binding) -> Optional[List[ast.Call]]:
    """`w = w.cuda().half()`: the moves, innermost first; None for any other value."""
    node = binding.value
    chain: List[ast.Call] = []
    while isinstance(node, ast.Call) and _is_move(node):
        chain.insert(0, node)
        node = called_method(node).value
    if chain and isinstance(node, ast.Name) and node.id == binding.name and isinstance(binding.stmt, ast.Assign):
        return chain
    return None


def _made_as_parameter(ctx: FileContext, bindings: List[Binding], moved: Binding) -> bool:
    """Every earlier binding of the name builds an nn.Parameter (or is another such move)."""
    earlier = [b for b in bindings if b.stmt.lineno < moved.stmt.lineno]
    made = False
    for binding in earlier:
        value = binding.value
        if isinstance(value, ast.Call) and ctx.qualify(value.func) == "torch.nn.Parameter":
            made = True
        elif _self_move_chain(binding) is None:
            return False
    return made


def _stored_after(ctx: FileContext, scope: Scope, name: str, stmt: ast.stmt) -> Optional[Union[ast.stmt, ast.Call]]:
    """The first store of the name below ``stmt`` in the same function: an attribute, a registration,
    an append."""
    for target, value, store, where in ctx.index.attribute_stores:
        if where is scope and store.lineno > last_line(stmt) and isinstance(value, ast.Name) and value.id == name:
            return store
    for call in scope.calls:
        if call.lineno <= last_line(stmt) or not isinstance(call.func, ast.Attribute):
            continue
        args = call.args[1:] if call.func.attr == "register_parameter" else call.args if call.func.attr == "append" \
            else ()
        if any(isinstance(a, ast.Name) and a.id == name for a in args):
            return call
    return None


def _rebound_finding(ctx: FileContext, binding: Binding, chain: List[ast.Call],
                     store: Union[ast.stmt, ast.Call]) -> Finding:
    first = chain[0]
    moved = ctx.text(first)
    what = {"cuda": "moved", "cpu": "moved", "to": "moved or converted"}.get(called_method(first).attr, "converted")
    message = ("`%s` returns a %s copy of the Parameter `%s`, a plain non-leaf tensor: on this path `%s` below "
               "stores a tensor that is never registered on a Module, so it is not in parameters() or state_dict() "
               "and the optimizer never trains it" % (shorten(moved, 40), what, binding.name,
                                                      shorten(ctx.text(store), 40)))
    parameter, import_edit = ctx.spell("torch.nn.Parameter")
    if _integral(ctx, chain):
        extra = ", requires_grad=False"
    else:
        made = [b.value for b in binding.scope.locals.get(binding.name, ())
                if isinstance(b.value, ast.Call) and ctx.qualify(b.value.func) == "torch.nn.Parameter"]
        given = any(keyword(call, "requires_grad") is not None or len(call.args) > 1 for call in made)
        extra = ", requires_grad=%s.requires_grad" % binding.name if given else ""
    value = binding.value
    assert value is not None  # (a move chain: _self_move_chain)
    fix = ctx.fix("Keep it a Parameter: `%s = %s(%s%s)`" % (binding.name, parameter, shorten(ctx.text(value), 30),
                                                          extra),
                  ctx.wrap(value, parameter + "(", extra + ")") + [import_edit], safe=True, preferred=True)
    related = (ctx.related(store, "stored here"),)
    return ctx.finding(message, first, (fix,), related)


def _is_move(call: ast.Call) -> bool:
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in tn.MOVE_METHODS:
        return False
    if func.attr in ("type", "to") and not call.args and not call.keywords:
        return False  # .type() names the type, .to() returns self
    return True


def _finding(ctx: FileContext, parameter: ast.Call, chain: List[ast.Call]) -> Finding:
    first = chain[0]
    spelled = "%s(...).%s%s" % (ctx.text(parameter.func), called_method(first).attr, _short_args(ctx, first))
    trainable = not _false(keyword(parameter, "requires_grad"))
    what = {"cuda": "moved", "cpu": "moved", "to": "moved or converted", "type": "converted"}.get(
        called_method(first).attr, "converted")
    message = ("`%s` returns a %s copy, a plain non-leaf tensor, not the Parameter: it is never registered "
               "on a Module, so it is not in parameters() or state_dict()%s"
               % (spelled, what, " and the optimizer never trains it" if trainable else ""))
    fixes = []
    inside = _move_inside(ctx, parameter, chain)
    if inside is not None:
        fixes.append(inside)
    factory = _on_factory(ctx, parameter, chain)
    if factory is not None:
        fixes.append(factory)
    preferred = 1 if factory is not None and factory.is_safe else 0
    fixes = [ctx.fix(f.title, f.edits, f.is_safe, preferred=(i == preferred)) for i, f in enumerate(fixes)]
    if _only_returned(ctx, chain[-1]):
        return ctx.finding(message, first, fixes, severity=Severity.HINT)
    return ctx.finding(message, first, fixes)


def _only_returned(ctx: FileContext, moved: ast.Call) -> bool:
    """`return nn.Parameter(t).to(d)` in a function no call of which in this file keeps what it
    returns: a value handed back to compute with (a placeholder loss that only has to require
    grad, as a trainer in another file calls it), no weight a Module was meant to keep."""
    if not isinstance(ctx.parent(moved), ast.Return):
        return False
    scope = ctx.index.call_scopes.get(id(moved))
    function = scope.node if scope is not None else None
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    for call in ctx.index.calls:
        func = call.func
        called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if called != function.name:
            continue
        if not isinstance(ctx.parent(call), ast.Expr):
            return False  # its result kept (a local is not followed to where it goes: kept too)
    return True


def _data_argument(parameter: ast.Call) -> Optional[ast.expr]:
    if parameter.args:
        return None if isinstance(parameter.args[0], ast.Starred) else parameter.args[0]
    return keyword(parameter, "data")


def _false(node: Optional[ast.expr]) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _moves_text(ctx: FileContext, parameter: ast.Call, chain: List[ast.Call]) -> Optional[str]:
    """`.cuda().half()` rebuilt from the chain, or None when a comment sits inside it."""
    pieces = []
    previous_end = ctx.range(parameter).end
    for call in chain:
        args_start = ctx.range(call.func).end
        glue = ctx.source.segment(Range(previous_end, args_start))
        if "#" in glue:
            return None  # deleting the glue would delete the comment
        args = ctx.source.segment(Range(args_start, ctx.range(call).end))
        pieces.append(".%s%s" % (called_method(call).attr, args))
        previous_end = ctx.range(call).end
    return "".join(pieces)


def _delete_chain(ctx: FileContext, parameter: ast.Call, chain: List[ast.Call]) -> Edit:
    return ctx.replace(Range(ctx.range(parameter).end, ctx.range(chain[-1]).end), "")


def _integral(ctx: FileContext, chain: List[ast.Call]) -> bool:
    for call in chain:
        if called_method(call).attr in INTEGER_METHODS:
            return True
        for node in list(call.args) + [k.value for k in call.keywords]:
            if ctx.qualify(node) in INTEGER_DTYPES:
                return True
    return False


def _move_inside(ctx: FileContext, parameter: ast.Call, chain: List[ast.Call]) -> Optional[Fix]:
    """nn.Parameter(t).cuda() -> nn.Parameter(t.cuda())."""
    data = _data_argument(parameter)
    moves = _moves_text(ctx, parameter, chain)
    if data is None or moves is None:
        return None
    edits = [_delete_chain(ctx, parameter, chain)]
    end = ctx.range(data).end
    if isinstance(data, _ATOMS):
        edits.append(ctx.replace(Range(end, end), moves))
    else:
        start = ctx.range(data).start
        edits += [ctx.replace(Range(start, start), "("), ctx.replace(Range(end, end), ")" + moves)]
    extra = ""
    if _integral(ctx, chain) and keyword(parameter, "requires_grad") is None:
        # An integer Parameter must not require grad, or nn.Parameter raises.
        last = ctx.range(_last_argument(parameter)).end
        extra = ", requires_grad=False"
        edits.append(ctx.replace(Range(last, last), extra))
    shown = "".join(".%s%s" % (called_method(call).attr, _short_args(ctx, call)) for call in chain)
    title = "Move the call inside: `%s(%s%s%s)`" % (ctx.text(parameter.func), _short(ctx, data), shown, extra)
    if extra:
        title += " (integer tensors cannot require grad)"
    return ctx.fix(title, edits, safe=True)


def _on_factory(ctx: FileContext, parameter: ast.Call, chain: List[ast.Call]) -> Optional[Fix]:
    """nn.Parameter(torch.zeros(3)).cuda() -> nn.Parameter(torch.zeros(3, device="cuda"))."""
    factory = _data_argument(parameter)
    if not isinstance(factory, ast.Call) or _integral(ctx, chain):
        return None
    qualified = ctx.qualify(factory.func)
    if qualified not in FACTORIES or any(k.arg is None for k in factory.keywords):
        return None
    options: Dict[str, str] = {}
    for call in chain:
        implied = _implied_options(ctx, call)
        if implied is None:
            return None
        options.update(implied)
    if not options or any(keyword(factory, name) is not None for name in options):
        return None
    deleted = _delete_chain(ctx, parameter, chain)
    if "#" in ctx.source.segment(deleted.range):
        return None  # the chain holds a comment that this fix would delete
    import_edits = []
    texts = []
    for name in ("device", "dtype"):
        if name in options:
            value = options[name]
            if value.startswith("torch."):
                value, import_edit = ctx.spell(value)
                import_edits.append(import_edit)
            texts.append("%s=%s" % (name, value))
    added = ", ".join(texts)
    arguments = list(factory.args) + list(factory.keywords)
    if arguments:
        at = ctx.range(_last_argument(factory)).end
        insert = ctx.replace(Range(at, at), ", " + added)
    else:
        at = ctx.range(factory).end
        at = type(at)(at.line, at.column - 1)  # just inside the closing parenthesis
        insert = ctx.replace(Range(at, at), added)
    exact = qualified in EXACT_FACTORIES or (qualified not in RANDOM_FACTORIES and "dtype" not in options)
    title = "Create it there: `%s(..., %s)`" % (ctx.text(factory.func), added)
    if qualified in RANDOM_FACTORIES:
        title += " (draws other random numbers for the same seed)"
    elif not exact:
        title += " (values computed directly in the new dtype may differ slightly)"
    return ctx.fix(title, [deleted, insert] + import_edits, safe=exact)


def _implied_options(ctx: FileContext, call: ast.Call) -> Optional[Dict[str, str]]:
    """The factory keywords a move stands for: `.cuda()` -> device="cuda"; None when it cannot tell."""
    method = called_method(call).attr
    if method in FLOAT_METHODS:
        return None if call.args or call.keywords else {"dtype": FLOAT_METHODS[method]}
    if method in ("cuda", "cpu"):
        if call.keywords or len(call.args) > 1:
            return None
        if not call.args:
            return {"device": '"%s"' % method}
        index = call.args[0]
        if method == "cuda" and isinstance(index, ast.Constant) and type(index.value) is int:
            return {"device": '"cuda:%d"' % index.value}
        return None
    options = {}
    for arg in call.args:
        role = _role(ctx, arg)
        if role is None or role in options:
            return None
        options[role] = ctx.text(arg)
    for kw in call.keywords:
        if kw.arg not in ("device", "dtype") or (method == "type" and kw.arg == "device"):
            return None  # non_blocking=, copy=, memory_format= have no factory equivalent
        options[kw.arg] = ctx.text(kw.value)
    if method == "type" and set(options) != {"dtype"}:
        return None  # .type(torch.cuda.FloatTensor) names a tensor type, not a dtype
    return options


def _role(ctx: FileContext, node: ast.expr) -> Optional[str]:
    """Whether a positional argument of .to() is a device or a dtype, when its spelling says so."""
    qualified = ctx.qualify(node)
    if qualified in FLOAT_DTYPES:
        return "dtype"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return "device"
    if isinstance(node, ast.Call) and ctx.qualify(node.func) == "torch.device":
        return "device"
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    if "dtype" in name.lower():
        return "dtype"
    if name.lower() in ("device", "dev") or name.lower().endswith("device"):
        return "device"
    return None


def _last_argument(call: ast.Call) -> Union[ast.expr, ast.keyword]:
    nodes = list(call.args) + list(call.keywords)
    return max(nodes, key=lambda n: (n.end_lineno, n.end_col_offset))


def _short_args(ctx: FileContext, call: ast.Call) -> str:
    """`(device)` as messages show a move's arguments: whole when short and on one line."""
    args = ctx.source.segment(Range(ctx.range(call.func).end, ctx.range(call).end))
    return args if "\n" not in args and len(args) <= 24 else "(...)"


def _short(ctx: FileContext, node: ast.expr) -> str:
    """The argument as the fix title shows it: whole when short, elided when long."""
    text = ctx.text(node)
    if "\n" not in text and len(text) <= 30:
        return text if isinstance(node, _ATOMS) else "(%s)" % text
    if isinstance(node, ast.Call) and len(ctx.text(node.func)) <= 30:
        return "%s(...)" % ctx.text(node.func)
    return "..." if isinstance(node, _ATOMS) else "(...)"
