"""The child side of ``torchlint verify``: example inputs worked out from the module itself.

Loaded by ``probe.py`` by path, in the child process only (it imports torch). Three
sources, tried in this order after what the user gave:

* the project's own calls of the built object (found statically by ``verify/inputs.py``
  in the parent and sent as expressions that need only ``torch``): ``code_inputs``;
* the first layer ``forward`` really applies to each tensor argument: ``dataflow_inputs``
  reads ``forward``'s source (``ast``), follows each argument through names, activations,
  dropout, residual sums, ``nn.Sequential`` and the project's own submodules and methods
  until a layer that fixes its width (``nn.Linear``, a convolution, a norm, an embedding,
  attention, a recurrent layer); ``B, N, C = x.shape`` anywhere on the way says how many
  dimensions it has;
* candidates, each tried in turn until one runs: every ``Linear``'s ``in_features`` (with a
  sequence axis when a block unpacks three dimensions), every convolution's ``in_channels``
  with two or three spatial sizes, embeddings, layer norms: ``candidate_inputs``.

Each is a list of ``(args, kwargs, description)``; the caller decides which it trusts.
"""
from __future__ import annotations

import ast
import inspect
import re
import sys
import textwrap
from typing import TYPE_CHECKING, Any, Dict, List, Tuple, cast

import torch
from torch import nn

if TYPE_CHECKING:  # annotations only: never evaluated, so Python 3.8 runs this file as it is
    from typing import Iterable, Optional, Sequence, Set, TypeGuard, Union

    from . import probe_support as support  # as mypy reads what probe.py loads
    from .protocol import JsonObject

    Shape = Tuple[int, ...]
    # A shape to try and what fills it: None (random floats) or "indices" (an embedding's).
    Option = Tuple[Shape, Optional[str]]
    Guess = Tuple[Tuple[Any, ...], Dict[str, Any], str]  # (args, kwargs, description)
    FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]
    Layers = Union[List[nn.Module], Tuple[nn.Module, ...]]  # a plain list or tuple of modules
else:
    support = sys.modules["torchlint_probe_support"]

BATCH = 2
SEQUENCE = 8  # a sequence axis's length, when nothing says another
MAX_FLOW_DEPTH = 4  # submodules and methods followed into
MAX_OPTIONS = 4  # shapes per requirement
MAX_CANDIDATES = 12
# Video models pool down to a fixed clip (torchvision's S3D and MViT: 16 frames of 224 x 224),
# tried last: it costs seconds and GBs on a CPU.
# dims -> the spatial sizes tried, in order
SPATIAL_SIZES: Dict[int, List[Tuple[int, ...]]] = {1: [(64,), (256,), (32,)], 2: [(64, 64), (224, 224), (299, 299), (32, 32)],
                 3: [(8, 8, 8), (16, 16, 16), (16, 224, 224)]}
CANDIDATE_SPATIAL: Dict[int, List[Tuple[int, ...]]] = {1: [(64,), (256,)], 2: [(64, 64), (224, 224), (32, 32)],
                     3: [(8, 8, 8), (16, 16, 16), (16, 224, 224)]}

# Layers that do not fix the width of what they get: followed through.
_NEUTRAL_NAMES = frozenset({
    "ReLU", "ReLU6", "GELU", "SiLU", "Mish", "Tanh", "Sigmoid", "LeakyReLU", "ELU", "SELU", "CELU", "Hardswish",
    "Hardsigmoid", "Hardtanh", "Softplus", "Softsign", "Tanhshrink", "LogSigmoid", "Softmax", "LogSoftmax",
    "Softmin", "Threshold", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
    "Identity", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
    "ZeroPad2d", "ConstantPad1d", "ConstantPad2d", "ReflectionPad2d", "ReplicationPad2d", "Upsample",
})
# Tensor methods and functions that keep the last axis and the number of dimensions.
_CARRY_METHODS = frozenset({
    "float", "double", "half", "bfloat16", "to", "cuda", "cpu", "contiguous", "clone", "detach", "type_as",
    "relu", "gelu", "sigmoid", "tanh", "softmax", "log_softmax", "exp", "abs", "neg", "clamp", "clip", "masked_fill",
    "mul", "add", "sub", "div", "pow", "sqrt", "rsqrt", "requires_grad_", "relu_", "mul_", "add_", "sin", "cos",
})
_CARRY_FUNCTIONS = frozenset({
    "relu", "relu6", "gelu", "silu", "mish", "sigmoid", "tanh", "dropout", "dropout1d", "dropout2d", "softmax",
    "log_softmax", "leaky_relu", "elu", "selu", "hardswish", "normalize", "abs", "exp", "clamp", "clip", "where",
    "add", "mul", "sub", "div", "sin", "cos", "contiguous", "cat", "concat", "concatenate",
})
_TORCH_NAMES = frozenset({"torch", "F", "nn", "functional"})


def _plain_layers(value: object) -> TypeGuard[Layers]:
    """A plain list or tuple of modules."""
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, nn.Module) for v in value[:64])


