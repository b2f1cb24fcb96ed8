"""TL109 buffer-registered-late: a saved buffer first registered in forward (or registered as
None in __init__ and filled there): a new instance's state_dict() lacks it, so loading a
checkpoint saved after training raises "Unexpected key(s) in state_dict"."""
from __future__ import annotations

import ast
from typing import Dict, Iterator, List, Optional, Set, Tuple

from ..analysis.context import FileContext
from ..analysis.findings import Finding, Fix, Range, Severity
from ..analysis.forward import external_bases, reach
from ..analysis.scopes import ClassInfo, Scope
from ..analysis.values import Kind
from .base import Rule

# Methods by which a class loads its state its own way: it may register what it finds.
_OWN_LOADING = frozenset(["_load_from_state_dict", "load_state_dict", "_register_load_state_dict_pre_hook",
                          "register_load_state_dict_pre_hook", "register_load_state_dict_post_hook",
                          "initialize_parameters"])  # (nn.modules.lazy.LazyModuleMixin's)

# Methods torch runs when the module is installed, before it can be saved: a parametrization's
# right_inverse() (register_parametrization calls it on the original tensor). What they register is
# in every instance built that way.
_RUN_AT_INSTALL = frozenset(["right_inverse"])

# A buffer registration construction makes: whether it holds None (a placeholder) and where it is.
Registration = Tuple[bool, ast.Call]


class BufferRegisteredLate(Rule):
    code = "TL109"
    name = "buffer-registered-late"
    summary = ("`register_buffer(\"x\", t)` first in forward, or `register_buffer(\"x\", None)` filled there: a new "
               "instance's state_dict() lacks it, so load_state_dict() of a trained checkpoint raises")
    severity = Severity.WARNING
    reads_script_flow = False

    def find(self, ctx: FileContext) -> Iterator[Finding]:
        for cls in ctx.module_classes:
            if _loads_its_own_way(ctx, cls):
                continue
            reached = ctx.forward_reach(cls)
            if reached is None:
                continue
            built = _built_at_construction(ctx, cls)
            if built is None:
                continue  # construction runs outside this file: what it registers is not known
            registrations, assigned = built
            constructing = {id(scope) for scope in _construction_scopes(ctx, cls)}
            forward_runs = {id(scope): method for method, scope in reached.methods.items()}
            seen: Set[int] = set()
            for info in ctx.class_chain(cls):
                for method, scope in info.method_scopes.items():
                    if id(scope) in constructing or id(scope) in seen or scope.self_name is None \
                            or method in _RUN_AT_INSTALL:
                        continue  # (a helper __init__ runs too: what it registers is there from the start)
                    seen.add(id(scope))
                    in_forward = id(scope) in forward_runs
                    for stmt in scope.statements:
                        late = _late_buffer(ctx, scope, stmt, registrations, assigned)
                        # A buffer first registered in another method may be a two-step
                        # construction (`build()`, called before loading too): said only in
                        # forward's reach. One registered as None at construction is a placeholder
                        # whatever method fills it.
                        if late is not None and (in_forward or late[0] in registrations):
                            yield _finding(ctx, scope, forward_runs.get(id(scope)), method, *late, registrations)


def _loads_its_own_way(ctx: FileContext, cls: ClassInfo) -> bool:
    """The class (or a base in the file) overrides loading or hooks into it, or is a lazy module."""
    for info in ctx.class_chain(cls):
        if _OWN_LOADING & set(info.method_scopes):
            return True
        for base in info.node.bases:
            if "Lazy" in ctx.text(base):
                return True
        for node in ctx.nodes.under(info.node, ast.Attribute):
            if isinstance(node, ast.Attribute) and node.attr in _OWN_LOADING:
                return True
    return False


def _construction_scopes(ctx: FileContext, cls: ClassInfo) -> List[Scope]:
    found = reach(ctx, cls, entry="__init__")
    return list(found.methods.values()) if found is not None else []


def _built_at_construction(ctx: FileContext, cls: ClassInfo) -> Optional[Tuple[Dict[str, Registration], Set[str]]]:
    """(the buffers construction registers by name, the names it assigns otherwise), or None when
    construction is not in this file (no __init__ of the class or its bases here, and a base outside)."""
    scopes = _construction_scopes(ctx, cls)
    if not scopes and external_bases(ctx, cls):
        return None
    registrations: Dict[str, Registration] = {}
    assigned: Set[str] = set()
    for scope in scopes:
        for stmt in scope.statements:
            call = _register_buffer(scope, stmt)
            if call is not None:
                name = call.args[0].value  # type: ignore[attr-defined]
                holds_none = len(call.args) > 1 and isinstance(call.args[1], ast.Constant) \
                    and call.args[1].value is None
                if _persistent(call) is not True:
                    assigned.add(name)  # not saved (or not known): nothing to load
                elif name not in registrations or not holds_none:
                    registrations[name] = (holds_none, call)
                continue
            for target in _self_targets(scope, stmt):
                assigned.add(target)
    return registrations, assigned


