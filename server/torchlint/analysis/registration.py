"""What ``self.<name>`` is in an ``nn.Module`` class, as torch will see it: a parameter, a buffer
(persistent or not), a submodule, a container of modules or parameters, a plain tensor that is
not registered, or unknown; and the line where that was decided.

The editor shows it on hover (and, when asked, as inlay hints after the assignments in
``__init__``). It is computed from what the rules already know: the file's index (registrations,
``self.<attr>`` assignments), the class chain and the value classifier.
"""
from __future__ import annotations

import ast
import enum
from dataclasses import dataclass
from typing import Callable, Iterable, List, Optional, Tuple, cast

from .context import FileContext
from .findings import Position, Range
from .parsing import parse
from .scopes import Binding, ClassInfo, Scope
from .source import first_line, last_line
from .values import Kind, Value, keyword

MODULE_CONTAINERS = frozenset(["torch.nn.ModuleList", "torch.nn.ModuleDict", "torch.nn.Sequential"])
PARAMETER_CONTAINERS = frozenset(["torch.nn.ParameterList", "torch.nn.ParameterDict"])


class Status(enum.Enum):
    PARAMETER = "parameter"
    BUFFER = "buffer"
    SUBMODULE = "submodule"
    MODULE_CONTAINER = "container of modules"
    PARAMETER_CONTAINER = "container of parameters"
    PLAIN_TENSOR = "plain tensor"  # not registered: not trained, saved or moved
    PLAIN_CONTAINER = "plain container"  # a Python list/dict of modules or parameters: invisible to torch
    PLAIN_VALUE = "plain attribute"  # a number, a string, a shape...: nothing to register
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Registration:
    name: str
    class_name: str
    status: Status
    line: Optional[int] = None  # where it was registered (or assigned, when nothing registers it)
    persistent: Optional[bool] = None  # buffers: saved by state_dict() unless persistent=False
    module_class: Optional[str] = None  # submodules and containers: the class, when known
    registered_by: str = ""  # how: "register_buffer", "nn.Parameter", "assignment"...

    @property
    def word(self) -> str:
        """The status in a word or two (inlay hints)."""
        if self.status is Status.BUFFER and self.persistent is False:
            return "buffer (not saved)"
        if self.status in (Status.PLAIN_TENSOR, Status.PLAIN_CONTAINER):
            return self.words + ", not registered"
        return self.words

    @property
    def words(self) -> str:
        """The status's own words."""
        words: str = self.status.value
        return words

    def describe(self, where: Callable[[int], str] = "line {}".format) -> str:
        """One sentence: what it is and where that was decided (``where`` names a line: in a
        notebook, the cell and its line)."""
        subject = "`self.%s`" % self.name
        if self.status is Status.PARAMETER:
            text = "%s is a **parameter**: trained, saved by state_dict() and moved by .to()" % subject
        elif self.status is Status.BUFFER:
            text = "%s is a **%s buffer**: moved by .to(), not trained; %s" % (
                subject, "persistent" if self.persistent is not False else "non-persistent",
                "saved by state_dict()" if self.persistent is not False else "not saved by state_dict()")
        elif self.status is Status.SUBMODULE:
            text = "%s is a **submodule**%s: its parameters and buffers are the Module's" % (
                subject, _of_class(self.module_class))
        elif self.status is Status.MODULE_CONTAINER:
            text = "%s is a **container of modules**%s: every layer in it is registered" % (
                subject, _of_class(self.module_class))
        elif self.status is Status.PARAMETER_CONTAINER:
            text = "%s is a **container of parameters**%s: every parameter in it is registered" % (
                subject, _of_class(self.module_class))
        elif self.status is Status.PLAIN_TENSOR:
            text = ("%s is a **plain tensor, not registered**: never trained, not saved by state_dict(), "
                    "left behind by .to()" % subject)
        elif self.status is Status.PLAIN_CONTAINER:
            text = ("%s is a **plain Python container, not registered**: the modules or parameters in it are "
                    "invisible to .parameters(), .to() and state_dict()" % subject)
        elif self.status is Status.PLAIN_VALUE:
            text = "%s is a **plain attribute** (not a tensor or a module): nothing to register" % subject
        else:
            return "%s: torchlint cannot tell whether it is a parameter, a buffer or a submodule" % subject
        if self.status in (Status.PLAIN_TENSOR, Status.PLAIN_CONTAINER, Status.PLAIN_VALUE):
            return text + (". Assigned on %s." % where(self.line) if self.line else ".")
        how = " by %s" % self.registered_by if self.registered_by else ""
        return text + (". Registered%s%s." % (how, " on %s" % where(self.line) if self.line else "")
                       if how or self.line else ".")


