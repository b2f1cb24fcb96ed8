"""What an expression evaluates to, as far as names and syntax can tell.

The classifier is deliberately modest: it answers ``UNKNOWN`` whenever names
alone cannot decide, so that rules stay quiet rather than guess. The jedi layer
can later answer some of those unknowns.
"""
from __future__ import annotations

import ast
import enum
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from . import torch_names as tn
from .imports import ImportMap
from .scopes import Binding, ClassInfo, Scope, class_chain


class Kind(enum.Enum):
    UNKNOWN = "unknown"
    OTHER = "other"  # known not to be a tensor: numbers, strings, shapes, None
    TENSOR = "tensor"  # a plain torch.Tensor
    PARAMETER = "parameter"  # an nn.Parameter
    MOVED_PARAMETER = "moved-parameter"  # nn.Parameter(...).cuda(): a plain non-leaf tensor
    BUFFER = "buffer"  # nn.Buffer(...): registers itself
    MODULE = "module"  # an nn.Module instance (registered containers included)
    MODULE_LIST = "module-list"  # plain list/tuple of new modules
    MODULE_DICT = "module-dict"
    PARAMETER_LIST = "parameter-list"
    PARAMETER_DICT = "parameter-dict"


CONTAINER_KINDS = {Kind.MODULE_LIST, Kind.MODULE_DICT, Kind.PARAMETER_LIST, Kind.PARAMETER_DICT}
TENSOR_KINDS = {Kind.TENSOR, Kind.MOVED_PARAMETER}


@dataclass(frozen=True)
class Value:
    kind: Kind
    requires_grad: bool = False
    factory: Optional[str] = None  # qualified factory name for tensors made by one
    module_class: Optional[str] = None  # qualified or local class name for modules
    empty: bool = False  # an empty list/dict literal (filled later by .append?)


UNKNOWN = Value(Kind.UNKNOWN)
# Builtins whose result is never a tensor (max/sum/list... may hold or return tensors).
_PLAIN_BUILTINS = frozenset(["int", "float", "str", "len", "range", "bool", "round", "isinstance", "repr"])
OTHER = Value(Kind.OTHER)


def _true(node: Optional[ast.AST]) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def keyword(call: ast.Call, name: str) -> Optional[ast.expr]:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def _returned_values(function: ast.AST) -> List[Optional[ast.expr]]:
    """What the function's own `return` statements give (None for a bare `return`), those of
    functions and classes nested in it left out; a generator's are not values it returns."""
    found: List[Optional[ast.expr]] = []
    pending = list(ast.iter_child_nodes(function))
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return []
        if isinstance(node, ast.Return):
            found.append(node.value)
        pending.extend(ast.iter_child_nodes(node))
    return found


