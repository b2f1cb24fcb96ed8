"""TL102 unregistered-container: a plain list/tuple/dict of modules or parameters on a Module."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Iterator, List, Optional, Sequence, Set, Tuple, cast

from ..analysis.context import FileContext
from ..analysis.findings import Edit, Finding, Fix, Position, Range, Severity
from ..analysis.scopes import Binding, FunctionDefinition, Scope, dotted_name
from ..analysis.source import last_line
from ..analysis.values import CONTAINER_KINDS, Kind
from .base import Rule

_WRAPPERS = {
    Kind.MODULE_LIST: "torch.nn.ModuleList",
    Kind.MODULE_DICT: "torch.nn.ModuleDict",
    Kind.PARAMETER_LIST: "torch.nn.ParameterList",
    Kind.PARAMETER_DICT: "torch.nn.ParameterDict",
}
_WHAT = {
    Kind.MODULE_LIST: "list of modules",
    Kind.MODULE_DICT: "dict of modules",
    Kind.PARAMETER_LIST: "list of parameters",
    Kind.PARAMETER_DICT: "dict of parameters",
}
_LEAF = {Kind.MODULE_LIST: Kind.MODULE, Kind.MODULE_DICT: Kind.MODULE,
         Kind.PARAMETER_LIST: Kind.PARAMETER, Kind.PARAMETER_DICT: Kind.PARAMETER}
_CONTAINER = {(Kind.MODULE, False): Kind.MODULE_LIST, (Kind.MODULE, True): Kind.MODULE_DICT,
              (Kind.PARAMETER, False): Kind.PARAMETER_LIST, (Kind.PARAMETER, True): Kind.PARAMETER_DICT}

# Names an nn.ModuleDict / nn.ParameterDict already has (Module's methods and attributes, the dict
# methods): add_module / register_parameter raise KeyError "attribute '...' already exists" for them.
_TAKEN_NAMES = frozenset("""
T_destination add_module apply bfloat16 buffers call_super_init children clear compile copy cpu cuda
double dump_patches eval extra_repr float forward fromkeys get get_buffer get_extra_state get_parameter
get_submodule half ipu items keys load_state_dict modules mtia named_buffers named_children named_modules
named_parameters parameters pop popitem register_backward_hook register_buffer register_forward_hook
register_forward_pre_hook register_full_backward_hook register_full_backward_pre_hook
register_load_state_dict_post_hook register_load_state_dict_pre_hook register_module register_parameter
register_state_dict_post_hook register_state_dict_pre_hook requires_grad_ set_extra_state set_submodule
setdefault share_memory state_dict to to_empty train training type update values xpu zero_grad
""".split())


class UnregisteredContainer(Rule):
    code = "TL102"
    name = "unregistered-container"
    summary = "plain list/tuple/dict of modules or parameters on a Module: invisible to parameters() and .to()"
    severity = Severity.WARNING

    def find(self, ctx: FileContext) -> Iterator[Finding]:
        for cls in ctx.module_classes:
            init = cls.method_scopes.get("__init__")
            if init is None:
                continue
            registered = ctx.registered_names(cls)
            handed = None  # what __init__'s calls hand to registering code, read once (_Handed)
            for binding in cls.attr_assignments:
                if binding.scope is not init or binding.value is None or binding.name in registered:
                    continue
                found = _container(ctx, binding, init)
                if found is None:
                    continue
                handed = handed or _Handed(ctx, init)
                if _registered_later(ctx, binding, init, handed) or _hidden_on_purpose(ctx, binding):
                    continue
                yield _finding(ctx, binding, found)


@dataclass
class _Found:
    """What a container stored on the Module holds, and how it is built."""

    kind: Kind  # MODULE_LIST, MODULE_DICT, PARAMETER_LIST or PARAMETER_DICT: the outer container
    filled: bool = False  # an empty literal filled by `.append(...)` / `[key] = ...` in __init__
    fills: Sequence[ast.AST] = field(default_factory=list)  # those appends and item statements
    inner: Optional[str] = None  # "list" or "dict": each item is itself a container of the leaves
    inner_nodes: List[ast.expr] = field(default_factory=list)  # the inner literals (filled lists)
    mixed: bool = False  # inner lists hold other values besides the new modules (`[nn.Linear(...), act]`)
    keys: Optional[List[Optional[ast.expr]]] = None  # a dict's keys (None for `**`) when every one is seen, else None
    repeated: bool = False  # `n * [layer]`

    @property
    def leaf(self) -> Kind:
        return _LEAF[self.kind]

    @property
    def dict_like(self) -> bool:
        return self.kind in (Kind.MODULE_DICT, Kind.PARAMETER_DICT)


def _value(binding: Binding) -> ast.expr:
    """The value a binding assigns (find takes only those that assign one)."""
    assert binding.value is not None
    return binding.value


def _container(ctx: FileContext, binding: Binding, init: Scope) -> Optional[_Found]:
    node = _value(binding)
    if isinstance(node, (ast.Call, ast.Attribute)):
        # One object, never a container the classifier knows (the jedi layer's answers are single
        # values too): not classified, which would ask the jedi layer about each `self.x = f(...)`.
        return _Found(Kind.MODULE_LIST) if _from_module_arguments(ctx, node, init) else None
    value = ctx.classify(node, init)
    if value.kind in CONTAINER_KINDS and not value.empty:
        return _Found(value.kind, keys=_literal_keys(node, init))
    if value.kind is Kind.OTHER and value.empty and isinstance(node, (ast.List, ast.Dict)):
        return _filled(ctx, binding, init, isinstance(node, ast.Dict))
    if value.kind in CONTAINER_KINDS:  # a local list filled by append, stored afterwards
        return _Found(value.kind)
    repeated = _repeated(node)
    if repeated is not None and ctx.classify(repeated, init).kind is Kind.MODULE_LIST:
        return _Found(Kind.MODULE_LIST, repeated=True)  # n * [nn.Linear(...)]: one layer, n times
    if _from_module_arguments(ctx, node, init):
        return _Found(Kind.MODULE_LIST)  # list(layers) where `def __init__(self, *layers: nn.Module)`
    nested = _nested_literal(ctx, node, init)
    if nested is not None:
        return nested
    return None


def _literal_keys(node: Optional[ast.expr], init: Optional[Scope] = None) -> Optional[List[Optional[ast.expr]]]:
    """A dict's keys as written, when they can be read: a literal, a comprehension over range(n), or a
    local name bound once to one of those."""
    if isinstance(node, ast.Name) and init is not None:
        bindings = init.locals.get(node.id, ())
        return _literal_keys(bindings[0].value) if len(bindings) == 1 else None
    if isinstance(node, ast.Dict):
        return list(node.keys)
    if isinstance(node, ast.DictComp) and _digit_key(node):
        return [node.key]
    return None


def _digit_key(comp: ast.DictComp) -> bool:
    """`{str(i): ... for i in range(n)}`: every key a string of digits."""
    key = comp.key
    if not (isinstance(key, ast.Call) and isinstance(key.func, ast.Name) and key.func.id == "str"
            and len(key.args) == 1 and isinstance(key.args[0], ast.Name)):
        return False
    for generator in comp.generators:
        loop = generator.iter
        if isinstance(generator.target, ast.Name) and generator.target.id == key.args[0].id:
            return isinstance(loop, ast.Call) and isinstance(loop.func, ast.Name) and loop.func.id == "range"
    return False


def _filled(ctx: FileContext, binding: Binding, init: Scope, dict_like: bool) -> Optional[_Found]:
    """`self.layers = []` then `self.layers.append(...)`; `self.heads = {}` then `self.heads[k] = ...`."""
    own = "%s.%s" % (init.self_name, binding.name)
    appends = list(init.appends.get(own, ()))
    items = _items_set(init, own)
    added = [call.args[0] for call in appends] + [stmt.value for stmt in items]
    if not added:
        return None
    fills = appends + items
    keys: Optional[List[Optional[ast.expr]]] = [cast(ast.Subscript, stmt.targets[0]).slice for stmt in items] \
        if dict_like and not appends else None
    kinds = {_new_object(ctx, item, init) for item in added}
    if len(kinds) == 1 and kinds <= {Kind.MODULE, Kind.PARAMETER}:
        return _Found(_CONTAINER[(kinds.pop(), dict_like)], filled=True, fills=fills, keys=keys)
    # Each item a list or dict literal of new layers: `self.hidden.append([nn.Linear(...), act])`.
    inner = [_inner(ctx, item, init) for item in added]
    states = [state for state in inner if state is not None]
    leaves = {state[1] for state in states}
    shapes = {state[0] for state in states}
    if len(states) != len(inner) or len(leaves) != 1 or len(shapes) != 1:
        return None
    return _Found(_CONTAINER[(leaves.pop(), dict_like)], filled=True, fills=fills, inner=shapes.pop(),
                  inner_nodes=added, mixed=any(state[2] for state in states), keys=keys)


def _inner(ctx: FileContext, node: ast.expr, init: Scope) -> Optional[Tuple[str, Kind, bool]]:
    """An inner container literal: ("list" or "dict", the leaf kind, mixed) when it holds at least one
    new module or parameter, else None. Mixed: some items may not be modules (an activation function)."""
    if isinstance(node, (ast.List, ast.Tuple)):
        shape, items = "list", node.elts
    elif isinstance(node, ast.ListComp):
        shape, items = "list", [node.elt]
    elif isinstance(node, ast.Dict) and None not in node.keys:
        shape, items = "dict", node.values
    else:
        return None
    kinds = []
    for item in items:
        if isinstance(item, ast.Starred):
            return None
        kind = ctx.classify(item, init).kind
        if kind in (Kind.TENSOR, Kind.MOVED_PARAMETER, Kind.BUFFER) or kind in CONTAINER_KINDS:
            return None
        if kind in (Kind.MODULE, Kind.PARAMETER) and not isinstance(item, ast.Call):
            kind = Kind.UNKNOWN  # an existing module (self.act): not new, maybe registered
        kinds.append(kind)
    new = {k for k in kinds if k in (Kind.MODULE, Kind.PARAMETER)}
    if len(new) != 1:
        return None
    leaf = new.pop()
    mixed = any(k is not leaf for k in kinds)
    if mixed and (shape == "dict" or leaf is Kind.PARAMETER):
        return None  # a dict or a list of parameters with other values: unsure
    return shape, leaf, mixed


def _nested_literal(ctx: FileContext, node: ast.expr, init: Scope) -> Optional[_Found]:
    """A list (or comprehension) of lists of new layers: `[[nn.Linear(...) for _ in r] for _ in r]`; a
    dict of dicts of new parameters."""
    if isinstance(node, ast.ListComp):
        items, dict_like = [node.elt], False
    elif isinstance(node, (ast.List, ast.Tuple)) and node.elts:
        items, dict_like = node.elts, False
    elif isinstance(node, ast.Dict) and node.values and None not in node.keys:
        items, dict_like = node.values, True
    else:
        return None
    inner = [_inner(ctx, item, init) for item in items]
    states = [state for state in inner if state is not None]
    if len(states) != len(inner) or len({state[:2] for state in states}) != 1:
        return None
    shape, leaf, _ = states[0]
    return _Found(_CONTAINER[(leaf, dict_like)], inner=shape, mixed=any(state[2] for state in states),
                  keys=list(node.keys) if isinstance(node, ast.Dict) else None)  # (a dict: dict_like)


def _module_arguments(ctx: FileContext, init: Scope) -> Optional[str]:
    """The name of `*layers` in `def __init__(self, *layers: nn.Module)`."""
    vararg = cast(FunctionDefinition, init.node).args.vararg
    if vararg is None or vararg.annotation is None:
        return None
    return vararg.arg if ctx.classifier.annotation(vararg.annotation).kind is Kind.MODULE else None


def _from_module_arguments(ctx: FileContext, node: ast.expr, init: Scope) -> bool:
    """`layers`, `list(layers)`, `tuple(layers)`, `[l for l in layers]` from `*layers: nn.Module`."""
    return _source_name(node) is not None and _source_name(node) == _module_arguments(ctx, init)


def _source_name(node: ast.expr) -> Optional[str]:
    """The name a container is made from: `layers`, `list(layers)`, `[layer for layer in layers]`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("list", "tuple") \
            and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Name):
        return node.args[0].id
    if isinstance(node, ast.ListComp) and len(node.generators) == 1:
        generator = node.generators[0]
        if isinstance(generator.target, ast.Name) and isinstance(node.elt, ast.Name) \
                and node.elt.id == generator.target.id and isinstance(generator.iter, ast.Name):
            return generator.iter.id
    return None