def all_layers(model: nn.Module) -> List[Tuple[str, nn.Module]]:
    """(path, module) of the tree, then of the modules held in plain lists, tuples and dicts
    (not registered, but forward calls them all the same)."""
    found = [(name, layer) for name, layer in model.named_modules() if layer is not model]
    seen = {id(layer) for _, layer in found} | {id(model)}
    for prefix, module in [("", model)] + list(found):
        try:
            items = list(vars(module).items())
        except TypeError:
            continue
        for name, value in items:
            held: List[Tuple[str, object]]
            if isinstance(value, dict):
                held = [("%s[%r]" % (name, key), item) for key, item in list(value.items())[:64]]
            elif isinstance(value, (list, tuple)):
                held = [("%s[%d]" % (name, index), item) for index, item in enumerate(value[:64])]
            else:
                continue
            for label, item in held:
                if isinstance(item, nn.Module) and id(item) not in seen:
                    base = prefix + "." + label if prefix else label
                    for sub, layer in item.named_modules():
                        if id(layer) not in seen:
                            seen.add(id(layer))
                            found.append((base + ("." + sub if sub else ""), layer))
    return found


def _torch_class(layer: object) -> bool:
    name = getattr(type(layer), "__module__", "") or ""
    return name == "torch" or name.startswith("torch.")


def _neutral(layer: object) -> bool:
    return _torch_class(layer) and type(layer).__name__ in _NEUTRAL_NAMES


# -- what a layer needs ------------------------------------------------------------------------------

class Need:
    """What the first layer an argument reaches needs: ``last`` (feature-last: the trailing sizes),
    ``channels`` (channels-first, with ``spatial`` dimensions), or ``indices`` (an embedding)."""

    def __init__(self, label: str, last: Optional[Shape] = None, channels: Optional[int] = None,
                 spatial: Optional[List[int]] = None, indices: Optional[int] = None, min_dims: int = 2) -> None:
        self.label = label
        self.last = last
        self.channels = channels
        self.spatial = spatial  # a list of possible numbers of spatial dimensions
        self.indices = indices
        self.min_dims = min_dims

    def shapes(self, ndim: Optional[int] = None, lengths: Sequence[int] = (SEQUENCE,)) -> List[Option]:
        """[(shape, dtype)], best first (``ndim``: the dimensions forward's code says it has)."""
        found: List[Option] = []
        if self.indices is not None:
            dims = ndim or 2
            shape = (BATCH,) + (SEQUENCE,) * max(dims - 1, 0)
            return [(shape, "indices")]
        if self.last is not None:
            tail = tuple(self.last)
            if ndim:
                rest = ndim - 1 - len(tail)
                if rest >= 0:
                    for length in lengths:
                        found.append(((BATCH,) + (length,) * rest + tail, None))
            else:
                if 1 + len(tail) >= self.min_dims:
                    found.append(((BATCH,) + tail, None))
                for length in lengths:
                    found.append(((BATCH, length) + tail, None))
        elif self.channels is not None:
            spatial = [ndim - 2] if ndim and ndim >= 2 else self.spatial
            assert spatial is not None  # (need_of gives channels with spatial)
            for dims in spatial:
                if dims == 0:
                    found.append(((BATCH, self.channels), None))
                for size in SPATIAL_SIZES.get(dims, []):
                    found.append(((BATCH, self.channels) + size, None))
        unique: List[Option] = []
        for item in found:
            if item not in unique:
                unique.append(item)
        return unique[:MAX_OPTIONS]


def need_of(layer: object, path: str) -> Optional[Need]:
    """The Need of a layer that fixes its input's width, or None."""
    label = "%s = %s" % (path, type(layer).__name__) if path else type(layer).__name__
    uninitialized = getattr(layer, "has_uninitialized_params", None)
    if isinstance(layer, nn.modules.lazy.LazyModuleMixin) and callable(uninitialized) and uninitialized():
        return None  # a lazy layer: its width comes from the input
    if isinstance(layer, nn.Linear):
        return Need("%s(in_features=%d)" % (label, layer.in_features), last=(layer.in_features,))
    if isinstance(layer, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d,
                          nn.ConvTranspose3d)):
        return Need("%s(in_channels=%d)" % (label, layer.in_channels), channels=layer.in_channels,
                    spatial=[len(layer.kernel_size)])
    if isinstance(layer, nn.Embedding):
        return Need("%s(num_embeddings=%d)" % (label, layer.num_embeddings), indices=layer.num_embeddings)
    if isinstance(layer, nn.LayerNorm):
        shape = list(layer.normalized_shape)
        return Need("%s(%s)" % (label, shape), last=tuple(shape))
    if isinstance(layer, nn.modules.batchnorm._BatchNorm) or isinstance(layer, nn.modules.instancenorm._InstanceNorm):
        dims = {"1d": [0, 1], "2d": [2], "3d": [3]}.get(type(layer).__name__[-2:], [2])
        return Need("%s(%d)" % (label, layer.num_features), channels=layer.num_features, spatial=dims)
    if isinstance(layer, nn.GroupNorm):
        return Need("%s(num_channels=%d)" % (label, layer.num_channels), channels=layer.num_channels, spatial=[2, 1])
    if isinstance(layer, nn.MultiheadAttention):
        return Need("%s(embed_dim=%d)" % (label, layer.embed_dim), last=(layer.embed_dim,), min_dims=3)
    if isinstance(layer, nn.RNNBase):
        return Need("%s(input_size=%d)" % (label, layer.input_size), last=(layer.input_size,), min_dims=3)
    if isinstance(layer, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)):
        width = layer.self_attn.embed_dim
        return Need("%s(d_model=%d)" % (label, width), last=(width,), min_dims=3)
    if isinstance(layer, nn.TransformerEncoder) and len(layer.layers):
        width = layer.layers[0].self_attn.embed_dim
        return Need("%s(d_model=%d)" % (label, width), last=(width,), min_dims=3)
    return None