def _late_buffer(ctx: FileContext, scope: Scope, stmt: ast.stmt, registrations: Dict[str, Registration],
                 assigned: Set[str]) -> Optional[Tuple[str, ast.expr, Optional[ast.Call]]]:
    """(name, the node to report, the registration call to make not saved) for a saved buffer
    this statement of a method forward runs gives its first tensor."""
    call = _register_buffer(scope, stmt)
    if call is not None:
        name = call.args[0].value  # type: ignore[attr-defined]
        if name in assigned or _persistent(call) is not True or len(call.args) < 2:
            return None
        if isinstance(call.args[1], ast.Constant) and call.args[1].value is None:
            return None
        registered = registrations.get(name)
        if registered is None or registered[0]:
            return name, call, call if registered is None else None
        return None
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
        return None
    target = stmt.targets[0]
    if not (isinstance(target, ast.Attribute) and scope.is_self(target.value)):
        return None
    name = target.attr
    registered = registrations.get(name)
    if isinstance(stmt.value, ast.Constant) and stmt.value.value is None:
        return None
    if registered is not None and registered[0] and name not in assigned:
        return name, target, None  # registered as None at construction, given its tensor here
    if registered is None and name not in assigned and isinstance(stmt.value, ast.Call) \
            and _persistent(stmt.value) is True and ctx.classify(stmt.value, scope).kind is Kind.BUFFER:
        return name, target, None  # `self.x = nn.Buffer(t)`: registered here, first
    return None


def _register_buffer(scope: Scope, stmt: ast.stmt) -> Optional[ast.Call]:
    """`self.register_buffer("name", ...)` as a statement of its own, with the name spelled out."""
    if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
        return None
    call = stmt.value
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "register_buffer" and scope.is_self(func.value)):
        return None
    if not call.args or not (isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)):
        return None
    return call


def _persistent(call: ast.Call) -> Optional[bool]:
    """Whether the buffer is saved in state_dict() (None: the argument is not a constant)."""
    value: Optional[ast.expr] = call.args[2] if len(call.args) > 2 else None
    for keyword in call.keywords:
        if keyword.arg == "persistent":
            value = keyword.value
        elif keyword.arg is None:
            return None  # **options
    if value is None:
        return True
    if isinstance(value, ast.Constant) and isinstance(value.value, bool):
        return value.value
    return None


def _self_targets(scope: Scope, stmt: ast.stmt) -> Iterator[str]:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else \
        [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else []
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, ast.Attribute) and scope.is_self(node.value):
                yield node.attr


def _finding(ctx: FileContext, scope: Scope, reached_as: Optional[str], method: str, name: str, node: ast.expr,
             call: Optional[ast.Call], registrations: Dict[str, Registration]) -> Finding:
    """``reached_as``: the method's name in forward's reach (None: forward does not run it)."""
    if reached_as == "forward":
        where, after = "forward", "a forward"
    elif reached_as is not None:
        where, after = "`%s()` (which forward calls)" % method, "a forward"
    else:
        where, after = "`%s()`" % method, "`%s()` ran" % method
    self_name = scope.self_name
    if name in registrations:
        what = ("`%s.%s` is registered as a buffer holding None at construction and gets its tensor in %s: "
                "state_dict() leaves None buffers out" % (self_name, name, where))
        advice = "register a tensor of its shape in __init__"
    else:
        what = "`%s.%s` is first registered as a buffer in %s" % (self_name, name, where)
        advice = "register it in __init__ (a tensor of its shape)"
    message = ("%s, so a new instance's state_dict() has no `%s`, and load_state_dict() of a checkpoint saved "
               "after %s raises \"Unexpected key(s) in state_dict: '...%s'\"; %s, or pass "
               "persistent=False if it need not be saved" % (what, name, after, name, advice))
    placeholder = registrations.get(name)
    target = call if call is not None else (placeholder[1] if placeholder is not None else None)
    fixes = (_not_saved(ctx, target),) if target is not None else ()
    return ctx.finding(message, node, fixes)


def _not_saved(ctx: FileContext, call: ast.Call) -> Fix:
    """`persistent=False` after the registration's last argument (unsafe: the buffer is then not in
    checkpoints at all, which is right for a cache and wrong for a running statistic)."""
    last = (list(call.args) + [k.value for k in call.keywords])[-1]
    end = ctx.range(last).end
    return ctx.fix("Pass persistent=False (not saved in state_dict)",
                   [ctx.replace(Range(end, end), ", persistent=False")], safe=False, preferred=True)