def _items_set(init: Scope, own: str) -> List[ast.Assign]:
    """The statements `self.heads[key] = value` in __init__ (loops included)."""
    found = []
    for stmt in init.statements:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            if isinstance(target, ast.Subscript) and dotted_name(target.value) == own:
                found.append(stmt)
    return found


def _new_object(ctx: FileContext, node: ast.expr, init: Scope) -> Kind:
    """The kind of a new module or parameter put into a container: a call building one, or a local
    name every assignment of which builds one (`layer = nn.Linear(...)`, then `append(layer)`), or a
    loop variable over `*layers: nn.Module`."""
    if isinstance(node, ast.Call):
        return ctx.classify(node, init).kind
    if isinstance(node, ast.Name):
        bindings = init.locals.get(node.id, ())
        if bindings and all(isinstance(b.value, ast.Call) for b in bindings):
            kinds = {ctx.classify(b.value, init).kind for b in bindings}
            return kinds.pop() if len(kinds) == 1 else Kind.UNKNOWN
        arguments = _module_arguments(ctx, init)
        if arguments and len(bindings) == 1 and isinstance(bindings[0].iter_of, ast.Name) \
                and bindings[0].iter_of.id == arguments and bindings[0].unpack_index is None:
            return Kind.MODULE
    return Kind.UNKNOWN