# -- following forward's data flow ---------------------------------------------------------------------

def _function_tree(function: object) -> Optional[FunctionNode]:
    """The ast.FunctionDef of a function, or None (no source: builtins, exec'd code)."""
    try:
        # (anything: what has no source, None included, raises, caught below)
        source = textwrap.dedent(inspect.getsource(function))  # type: ignore[arg-type]
        tree = ast.parse(source)
    except BaseException:  # noqa: B902 - OSError, TypeError, SyntaxError, odd objects
        return None
    node = tree.body[0] if tree.body else None
    return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _parameters(node: FunctionNode, bound: bool = True) -> Tuple[List[str], int]:
    """(positional parameter names after self, how many of them are required)."""
    args = node.args
    positional = [a.arg for a in args.posonlyargs + args.args]
    if bound and positional:
        positional = positional[1:]
    required = len(positional) - len(args.defaults)
    return positional, max(required, 0)


class Flow:
    """One function's data flow: which argument each local carries (unchanged in width), which
    module each local names, and the first width-fixing layer each argument reaches."""

    def __init__(self, owner: object, path: str, depth: int) -> None:
        self.owner = owner  # the module `self` is
        self.path = path  # its dotted path from the verified module
        self.depth = depth
        self.self_name = "self"
        self.carriers: Dict[str, int] = {}  # local name -> argument index
        self.modules: Dict[str, Tuple[object, str]] = {}  # local name -> (module, path)
        self.found: Dict[int, Need] = {}  # argument index -> Need
        self.ndim: Dict[int, int] = {}  # argument index -> number of dimensions the code unpacks
        self.returns: Optional[int] = None  # the argument index a return statement carries

    def run(self, node: FunctionNode, indices: Sequence[Optional[int]]) -> Flow:
        """``indices``: for each positional parameter after self, the outer argument it carries (or None)."""
        args = node.args
        positional = [a.arg for a in args.posonlyargs + args.args]
        if positional:
            self.self_name = positional[0]
        for name, index in zip(positional[1:], indices):
            if index is not None:
                self.carriers[name] = index
        self.block(node.body)
        return self

    # -- statements ------------------------------------------------------------------------
    def block(self, statements: List[ast.stmt]) -> None:
        for statement in statements:
            self.statement(statement)

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is None:
                return
            self._unpacked_shape(targets, node.value)
            carried = self.visit(node.value)
            module = self.resolve(node.value)
            for target in targets:
                self.bind(target, carried, module)
        elif isinstance(node, ast.AugAssign):
            self.visit(node.value)
        elif isinstance(node, (ast.Expr, ast.Return)):
            if node.value is not None:
                carried = self.visit(node.value)
                if isinstance(node, ast.Return) and carried is not None and self.returns is None:
                    self.returns = carried
        elif isinstance(node, (ast.If, ast.While)):
            self.visit(node.test)
            self.block(node.body)
            self.block(node.orelse)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self.visit(node.iter)
            self._loop(node.target, node.iter)
            self.block(node.body)
            self.block(node.orelse)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                self.visit(item.context_expr)
            self.block(node.body)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            handled = cast("ast.Try", node)  # (ast.TryStar, Python 3.11+, has the same fields)
            self.block(handled.body)
            for handler in handled.handlers:
                self.block(handler.body)
            self.block(handled.orelse)
            self.block(handled.finalbody)

    def bind(self, target: ast.expr, carried: Optional[int], module: Optional[Tuple[object, str]]) -> None:
        if isinstance(target, ast.Name):
            if carried is not None:
                self.carriers[target.id] = carried
            else:
                self.carriers.pop(target.id, None)
            if module is not None:
                self.modules[target.id] = module
            else:
                self.modules.pop(target.id, None)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.bind(element.value if isinstance(element, ast.Starred) else element, None, None)

    def _unpacked_shape(self, targets: Sequence[ast.expr], value: ast.expr) -> None:
        """``B, N, C = x.shape`` / ``b, c, h, w = x.size()``: x has that many dimensions."""
        if len(targets) != 1 or not isinstance(targets[0], (ast.Tuple, ast.List)):
            return
        if any(isinstance(e, ast.Starred) for e in targets[0].elts):
            return
        source: Optional[ast.expr] = None
        if isinstance(value, ast.Attribute) and value.attr == "shape":
            source = value.value
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "size" \
                and not value.args:
            source = value.func.value
        if source is not None:
            carried = self.visit(source)
            if carried is not None:
                self.ndim.setdefault(carried, len(targets[0].elts))

    def _loop(self, target: ast.expr, iterable: ast.expr) -> None:
        """``for block in self.blocks`` / ``for i, block in enumerate(self.blocks)`` / ``for layer, gate
        in zip(self.layers, self.gates)``: the first one."""
        if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.func.id == "zip" \
                and isinstance(target, ast.Tuple) and len(target.elts) == len(iterable.args):
            for element, source in zip(target.elts, iterable.args):
                self._loop(element, source)
            return
        if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.func.id == "enumerate" \
                and iterable.args and isinstance(target, ast.Tuple) and len(target.elts) == 2:
            iterable, target = iterable.args[0], target.elts[1]
        container = self.resolve(iterable)
        if container is None or not isinstance(target, ast.Name):
            self.bind(target, None, None)
            return
        module, path = container
        if (isinstance(module, (nn.ModuleList, nn.Sequential)) or _plain_layers(module)) and len(module):
            self.modules[target.id] = (module[0], path + ".0")
        elif isinstance(module, nn.ModuleDict) and len(module):
            key = next(iter(module.keys()))
            self.modules[target.id] = (module[key], path + "." + key)

    # -- expressions -----------------------------------------------------------------------
    def resolve(self, node: ast.expr) -> Optional[Tuple[object, str]]:
        """(module, path) when the expression names a submodule, else None."""
        if isinstance(node, ast.Name):
            return self.modules.get(node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == self.self_name:
            module = getattr(self.owner, "_modules", {}).get(node.attr)
            if module is None:  # a plain list of layers (not registered: TL901 says so) runs all the same
                try:
                    module = vars(self.owner).get(node.attr)
                except TypeError:
                    module = None
                if not _plain_layers(module):
                    module = None
            if isinstance(module, nn.Module) or _plain_layers(module):
                return module, (self.path + "." + node.attr if self.path else node.attr)
            return None
        if isinstance(node, ast.Attribute):
            outer = self.resolve(node.value)
            if outer is not None:
                module = getattr(outer[0], "_modules", {}).get(node.attr)
                if isinstance(module, nn.Module):
                    return module, outer[1] + "." + node.attr
            return None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            outer = self.resolve(node.value)
            key = node.slice.value
            if outer is None:
                return None
            container = outer[0]
            try:
                if (isinstance(container, (nn.ModuleList, nn.Sequential)) or _plain_layers(container)) \
                        and isinstance(key, int):
                    return container[key], "%s.%d" % (outer[1], key % len(container))
                if isinstance(container, nn.ModuleDict) and isinstance(key, str):
                    return container[key], "%s.%s" % (outer[1], key)
            except (IndexError, KeyError, ZeroDivisionError):
                return None
        return None

    def visit(self, node: Optional[ast.expr]) -> Optional[int]:
        """The argument index the expression carries (same width and dimensions), or None; records
        the first width-fixing layer each argument reaches on the way."""
        if node is None:
            return None
        if isinstance(node, ast.Name):
            return self.carriers.get(node.id)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.BinOp):
            left, right = self.visit(node.left), self.visit(node.right)
            if isinstance(node.op, ast.MatMult) and left is not None:
                self._times_parameter(left, node.right)
            return left if left is not None else right
        if isinstance(node, ast.IfExp):
            self.visit(node.test)
            body, orelse = self.visit(node.body), self.visit(node.orelse)
            return body if body is not None else orelse
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            for generator in node.generators:  # [head(x) for head in self.heads]: the first head
                self.visit(generator.iter)
                self._loop(generator.target, generator.iter)
            self.visit(node.elt)
            return None
        if isinstance(node, ast.NamedExpr):
            carried = self.visit(node.value)
            self.bind(node.target, carried, None)
            return carried
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.visit(child)
        return None

    def call(self, node: ast.Call) -> Optional[int]:
        carried_args = [self.visit(a.value if isinstance(a, ast.Starred) else a) for a in node.args]
        for keyword in node.keywords:
            self.visit(keyword.value)
        first = next((c for c in carried_args if c is not None), None)
        func = node.func
        target = self.resolve(func)
        if target is not None:
            return self.apply(target[0], target[1], carried_args, first)
        if isinstance(func, ast.Attribute):
            base = func.value
            if isinstance(base, ast.Name) and base.id == self.self_name:
                return self.method(func.attr, carried_args)
            if isinstance(base, ast.Name) and base.id in _TORCH_NAMES or (
                    isinstance(base, ast.Attribute) and base.attr in _TORCH_NAMES):
                if func.attr in ("cat", "concat", "concatenate") and node.args:
                    return self._concatenated(node)
                if func.attr in ("mm", "matmul") and len(node.args) == 2 and carried_args[0] is not None:
                    self._times_parameter(carried_args[0], node.args[1])
                return first if func.attr in _CARRY_FUNCTIONS else None
            receiver = self.visit(base)
            if receiver is not None:
                return receiver if func.attr in _CARRY_METHODS else None
            return None
        if isinstance(func, ast.Name) and func.id in _CARRY_FUNCTIONS:
            return first
        self.visit(func)
        return None

    def _times_parameter(self, carried: int, other: ast.expr) -> None:
        """``torch.mm(h, self.W)`` / ``h @ self.W`` with a 2-D parameter of the module: h's last
        size is the parameter's first (a graph layer's weight, used without nn.Linear)."""
        if isinstance(other, ast.Call) and isinstance(other.func, ast.Attribute) and other.func.attr == "detach" \
                and not other.args:
            other = other.func.value  # (self.W.detach(): the same sizes)
        elif isinstance(other, ast.Attribute) and other.attr == "data" and isinstance(other.value, ast.Attribute):
            other = other.value  # (self.W.data)
        if not (isinstance(other, ast.Attribute) and isinstance(other.value, ast.Name)
                and other.value.id == self.self_name):
            return
        weight = vars(self.owner).get("_parameters", {}).get(other.attr) if hasattr(self.owner, "__dict__") else None
        if isinstance(weight, torch.Tensor) and weight.dim() == 2:
            label = "%s (a %d x %d parameter forward multiplies by)" % (
                ".".join(filter(None, (self.path, other.attr))), weight.shape[0], weight.shape[1])
            self.found.setdefault(carried, Need(label, last=(int(weight.shape[0]),)))

    def _concatenated(self, node: ast.Call) -> Optional[int]:
        """torch.cat([cls, x], dim=1): the width of x, unless it concatenates along the last axis."""
        dim = next((k.value for k in node.keywords if k.arg in ("dim", "axis")), node.args[1] if len(node.args) > 1
                   else None)
        if isinstance(dim, ast.UnaryOp) or (isinstance(dim, ast.Constant) and dim.value == -1):
            return None
        items = node.args[0]
        if isinstance(items, (ast.List, ast.Tuple)):
            for item in items.elts:
                carried = self.visit(item)
                if carried is not None:
                    return carried
        return None

    def method(self, name: str, carried_args: List[Optional[int]]) -> Optional[int]:
        """``self.forward_features(x)``: follow the module's own method."""
        if self.depth >= MAX_FLOW_DEPTH or all(c is None for c in carried_args):
            return None
        function = inspect.getattr_static(type(self.owner), name, None)
        if not inspect.isfunction(function):
            return None
        node = _function_tree(function)
        if node is None:
            return None
        inner = Flow(self.owner, self.path, self.depth + 1).run(node, carried_args)
        self._merge(inner)
        return inner.returns

    def apply(self, layer: object, path: str, carried_args: List[Optional[int]], first: Optional[int]) -> Optional[int]:
        if first is None:
            return None
        if _neutral(layer):
            return first
        if isinstance(layer, nn.Sequential):
            for name, child in layer.named_children():
                if _neutral(child):
                    continue
                return self.apply(child, path + "." + name, [first], first)
            return first
        if isinstance(layer, (nn.ModuleList, nn.ModuleDict)):
            return None
        need = need_of(layer, path)
        if need is not None:
            self.found.setdefault(first, need)
            return None
        if _torch_class(layer) or self.depth >= MAX_FLOW_DEPTH:
            return None
        node = _function_tree(getattr(type(layer), "forward", None))
        if node is None:
            return None
        inner = Flow(layer, path, self.depth + 1).run(node, carried_args)
        self._merge(inner)
        return inner.returns

    def _merge(self, inner: Flow) -> None:
        for index, need in inner.found.items():
            self.found.setdefault(index, need)
        for index, dims in inner.ndim.items():
            self.ndim.setdefault(index, dims)


