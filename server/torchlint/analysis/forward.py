"""What a Module's ``forward`` runs: its own body and the methods it reaches through
``self.<method>``, resolved in the class and its bases of the same file, then in its bases of
other project files when the inference layer read them (:class:`BaseClass`).

Also whether that reach is *dynamic* (it can touch any attribute: ``getattr(self, name)``,
loops over ``self.children()``, ``self`` handed to other code, ``super()``, methods defined
outside the file that could not be read), and which submodules may hold parameters.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, Iterator, List, Optional, Set, Tuple, cast

from .imports import ImportMap
from .scopes import ClassInfo, NodeTable, Scope
from .values import Kind

if TYPE_CHECKING:  # (context imports this module)
    from .context import FileContext

# A use of `self` in a method: (attribute name, called, None), or (None, False, why it can reach
# any attribute).
SelfUse = Tuple[Optional[str], bool, Optional[str]]

# Module methods that reach every submodule or parameter by iterating them.
_ITERATING_METHODS = frozenset("""
children named_children modules named_modules parameters named_parameters buffers named_buffers
state_dict apply __getattr__ __getattribute__ _modules _parameters _buffers __dict__ get_submodule
""".split())
_DYNAMIC_BUILTINS = frozenset(["getattr", "vars", "dir", "hasattr"])

# torch.nn classes that hold parameters (or hold layers that do). The others (activations,
# dropout, pooling, losses, Identity, Flatten...) hold none.
PARAMETER_LAYERS = frozenset(["torch.nn." + n for n in """
Linear LazyLinear Bilinear Embedding EmbeddingBag PReLU LayerNorm GroupNorm RMSNorm
BatchNorm1d BatchNorm2d BatchNorm3d LazyBatchNorm1d LazyBatchNorm2d LazyBatchNorm3d SyncBatchNorm
Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d LazyConv1d LazyConv2d LazyConv3d
LazyConvTranspose1d LazyConvTranspose2d LazyConvTranspose3d
RNN LSTM GRU RNNCell LSTMCell GRUCell MultiheadAttention Transformer TransformerEncoder
TransformerDecoder TransformerEncoderLayer TransformerDecoderLayer AdaptiveLogSoftmaxWithLoss
Sequential ModuleList ModuleDict ParameterList ParameterDict
""".split()])


# torch.nn layers with no parameters whose call changes what flows through forward: left
# uncalled, their effect is lost (DDP and the optimizer are unaffected). Identity changes
# nothing; losses are the training loop's, not forward's.
DROPOUT_LAYERS = frozenset(["torch.nn." + n for n in
                            "Dropout Dropout1d Dropout2d Dropout3d AlphaDropout FeatureAlphaDropout".split()])
PARAMETER_FREE_LAYERS = DROPOUT_LAYERS | frozenset(["torch.nn." + n for n in """
ReLU ReLU6 LeakyReLU RReLU ELU SELU CELU GELU SiLU Mish Sigmoid Tanh Softmax Softmin LogSoftmax Softmax2d
Softplus Softsign Hardtanh Hardswish Hardsigmoid Hardshrink Softshrink Tanhshrink Threshold GLU LogSigmoid
Flatten Unflatten MaxPool1d MaxPool2d MaxPool3d AvgPool1d AvgPool2d AvgPool3d AdaptiveAvgPool1d
AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d LPPool1d LPPool2d
Upsample UpsamplingNearest2d UpsamplingBilinear2d PixelShuffle PixelUnshuffle ChannelShuffle
""".split()])

@dataclass
class Reach:
    """The methods ``forward`` runs, by name, with the scope of each definition used."""

    methods: Dict[str, Scope] = field(default_factory=dict)
    dynamic: Optional[str] = None  # why any attribute may be used, or None
    attributes: Set[str] = field(default_factory=set)  # self.<name> read (or named in a string) by them
    outside: Set[str] = field(default_factory=set)  # methods it runs that bases of other files define


@dataclass(frozen=True)
class BaseClass:
    """A base of a checked class defined in another file of the project, as read from that file
    (by the inference layer): what its methods do with `self`, what they assign."""

    name: str
    path: str
    methods: Dict[str, Tuple[SelfUse, ...]]  # name -> its uses of `self`, as _self_uses yields them
    assigned: FrozenSet[str]  # self.<name> assigned by its methods
    spelled: FrozenSet[str]  # names in its strings (spelled_names)
    registers_hooks: bool  # it registers forward or backward hooks: code forward does not show runs
    # It makes parameters itself (`nn.Parameter`, a torch layer that has them, `register_parameter`),
    # read by names through its file's imports; False where names cannot tell (a layer of its own).
    holds_parameters: bool = False


def read_class(nodes: NodeTable, info: ClassInfo, path: str, imports: Optional[ImportMap] = None) -> BaseClass:
    """What another file's class says of its instances, from that file's index (``imports``: that
    file's, to read which torch classes it builds)."""
    methods: Dict[str, Tuple[SelfUse, ...]] = {}
    for name, scope in info.method_scopes.items():
        uses = tuple(_self_uses(nodes, scope))
        if scope.self_name is None:
            uses += ((None, False, "`%s` takes no `self`" % name),)
        methods[name] = uses
    hooks = any(node.attr.startswith("register_") and "hook" in node.attr
                for node in nodes.under(info.node, ast.Attribute))
    return BaseClass(info.name, path, methods, frozenset(b.name for b in info.attr_assignments),
                     frozenset(spelled_names(nodes, info.node)), hooks,
                     imports is not None and _makes_parameters(nodes, info, imports))


def _makes_parameters(nodes: NodeTable, info: ClassInfo, imports: ImportMap) -> bool:
    if any(imports.qualify(base) in PARAMETER_LAYERS for base in info.node.bases):
        return True
    for binding in info.attr_assignments:
        if isinstance(binding.value, ast.Call):
            built = imports.qualify(binding.value.func)
            if built == "torch.nn.Parameter" or built in PARAMETER_LAYERS:
                return True
    return any(isinstance(call.func, ast.Attribute) and call.func.attr == "register_parameter"
               for call in nodes.under(info.node, ast.Call))


def spelled_names(nodes: NodeTable, node: ast.AST) -> Set[str]:
    """Names spelled in the strings under ``node``, whole or as a dotted part (`"shared.weight"`
    in a table of tied weights): an attribute named there may be looked up by that name."""
    names: Set[str] = set()
    for n in nodes.under(node, ast.Constant):
        if isinstance(n.value, str) and len(n.value) < 200:
            names.add(n.value)
            names.update(n.value.split("."))
    return names


def method_table(ctx: FileContext, cls: ClassInfo) -> Dict[str, Tuple[ClassInfo, Scope]]:
    """Each method name -> the class that defines it and its scope: the class first, then its
    bases of this file, depth first (Python's order for the usual single-inheritance chains)."""
    table: Dict[str, Tuple[ClassInfo, Scope]] = {}
    for info in ctx.class_chain(cls):
        for name, scope in info.method_scopes.items():
            table.setdefault(name, (info, scope))
    return table


def external_bases(ctx: FileContext, cls: ClassInfo) -> bool:
    """A base in the chain is neither nn.Module nor a class of this file: it may define methods."""
    for info in ctx.class_chain(cls):
        for base in info.bases:
            if base not in ctx.classes and base != "torch.nn.Module":
                return True
    return False


def bases_read(ctx: FileContext, cls: ClassInfo) -> Optional[List[BaseClass]]:
    """The class's bases in other files of the project, read from them (empty: none outside
    this file but nn.Module); None when one cannot be read (no inference layer, a class of a
    library, a base that is not found)."""
    return ctx.bases_elsewhere(cls) if external_bases(ctx, cls) else []


def forward_elsewhere(ctx: FileContext, cls: ClassInfo) -> bool:
    """A base outside the file may define ``forward``: one that could not be read, or one that does."""
    if not external_bases(ctx, cls):
        return False
    outside = ctx.bases_elsewhere(cls)
    return outside is None or any("forward" in base.methods for base in outside)


def reach(ctx: FileContext, cls: ClassInfo, entry: str = "forward",
          self_uses: Optional[Dict[int, List[SelfUse]]] = None) -> Optional[Reach]:
    """The methods ``entry`` runs, or None when the class has no ``entry`` of its own in this file.
    ``self_uses``: a table id(method scope) -> its uses of `self`, kept across classes (a base's
    methods are read once however many subclasses reach them). A method that bases of other
    files define is followed there when the inference layer read them; else the reach is dynamic."""
    table = method_table(ctx, cls)
    if entry not in table:
        return None
    assigned = {b.name for info in ctx.class_chain(cls) for b in info.attr_assignments}
    # The bases of other files: asked at the first call of a method not found in this file.
    asked, outside = False, cast(Optional[List[BaseClass]], None)
    foreign: Dict[str, Tuple[SelfUse, ...]] = {}
    result = Reach()
    todo = [entry]
    while todo:
        name = todo.pop()
        if name in result.methods or name in result.outside:
            continue
        if name in table:
            scope = table[name][1]
            result.methods[name] = scope
            if scope.self_name is None:
                # `def forward(**kwargs): super().forward()`: a template; what it touches is not in its names
                result.dynamic = result.dynamic or "`%s` takes no `self`" % name
            uses = None if self_uses is None else self_uses.get(id(scope))
            if uses is None:
                uses = list(_self_uses(ctx.nodes, scope))
                if self_uses is not None:
                    self_uses[id(scope)] = uses
        else:  # a method of a base in another file (found in ``foreign`` below)
            result.outside.add(name)
            uses = list(foreign[name])
        for used, called, dynamic in uses:
            if used is None:  # (then ``dynamic`` says why)
                result.dynamic = result.dynamic or dynamic
            elif used in table:
                todo.append(used)
            else:
                if used not in assigned and not used.startswith("__") and external_bases(ctx, cls):
                    # Neither assigned here nor a method here: a method (or a property, or a method
                    # handed on: `checkpoint(self._block, x)`) of a base outside the file.
                    if not asked:
                        asked, outside = True, bases_read(ctx, cls)
                        for base in outside or ():
                            assigned.update(base.assigned)
                            for method, method_uses in base.methods.items():
                                foreign.setdefault(method, method_uses)
                    if used in foreign:
                        todo.append(used)
                        continue
                    if called and outside is None:  # (read, the bases say what it is: nn.Module's, a layer)
                        result.dynamic = result.dynamic or "it calls `self.%s()`, defined outside this file" % used
                result.attributes.add(used)
    return result


def _self_uses(table: NodeTable, scope: Scope) -> Iterator[SelfUse]:
    """(attribute name, called, None) for each `self.<name>` in the method, or (None, False, reason)
    for a use of `self` that can reach any attribute; in the order `ast.walk` meets them (the
    order decides which methods are followed first). Read from the file's node table."""
    self_name = scope.self_name
    if self_name is None:
        return
    # Any: each loop reads the nodes of the class it asked positions_under for.
    nodes, parent_of = cast(List[Any], table.nodes), table.parent
    root = scope.node
    positions = []
    for position in table.positions_under(root, ast.Attribute):
        value = nodes[position].value
        if value.__class__ is ast.Name and value.id == self_name:
            positions.append(position)
    for position in table.positions_under(root, ast.Call):
        if nodes[position].func.__class__ is ast.Name:
            positions.append(position)
    for position in table.positions_under(root, ast.Name):
        node = nodes[position]
        if node.id == self_name and isinstance(node.ctx, ast.Load):
            parent = parent_of.get(id(node))
            if not (isinstance(parent, ast.Attribute) and parent.value is node):
                positions.append(position)
    for node in table.in_walk_order(positions):
        if isinstance(node, ast.Attribute):
            if node.attr in _ITERATING_METHODS:
                yield None, False, "it uses `%s.%s`" % (self_name, node.attr)
            else:
                parent = parent_of.get(id(node))
                yield node.attr, isinstance(parent, ast.Call) and parent.func is node, None
        elif isinstance(node, ast.Call):
            func = cast(ast.Name, node.func)  # (the calls of names only were kept above)
            if func.id == "super":
                yield None, False, "it calls `super()`"
            elif func.id in _DYNAMIC_BUILTINS and node.args and _is_name(node.args[0], self_name):
                attr = node.args[1] if len(node.args) > 1 else None
                if isinstance(attr, ast.Constant) and isinstance(attr.value, str):
                    yield attr.value, False, None
                else:
                    yield None, False, "it calls `%s(%s, ...)`" % (func.id, self_name)
        else:
            yield None, False, "it hands `%s` to other code" % self_name


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def may_hold_parameters(ctx: FileContext, module_class: Optional[str], seen: Optional[Set[str]] = None,
                        built: Optional[ast.expr] = None) -> bool:
    """Whether a Module of this class can hold parameters: torch layers by name, classes of this
    file by what their methods assign, a class of another project file (``built``: the call that
    builds it) by what that file's class builds. False when it cannot tell (a library's class)."""
    if not module_class:
        return False
    if module_class.startswith("torch.nn."):
        return module_class in PARAMETER_LAYERS
    info = ctx.classes.get(module_class)
    if info is None and isinstance(built, ast.Call):
        return any(base.holds_parameters for base in ctx.project_class(built.func) or ())
    if info is None or not info.is_module:
        return False
    seen = set() if seen is None else seen
    if module_class in seen:
        return False
    seen.add(module_class)
    for cls in ctx.class_chain(info):
        if cls.registered_parameters:
            return True
        if any(base in PARAMETER_LAYERS for base in cls.bases):
            return True
        for binding in cls.attr_assignments:
            if binding.value is None:
                continue
            value = ctx.classifier.classify(binding.value, binding.scope)
            if value.kind in (Kind.PARAMETER, Kind.PARAMETER_LIST, Kind.PARAMETER_DICT):
                return True
            if value.kind is Kind.MODULE and may_hold_parameters(ctx, value.module_class, seen, binding.value):
                return True
            if value.kind in (Kind.MODULE_LIST, Kind.MODULE_DICT):
                return True
    return False