def _repeated(node: ast.expr) -> Optional[ast.List]:
    """`n * [x]` / `[x] * n`: the list."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for side in (node.left, node.right):
            if isinstance(side, ast.List):
                return side
    return None


_REGISTERING = frozenset("torch.nn." + n for n in "ModuleList ModuleDict Sequential ParameterList ParameterDict".split())


def _registering_by_name(func: ast.expr) -> str:
    """A call names cannot qualify (its module from a star import: ``nn.Sequential(*self.layers)``
    after ``from ..imports import *``) whose last name is a registering container's is taken as
    one: when unsure, say less."""
    last = (dotted_name(func) or "").rpartition(".")[2]
    return "torch.nn." + last if "torch.nn." + last in _REGISTERING else ""


class _Handed:
    """What the calls of ``__init__`` hand to code that registers modules, read once per
    ``__init__`` (asking for each of N containers stays linear): the names and dotted names given
    directly to ``torch.nn.*`` calls and ``.extend``; those found anywhere inside the arguments of
    the registering containers (``nn.ModuleList([l for l, _ in self.hidden])``); and the member
    registrations (``add_module``, ``register_module``, ``register_parameter``, ``setattr``)."""

    def __init__(self, ctx: FileContext, init: Scope) -> None:
        self.direct: Set[str] = set()  # dotted names and plain names given as arguments
        self.inside: Set[str] = set()  # dotted names anywhere in a registering container's arguments
        self.member_calls: List[ast.Call] = []
        for call in init.calls:
            if isinstance(call.func, ast.Attribute) and call.func.attr in ("add_module", "register_module",
                                                                             "register_parameter") \
                    or isinstance(call.func, ast.Name) and call.func.id == "setattr":
                self.member_calls.append(call)
                continue
            qualified = ctx.qualify(call.func) or _registering_by_name(call.func)
            if not (qualified.startswith("torch.nn.") or (
                    isinstance(call.func, ast.Attribute) and call.func.attr == "extend")):
                continue
            for arg in list(call.args) + [k.value for k in call.keywords]:
                inner = arg.value if isinstance(arg, ast.Starred) else arg
                name = dotted_name(inner)
                if name:
                    self.direct.add(name)
                if qualified in _REGISTERING:
                    self.inside.update(n for n in map(dotted_name, ast.walk(inner)) if n)


def _registered_later(ctx: FileContext, binding: Binding, init: Scope, handed: _Handed) -> bool:
    """`self.blocks = nn.ModuleList(self.blocks)`, or the same objects handed to a registered container."""
    own = "%s.%s" % (init.self_name, binding.name)
    source_name = _source_name(_value(binding))
    assert init.cls is not None  # (the scope of a class's __init__)
    for other in init.cls.assignments_of(binding.name):
        if other.scope is init and other is not binding and other.value is not None:
            if ctx.classify(other.value, init).kind is Kind.MODULE:
                return True
    if any(_registers_members(ctx, call, init, own, source_name) for call in handed.member_calls):
        return True  # this container's members registered one by one: say nothing
    # nn.ModuleList(self.blocks), nn.Sequential(*layers), nn.ModuleList([l for l, _ in self.hidden])
    return own in handed.direct or own in handed.inside or bool(source_name and source_name in handed.direct)


def _registers_members(ctx: FileContext, call: ast.Call, init: Scope, own: str, source_name: Optional[str]) -> bool:
    """`self.add_module(name, m)` / `setattr(self, name, m)` registers what the container holds: `m`
    reads the container (`self.layers[i]`), is a loop variable over it (or over one of its items), or
    is appended to it."""
    args = call.args[1:] if isinstance(call.func, ast.Attribute) else call.args[2:]
    if not args:
        return False
    module = args[0]
    names = {n.id for n in ast.walk(module) if isinstance(n, ast.Name)}
    if any(dotted_name(n) == own for n in ast.walk(module)) or (source_name and source_name in names):
        return True
    appended = {a.id for c in init.appends.get(own, ()) for a in c.args if isinstance(a, ast.Name)}
    if names & appended:
        return True
    return any(_loops_over(init, name, own, source_name, 2) for name in names)


def _loops_over(init: Scope, name: str, own: str, source_name: Optional[str], depth: int) -> bool:
    """``name`` is a loop variable over the container, or over a loop variable over it (nested)."""
    for binding in init.locals.get(name, ()):
        loop = binding.iter_of
        if loop is None:
            continue
        for node in ast.walk(loop):
            if dotted_name(node) == own or (source_name and isinstance(node, ast.Name) and node.id == source_name):
                return True
            if depth > 1 and isinstance(node, ast.Name) and node.id != name \
                    and _loops_over(init, node.id, own, source_name, depth - 1):
                return True
    return False


def _hidden_on_purpose(ctx: FileContext, binding: Binding) -> bool:
    """A one-element list with a comment: the known idiom for keeping a module out of parameters()."""
    value = binding.value
    if not (isinstance(value, ast.List) and len(value.elts) == 1):
        return False
    if not isinstance(value.elts[0], ast.Call):
        return True  # [existing_module]: a reference, not a new layer
    own = "%s.%s" % (binding.scope.self_name, binding.name)
    if binding.scope.appends.get(own):
        return False  # appended to later: a container of layers, not one module kept out of sight
    stmt = binding.stmt
    lines = [ctx.source.line(n) for n in range(stmt.lineno, last_line(stmt) + 1)]
    if stmt.lineno > 1:
        lines.append(ctx.source.line(stmt.lineno - 1))
    return any("#" in line for line in lines)


# -- the finding and its fix ------------------------------------------------------------------

def _finding(ctx: FileContext, binding: Binding, found: _Found) -> Finding:
    target = "%s.%s" % (binding.scope.self_name, binding.name)
    what = _WHAT[found.kind]
    if found.inner:
        what = "%s of %ss of %s" % ("dict" if found.dict_like else "list", found.inner,
                                    "modules" if found.leaf is Kind.MODULE else "parameters")
    if found.leaf is Kind.MODULE:
        message = ("`%s` is a plain %s: their parameters are not in parameters() (the optimizer never sees "
                   "them), not in state_dict(), .to()/.cuda() do not move them, and .eval() does not reach them "
                   "(a Dropout or BatchNorm among them stays in training mode)" % (target, what))
    else:
        message = ("`%s` is a plain %s: they are not registered, so the optimizer never sees them and "
                   "state_dict() does not save them" % (target, what))
    fix, why = _fix(ctx, binding, found)
    if fix is None:
        message += "; no fix: %s" % why
        return ctx.finding(message, binding.stmt)
    return ctx.finding(message, binding.stmt, [fix])


def _fix(ctx: FileContext, binding: Binding, found: _Found) -> Tuple[Optional[Fix], Optional[str]]:
    """(the fix, None) or (None, why there is none)."""
    node = _value(binding)
    if found.inner is None and not found.dict_like:
        return _wrap_fix(ctx, node, found), None
    if found.inner is None:
        bad = _bad_key(found.keys)
        if bad is None:
            return _wrap_fix(ctx, node, found), None
        as_list = _as_module_list(ctx, binding, found)
        if as_list is not None:
            return as_list, None
        return _loop_fix(ctx, binding, found, "nn.ModuleDict takes only string keys without a dot, and %s" % bad)
    if found.inner == "list" and not found.dict_like and not found.mixed:
        return _nested_list_fix(ctx, binding, found), None
    if found.mixed:
        return _loop_fix(ctx, binding, found, "the inner lists hold values that may not be modules, which "
                                              "nn.ModuleList refuses")
    return _loop_fix(ctx, binding, found, "the plain containers stay as they are: registering ones nested would "
                                          "need string keys without a dot at every level")


def _wrap_fix(ctx: FileContext, node: ast.expr, found: _Found) -> Fix:
    wrapper, import_edit = ctx.spell(_WRAPPERS[found.kind])
    if found.filled and isinstance(node, (ast.List, ast.Dict)):
        edits = [ctx.replace(node, wrapper + "()")]
    elif isinstance(node, ast.Tuple) and not _parenthesised(ctx, node):
        edits = ctx.wrap(node, wrapper + "((", "))")
    else:
        edits = ctx.wrap(node, wrapper + "(", ")")
    return ctx.fix("Wrap in `%s`" % wrapper, edits + [import_edit], safe=False, preferred=True)


def _nested_list_fix(ctx: FileContext, binding: Binding, found: _Found) -> Fix:
    """nn.ModuleList takes modules, not lists: each inner list becomes an nn.ModuleList (or an
    nn.ParameterList) too."""
    outer, import_edit = ctx.spell("torch.nn.ModuleList")
    inner, inner_import = ctx.spell(_WRAPPERS[_CONTAINER[(found.leaf, False)]])
    node = _value(binding)
    if found.filled:
        edits = [ctx.replace(node, outer + "()")]
        for item in found.inner_nodes:
            edits.extend(_wrap_literal(ctx, item, inner))
    else:
        edits = ctx.wrap(node, "%s(%s(row) for row in " % (outer, inner), ")")
    return ctx.fix("Wrap in `%s` of `%s`" % (outer, inner), edits + [import_edit, inner_import], safe=False,
                   preferred=True)


def _wrap_literal(ctx: FileContext, node: ast.expr, wrapper: str) -> List[Edit]:
    if isinstance(node, ast.Tuple) and not _parenthesised(ctx, node):
        return ctx.wrap(node, wrapper + "((", "))")
    return ctx.wrap(node, wrapper + "(", ")")


def _bad_key(keys: Optional[List[Optional[ast.expr]]]) -> Optional[str]:
    """Why these keys cannot be a ModuleDict's, or None when they can."""
    if keys is None:
        return "the keys are computed at run time"
    for key in keys:
        if key is None:
            return "`**` adds keys computed at run time"
        if isinstance(key, ast.Call):
            continue  # `str(i)` over range(n), checked by _digit_key
        if isinstance(key, ast.Constant) and type(key.value) in (int, float, bool, tuple):
            return "%r is not a string" % (key.value,)
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            return "`%s` is computed at run time" % ast.unparse(key)
        if "." in key.value:
            return "%r has a dot" % key.value
        if not key.value or key.value in _TAKEN_NAMES:
            return "%r is a name nn.ModuleDict already has" % key.value
    return None


