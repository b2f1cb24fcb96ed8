"""TL202 stale-optimizer: a submodule or parameter re-bound after an optimizer was built from it."""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Iterator, List, Optional, Set, Tuple, cast

from ..analysis import torch_names as tn
from ..analysis.construction import block_of
from ..analysis.context import FileContext
from ..analysis.findings import Edit, Finding, Fix, Position, Range, Related, Severity
from ..analysis.scopes import Scope, block_chain, dotted_name, encloses
from ..analysis.source import last_line
from ..analysis.values import Kind
from .base import Rule
from .rebinding import Through, can_move_below, line_after, mentioned_between, rebinding, rebinding_through_call

_PARAMETER_SOURCES = ("parameters", "named_parameters")

@dataclass
class _Build:
    """`opt = optim.SGD(model.parameters(), ...)`: where, into what, from which modules."""

    stmt: ast.Assign
    position: int  # index in scope.statements
    target: str  # dotted text of the assignment target ("optimizer", "self.opt")
    roots: Set[str]  # "model", "model.fc", "self"
    direct: bool  # every parameter source is in the optimizer call itself (no helper variable)


class StaleOptimizer(Rule):
    code = "TL202"
    name = "stale-optimizer"
    summary = "submodule or parameter re-bound after the optimizer was built: the new weights are never updated"
    severity = Severity.WARNING

    def find(self, ctx: FileContext) -> Iterator[Finding]:
        for scope in ctx.index.scopes:
            statements = scope.statements
            reported = set()  # one finding per re-binding, even when two optimizers hold the parameters
            builds = [b for b in (_build(ctx, scope, i, s) for i, s in enumerate(statements)) if b]
            for build in builds:
                for position in range(build.position + 1, len(statements)):
                    stmt = statements[position]
                    if _assigns(stmt, build.target):
                        break  # a newer optimizer in the same variable: its own build is checked
                    if id(stmt) in reported or not encloses(ctx.index, build.stmt, stmt):
                        continue
                    rebound = rebinding(ctx, scope, stmt, build.roots)
                    through = None if rebound is not None else \
                        rebinding_through_call(ctx, scope, stmt, build.roots, build.target)
                    if rebound is None and through is None:
                        continue
                    if _refreshed(ctx, statements[position + 1:], build) or not _used_later(ctx, scope, build,
                                                                                            stmt, position):
                        continue
                    reported.add(id(stmt))
                    if through is not None:
                        yield _finding_through(ctx, build, through)
                    elif rebound is not None:
                        yield _finding(ctx, scope, build, stmt, *rebound)


# -- facts -------------------------------------------------------------------------------------

def _is_optimizer_call(ctx: FileContext, node: ast.expr) -> bool:
    if not isinstance(node, ast.Call):
        return False
    qualified = ctx.qualify(node.func)
    return qualified is not None and tn.is_optimizer_class(qualified)


def _build(ctx: FileContext, scope: Scope, position: int, stmt: ast.stmt) -> Optional[_Build]:
    if not (isinstance(stmt, ast.Assign) and _is_optimizer_call(ctx, stmt.value)):
        return None
    target = dotted_name(stmt.targets[0])
    if target is None:
        return None
    call = cast(ast.Call, stmt.value)  # (an optimizer's: _is_optimizer_call)
    arguments = list(call.args) + [kw.value for kw in call.keywords]
    direct = _parameter_roots(arguments)
    indirect = _roots_through_names(ctx, scope, arguments, stmt.lineno, depth=3)
    roots = direct | indirect
    if not roots:
        return None
    return _Build(stmt, position, target, roots, direct=not (indirect - direct))


def _parameter_roots(nodes: List[ast.expr]) -> Set[str]:
    """Receivers of every `<x>.parameters()` / `<x>.named_parameters()` in ``nodes``."""
    roots = set()
    for top in nodes:
        for node in ast.walk(top):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in _PARAMETER_SOURCES:
                root = dotted_name(node.func.value)
                if root is not None:
                    roots.add(root)
    return roots