def forward_signature(model: nn.Module) -> Optional[Tuple[List[str], int]]:
    """(positional parameter names of forward after self, how many are required), or None.
    ``forward(self, *args)`` counts as one required argument (nothing says how many)."""
    node = _function_tree(getattr(type(model), "forward", None))
    if node is None:
        return None
    names, required = _parameters(node)
    if node.args.vararg is not None and not required:
        required = 1
    return names, required


def first_layers(model: nn.Module) -> Optional[Tuple[List[str], int, Dict[int, Need], Dict[int, int]]]:
    """(parameter names, required count, {index: Need}, {index: ndim}), or None without forward's source."""
    node = _function_tree(getattr(type(model), "forward", None))
    if node is None:
        return None
    names, required = _parameters(node)
    if node.args.vararg is not None and not names:
        return None  # forward(self, *args): nothing says how many
    try:
        flow = Flow(model, "", 0).run(node, list(range(len(names))))
    except RecursionError:
        return None
    return names, required, flow.found, flow.ndim


# -- making tensors --------------------------------------------------------------------------------

def _tensor(shape: Shape, kind: Optional[int]) -> torch.Tensor:
    if isinstance(kind, int):  # an embedding's size: indices below it
        return torch.randint(0, max(kind, 1), shape)
    return torch.randn(*shape)


