"""TL107 attribute-then-register: `self.pe = pe` then `self.register_buffer("pe", pe)` raises KeyError."""
from __future__ import annotations

import ast
from typing import Dict, Iterator, List, Optional, Sequence, Set, Union, cast

from ..analysis.context import FileContext
from ..analysis.findings import Finding, Fix, Position, Range, Severity
from ..analysis.scopes import Scope, encloses
from ..analysis.source import last_line
from ..analysis.values import Kind
from .base import Rule

# Registration methods and the container that lets an existing name through.
_REGISTER = {"register_buffer": "_buffers", "register_parameter": "_parameters", "add_module": "_modules",
             "register_module": "_modules"}
# What an earlier `self.x = value` makes of x, by the kind of value.
_LANDS_IN = {Kind.PARAMETER: "_parameters", Kind.MODULE: "_modules", Kind.BUFFER: "_buffers"}


class AttributeThenRegister(Rule):
    code = "TL107"
    name = "attribute-then-register"
    summary = "`self.x = t` then `register_buffer(\"x\", ...)`: KeyError \"attribute 'x' already exists\""
    severity = Severity.ERROR

    def find(self, ctx: FileContext) -> Iterator[Finding]:
        for cls in ctx.module_classes:
            for scope in cls.method_scopes.values():
                if scope.self_name is None:
                    continue
                touching = None  # name -> the method's statements that touch self.<name>, built once
                for stmt in scope.statements:
                    call = _register_call(scope, stmt)
                    if call is None:
                        continue
                    name = _registered_name(call)
                    if touching is None:
                        touching = _statements_by_name(scope)
                    earlier = _plain_assignment_before(ctx, scope, touching.get(name, ()), stmt, name,
                                                       _REGISTER[cast(ast.Attribute, call.func).attr])
                    if earlier is not None:
                        yield _finding(ctx, scope, stmt, call, earlier, name)


def _register_call(scope: Scope, stmt: ast.stmt) -> Optional[ast.Call]:
    """`self.register_buffer("name", ...)` as a statement of its own."""
    if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
        return None
    call = stmt.value
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr in _REGISTER and scope.is_self(func.value)):
        return None
    if not call.args or not (isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)):
        return None
    return call


def _statements_by_name(scope: Scope) -> Dict[str, List[ast.stmt]]:
    """The method's statements, in order, under each name whose ``self.<name>`` they assign,
    delete or register: a registration then reads only its name's statements (linear in a
    method that registers N names)."""
    by_name: Dict[str, List[ast.stmt]] = {}
    for stmt in scope.statements:
        names: Set[str] = set()
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names.update(t.attr for t in targets if isinstance(t, ast.Attribute) and scope.is_self(t.value))
        elif isinstance(stmt, ast.Delete):
            names.update(t.attr for t in stmt.targets if isinstance(t, ast.Attribute) and scope.is_self(t.value))
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            if isinstance(call.func, ast.Name) and call.func.id == "delattr" and len(call.args) == 2 \
                    and isinstance(call.args[1], ast.Constant) and isinstance(call.args[1].value, str):
                names.add(call.args[1].value)
            registered = _register_call(scope, stmt)
            if registered is not None:
                names.add(_registered_name(registered))
        for name in names:
            by_name.setdefault(name, []).append(stmt)
    return by_name


def _plain_assignment_before(ctx: FileContext, scope: Scope, touching: Sequence[ast.stmt], stmt: ast.stmt, name: str,
                             container: str) -> Optional[Union[ast.Assign, ast.AnnAssign]]:
    """The `self.<name> = value` that runs before ``stmt`` in the same method and leaves ``name``
    somewhere the registration refuses (a plain attribute, or another kind of member).
    ``touching``: the method's statements that touch ``self.<name>`` (_statements_by_name)."""
    last, registered = None, False
    for earlier in touching:
        if earlier.lineno >= stmt.lineno:
            break
        if _deletes(scope, earlier, name):
            last, registered = None, False
            continue
        if _registers(scope, earlier, name):
            last, registered = None, True  # a later assignment updates the registered member
            continue
        if not registered and isinstance(earlier, (ast.Assign, ast.AnnAssign)) and encloses(ctx.index, earlier, stmt):
            targets = earlier.targets if isinstance(earlier, ast.Assign) else [earlier.target]
            if any(isinstance(t, ast.Attribute) and t.attr == name and scope.is_self(t.value) for t in targets):
                if earlier.value is None:
                    continue
                kind = ctx.classify(earlier.value, scope).kind
                last = None if _LANDS_IN.get(kind) == container else earlier
    return last


