"""Example inputs the project's own code gives a class: its calls of the built object.

``model = Net(dim=64); y = model(torch.randn(2, 24, 64))`` in a ``__main__`` block, a training
function of the package or a test says what ``Net.forward`` takes. This module finds such
calls by reading the code (never importing it, like ``targets.find_constructors``):

* the receiver is bound, in the same function (or the module's code), to a call of the class
  or of a factory that returns it (``resnet_tiny()``), possibly moved (``.to(device)``,
  ``.cuda()``, ``.eval()``), or is a parameter annotated with the class; ``Net(...)(x)``
  and ``model.forward(x)`` count too;
* every argument is a literal tensor factory (``torch.randn(2, 24, 64)``,
  ``torch.randint(0, 100, (2, 16))``, ``torch.ones(2, 16, dtype=torch.bool)``), possibly
  converted (``.long()``, ``.to(device)``, ``.unsqueeze(0)``), a name bound once to one in the
  same function, or a literal (``return_attn=True``); sizes may be names bound once to
  numbers (``B, N, C = 2, 24, 64``) or arithmetic on them.

Each call becomes ``{"args": [expr], "kwargs": {name: expr}, "origin": "demo.py:41, the
`__main__` block", "built_with": "Net(dim=64)" or None}``; every expression refers to
``torch`` only (the child evaluates it with nothing else bound).
"""
from __future__ import annotations

import ast
import re
from typing import Callable, Dict, List, Literal, Optional, Sequence, Set, Tuple, Union

from ..analysis.scopes import Scope
from ..files import display_path
from .protocol import JsonObject
from .targets import (CandidateFinder, ImportPlan, ParsedFile, absolute_module, bound_value, candidate_files, every_one,
                      import_plan, in_main_block, may_reexport, scan_sites)

MAX_INPUT_CALLS = 6  # per class
MAX_DEPTH = 8  # names followed to their values
MAX_NUMEL = 1 << 24  # a literal factory bigger than this is not an example input
FACTORIES = frozenset({"randn", "rand", "zeros", "ones", "empty", "randint", "arange", "full", "tensor",
                       "as_tensor", "eye", "linspace", "normal", "randperm", "ones_like", "zeros_like",
                       "randn_like", "rand_like"})
# Tensor methods kept as they are (their arguments must be literals too).
KEPT_METHODS = frozenset({"long", "float", "double", "half", "bfloat16", "bool", "int", "unsqueeze", "squeeze",
                          "view", "reshape", "expand", "repeat", "permute", "transpose", "flatten", "contiguous",
                          "clone", "t", "requires_grad_", "softmax", "abs", "exp", "sigmoid", "tanh", "relu",
                          "masked_fill", "tril", "triu", "bernoulli", "normal_", "uniform_", "fill_", "zero_"})
DROPPED_METHODS = frozenset({"cuda", "cpu", "to", "pin_memory", "detach"})  # where the tensor lives: the child moves it
DROPPED_KEYWORDS = frozenset({"device", "pin_memory", "generator", "out", "layout"})
MODEL_METHODS = frozenset({"to", "cuda", "cpu", "eval", "train", "float", "double", "half", "bfloat16",
                           "requires_grad_"})  # return the module itself


class _Torch:
    """How a file spells torch: ``import torch``, ``import torch as th``, ``from torch import randn``."""

    def __init__(self, tree: ast.Module) -> None:
        self.modules: Set[str] = set()
        self.functions: Dict[str, str] = {}  # local name -> torch function name
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "torch":
                        self.modules.add(alias.asname or "torch")
            elif isinstance(node, ast.ImportFrom) and node.module == "torch" and not node.level:
                for alias in node.names:
                    self.functions[alias.asname or alias.name] = alias.name

    def is_torch(self, node: ast.expr) -> bool:
        return isinstance(node, ast.Name) and node.id in self.modules