def _make(need: Need, shape: Shape, kind: Optional[str]) -> torch.Tensor:
    return _tensor(shape, need.indices if kind == "indices" else None)


def _lengths(model: nn.Module, need: Need) -> List[int]:
    """Sequence lengths to try: 8, then what a fixed position table of that width says (P and P-1
    for a class token)."""
    lengths = [SEQUENCE]
    if need.last is not None and len(need.last) == 1:
        width = need.last[0]
        for tensor in list(model.parameters()) + list(model.buffers()):
            if isinstance(tensor, nn.parameter.UninitializedTensorMixin):  # type: ignore[attr-defined]
                continue
            if tensor.dim() == 3 and tensor.shape[0] == 1 and tensor.shape[-1] == width:
                for length in (tensor.shape[1], tensor.shape[1] - 1):
                    if length > 0 and length not in lengths:
                        lengths.append(int(length))
    return lengths[:3]


# A later argument that no layer reads, named as diffusion models name the step (or noise level)
# of each sample: a (batch,) tensor, not one shaped like the first argument.
TIME_STEP = re.compile(r"^(t|ts|time|times|timesteps?|time_steps?|steps?|sigmas?|noise_levels?|noise_labels?)$")


# A later argument named as graph layers name the adjacency matrix, with node features of
# (nodes, features) first: (nodes, nodes), every entry positive (each node sees every node).
ADJACENCY = re.compile(r"^(adj|adjacency|adj_?mat(rix)?|a_hat)$")