def _as_module_list(ctx: FileContext, binding: Binding, found: _Found) -> Optional[Fix]:
    """`{0: nn.Linear(...), 1: ...}` read only by index (`self.layers[i]`, `len(...)`): an nn.ModuleList."""
    node = binding.value
    if not isinstance(node, ast.Dict) or not found.keys:
        return None
    indices = [k.value if isinstance(k, ast.Constant) and type(k.value) is int else None for k in found.keys]
    if indices != list(range(len(indices))):
        return None  # other keys, or written out of order (the layers would be built in another order)
    # Every `<anything>.<name>` read in the file (subclasses and callers included), to be sure.
    for use in ctx.nodes.of_type(ast.Attribute):
        if use.attr != binding.name or not isinstance(use.ctx, ast.Load):
            continue
        parent = ctx.parent(use)
        by_index = isinstance(parent, ast.Subscript) and parent.value is use and isinstance(parent.ctx, ast.Load)
        counted = isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "len"
        if not (by_index or counted):
            return None
    wrapper, import_edit = ctx.spell(_WRAPPERS[_CONTAINER[(found.leaf, False)]])
    text = "%s([%s])" % (wrapper, ", ".join(ctx.text(value) for value in node.values))
    if any("#" in ctx.text(value) for value in node.values) or "#" in ctx.text(node):
        return None  # a comment inside would be lost
    return ctx.fix("Make it `%s` (keys 0..%d, read by index)" % (wrapper, len(indices) - 1),
                   [ctx.replace(node, text), import_edit], safe=False, preferred=True)