def _roots_through_names(ctx: FileContext, scope: Scope, nodes: List[ast.expr], before_line: int,
                         depth: int) -> Set[str]:
    """`params = [p for p in model.parameters() if ...]` then `optim.SGD(params)`, and `params.append(p)` loops."""
    roots: Set[str] = set()
    if depth == 0:
        return roots
    names = {n.id for top in nodes for n in ast.walk(top) if isinstance(n, ast.Name)}
    for name in names:
        sources = []
        for binding in scope.locals.get(name, ()):
            if binding.stmt.lineno < before_line:
                sources += [n for n in (binding.value, binding.iter_of) if n is not None]
        sources += [arg for call in scope.appends.get(name, ()) if call.lineno < before_line for arg in call.args]
        roots |= _parameter_roots(sources)
        roots |= _roots_through_names(ctx, scope, sources, before_line, depth - 1)
    return roots


def _assigns(stmt: ast.stmt, target: str) -> bool:
    return isinstance(stmt, ast.Assign) and any(dotted_name(t) == target for t in stmt.targets)


def _chain(ctx: FileContext, stmt: ast.stmt) -> List[Tuple[int, str]]:
    return block_chain(ctx.index, stmt)


def _refreshed(ctx: FileContext, later_statements: List[ast.stmt], build: _Build) -> bool:
    """The optimizer is rebuilt, re-bound, or given the new parameters after the re-binding."""
    for stmt in later_statements:
        if isinstance(stmt, ast.Assign):
            if any(dotted_name(t) == build.target for t in stmt.targets):
                return True
            if _is_optimizer_call(ctx, stmt.value) and _parameter_roots([stmt.value]) & build.roots:
                return True
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "add_param_group" and dotted_name(node.func.value) == build.target:
                return True
    return False


def _used_later(ctx: FileContext, scope: Scope, build: _Build, stmt: ast.stmt, position: int) -> bool:
    """Whether the stale optimizer can still be used once the re-binding ran.

    An optimizer kept in an attribute outlives the scope. A local one counts when read after
    the re-binding, inside a loop that repeats the re-binding but not the build, or in a nested
    function.
    """
    if "." in build.target:
        return True
    name = build.target
    later = list(scope.statements[position + 1:])
    build_owners = {owner_id for owner_id, _ in _chain(ctx, build.stmt)}
    later += [owner for owner in _owners(ctx, stmt)
              if isinstance(owner, (ast.For, ast.AsyncFor, ast.While)) and id(owner) not in build_owners]
    nested = [s.node for s in ctx.scopes_within(scope)]
    return any(isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)
               for top in later + nested for node in ast.walk(top))


def _owners(ctx: FileContext, stmt: ast.stmt) -> List[ast.stmt]:
    owners = []
    entry = ctx.index.blocks.get(id(stmt))
    while entry is not None:
        owners.append(entry[0])
        entry = ctx.index.blocks.get(id(entry[0]))
    return owners


# -- the finding and its fixes -----------------------------------------------------------------

def _finding(ctx: FileContext, scope: Scope, build: _Build, stmt: ast.stmt, target: ast.expr, text: str, root: str,
             kind: Kind) -> Finding:
    new = "module's parameters" if kind is Kind.MODULE else "parameter"
    message = ("`%s` is replaced after the optimizer on line %d took the parameters of `%s`: "
               "it still holds the old ones and never updates the new %s"
               % (text, build.stmt.lineno, root, new))
    related = ctx.related(build.stmt, "`%s` is built here; it keeps the parameters `%s` had at this point"
                          % (build.target, root))
    # Something that already uses the optimizer (a scheduler) would keep the old one if it were
    # re-created; adding the new parameters to it keeps those links.
    used_between = mentioned_between(ctx, scope, build.target, last_line(build.stmt), stmt.lineno)
    # One fix builds the optimizer after the change (moving the line when nothing uses it in
    # between, else a copy of it); the other keeps the optimizer and gives it the new parameters.
    # Re-bindings in a row share one rebuild, after the last of them: their fixes make the same
    # edits, so applying all of them builds the optimizer once.
    last = _last_of_run(ctx, scope, build, stmt)
    rebuild = None
    if build.direct and not used_between and can_move_below(ctx, build.stmt, last):
        rebuild = _move_fix(ctx, build, stmt, text, last)
    elif build.direct:
        rebuild = _recreate_fix(ctx, build, last)
    add_group = _add_group_fix(ctx, build, stmt, text, kind)
    fixes = [add_group] + ([rebuild] if rebuild else []) if used_between or not build.direct \
        else [rebuild, add_group] if rebuild else [add_group]
    fixes = [ctx.fix(f.title, f.edits, f.is_safe, preferred=(i == 0)) for i, f in enumerate(fixes)]
    return ctx.finding(message, target, fixes, (related,))