def dataflow_inputs(model: nn.Module) -> List[Guess]:
    """[(args, kwargs, description)] from the first layer forward applies to each tensor argument."""
    found = first_layers(model)
    if found is None:
        return []
    names, required, needs, ndim = found
    if required == 0:
        return [((), {}, "no arguments (forward takes none)")]
    if 0 not in needs:
        return []
    first = needs[0]
    options = first.shapes(ndim.get(0), _lengths(model, first))
    checked = _none_checked(model)
    results: List[Guess] = []  # (args, kwargs, how they were made)
    for shape, kind in options:
        torch.manual_seed(0)
        tensors = [_make(first, shape, kind)]
        notes = ["%s, the first layer forward applies to %s" % (first.label, names[0])]
        for index in range(1, required):
            need = needs.get(index)
            if need is not None:
                other_shape, other_kind = (need.shapes(ndim.get(index), _lengths(model, need)) or [(shape, kind)])[0]
                tensors.append(_make(need, other_shape, other_kind))
                notes.append("%s for %s" % (need.label, names[index]))
            elif TIME_STEP.match(names[index]) and shape:  # a diffusion model's step: one per sample
                tensors.append(torch.randint(0, 1000, (shape[0],)).float())
                notes.append("%s one time step per sample" % names[index])
            elif LENGTHS.match(names[index]) and len(shape) >= 2:  # each sequence's length: all of it
                tensors.append(torch.full((shape[0],), shape[1], dtype=torch.int64))
                notes.append("%s the length of each sequence" % names[index])
            elif ADJACENCY.match(names[index]) and len(shape) == 2:  # a graph's: nodes are the first axis
                tensors.append(torch.rand(shape[0], shape[0]))
                notes.append("%s an adjacency of the %d nodes" % (names[index], shape[0]))
            else:  # nothing says: shaped like the first argument
                tensors.append(_make(first, shape, kind) if kind != "indices" else torch.randn(*shape))
                notes.append("%s shaped like %s" % (names[index], names[0]))
        args = tuple(tensors)
        results.append((args, {}, "%s (guessed from %s)" % (support.describe(args, {}), "; ".join(notes))))
        # An argument forward tests against None (``if y is not None: t += self.label_emb(y)``) and
        # no layer reads: also tried as None (a model built without what it would feed).
        optional = [index for index in range(1, required) if index not in needs and names[index] in checked]
        if optional:
            variant = tuple(None if index in optional else value for index, value in enumerate(args))
            results.append((variant, {}, "%s (guessed from %s; %s None, as forward allows)" % (
                support.describe(variant, {}), "; ".join(notes[:1]), ", ".join(names[i] for i in optional))))
    return results


def _unsqueezed(model: nn.Module, name: str) -> bool:
    """Does forward call ``<name>.unsqueeze(1)``?"""
    node = _function_tree(getattr(type(model), "forward", None))
    return node is not None and any(
        isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "unsqueeze"
        and isinstance(call.func.value, ast.Name) and call.func.value.id == name and len(call.args) == 1
        and isinstance(call.args[0], ast.Constant) and call.args[0].value == 1 for call in ast.walk(node))


def _none_checked(model: nn.Module) -> Set[str]:
    """The names forward compares with None (``x is None`` / ``x is not None``)."""
    node = _function_tree(getattr(type(model), "forward", None))
    found: Set[str] = set()
    for compare in ast.walk(node) if node is not None else ():
        if isinstance(compare, ast.Compare) and isinstance(compare.left, ast.Name) and len(compare.ops) == 1 \
                and isinstance(compare.ops[0], (ast.Is, ast.IsNot)) and isinstance(compare.comparators[0], ast.Constant) \
                and compare.comparators[0].value is None:
            found.add(compare.left.id)
    return found