class _Converter:
    """Rewrites a call's argument into an expression that means the same with only ``torch``
    bound, or gives up (None)."""

    def __init__(self, site: ParsedFile, torch: _Torch) -> None:
        self.site = site
        self.torch = torch

    def value_of(self, name: str, scope: Optional[Scope], depth: int) -> Optional[Tuple[ast.expr, Scope]]:
        """(the single value bound to ``name`` where it is read, its scope), or None."""
        while scope is not None:
            bindings = scope.locals.get(name)
            if bindings:
                values = [bound_value(b) for b in bindings]
                if len(values) == 1 and values[0] is not None:
                    return values[0], scope
                return None
            scope = scope.parent
        return None

    # -- numbers (sizes) --------------------------------------------------------------------
    def number(self, node: ast.expr, scope: Optional[Scope], depth: int = 0) -> Optional[ast.expr]:
        if depth > MAX_DEPTH:
            return None
        if isinstance(node, ast.Constant) and (isinstance(node.value, (int, float, bool))
                                               or node.value is None or node.value is Ellipsis):
            return node
        if isinstance(node, (ast.Tuple, ast.List)):
            elts = every_one([self.number(e, scope, depth) for e in node.elts])
            return None if elts is None else ast.Tuple(elts=elts, ctx=ast.Load())
        if isinstance(node, ast.UnaryOp):
            operand = self.number(node.operand, scope, depth)
            return None if operand is None else ast.UnaryOp(op=node.op, operand=operand)
        if isinstance(node, ast.BinOp):
            left, right = self.number(node.left, scope, depth), self.number(node.right, scope, depth)
            return None if left is None or right is None else ast.BinOp(left=left, op=node.op, right=right)
        if isinstance(node, ast.Name):
            found = self.value_of(node.id, scope, depth)
            return None if found is None else self.number(found[0], found[1], depth + 1)
        if isinstance(node, ast.Attribute) and self.torch.is_torch(node.value):
            return ast.Attribute(value=ast.Name(id="torch", ctx=ast.Load()), attr=node.attr, ctx=ast.Load())
        if isinstance(node, ast.Slice):
            parts = [None if p is None else self.number(p, scope, depth) for p in (node.lower, node.upper, node.step)]
            if any(p is None and o is not None for p, o in zip(parts, (node.lower, node.upper, node.step))):
                return None
            return ast.Slice(lower=parts[0], upper=parts[1], step=parts[2])
        return None

    # -- tensors ----------------------------------------------------------------------------
    def argument(self, node: ast.expr, scope: Optional[Scope]) -> Optional[ast.expr]:
        """A tensor expression, or a literal argument (a flag, a number, None)."""
        if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (int, float, bool, str))):
            return node
        return self.tensor(node, scope)

    def tensor(self, node: ast.expr, scope: Optional[Scope], depth: int = 0) -> Optional[ast.expr]:
        if depth > MAX_DEPTH:
            return None
        if isinstance(node, ast.Name):
            found = self.value_of(node.id, scope, depth)
            return None if found is None else self.tensor(found[0], found[1], depth + 1)
        if isinstance(node, ast.Call):
            return self._call(node, scope, depth)
        if isinstance(node, ast.BinOp):
            left = self.tensor(node.left, scope, depth + 1) or self.number(node.left, scope, depth + 1)
            right = self.tensor(node.right, scope, depth + 1) or self.number(node.right, scope, depth + 1)
            return None if left is None or right is None else ast.BinOp(left=left, op=node.op, right=right)
        if isinstance(node, ast.Compare) and len(node.comparators) == 1:
            left = self.tensor(node.left, scope, depth + 1)
            other = node.comparators[0]
            right = self.number(other, scope, depth + 1) or self.tensor(other, scope, depth + 1)
            return None if left is None or right is None else ast.Compare(left=left, ops=node.ops, comparators=[right])
        if isinstance(node, ast.Subscript):
            value = self.tensor(node.value, scope, depth + 1)
            index = self.number(node.slice, scope, depth + 1)
            return None if value is None or index is None else ast.Subscript(value=value, slice=index, ctx=ast.Load())
        if isinstance(node, ast.Attribute) and node.attr in ("T", "mT"):
            value = self.tensor(node.value, scope, depth + 1)
            return None if value is None else ast.Attribute(value=value, attr=node.attr, ctx=ast.Load())
        return None

    def _call(self, call: ast.Call, scope: Optional[Scope], depth: int) -> Optional[ast.expr]:
        func = call.func
        name = None
        if isinstance(func, ast.Attribute) and self.torch.is_torch(func.value):
            name = func.attr
        elif isinstance(func, ast.Name) and func.id in self.torch.functions:
            name = self.torch.functions[func.id]
        if name is not None:
            if name not in FACTORIES:
                return None
            args = every_one([self._factory_argument(a, scope, depth) for a in call.args])
            keywords = self._keywords(call, scope, depth)
            if args is None or keywords is None:
                return None
            made = ast.Call(func=ast.Attribute(value=ast.Name(id="torch", ctx=ast.Load()), attr=name, ctx=ast.Load()),
                            args=args, keywords=keywords)
            return made if _small(made) else None
        if isinstance(func, ast.Attribute):
            receiver = self.tensor(func.value, scope, depth + 1)
            if receiver is None:
                return None
            if func.attr in DROPPED_METHODS:
                dtype = self._dtype_of_to(call, scope, depth) if func.attr == "to" else None
                if dtype is None:
                    return receiver
                return ast.Call(func=ast.Attribute(value=receiver, attr="to", ctx=ast.Load()), args=[dtype],
                                keywords=[])
            if func.attr in KEPT_METHODS:
                args = every_one([self.number(a, scope, depth + 1) for a in call.args])
                keywords = self._keywords(call, scope, depth)
                if args is None or keywords is None:
                    return None
                return ast.Call(func=ast.Attribute(value=receiver, attr=func.attr, ctx=ast.Load()), args=args,
                                keywords=keywords)
        return None

    def _factory_argument(self, node: ast.expr, scope: Optional[Scope], depth: int) -> Optional[ast.expr]:
        return self.number(node, scope, depth + 1) or self.tensor(node, scope, depth + 1)

    def _keywords(self, call: ast.Call, scope: Optional[Scope], depth: int) -> Optional[List[ast.keyword]]:
        keywords = []
        for keyword in call.keywords:
            if keyword.arg is None:
                return None
            if keyword.arg in DROPPED_KEYWORDS:
                continue
            value = self.number(keyword.value, scope, depth + 1)
            if value is None:
                return None
            keywords.append(ast.keyword(arg=keyword.arg, value=value))
        return keywords

    def _dtype_of_to(self, call: ast.Call, scope: Optional[Scope], depth: int) -> Optional[ast.expr]:
        """The dtype a ``.to(...)`` converts to, if it says one (``.to(device)`` is dropped)."""
        candidates = list(call.args) + [k.value for k in call.keywords if k.arg == "dtype"]
        for node in candidates:
            if isinstance(node, ast.Attribute) and self.torch.is_torch(node.value) and node.attr not in ("device",):
                return ast.Attribute(value=ast.Name(id="torch", ctx=ast.Load()), attr=node.attr, ctx=ast.Load())
        return None


