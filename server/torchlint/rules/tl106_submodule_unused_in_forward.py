"""TL106 submodule-unused-in-forward: a layer registered in __init__ that forward never runs."""
from __future__ import annotations

import ast
from typing import Dict, Iterator, List, Optional, Set, Union, cast

from ..analysis import torch_names as tn
from ..analysis.context import FileContext
from ..analysis.findings import Finding, Severity
from ..analysis.forward import DROPOUT_LAYERS, PARAMETER_FREE_LAYERS, bases_read, may_hold_parameters, spelled_names
from ..analysis.scopes import Binding, ClassInfo, FunctionDefinition, Scope
from ..analysis.values import Kind, Value
from .base import Rule

# Methods that let the class be called without forward, or find attributes without their names.
_DYNAMIC_METHODS = frozenset(["__call__", "__getattr__", "__getattribute__", "_call_impl"])


class SubmoduleUnusedInForward(Rule):
    code = "TL106"
    name = "submodule-unused-in-forward"
    summary = ("submodule registered in __init__ that forward never uses: DDP needs find_unused_parameters=True; "
               "a parameter-free layer's effect (dropout) is never applied")
    severity = Severity.INFO
    grading = "information; hint for an unused parameter-free layer other than dropout (activation, pooling, flatten)"
    offers_fixes = False  # deleting a layer changes the checkpoint format: the author decides

    def find(self, ctx: FileContext) -> Iterator[Finding]:
        subclassed = {base for info in ctx.index.classes for base in info.bases}
        for cls in ctx.module_classes:
            if "forward" not in cls.methods or cls.name in subclassed or _dynamic_class(ctx, cls):
                continue
            if _abstract(cls.methods["forward"]):
                continue
            reached = ctx.forward_reach(cls)
            if reached is None or reached.dynamic is not None:
                continue
            init = cls.method_scopes.get("__init__")
            if init is None:
                continue
            elsewhere = _used_outside_forward(ctx, cls, set(reached.methods))
            strings = spelled_names(ctx.nodes, cls.node)
            for base in bases_read(ctx, cls) or ():  # (None: none read, and reach said so)
                strings |= base.spelled
            reported = set()
            for binding in cls.attr_assignments:
                name = binding.name
                if binding.scope is not init or binding.value is None or name in reported:
                    continue
                if name in reached.attributes or name in elsewhere or name in strings \
                        or ctx.attribute_read_outside(cls.node, name):
                    continue
                value = ctx.classify(binding.value, init)
                module_class = value.module_class
                if value.kind is not Kind.MODULE or module_class is None:
                    continue
                free = _parameter_free_layers(ctx, cls, binding.value, module_class, name)
                if not free:
                    if not may_hold_parameters(ctx, module_class, built=binding.value):
                        continue  # (no class: may_hold_parameters cannot tell)
                    if _built_without_parameters(binding.value, module_class) \
                            or _empty_and_never_filled(ctx, cls, binding.value, module_class, name):
                        continue
                if _used_in_other_files(ctx, cls, name) or _registers_what_another_holds(cls, binding, init, module_class):
                    continue
                reported.add(name)
                yield _unapplied_finding(ctx, binding, value, free) if free else _finding(ctx, binding, value)


def _registers_what_another_holds(cls: ClassInfo, binding: Binding, init: Scope, module_class: str) -> bool:
    """`self._registered = nn.ModuleList(policies.values())` beside `self.policies = policies`: the
    container registers layers that forward runs through the other attribute (a plain dict of
    them), so it is not an unused layer but their registration. (A layer given a size another
    attribute keeps, `nn.Embedding(n, model_dim)` beside `self.model_dim = model_dim`, is not.)"""
    value = binding.value
    if not isinstance(value, ast.Call) or module_class not in _CONTAINERS:
        return False
    given = {node.id for argument in list(value.args) + [k.value for k in value.keywords]
             for node in ast.walk(argument) if isinstance(node, ast.Name)}
    return any(other is not binding and other.scope is init and isinstance(other.value, ast.Name)
               and other.value.id in given for other in cls.attr_assignments)


# Norm layers whose weights a flag turns off: class -> (keyword, its position, default).
_AFFINE_FLAGS = {
    "torch.nn.BatchNorm1d": ("affine", 3, True), "torch.nn.BatchNorm2d": ("affine", 3, True),
    "torch.nn.BatchNorm3d": ("affine", 3, True), "torch.nn.SyncBatchNorm": ("affine", 3, True),
    "torch.nn.LazyBatchNorm1d": ("affine", 2, True), "torch.nn.LazyBatchNorm2d": ("affine", 2, True),
    "torch.nn.LazyBatchNorm3d": ("affine", 2, True), "torch.nn.GroupNorm": ("affine", 3, True),
    "torch.nn.LayerNorm": ("elementwise_affine", 2, True), "torch.nn.RMSNorm": ("elementwise_affine", 2, True),
}
_CONTAINERS = frozenset(["torch.nn.ModuleList", "torch.nn.ModuleDict", "torch.nn.Sequential"])