def _unpacks_three(model: nn.Module) -> bool:
    """Does any module of the tree unpack three dimensions (``B, N, C = x.shape``) in forward?"""
    seen: Set[type] = set()
    for module in model.modules():
        cls = type(module)
        if cls in seen or _torch_class(module):
            continue
        seen.add(cls)
        node = _function_tree(getattr(cls, "forward", None))
        if node is None:
            continue
        for statement in ast.walk(node):
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                    and isinstance(statement.targets[0], ast.Tuple) and len(statement.targets[0].elts) == 3:
                value = statement.value
                if (isinstance(value, ast.Attribute) and value.attr == "shape") or (
                        isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                        and value.func.attr == "size" and not value.args):
                    return True
    return False


_IMAGE_SIZE = ("img_size", "image_size", "input_size", "img_res", "image_resolution", "input_resolution")
_IMAGE_CHANNELS = ("in_chans", "in_channels", "in_c", "in_ch", "input_channels", "num_channels", "n_channels")


def stated_image(model: nn.Module) -> Optional[Shape]:
    """(batch, channels, height, width) when the module's constructor states an image size
    (``img_size=32``, as the module holds it or as the signature's default), with its channels
    (``in_chans``, ``in_c``; 3 when it says none): a vision model whose first layer is not a
    convolution (patches cut by ``unfold``) takes that image. None when no size is stated."""
    try:
        defaults = {name: p.default for name, p in inspect.signature(type(model)).parameters.items()
                    if p.default is not inspect.Parameter.empty}
    except (TypeError, ValueError):
        defaults = {}
    held = vars(model)

    def stated(names: Sequence[str]) -> Any:
        for name in names:
            value = held.get(name, defaults.get(name))
            if value is not None:
                return value
        return None

    size = stated(_IMAGE_SIZE)
    if isinstance(size, int) and not isinstance(size, bool):
        size = (size, size)
    if not (isinstance(size, (tuple, list)) and len(size) == 2 and all(
            isinstance(n, int) and not isinstance(n, bool) and 0 < n <= 1024 for n in size)):
        return None
    channels = stated(_IMAGE_CHANNELS)
    if not (isinstance(channels, int) and not isinstance(channels, bool) and 0 < channels <= 64):
        channels = 3
    return (BATCH, channels, size[0], size[1])


_FEATURE_SIZE = ("input_dim", "idim", "n_mels", "num_mels", "num_mel_bins", "feat_dim", "feature_dim")
FRAMES = 64  # frames of a (batch, frames, features) sequence: enough that strided front ends leave several
LENGTHS = re.compile(r"^(\w+_)?(lengths|lens)$")  # a (batch,) tensor of each sequence's length


def stated_frames(model: nn.Module) -> Optional[Shape]:
    """(batch, FRAMES, features) when the constructor states the size of each frame of its input
    (``input_dim=80`` mel bins, as speech encoders take them), as held or as the default."""
    try:
        defaults = {name: p.default for name, p in inspect.signature(type(model)).parameters.items()
                    if p.default is not inspect.Parameter.empty}
    except (TypeError, ValueError):
        defaults = {}
    for name in _FEATURE_SIZE:
        value = vars(model).get(name, defaults.get(name))
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 4096:
            return (BATCH, FRAMES, value)
    return None