def _loop_fix(ctx: FileContext, binding: Binding, found: _Found, why: str) -> Tuple[Optional[Fix], Optional[str]]:
    """Keep the plain container and register what it holds after it is built:

        for index, layer in enumerate(self.heads.values()):
            self.add_module("heads_%d" % index, layer)
    """
    anchor = _anchor(ctx, binding, found)
    if anchor is None or not ctx.stands_alone(anchor):
        return None, "%s, and torchlint cannot place a registration loop after it is filled" % why
    scope = binding.scope
    method = cast(FunctionDefinition, scope.node)  # (the container's assignment is in __init__)
    used = {n.id for n in ctx.nodes.under(method, ast.Name)} | {a.arg for a in ast.walk(method.args)
                                                                    if isinstance(a, ast.arg)}
    index, row, item = (_free(name, used) for name in ("index", "row", "layer" if found.leaf is Kind.MODULE
                                                         else "param"))
    inner_index = _free("inner", used)
    own = "%s.%s" % (scope.self_name, binding.name)
    register = "add_module" if found.leaf is Kind.MODULE else "register_parameter"
    newline, unit = ctx.source.newline(), ctx.indent_unit
    indent = ctx.indent(anchor)
    outer_iter = "%s.values()" % own if found.dict_like else own
    lines = []
    if found.inner is None:
        lines.append("for %s, %s in enumerate(%s):" % (index, item, outer_iter))
        body = '%s.%s("%s_%%d" %% %s, %s)' % (scope.self_name, register, binding.name, index, item)
        depth = 1
    else:
        inner_iter = "%s.values()" % row if found.inner == "dict" else row
        lines.append("for %s, %s in enumerate(%s):" % (index, row, outer_iter))
        lines.append(unit + "for %s, %s in enumerate(%s):" % (inner_index, item, inner_iter))
        body = '%s.%s("%s_%%d_%%d" %% (%s, %s), %s)' % (scope.self_name, register, binding.name, index,
                                                       inner_index, item)
        depth = 2
    import_edit = None
    if found.mixed:
        module, import_edit = ctx.spell("torch.nn.Module")
        lines.append(unit * depth + "if isinstance(%s, %s):" % (item, module))
        depth += 1
    lines.append(unit * depth + body)
    text = "".join(newline + indent + line for line in lines)
    end_line = last_line(anchor)
    at = Position(end_line, len(ctx.source.line(end_line)))
    title = "Register each %s with `%s` after it is filled (%s)" % (
        "layer" if found.leaf is Kind.MODULE else "parameter", register, why)
    return ctx.fix(title, [ctx.replace(Range(at, at), text), import_edit], safe=False, preferred=True), None


def _free(name: str, used: Set[str]) -> str:
    while name in used:
        name += "_"
    return name


def _anchor(ctx: FileContext, binding: Binding, found: _Found) -> Optional[ast.stmt]:
    """The statement after which the container is complete: its assignment, or the statement of the
    same block that holds its last append / item assignment (a loop filling it, say)."""
    stmt = binding.stmt
    if not found.filled:
        return stmt
    block = ctx.index.blocks.get(id(stmt))
    last = None
    for fill in found.fills:
        node: Optional[ast.AST] = fill
        while node is not None and not isinstance(node, ast.stmt):
            node = ctx.parent(node)
        statement = node  # a statement, or None above the tree
        # Climb to the statement of the assignment's own block.
        while statement is not None and ctx.index.blocks.get(id(statement)) != block:
            entry = ctx.index.blocks.get(id(statement))
            statement = entry[0] if entry is not None else None
        if statement is None or statement.lineno < stmt.lineno:
            return None
        if last is None or statement.lineno > last.lineno:
            last = statement
    return last


def _parenthesised(ctx: FileContext, node: ast.Tuple) -> bool:
    return ctx.text(node).startswith("(")