def _built_without_parameters(value: ast.AST, module_class: str) -> bool:
    """`nn.BatchNorm2d(c, affine=False)`, `nn.LayerNorm(d, elementwise_affine=False)`: running
    statistics at most, no parameter for DDP to wait for. Only a literal False counts."""
    flag = _AFFINE_FLAGS.get(module_class)
    if flag is None or not isinstance(value, ast.Call):
        return False
    keyword, position, _ = flag
    given = next((k.value for k in value.keywords if k.arg == keyword), None)
    if given is None and len(value.args) > position and not any(isinstance(a, ast.Starred) for a in value.args):
        given = value.args[position]
    return isinstance(given, ast.Constant) and given.value is False


def _parameter_free_layers(ctx: FileContext, cls: ClassInfo, value: ast.AST, module_class: str,
                           name: str) -> List[str]:
    """The torch layers, none with parameters, that ``value`` builds: `nn.Dropout(p)` ->
    [torch.nn.Dropout]; a Sequential / ModuleList of only such layers, never filled later, ->
    each of them. Empty where anything in it may hold parameters or cannot be told."""
    if module_class in PARAMETER_FREE_LAYERS:
        return [module_class]
    if module_class not in ("torch.nn.Sequential", "torch.nn.ModuleList") or not isinstance(value, ast.Call) \
            or value.keywords or not _never_read_again(ctx, cls, name):
        return []
    layers = list(value.args)
    if module_class == "torch.nn.ModuleList":
        if len(layers) != 1 or not isinstance(layers[0], (ast.List, ast.Tuple)):
            return []
        layers = list(cast(ast.List, layers[0]).elts)
    classes = []
    for layer in layers:
        if not isinstance(layer, ast.Call):
            return []  # `*blocks`, a layer built elsewhere
        qualified = ctx.qualify(layer.func)
        if qualified not in PARAMETER_FREE_LAYERS and qualified != "torch.nn.Identity":
            return []
        if qualified not in classes:
            classes.append(qualified)
    return [c for c in classes if c != "torch.nn.Identity"]


def _empty_and_never_filled(ctx: FileContext, cls: ClassInfo, value: ast.AST, module_class: str, name: str) -> bool:
    """`self.blocks = nn.ModuleList()` that nothing in the class ever reads again (no `append`,
    no `extend`, no item set): it stays empty and holds no parameter."""
    if module_class not in _CONTAINERS or not isinstance(value, ast.Call) or value.args or value.keywords:
        return False
    return _never_read_again(ctx, cls, name)


def _never_read_again(ctx: FileContext, cls: ClassInfo, name: str) -> bool:
    """Nothing in the class reads `self.<name>` (no `append`, `extend`, item set) or adds to it."""
    for position in ctx.nodes.attributes_named(cls.node, name):
        node = cast(ast.Attribute, ctx.nodes.nodes[position])
        if not isinstance(node.ctx, ast.Store):
            return False
        parent = ctx.nodes.parent.get(id(node))
        if isinstance(parent, ast.AugAssign):
            return False  # `self.blocks += [...]`
    return True


def _dynamic_class(ctx: FileContext, cls: ClassInfo) -> bool:
    """Lightning modules (training_step runs without forward), classes that redefine how they
    are called or looked up, and classes that register hooks (they run code forward does not show),
    here or in a base of another file that was read."""
    for info in ctx.class_chain(cls):
        if any(base in tn.MODULE_BASES and base != "torch.nn.Module" for base in info.bases):
            return True
        if _DYNAMIC_METHODS & set(info.methods):
            return True
    for node in ctx.nodes.under(cls.node, ast.Attribute):
        if node.attr.startswith("register_") and "hook" in node.attr:
            return True
    return any(base.registers_hooks or _DYNAMIC_METHODS & set(base.methods) for base in bases_read(ctx, cls) or ())


def _used_in_other_files(ctx: FileContext, cls: ClassInfo, name: str) -> bool:
    """Code of another file of the project may use the layer: it reads `<expr>.<name>` (the model
    holding this one calls `self.decoder.<name>(x)`), or it may subclass the class (whose methods
    may use any of its layers). Asked last: the project's files are read at the first question."""
    return ctx.subclassed_in_other_files(cls) or ctx.used_in_other_files(cls, name)