def _of_class(name: Optional[str]) -> str:
    return " (%s)" % name.replace("torch.nn.", "nn.") if name else ""


def registration_of(ctx: FileContext, cls: ClassInfo, name: str) -> Registration:
    """What ``self.<name>`` is in instances of ``cls`` (a Module class of ``ctx``'s file)."""
    chain = ctx.class_chain(cls)
    for info in chain:  # explicit registrations decide, whatever is assigned later
        if name in info.registered_parameters:
            return Registration(name, cls.name, Status.PARAMETER, _line(info.registered_parameters[name]),
                                registered_by=_register_how(info.registered_parameters[name]))
        if name in info.registered_buffers:
            node = info.registered_buffers[name]
            return Registration(name, cls.name, Status.BUFFER, _line(node), persistent=_persistent(node),
                                registered_by=_register_how(node))
        if name in info.registered:
            node = info.registered[name]
            value = _registered_module_value(ctx, node, info)
            status = _module_status(value.module_class)
            return Registration(name, cls.name, status, _line(node), module_class=value.module_class,
                                registered_by=_register_how(node))
    bindings = [b for b in ctx.classifier.class_attribute_bindings(cls, name) if b.value is not None]
    if not bindings:
        return Registration(name, cls.name, Status.UNKNOWN)
    values = [(b, ctx.classify(b.value, b.scope)) for b in bindings]
    overall = ctx.classifier.attribute_of(cls, name)
    first = _first(values, lambda v: v.kind is overall.kind) if overall.kind is not Kind.UNKNOWN else None
    if overall.kind is Kind.PARAMETER:
        return Registration(name, cls.name, Status.PARAMETER, _line(first[0].stmt) if first else None,
                            registered_by="assigning an nn.Parameter")
    if overall.kind is Kind.MODULE:
        status = _module_status(overall.module_class)
        return Registration(name, cls.name, status, _line(first[0].stmt) if first else None,
                            module_class=overall.module_class, registered_by="assigning a Module")
    buffer = _first(values, lambda v: v.kind is Kind.BUFFER)
    if buffer is not None:
        return Registration(name, cls.name, Status.BUFFER, _line(buffer[0].stmt),
                            persistent=_persistent(buffer[0].value), registered_by="assigning an nn.Buffer")
    if overall.kind is Kind.TENSOR or {v.kind for _, v in values} <= {Kind.TENSOR, Kind.MOVED_PARAMETER}:
        tensor = _first(values, lambda v: v.kind in (Kind.TENSOR, Kind.MOVED_PARAMETER))
        assert tensor is not None  # (an overall TENSOR is one every value agrees on)
        return Registration(name, cls.name, Status.PLAIN_TENSOR, _line(tensor[0].stmt))
    containers = _first(values, lambda v: v.kind in (Kind.MODULE_LIST, Kind.MODULE_DICT, Kind.PARAMETER_LIST,
                                                        Kind.PARAMETER_DICT))
    if containers is not None and all(v.kind in (containers[1].kind, Kind.OTHER) for _, v in values):
        return Registration(name, cls.name, Status.PLAIN_CONTAINER, _line(containers[0].stmt))
    if all(v.kind is Kind.OTHER for _, v in values):
        return Registration(name, cls.name, Status.PLAIN_VALUE, _line(values[0][0].stmt))
    return Registration(name, cls.name, Status.UNKNOWN)


def registration_at(ctx: FileContext, pos: Position) -> Optional[Tuple[Range, Registration]]:
    """The ``self.<name>`` under ``pos`` in a method of a Module class, and what it is."""
    scope = _method_scope_at(ctx, pos.line)
    if scope is None:
        return None
    for node in ast.walk(scope.node):
        if isinstance(node, ast.Attribute) and scope.is_self(node.value):
            rng = ctx.range(node)
            if rng.start <= pos <= rng.end:
                assert scope.cls is not None  # (a method's scope)
                return rng, registration_of(ctx, scope.cls, node.attr)
    return None