class Classifier:
    """Classifies expressions of one file. ``local_classes`` maps class names to ClassInfo."""

    def __init__(self, imports: ImportMap, local_classes: Dict[str, ClassInfo],
                 extra: Optional[Callable[[ast.expr, Optional[Scope]], Optional[Value]]] = None,
                 constructions: Optional[Callable[[str], Sequence[Tuple[ast.Call, Scope]]]] = None,
                 scopes: Sequence[Scope] = ()) -> None:
        self.imports = imports
        self.local_classes = local_classes
        self.extra = extra  # the jedi layer's hook for what names cannot tell
        # The calls `Name(...)` of the file by the name called, with their scopes: what a local
        # class's __init__ is given (a parameter every construction passes a tensor holds one).
        self.constructions = constructions
        # id(function node) -> its scope: what a helper of the file returns (_helper_result).
        self._module_functions: Dict[str, Optional[Scope]] = {}  # name -> its scope (None: defined twice)
        for scope in scopes:
            if isinstance(scope.node, (ast.FunctionDef, ast.AsyncFunctionDef)) and scope.cls is None \
                    and scope.parent is not None and scope.parent.parent is None and not scope.node.decorator_list:
                self._module_functions[scope.name] = None if scope.name in self._module_functions else scope
        self._depth = 0
        self._binding_cache: Dict[int, Value] = {}  # id(binding) -> value; UNKNOWN while in progress
        self._attribute_cache: Dict[Tuple[int, str], Value] = {}  # (id(class), attr) -> value
        self._returned: Dict[int, Value] = {}  # id(function scope) -> what it returns; UNKNOWN while in progress
        # The same three, for answers given without the hook.
        self._names_only_caches: Tuple[Dict[int, Value], Dict[Tuple[int, str], Value], Dict[int, Value]] = ({}, {}, {})
        # id(node) -> (node, its qualified name): every rule qualifies the same calls. The node is
        # kept so that its id is never another node's (rules build a few nodes of their own).
        self._qualified: Dict[int, Tuple[ast.AST, Optional[str]]] = {}

    @contextmanager
    def names_only(self) -> Iterator[Classifier]:
        """Answer from names alone for a while (a cheap first look before asking the slow layer)."""
        saved = self.extra, self._binding_cache, self._attribute_cache, self._returned
        self.extra = None
        self._binding_cache, self._attribute_cache, self._returned = self._names_only_caches
        try:
            yield self
        finally:
            self.extra, self._binding_cache, self._attribute_cache, self._returned = saved

    def qualify(self, node: ast.AST) -> Optional[str]:
        entry = self._qualified.get(id(node))
        if entry is None or entry[0] is not node:
            entry = self._qualified[id(node)] = (node, self.imports.qualify(node))
        return entry[1]

    def classify(self, node: Optional[ast.expr], scope: Optional[Scope] = None) -> Value:
        if node is None or self._depth > 12:
            return UNKNOWN
        self._depth += 1
        try:
            value = self._classify(node, scope)
            if value.kind is Kind.UNKNOWN and self.extra is not None and self._worth_inferring(node, scope):
                value = self.extra(node, scope) or value
            return value
        finally:
            self._depth -= 1

    def _worth_inferring(self, node: ast.expr, scope: Optional[Scope]) -> bool:
        """Skip what the slow layer was already asked about: a local name's assigned values were
        classified (with the hook) when the name was, and so were self.<attr>'s assignments. And
        a call of a Module (`self.encoder(x)`): jedi does not go through Module.__call__ (calling
        an instance, it answers "unknown")."""
        if isinstance(node, ast.Name):
            return not self._is_local(node.id, scope)
        if isinstance(node, ast.Attribute):
            return not (scope is not None and scope.is_self(node.value) and scope.cls is not None
                        and scope.cls.is_module)
        return isinstance(node, ast.Call) and self._callee_module(node.func, scope) is None

    # -- the cases -------------------------------------------------------------------------
    def _classify(self, node: ast.expr, scope: Optional[Scope]) -> Value:
        if isinstance(node, ast.Compare):
            return self._comparison(node, scope)
        if isinstance(node, ast.Constant) or isinstance(node, (ast.JoinedStr, ast.BoolOp)):
            return OTHER
        if isinstance(node, ast.Call):
            return self._call(node, scope)
        if isinstance(node, ast.Name):
            return self._name(node, scope)
        if isinstance(node, ast.Attribute):
            if node.attr in tn.TENSOR_PROPERTIES and self.classify(node.value, scope).kind in (
                    Kind.TENSOR, Kind.PARAMETER, Kind.MOVED_PARAMETER):
                return Value(Kind.TENSOR)
            return self._self_attribute(node, scope)
        if isinstance(node, ast.BinOp):
            left = self.classify(node.left, scope)
            right = self.classify(node.right, scope)
            if left.kind in TENSOR_KINDS | {Kind.PARAMETER} or right.kind in TENSOR_KINDS | {Kind.PARAMETER}:
                return Value(Kind.TENSOR, requires_grad=left.requires_grad or right.requires_grad)
            if left.kind is Kind.OTHER and right.kind is Kind.OTHER:
                return OTHER
            return UNKNOWN
        if isinstance(node, ast.UnaryOp):
            inner = self.classify(node.operand, scope)
            return Value(Kind.TENSOR) if inner.kind in TENSOR_KINDS | {Kind.PARAMETER} else inner
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return self._sequence(node.elts, scope, dict_like=False, literal=True)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            return self._sequence([node.elt], scope, dict_like=False, literal=False)
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                return UNKNOWN
            return self._sequence(node.values, scope, dict_like=True, literal=True)
        if isinstance(node, ast.DictComp):
            return self._sequence([node.value], scope, dict_like=True, literal=False)
        if isinstance(node, ast.Subscript):
            inner = self.classify(node.value, scope)
            if inner.kind in TENSOR_KINDS | {Kind.PARAMETER}:
                return Value(Kind.TENSOR)
            return UNKNOWN
        return UNKNOWN

    def _comparison(self, node: ast.Compare, scope: Optional[Scope]) -> Value:
        """`torch.tril(m) == 0` is a tensor of booleans; other comparisons are plain. Decided by names
        alone: a comparison's operands are not worth a question to the slow layer."""
        if not any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops):
            with self.names_only():
                for operand in [node.left] + node.comparators:
                    if self.classify(operand, scope).kind in TENSOR_KINDS | {Kind.PARAMETER}:
                        return Value(Kind.TENSOR)
        return OTHER

    def _sequence(self, elts: Sequence[ast.expr], scope: Optional[Scope], dict_like: bool,
                  literal: bool) -> Value:
        if not elts:
            return Value(Kind.OTHER, empty=literal)
        kinds = set()
        for elt in elts:
            if isinstance(elt, ast.Starred):
                return UNKNOWN
            value = self.classify(elt, scope)
            if value.kind is Kind.MODULE and not _constructs(elt):
                # A list of modules that already live elsewhere (self.enc, self.dec) adds nothing unregistered.
                return UNKNOWN
            kinds.add(value.kind)
        if kinds == {Kind.MODULE}:
            return Value(Kind.MODULE_DICT if dict_like else Kind.MODULE_LIST)
        if kinds == {Kind.PARAMETER}:
            return Value(Kind.PARAMETER_DICT if dict_like else Kind.PARAMETER_LIST)
        if kinds <= {Kind.OTHER}:
            return OTHER
        return UNKNOWN

    def _call(self, call: ast.Call, scope: Optional[Scope]) -> Value:
        func = call.func
        qualified = self.qualify(func)
        if qualified is not None:
            return self._qualified_call(qualified, call, scope)
        callee = self._callee_module(func, scope)
        if callee is not None:
            return self._forward_result(callee)
        helper = self._helper(func, scope)
        if helper is not None:
            return self._helper_result(helper)
        if isinstance(func, ast.Name):
            info = self.local_classes.get(func.id)
            if info is not None and func.id not in (scope.locals if scope else {}):
                return Value(Kind.MODULE, module_class=func.id) if info.is_module else OTHER
            return OTHER if func.id in _PLAIN_BUILTINS else UNKNOWN
        if isinstance(func, ast.Attribute):
            receiver = self.classify(func.value, scope)
            method = func.attr
            if receiver.kind is Kind.PARAMETER:
                if method in tn.MOVE_METHODS and not (method == "type" and not call.args):
                    return Value(Kind.MOVED_PARAMETER, requires_grad=True)
                if method.endswith("_"):
                    return receiver  # in place: still the Parameter
                if method in tn.TENSOR_METHODS:
                    return Value(Kind.TENSOR)
                return UNKNOWN
            if receiver.kind in TENSOR_KINDS:
                if method == "requires_grad_":
                    grad = not call.args or _true(call.args[0]) or _true(keyword(call, "requires_grad"))
                    return Value(Kind.TENSOR, requires_grad=grad, factory=receiver.factory)
                if method.endswith("_") or method in tn.MOVE_METHODS:
                    return Value(receiver.kind, requires_grad=receiver.requires_grad, factory=receiver.factory)
                if method in tn.TENSOR_METHODS:
                    return Value(Kind.TENSOR, requires_grad=receiver.requires_grad and method != "detach")
                return UNKNOWN
            if receiver.kind is Kind.MODULE and method in tn.MOVE_METHODS:
                return receiver  # modules move in place and return themselves
        return UNKNOWN

    def _callee_module(self, func: ast.expr, scope: Optional[Scope]) -> Optional[Value]:
        """`self.conv` / `layer` when it holds a Module: calling it goes through Module.__call__."""
        if scope is None:
            return None
        if isinstance(func, ast.Attribute) and scope.is_self(func.value):
            value = self.classify(func, scope)
        elif isinstance(func, ast.Name) and func.id not in self.local_classes and self._is_local(func.id, scope):
            value = self.classify(func, scope)
        else:
            return None
        return value if value.kind is Kind.MODULE else None

    def _helper(self, func: ast.expr, scope: Optional[Scope]) -> Optional[Scope]:
        """The scope of the file's function `func` names (`make_weight`, defined once at the top
        level, undecorated) or of the method `self.<name>` of the class or a base in the file."""
        if scope is None:
            return None
        if isinstance(func, ast.Attribute) and scope.is_self(func.value) and scope.cls is not None:
            pending, seen = [scope.cls], set()
            while pending:
                info = pending.pop(0)
                if id(info) in seen:
                    continue
                seen.add(id(info))
                if func.attr in info.method_scopes:
                    return info.method_scopes[func.attr]
                pending += [self.local_classes[b] for b in info.bases if b in self.local_classes]
            return None
        if not isinstance(func, ast.Name) or self._is_local(func.id, scope) or func.id in self.imports.names:
            return None
        return self._module_functions.get(func.id)

    def _helper_result(self, function: Scope) -> Value:
        """A tensor (or a Parameter) when every `return` of the function gives one, by names alone
        (the slow layer is asked of the call, as it was, where names cannot tell); else unknown.
        Once per function."""
        key = id(function)
        if key not in self._returned:
            self._returned[key] = UNKNOWN  # (a helper that calls itself)
            with self.names_only():
                kinds = {self.classify(value, function).kind for value in _returned_values(function.node)}
            if len(kinds) == 1 and kinds <= {Kind.TENSOR, Kind.PARAMETER}:
                self._returned[key] = Value(kinds.pop())
        return self._returned[key]

    @staticmethod
    def _is_local(name: str, scope: Optional[Scope]) -> bool:
        while scope is not None:
            if name in scope.locals:
                return True
            scope = scope.parent
        return False

    def _forward_result(self, module: Value) -> Value:
        """What calling a Module returns: a tensor for torch's plain layers, or per forward's annotation."""
        name = module.module_class or ""
        if tn.is_module_class(name):
            return Value(Kind.TENSOR) if name not in tn.NON_TENSOR_FORWARD else UNKNOWN
        info = self.local_classes.get(name)
        forward = info.methods.get("forward") if info is not None else None
        if forward is not None and forward.returns is not None and self.qualify(forward.returns) == "torch.Tensor":
            return Value(Kind.TENSOR)
        return UNKNOWN

    def _qualified_call(self, qualified: str, call: ast.Call, scope: Optional[Scope]) -> Value:
        if qualified in ("torch.nn.Parameter", "torch.nn.UninitializedParameter"):
            return Value(Kind.PARAMETER, requires_grad=True)
        if qualified == "torch.nn.Buffer":
            return Value(Kind.BUFFER)
        if qualified == "torch.autograd.Variable":
            grad = _true(keyword(call, "requires_grad"))
            return Value(Kind.TENSOR, requires_grad=grad, factory=qualified)
        if tn.is_tensor_factory(qualified):
            inner_grad = False
            if qualified.startswith("torch.nn.functional.") and call.args:
                inner_grad = self.classify(call.args[0], scope).requires_grad
            return Value(Kind.TENSOR, requires_grad=_true(keyword(call, "requires_grad")) or inner_grad,
                         factory=qualified)
        if tn.is_module_class(qualified):
            return Value(Kind.MODULE, module_class=qualified)
        if qualified in ("torch.device", "torch.Size", "torch.finfo", "torch.iinfo", "torch.dtype"):
            return OTHER
        return UNKNOWN

    def _name(self, node: ast.Name, scope: Optional[Scope]) -> Value:
        if node.id in ("True", "False", "None"):
            return OTHER
        while scope is not None:
            bindings = scope.locals.get(node.id)
            if bindings:
                return self._from_bindings(node.id, bindings, scope)
            if scope.parent is None:
                break
            scope = scope.parent
        return UNKNOWN

    def _from_bindings(self, name: str, bindings: Sequence[Binding], scope: Scope) -> Value:
        """A local name is known when every binding of it agrees."""
        # `x += y` on a tensor updates it in place: it stays a tensor.
        plain = [b for b in bindings if not isinstance(b.stmt, ast.AugAssign)]
        if plain and len(plain) < len(bindings) and {self.binding_value(b).kind for b in plain} <= TENSOR_KINDS:
            bindings = plain
        values = set()
        for binding in bindings[:8]:
            values.add(self.binding_value(binding))
        if len(bindings) > 8 or len(values) != 1:
            kinds = {v.kind for v in values}
            if len(kinds) == 1 and kinds <= TENSOR_KINDS:
                return Value(kinds.pop())
            return UNKNOWN
        value = values.pop()
        if value.empty and value.kind is Kind.OTHER:
            # `layers = []` then `layers.append(nn.Linear(...))`: an append-built container.
            appended = {self.classify(c.args[0], scope).kind for c in scope.appends.get(name, ())}
            if appended == {Kind.MODULE}:
                return Value(Kind.MODULE_LIST, empty=True)
            if appended == {Kind.PARAMETER}:
                return Value(Kind.PARAMETER_LIST, empty=True)
            if appended:
                return UNKNOWN
        return value

    def binding_value(self, binding: Binding) -> Value:
        key = id(binding)
        cached = self._binding_cache.get(key)
        if cached is None:
            self._binding_cache[key] = UNKNOWN  # a binding that refers to itself (x = x + 1) stays unknown
            cached = self._binding_cache[key] = self._compute_binding_value(binding)
        return cached

    def _compute_binding_value(self, binding: Binding) -> Value:
        if binding.value is not None:
            if binding.annotation is not None:
                annotated = self.annotation(binding.annotation)
                if annotated.kind is not Kind.UNKNOWN:
                    return annotated
            return self.classify(binding.value, binding.scope)
        if binding.annotation is not None:
            return self.annotation(binding.annotation)
        if binding.iter_of is not None and _iterates_parameters(binding):
            return Value(Kind.PARAMETER)
        return self._constructor_argument(binding)

    def _constructor_argument(self, binding: Binding) -> Value:
        """A parameter of a local class's ``__init__`` is a tensor when every construction of the
        class in the file passes one for it (`Mask(torch.eye(4))`); unknown otherwise."""
        function, cls = binding.stmt, binding.scope.cls
        if self.constructions is None or cls is None or not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                or function.name != "__init__" or binding.scope.node is not function:
            return UNKNOWN
        positional = [a.arg for a in function.args.posonlyargs + function.args.args][1:]  # (after self)
        named = positional + [a.arg for a in function.args.kwonlyargs]
        if binding.name not in named:
            return UNKNOWN
        calls = self.constructions(cls.name)
        if not calls:
            return UNKNOWN
        for call, scope in calls[:8]:
            if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
                return UNKNOWN
            given = [k.value for k in call.keywords if k.arg == binding.name]
            if not given and binding.name in positional and positional.index(binding.name) < len(call.args):
                given = [call.args[positional.index(binding.name)]]
            if not given or self.classify(given[0], scope).kind not in TENSOR_KINDS:
                return UNKNOWN
        return Value(Kind.TENSOR) if len(calls) <= 8 else UNKNOWN

    def annotation(self, node: ast.expr) -> Value:
        qualified = self.qualify(node)
        if qualified == "torch.Tensor":
            return Value(Kind.TENSOR)
        if qualified == "torch.nn.Parameter":
            return Value(Kind.PARAMETER)
        if qualified and (tn.is_module_class(qualified) or qualified in tn.MODULE_BASES):
            return Value(Kind.MODULE, module_class=qualified)
        if isinstance(node, ast.Name) and node.id in self.local_classes and self.local_classes[node.id].is_module:
            return Value(Kind.MODULE, module_class=node.id)
        return UNKNOWN

    def _self_attribute(self, node: ast.Attribute, scope: Optional[Scope]) -> Value:
        """``self.x`` in a Module method, or ``obj.x`` where obj is an instance of a Module class of this file."""
        if scope is not None and scope.is_self(node.value) and scope.cls is not None and scope.cls.is_module:
            cls: ClassInfo = scope.cls
        else:
            owner = self.classify(node.value, scope)
            if owner.kind is Kind.MODULE and node.attr in tn.LAYER_PARAMETERS.get(owner.module_class or "", ()):
                return Value(Kind.PARAMETER)  # nn.Linear(...).weight and friends
            local = self.local_classes.get(owner.module_class or "") if owner.kind is Kind.MODULE else None
            if local is None:
                return UNKNOWN
            cls = local
        key = (id(cls), node.attr)
        cached = self._attribute_cache.get(key)
        if cached is None:
            self._attribute_cache[key] = UNKNOWN
            cached = self._attribute_cache[key] = self.attribute_of(cls, node.attr)
        return cached

    def attribute_of(self, cls: ClassInfo, attr: str) -> Value:
        """What instances of ``cls`` hold in ``attr``, when every assignment agrees.

        A name ever holding a Parameter is a parameter slot (assigning anything else
        raises); otherwise ``None`` placeholders and unknowns are ignored for modules,
        but a tensor must be certain.
        """
        if attr in cls.registered_parameters:
            return Value(Kind.PARAMETER)
        values = []
        for binding in self.class_attribute_bindings(cls, attr):
            if binding.value is not None:
                values.append(self.classify(binding.value, binding.scope))
        kinds = {v.kind for v in values}
        if Kind.PARAMETER in kinds:
            return Value(Kind.PARAMETER)
        known = [v for v in values if v.kind not in (Kind.UNKNOWN, Kind.OTHER)]
        if known and all(v.kind is Kind.MODULE for v in known):
            classes = {v.module_class for v in known}
            return Value(Kind.MODULE, module_class=classes.pop() if len(classes) == 1 else None)
        if values and kinds == {Kind.TENSOR}:
            return Value(Kind.TENSOR)
        if attr in cls.registered_buffers and kinds <= {Kind.TENSOR, Kind.OTHER}:
            return Value(Kind.TENSOR)  # a registered buffer holds a tensor
        return UNKNOWN

    def class_attribute_bindings(self, cls: ClassInfo, attr: str) -> Iterator[Binding]:
        """Assignments to self.<attr> in this class and its in-file bases."""
        for info in class_chain(cls, self.local_classes):
            yield from info.assignments_of(attr)


def _iterates_parameters(binding: Binding) -> bool:
    """``for p in m.parameters()`` / ``for name, p in m.named_parameters()``."""
    call = binding.iter_of
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
        return False
    if call.func.attr == "parameters":
        return binding.unpack_index is None
    if call.func.attr == "named_parameters":
        return binding.unpack_index == 1
    return False


def _constructs(node: ast.expr) -> bool:
    """An element that builds a new object (a call), as opposed to naming an existing one."""
    return isinstance(node, ast.Call)