def _abstract(forward: FunctionDefinition) -> bool:
    """A forward that only raises, passes or holds a docstring: the subclasses' forwards run."""
    for stmt in forward.body:
        if isinstance(stmt, (ast.Pass, ast.Raise)):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # a docstring or `...`
        return False
    return True


def _used_outside_forward(ctx: FileContext, cls: ClassInfo, reached: Set[str]) -> Set[str]:
    """Submodule names used by the class's other methods (`generate`, a loss helper), shared in
    __init__ (`nn.Sequential(self.stem, ...)`, tied weights), or read through an instance elsewhere
    in the file (`model.aux(x)`). Initialising them in __init__ (`self.fc.weight.data.normal_()`,
    `nn.init.zeros_(self.fc.bias)`) is no use. Any read by a method of a base in another file counts."""
    used: Set[str] = {name for base in bases_read(ctx, cls) or () for uses in base.methods.values()
                      for name, _, _ in uses if name is not None}
    for info in ctx.class_chain(cls):
        for name, scope in info.method_scopes.items():
            if name in reached or scope.self_name is None:
                continue
            in_init = name == "__init__"
            for node in ctx.nodes.under(scope.node, ast.Attribute):
                if not (scope.is_self(node.value) and isinstance(node.ctx, ast.Load)):
                    continue
                if in_init and _initialises(node, ctx.nodes.parent):
                    continue
                used.add(node.attr)
    return used  # reads through an instance elsewhere: ctx.attribute_read_outside


def _initialises(node: ast.Attribute, parent_of: Dict[int, ast.AST]) -> bool:
    """`self.fc.weight...` read in __init__ by a call (`nn.init.zeros_(self.fc.bias)`,
    `self.fc.weight.data.normal_()`), not in an assignment (that shares or ties the weight)."""
    parent = parent_of.get(id(node))
    if not isinstance(parent, ast.Attribute):
        return False
    while parent is not None and not isinstance(parent, ast.stmt):
        parent = parent_of.get(id(parent))
    if isinstance(parent, (ast.Assign, ast.AnnAssign)) and parent.value is not None:
        return False  # `x = self.fc.weight` shares it; `self.fc.weight = other.weight` ties it
    return True


def _finding(ctx: FileContext, binding: Binding, value: Value) -> Finding:
    target = "%s.%s" % (binding.scope.self_name, binding.name)
    kind = _short_class(value.module_class)
    message = ("`%s` (%s) is registered in `__init__` but `forward` never uses it, nor any method it calls: "
               "its parameters get no gradient, so DistributedDataParallel stops with \"Expected to have finished "
               "reduction in the prior iteration\" unless `find_unused_parameters=True` (which slows every step), "
               "and the optimizer keeps state for them for nothing" % (target, kind))
    return ctx.finding(message, _target_node(binding))


def _unapplied_finding(ctx: FileContext, binding: Binding, value: Value, layers: List[str]) -> Finding:
    """A parameter-free layer forward never calls: no DDP error, no optimizer state; what is lost
    is the layer's effect. Information for a dropout (training regularises less than the code
    says); a hint for the rest (forward often does the same through `F.relu`, `torch.flatten`)."""
    target = "%s.%s" % (binding.scope.self_name, binding.name)
    names = [_short_class(layer) for layer in layers]
    what = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    dropout = any(layer in DROPOUT_LAYERS for layer in layers)
    consequence = "the dropout it was built for is never applied" if dropout and len(layers) == 1 \
        else "the %s it was built for %s never applied" % (what, "is" if len(names) == 1 else "are")
    message = ("`%s` (%s) is registered in `__init__` but `forward` never calls it, nor any method it calls: "
               "%s (it holds no parameters: DDP and the optimizer are not affected)"
               % (target, _short_class(value.module_class), consequence))
    return ctx.finding(message, _target_node(binding), severity=Severity.INFO if dropout else Severity.HINT)


def _target_node(binding: Binding) -> Union[ast.expr, ast.stmt]:
    stmt = binding.stmt
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [cast(ast.AnnAssign, stmt).target]
    return next((t for t in targets if isinstance(t, ast.Attribute) and t.attr == binding.name), stmt)


def _short_class(module_class: Optional[str]) -> str:
    if module_class and module_class.startswith("torch.nn."):
        return "nn." + module_class[len("torch.nn."):]
    return module_class.rsplit(".", 1)[-1] if module_class else "a Module"  # the name the code spells