def registration_in_text(text: str, path: str, pos: Position,
                         *fallbacks: Position) -> Optional[Tuple[Range, Registration]]:
    """:func:`registration_at` for a text (names only: quick enough for a hover); at the first of
    ``pos`` and ``fallbacks`` that is on a ``self.<name>``, the text parsed once."""
    tree, _ = parse(text, path)
    if tree is None:
        return None
    ctx = FileContext(text, path, tree)
    return next(filter(None, (registration_at(ctx, place) for place in (pos,) + fallbacks)), None)


def init_registrations_in_text(text: str, path: str) -> List[Tuple[Position, Registration]]:
    """:func:`init_registrations` for a text (names only)."""
    tree, _ = parse(text, path)
    return init_registrations(FileContext(text, path, tree)) if tree is not None else []


def init_registrations(ctx: FileContext) -> List[Tuple[Position, Registration]]:
    """For inlay hints: the end of each ``self.<name> = ...`` in a Module's ``__init__`` (the
    first per name), with what that name is."""
    hints = []
    for info in ctx.module_classes:
        scope = info.method_scopes.get("__init__")
        if scope is None:
            continue
        seen = set()
        for binding in info.attr_assignments:
            if binding.scope is not scope or binding.name in seen or not isinstance(binding.stmt, (
                    ast.Assign, ast.AnnAssign)):
                continue
            seen.add(binding.name)
            target = _target_of(binding)
            if target is not None:
                hints.append((ctx.range(target).end, registration_of(ctx, info, binding.name)))
    return hints


# -- helpers ---------------------------------------------------------------------------------------

def _method_scope_at(ctx: FileContext, line: int) -> Optional[Scope]:
    """The innermost method of a Module class holding ``line`` (a nested function's ``self`` is its method's)."""
    best, best_line = None, 0
    for scope in ctx.index.scopes:
        node = scope.node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not node.lineno <= line <= last_line(node):
            continue
        if best is None or node.lineno >= best_line:
            best, best_line = scope, node.lineno
    while best is not None and not (best.cls is not None and best.self_name and best.cls.is_module):
        best = best.parent
    return best


def _target_of(binding: Binding) -> Optional[ast.Attribute]:
    stmt = binding.stmt
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [cast(ast.AnnAssign, stmt).target]
    for target in targets:
        if isinstance(target, ast.Attribute) and target.attr == binding.name and binding.scope.is_self(target.value):
            return target
    return None


def _first(values: Iterable[Tuple[Binding, Value]], predicate: Callable[[Value], bool]
           ) -> Optional[Tuple[Binding, Value]]:
    return next(((binding, value) for binding, value in values if predicate(value)), None)


def _line(node: Optional[ast.AST]) -> Optional[int]:
    return getattr(node, "lineno", None)


def _register_how(node: ast.AST) -> str:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr + "()"
    return "assigning into self._parameters / _buffers / _modules"


def _persistent(node: Optional[ast.AST]) -> Optional[bool]:
    """``persistent=False`` given (to register_buffer or nn.Buffer): False; otherwise True."""
    if not isinstance(node, ast.Call):
        return True
    flag = keyword(node, "persistent")
    if flag is None and len(node.args) >= 3 and isinstance(node.func, ast.Attribute):
        flag = node.args[2]  # register_buffer(name, tensor, persistent)
    if isinstance(flag, ast.Constant) and isinstance(flag.value, bool):
        return flag.value
    return True if flag is None else None


def _registered_module_value(ctx: FileContext, node: ast.AST, info: ClassInfo) -> Value:
    """The module given to add_module()/register_module(), classified in its method."""
    if isinstance(node, ast.Call) and len(node.args) >= 2:
        scope = next((s for s in info.method_scopes.values()
                      if first_line(s.node) <= node.lineno <= last_line(s.node)), None)
        return ctx.classify(node.args[1], scope)
    return Value(Kind.MODULE)


def _module_status(module_class: Optional[str]) -> Status:
    if module_class in MODULE_CONTAINERS:
        return Status.MODULE_CONTAINER
    if module_class in PARAMETER_CONTAINERS:
        return Status.PARAMETER_CONTAINER
    return Status.SUBMODULE