def _small(call: ast.Call) -> bool:
    """A factory whose literal size is reasonable (a demo's batch, not a dataset)."""
    sizes = []
    for arg in call.args:
        for node in ast.walk(arg):
            if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
                sizes.append(abs(node.value))
    total = 1
    for size in sizes:
        total *= max(size, 1)
    return total <= MAX_NUMEL * 64


def _unwrap_model(node: ast.expr) -> ast.expr:
    """``Net(...).to(device).eval()`` -> ``Net(...)``."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MODEL_METHODS:
        node = node.func.value
    return node


class _ClassCalls:
    """Finds the calls of one class's built objects in the files it is given."""

    def __init__(self, target: ParsedFile, class_name: str, target_factories: Set[str]) -> None:
        self.finder = CandidateFinder(target, class_name)
        self.target = target
        self.class_name = class_name
        self.target_factories = target_factories  # module-level functions of the target file that return it
        self.found: List[JsonObject] = []
        self._seen: Set[str] = set()

    def builders(self, site: ParsedFile) -> Tuple[Set[str], Set[str], Set[str]]:
        """(names of the class, modules holding it, names of factories returning it) in ``site``."""
        names, modules = self.finder.callee_names(site)
        factories = {function.name for function, _ in self.finder.factories(site, names, modules)}
        if site is not self.target:
            target_module = self.target.module or ""
            for stmt in ast.walk(site.tree):
                if isinstance(stmt, ast.ImportFrom):
                    source = absolute_module(stmt, site.module, site.path.endswith("__init__.py"))
                    if source and target_module and may_reexport(source, target_module):
                        factories.update(a.asname or a.name for a in stmt.names if a.name in self.target_factories)
        return names, modules, factories

    def scan(self, site: ParsedFile, where: str) -> None:
        if len(self.found) >= MAX_INPUT_CALLS:
            return
        names, modules, factories = self.builders(site)
        if not (names or modules or factories):
            return
        torch = _Torch(site.tree)
        if not torch.modules and not torch.functions:
            return  # no tensor factory can be spelled in this file

        def builds(node: ast.expr) -> Optional[ast.Call]:
            node = _unwrap_model(node)
            if not isinstance(node, ast.Call):
                return None
            if self.finder.builds_class(node, names, modules):
                return node
            func = node.func
            if isinstance(func, ast.Name) and func.id in factories:
                return node
            if isinstance(func, ast.Attribute) and func.attr in self.target_factories \
                    and isinstance(func.value, ast.Name) and func.value.id in modules:
                return node
            return None

        converter = _Converter(site, torch)
        calls = sorted(site.index.calls, key=lambda c: (not in_main_block(site.tree, c), c.lineno, c.col_offset))
        for call in calls:
            receiver = call.func
            if isinstance(receiver, ast.Attribute) and receiver.attr == "forward":
                receiver = receiver.value
            scope = site.scope_of(call)
            built = builds(receiver) if isinstance(receiver, ast.Call) else self._bound(receiver, scope, builds)
            if built is None:  # (_bound and builds never answer False)
                continue
            args = every_one([converter.argument(a, scope) if not isinstance(a, ast.Starred) else None
                              for a in call.args])
            kwargs = {k.arg: converter.argument(k.value, scope) for k in call.keywords if k.arg is not None}
            given = {name: value for name, value in kwargs.items() if value is not None}
            if args is None or len(given) != len(kwargs) or any(k.arg is None for k in call.keywords):
                continue
            if not any(not isinstance(a, ast.Constant) for a in args + list(given.values())):
                continue  # no tensor at all: not an example input
            self._add(site, call, where, [ast.unparse(a) for a in args],
                      {k: ast.unparse(v) for k, v in given.items()}, built)

    def _bound(self, receiver: ast.expr, scope: Optional[Scope],
               builds: Callable[[ast.expr], Optional[ast.Call]]) -> Union[ast.Call, Literal[True], None]:
        """The construction a name is bound to (the call), True for a parameter annotated with the
        class, None when it is not one of the class's objects."""
        if not isinstance(receiver, ast.Name):
            return None
        while scope is not None and receiver.id not in scope.locals:
            scope = scope.parent
        if scope is None:
            return None
        bindings = scope.locals[receiver.id]
        construction = None
        for binding in bindings:
            value = binding.value
            if value is None:
                annotation = binding.annotation
                spelled = ast.unparse(annotation) if annotation is not None else ""
                if spelled.rsplit(".", 1)[-1].strip("'\"") == self.class_name and len(bindings) == 1:
                    return True
                return None
            made = builds(value)
            if made is not None:
                if construction is not None:
                    return None  # built twice: which one is called is not known here
                construction = made
                continue
            unwrapped = _unwrap_model(value)
            if not (isinstance(unwrapped, ast.Name) and unwrapped.id == receiver.id):
                return None  # `model = model.to(device)` keeps it; anything else may not
        return construction

    def _add(self, site: ParsedFile, call: ast.Call, where: str, args: List[str], kwargs: Dict[str, str],
             built: Union[ast.Call, Literal[True]]) -> None:
        key = repr((args, sorted(kwargs.items())))
        if key in self._seen or len(self.found) >= MAX_INPUT_CALLS:
            return
        self._seen.add(key)
        if in_main_block(site.tree, call):
            what = "the `__main__` block"
        else:
            scope = site.scope_of(call)
            function = getattr(scope.node, "name", None)
            what = "%s()" % function if function else "the module's code"
        built_with = None
        if isinstance(built, ast.Call):
            func = built.func
            if self.finder.builds_class(built, *self.finder.callee_names(site)):
                built_with = self.finder.portable_call(site, built)
            elif site is self.target and isinstance(func, ast.Name) and not built.args and not built.keywords:
                built_with = "%s()" % func.id
        self.found.append({"args": args, "kwargs": kwargs, "origin": "%s:%d, %s" % (where, call.lineno, what),
                           "built_with": built_with})