def _registered_name(call: ast.Call) -> str:
    """The name a call that _register_call found registers (its first argument, a string)."""
    return cast(str, cast(ast.Constant, call.args[0]).value)


def _deletes(scope: Scope, stmt: ast.stmt, name: str) -> bool:
    if isinstance(stmt, ast.Delete):
        return any(isinstance(t, ast.Attribute) and t.attr == name and scope.is_self(t.value) for t in stmt.targets)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        return (isinstance(call.func, ast.Name) and call.func.id == "delattr" and len(call.args) == 2
                and isinstance(call.args[1], ast.Constant) and call.args[1].value == name)
    return False


def _registers(scope: Scope, stmt: ast.stmt, name: str) -> bool:
    call = _register_call(scope, stmt)
    return call is not None and _registered_name(call) == name


def _reads(scope: Scope, node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == name and scope.is_self(n.value)
               and isinstance(n.ctx, ast.Load) for n in ast.walk(node))


def _local_rewrite(ctx: FileContext, scope: Scope, earlier: ast.Assign, stmt: ast.stmt, name: str) -> Optional[Fix]:
    """`self.x = v` ... `register_buffer("x", self.x.data)` -> `x = v` ... `register_buffer("x", x.data)`."""
    local = name if name not in scope.locals else name + "_value"
    if local in scope.locals or not local.isidentifier():
        return None
    edits = [ctx.replace(earlier.targets[0], local)]
    for node in ast.walk(scope.node):
        if isinstance(node, ast.Attribute) and node.attr == name and scope.is_self(node.value) \
                and isinstance(node.ctx, ast.Load) and last_line(earlier) < node.lineno <= last_line(stmt):
            edits.append(ctx.replace(node, local))
    return ctx.fix("Keep the value in a local variable `%s` until it is registered" % local, edits, safe=True)


def _finding(ctx: FileContext, scope: Scope, stmt: ast.stmt, call: ast.Call, earlier: Union[ast.Assign, ast.AnnAssign],
             name: str) -> Finding:
    method = cast(ast.Attribute, call.func).attr
    message = ("`%s(\"%s\", ...)` raises KeyError \"attribute '%s' already exists\": line %d already made "
               "`%s.%s` a plain attribute" % (method, name, name, earlier.lineno, scope.self_name, name))
    fixes = []
    between = [s for s in scope.statements if earlier.lineno < s.lineno < stmt.lineno]
    read_by_call = _reads(scope, call, name)
    read_between = any(_reads(scope, s, name) for s in between)
    single = isinstance(earlier, ast.Assign) and len(earlier.targets) == 1 and ctx.stands_alone(earlier)
    if single and not read_by_call and not read_between:
        first, last = earlier.lineno, last_line(earlier)
        fixes.append(ctx.fix("Remove the plain assignment on line %d (the registration sets the attribute)" % first,
                             [ctx.replace(Range(Position(first, 0), Position(last + 1, 0)), "")], safe=True))
    elif single:
        local = _local_rewrite(ctx, scope, cast(ast.Assign, earlier), stmt, name)  # (single: an ast.Assign)
        if local is not None:
            fixes.append(local)
    if ctx.stands_alone(stmt) and not read_by_call:
        at = Position(stmt.lineno, 0)
        newline = ctx.source.newline()
        fixes.append(ctx.fix("Delete the plain attribute first: `del %s.%s`" % (scope.self_name, name),
                             [ctx.replace(Range(at, at), "%sdel %s.%s%s" % (ctx.indent(stmt), scope.self_name, name,
                                                                           newline))], safe=True))
    fixes = [ctx.fix(f.title, f.edits, f.is_safe, preferred=(i == 0)) for i, f in enumerate(fixes)]
    related = (ctx.related(earlier, "`%s.%s` becomes a plain attribute here" % (scope.self_name, name)),)
    return ctx.finding(message, call, fixes, related)