def _finding_through(ctx: FileContext, build: _Build, through: Through) -> Finding:
    """A function called with the model re-binds its layer: reported on the call (no fix: what
    the function does is not this file's to move), the re-binding related where it is in this file."""
    new = "module's parameters" if through.kind is Kind.MODULE else "parameter"
    message = ("`%s(...)` replaces `%s` (%s) after the optimizer on line %d took the parameters of the model it is "
               "given: the optimizer still holds the old ones and never updates the new %s (no fix: build `%s` after "
               "the call)" % (ctx.text(through.call.func), through.text, through.place(ctx), build.stmt.lineno, new,
                              build.target))
    related: Tuple[Related, ...] = (ctx.related(through.inner, "`%s` is replaced here" % through.text),) \
        if through.path is None else ()
    related += (ctx.related(build.stmt, "`%s` is built here; it keeps the parameters the model had at this point"
                            % build.target),)
    return ctx.finding(message, through.call, (), related)


def _last_of_run(ctx: FileContext, scope: Scope, build: _Build, stmt: ast.stmt) -> ast.stmt:
    """The last re-binding stale for ``build`` among the statements after ``stmt`` in its block,
    before anything there uses or re-binds the optimizer (``stmt`` itself when there is none)."""
    block = block_of(ctx.index, scope, stmt)
    last = stmt
    for later in block[block.index(stmt) + 1:]:
        if _mentions(later, build.target):
            break
        if rebinding(ctx, scope, later, build.roots) is not None:
            last = later
    return last


def _mentions(stmt: ast.stmt, target: str) -> bool:
    return any(isinstance(node, (ast.Name, ast.Attribute)) and dotted_name(node) == target
               for node in ast.walk(stmt))


def _move_fix(ctx: FileContext, build: _Build, stmt: ast.stmt, text: str, below: ast.stmt) -> Fix:
    """Move the build below ``below`` (``stmt`` or the last re-binding of its run)."""
    newline = ctx.source.newline()
    first, last = build.stmt.lineno, last_line(build.stmt)
    lines = "".join(ctx.source.line(n) + newline for n in range(first, last + 1))
    delete = ctx.replace(Range(Position(first, 0), Position(last + 1, 0)), "")
    where, lead = line_after(ctx, below)
    insert = ctx.replace(Range(where, where), lead + lines)
    if below is stmt:
        title = "Build `%s` after `%s` is replaced (move line %d)" % (build.target, text, first)
    else:
        title = ("Build `%s` after `%s` and the replacements that follow it (move line %d below line %d)"
                 % (build.target, text, first, last_line(below)))
    return ctx.fix(title, [delete, insert], safe=False)


def _insert_after(ctx: FileContext, stmt: ast.stmt, text: str) -> Edit:
    """An edit that adds the (possibly multi-line) statement ``text`` right after ``stmt``."""
    if not ctx.stands_alone(stmt):
        end = ctx.range(stmt).end
        return ctx.replace(Range(end, end), "; " + text)
    newline = ctx.source.newline()
    where, lead = line_after(ctx, stmt)
    return ctx.replace(Range(where, where), lead + ctx.indent(stmt) + text + newline)


def _recreate_fix(ctx: FileContext, build: _Build, stmt: ast.stmt) -> Fix:
    old_indent, new_indent = ctx.indent(build.stmt), ctx.indent(stmt)
    lines = re.split(r"\r\n|\r|\n", ctx.text(build.stmt))  # as Python splits lines (not at form feeds)
    # Continuation lines keep their offset from the statement's indentation.
    lines[1:] = [new_indent + line[len(old_indent):] if line.startswith(old_indent) else line
                 for line in lines[1:]]
    copy = ctx.source.newline().join(lines)
    return ctx.fix("Re-create `%s` after the change" % build.target, [_insert_after(ctx, stmt, copy)], safe=False)


def _add_group_fix(ctx: FileContext, build: _Build, stmt: ast.stmt, text: str, kind: Kind) -> Fix:
    params = "%s.parameters()" % text if kind is Kind.MODULE else "[%s]" % text
    call = '%s.add_param_group({"params": %s})' % (build.target, params)
    return ctx.fix("Add the new parameters to `%s`" % build.target, [_insert_after(ctx, stmt, call)], safe=False)