def candidate_inputs(model: nn.Module, required: int, tried: Iterable[Option] = ()) -> List[Guess]:
    """[(args, kwargs, description)]: every layer's stated input size in turn (not those in ``tried``:
    shapes already tried)."""
    if required < 1:
        return []
    three = _unpacks_three(model)
    # The dimensions forward unpacks from its first argument (``b, c, t = x.shape``), even where the
    # data flow lost it on the way to a layer (a view, a pad): a convolution then gets that many.
    flow = first_layers(model)
    unpacked = flow[3].get(0) if flow is not None else None
    names = (forward_signature(model) or ([], 0))[0]
    results: List[Guess] = []
    shapes = set(tried)
    image = stated_image(model)
    if image is not None and required == 1 and (image, None) not in shapes:
        shapes.add((image, None))
        torch.manual_seed(0)
        args: Tuple[torch.Tensor, ...] = (torch.randn(*image),)
        results.append((args, {}, "%s (the image size and channels its constructor states, a candidate)" % (
            support.describe(args, {}))))
    frames = stated_frames(model)
    if frames is not None and (frames, None) not in shapes:
        shapes.add((frames, None))
        torch.manual_seed(0)
        first = torch.randn(*frames)
        args = (first,) + tuple(
            torch.full((BATCH,), frames[1], dtype=torch.int64) if LENGTHS.match(name) else torch.randn(*frames)
            for name in names[1:required])
        results.append((args, {}, "%s (the feature size its constructor states, over %d frames, a candidate)" % (
            support.describe(args, {}), frames[1])))
    for name, layer in all_layers(model):
        need = need_of(layer, name)
        if need is None:
            continue
        options: List[Option]
        if need.channels is not None:
            options = []
            # The first convolution is the stem: every size (299: Inception's auxiliary head).
            table = SPATIAL_SIZES if not any("in_channels" in r[2] for r in results) else CANDIDATE_SPATIAL
            assert need.spatial is not None  # (need_of gives channels with spatial)
            for dims in ([unpacked - 2] if unpacked and unpacked >= 2 else need.spatial):
                sizes: List[Shape] = [()] if dims == 0 else table.get(dims, [])
                options += [((BATCH, need.channels) + size, None) for size in sizes]
            if need.channels == 1 and names and _unsqueezed(model, names[0]):
                # ``self.conv(x.unsqueeze(1))``: the channel axis is added, so x has one axis less
                # (a (batch, frames, features) spectrogram into a single-channel convolution).
                options = [((BATCH,) + shape[2:], kind) for shape, kind in options if len(shape) > 2] + options
        elif need.last is not None and len(need.last) == 1 and three:
            options = need.shapes(3, _lengths(model, need)) + need.shapes(2)
        else:
            options = need.shapes(None, _lengths(model, need))[:2]
        for shape, kind in options:
            key = (shape, kind)
            if key in shapes:
                continue
            shapes.add(key)
            torch.manual_seed(0)
            args = tuple(torch.full((BATCH,), shape[1], dtype=torch.int64)
                         if index and index < len(names) and LENGTHS.match(names[index]) and len(shape) > 1
                         else _make(need, shape, kind) for index in range(required))
            results.append((args, {}, "%s (guessed from %s, a candidate)" % (support.describe(args, {}), need.label)))
            if len(results) >= MAX_CANDIDATES:
                return results
    if not results and not any(need_of(layer, name) for name, layer in all_layers(model)):
        # No layer says a width: the last size of a parameter of its own that forward may multiply
        # (a product network's kernel, a bilinear form): (batch, width) and (batch, 8, width).
        widths = sorted({int(p.shape[-1]) for p in model.parameters(recurse=False) if p.dim() >= 1})[:2]
        for width in widths:
            for shape in ((BATCH, width), (BATCH, SEQUENCE, width)):
                if (shape, None) in shapes:
                    continue
                shapes.add((shape, None))
                torch.manual_seed(0)
                args = tuple(torch.randn(*shape) for _ in range(required))
                results.append((args, {}, "%s (the last size of a parameter of its own, a candidate)" % (
                    support.describe(args, {}))))
    return results


def shapes_of(args: Iterable[object]) -> Set[Option]:
    """The (shape, kind) keys of inputs already tried (so candidates do not repeat them)."""
    keys: Set[Option] = set()
    for value in args:
        if isinstance(value, torch.Tensor):
            keys.add((tuple(value.shape), "indices" if not value.is_floating_point() else None))
    return keys


def code_inputs(entries: Optional[List[JsonObject]],
                built_text: str) -> List[Tuple[Tuple[Any, ...], Dict[str, Any], str, bool]]:
    """[(args, kwargs, description, matches)] from the project's calls of the built object: the
    expressions need only torch. ``matches``: the call's object was built the way this one was."""
    results: List[Tuple[Tuple[Any, ...], Dict[str, Any], str, bool]] = []
    for entry in entries or []:
        if not isinstance(entry, dict):
            continue
        namespace = {"torch": torch, "__builtins__": {}}
        try:
            torch.manual_seed(0)
            args = tuple(eval(compile(text, "<input from %s>" % entry.get("origin"), "eval"), dict(namespace))
                         for text in entry.get("args") or [])
            kwargs = {key: eval(compile(text, "<input from %s>" % entry.get("origin"), "eval"), dict(namespace))
                      for key, text in (entry.get("kwargs") or {}).items()}
        except Exception:  # noqa: BLE001 - an expression the child cannot make: not an input
            continue
        args, kwargs, replaced = varied(args, kwargs)
        matches = bool(entry.get("built_with")) and entry.get("built_with") == built_text
        note = "; constant float inputs given random values" if replaced else ""
        described = "%s (from %s%s)" % (support.describe(args, kwargs), entry.get("origin"), note)
        results.append((args, kwargs, described, matches))
    return results


def varied(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[Tuple[Any, ...], Dict[str, Any], bool]:
    """The inputs, each float tensor of one repeated value (torch.zeros(1, 3, 224, 224) in a demo,
    a flow that starts at zero) in random values of its shape: constant inputs make gradients
    that are zero for reasons of their own. (args, kwargs, whether one was replaced)."""
    import torch

    replaced = [False]

    def one(value: Any) -> Any:  # (an input as it came, or in place of one)
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() > 1 \
                and not value.requires_grad and bool(value.min() == value.max()):
            replaced[0] = True
            return torch.randn(value.shape, dtype=value.dtype, device=value.device)
        return value

    return tuple(one(a) for a in args), {key: one(value) for key, value in kwargs.items()}, replaced[0]