def find_input_calls(path: str, class_names: Sequence[str], plan: Optional[ImportPlan] = None,
                     workspace_root: Optional[str] = None,
                     sites: Optional[Sequence[Tuple[str, Optional[str]]]] = None,
                     deadline: Optional[float] = None) -> Dict[str, List[JsonObject]]:
    """Class name -> the calls of its built objects found in the project, best first (the file's
    ``__main__`` block, its functions, the package's other files, tests folders)."""
    import os

    path = os.path.abspath(path)
    plan = plan or import_plan(path, workspace_root)
    target = ParsedFile.load(path, plan.module)
    if target is None or not class_names:
        return {}
    base = workspace_root or plan.root or os.path.dirname(path)
    finders: Dict[str, _ClassCalls] = {}
    for name in class_names:
        factories = {function.name for function, _ in CandidateFinder(target, name).factories(target, {name}, set())}
        finders[name] = _ClassCalls(target, name, factories)
        finders[name].scan(target, display_path(path, base))
    names = "|".join(re.escape(n) for n in list(finders) + [f for c in finders.values() for f in c.target_factories])
    pattern = re.compile(r"\b(%s)\b" % names)
    if sites is None:
        sites = candidate_files(path, plan, workspace_root, deadline)
    scan_sites(sites, pattern, base, finders.values(), deadline, needs="torch",
               done=lambda: all(len(c.found) >= MAX_INPUT_CALLS for c in finders.values()))
    return {name: finder.found for name, finder in finders.items() if finder.found}
