"""TL201 data-assignment: rebinding ``p.data = t`` swaps a tensor's storage behind autograd's back."""
from __future__ import annotations

import ast
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

from ..analysis import torch_names as tn
from ..analysis.context import FileContext
from ..analysis.findings import Finding, Range, Severity
from ..analysis.scopes import Scope
from ..analysis.values import Kind
from .cleanups import merge_no_grad_blocks
from .base import Rule

TENSOR_LIKE = (Kind.PARAMETER, Kind.TENSOR, Kind.MOVED_PARAMETER)
PARAMETER_NAMES = ("weight", "bias", "in_proj_weight", "in_proj_bias")


class DataAssignment(Rule):
    code = "TL201"
    name = "data-assignment"
    cleanups = (merge_no_grad_blocks,)
    summary = "`p.data = t` bypasses autograd and the optimizer; copy in place under torch.no_grad()"
    severity = Severity.WARNING
    grading = "warning when it ties two tensors' storage or follows an optimizer; hint otherwise"

    def find(self, ctx: FileContext) -> Iterator[Finding]:
        swaps = _Swaps(ctx)
        for target, value, stmt, scope in ctx.index.attribute_stores:
            if target.attr != "data":
                continue
            holder = target.value
            if not _is_tensor(ctx, holder, scope):
                continue
            grade, hazard = _grade(ctx, holder, value, stmt, scope)
            severity = ctx.graded(grade)
            if severity is not None:
                yield _finding(ctx, target, value, stmt, severity, hazard, swaps.restored(holder, stmt, scope))


# Methods and properties that return the same tensor, or a view of its storage.
_VIEWS = frozenset("""
data detach view view_as reshape reshape_as T mT t transpose permute squeeze unsqueeze expand expand_as
contiguous to type_as narrow flatten unflatten
""".split())
# Conversions of the tensor itself: `w.data = w.data.T` keeps using the same values on purpose.
_SELF_CONVERSIONS = tn.MOVE_METHODS | frozenset("T mT t transpose permute contiguous".split())


def _grade(ctx: FileContext, holder: ast.expr, value: ast.expr, stmt: ast.stmt, scope: Scope
           ) -> Tuple[Optional[Severity], Optional[str]]:
    """(severity or None for quiet, what makes it hazardous or None).

    Warning: the parameter starts sharing another tensor's storage (`a.data = b.data`, a caller's
    tensor) or it happens after an optimizer was built. Quiet: a conversion of the tensor itself
    (`p.data = p.data.half()`, `w.data = w.data.T`, `init_(w.data)`). Otherwise a hint: the other
    rebinds seen in real code (merging adapters, re-parameterising, loading) work as written."""
    if _converts_itself(ctx, holder, value):
        return None, None
    if _optimizer_before(ctx, scope, stmt) and not _same_layout(ctx, holder, value):
        return Severity.WARNING, ("an optimizer was built above: its state (momentum, Adam moments) no longer "
                                  "matches if the shape, device or dtype changes")
    alias = _aliased(ctx, holder, value, scope, depth=3)
    if alias is not None:
        return Severity.WARNING, alias
    return Severity.HINT, None


def _converts_itself(ctx: FileContext, holder: ast.expr, value: ast.expr) -> bool:
    """`p.data = p.data.half()` / `p.data = p.to(device)` / `w.data = w.data.T` /
    `w.data = init.xavier_uniform_(w.data)`: a deliberate change of the tensor itself (what
    Module._apply used to do); copying into the old storage would undo it."""
    node = value
    while True:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _SELF_CONVERSIONS:
            node = node.func.value
        elif isinstance(node, ast.Attribute) and node.attr in ("data", "T", "mT"):
            node = node.value
        elif isinstance(node, ast.Call) and node.args and _initialiser(ctx, node):
            node = node.args[0]
        else:
            break
    return node is not value and ast.dump(node) == ast.dump(holder)


# Calls whose result has the shape, dtype and device of their first argument.
_SAME_LAYOUT_FACTORIES = frozenset("torch." + n for n in """
zeros_like ones_like full_like empty_like rand_like randn_like clamp clip
""".split())
_SAME_LAYOUT_METHODS = frozenset(["clamp", "clip"])


def _same_layout(ctx: FileContext, holder: ast.expr, value: ast.expr) -> bool:
    """`p.data = torch.full_like(p.data, -2)` / `p.data = p.data.clamp(0, 1)`: new values of the same
    shape, dtype and device, so an optimizer's state for `p` still fits it."""
    if not isinstance(value, ast.Call) or any(k.arg in ("dtype", "device", "layout") for k in value.keywords):
        return False
    func = value.func
    if isinstance(func, ast.Attribute) and func.attr in _SAME_LAYOUT_METHODS and ctx.qualify(func) is None:
        source: Optional[ast.expr] = func.value
    elif ctx.qualify(func) in _SAME_LAYOUT_FACTORIES and value.args:
        source = value.args[0]
    else:
        return False
    while isinstance(source, ast.Attribute) and source.attr == "data":
        source = source.value
    return source is not None and ast.dump(source) == ast.dump(holder)


def _initialiser(ctx: FileContext, call: ast.Call) -> bool:
    """`nn.init.xavier_uniform_(w)`, `trunc_normal_(w)`: fills its argument in place and returns it."""
    qualified = ctx.qualify(call.func) or ""
    name = qualified or (call.func.id if isinstance(call.func, ast.Name) else "")
    return qualified.startswith("torch.nn.init.") or name.endswith("_") and not name.endswith("__")


def _optimizer_before(ctx: FileContext, scope: Scope, stmt: ast.stmt) -> bool:
    """An optimizer built earlier in the same function (or script)."""
    for earlier in scope.statements:
        if earlier.lineno >= stmt.lineno:
            break
        value = getattr(earlier, "value", None)
        if isinstance(earlier, ast.Assign) and isinstance(value, ast.Call):
            qualified = ctx.qualify(value.func)
            if qualified is not None and tn.is_optimizer_class(qualified):
                return True
    return False


def _aliased(ctx: FileContext, holder: ast.expr, value: ast.expr, scope: Scope, depth: int) -> Optional[str]:
    """What the value shares its storage with, when it is another tensor (not a copy), else None."""
    node = value
    while True:  # views and `.data` keep the storage
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _VIEWS:
            node = node.func.value
        elif isinstance(node, ast.Attribute) and node.attr in _VIEWS:
            node = node.value
        else:
            break
    if isinstance(node, ast.Name):
        bindings = scope.locals.get(node.id, ()) if scope is not None else ()
        if len(bindings) != 1:
            return None
        binding = bindings[0]
        if binding.value is None and binding.iter_of is None and isinstance(binding.stmt, (ast.FunctionDef,
                                                                                           ast.AsyncFunctionDef)):
            return ("it now shares the storage of the caller's tensor `%s`: a later in-place change of either "
                    "changes the other" % node.id)
        if binding.value is not None and depth > 0 and binding.stmt.lineno < value.lineno:
            return _aliased(ctx, holder, binding.value, scope, depth - 1)
        return None
    if isinstance(node, ast.Attribute) and ast.dump(node) != ast.dump(holder) and not _mentions(node, holder):
        named = node.attr in PARAMETER_NAMES or node.attr.startswith(("weight", "bias"))
        if _deleted_later(scope, node, value.lineno):
            return None  # re-parameterisation: the old layer goes away, its storage is handed over
        if named or ctx.classify(node, scope).kind in TENSOR_LIKE or value is not node:
            return ("it now shares the storage of `%s`: two tensors silently tied, an in-place change of "
                    "either changes the other" % ctx.text(node))
    return None


def _deleted_later(scope: Scope, source: ast.Attribute, after: int) -> bool:
    """`self.pos_enc.bias` handed over, then `del self.pos_enc` / `self.__delattr__("pos_enc")` below."""
    owner = source.value
    while isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Attribute):
        owner = owner.value
    if scope is None or not (isinstance(owner, ast.Attribute) and scope.is_self(owner.value)):
        return False
    name = owner.attr
    for node in ast.walk(scope.node):
        if getattr(node, "lineno", 0) <= after:
            continue
        if isinstance(node, ast.Delete) and any(isinstance(t, ast.Attribute) and t.attr == name
                                                 and scope.is_self(t.value) for t in node.targets):
            return True
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[-1], ast.Constant) \
                and node.args[-1].value == name and (
                    (isinstance(node.func, ast.Attribute) and node.func.attr == "__delattr__")
                    or (isinstance(node.func, ast.Name) and node.func.id == "delattr")):
            return True
    return False


def _mentions(node: ast.expr, holder: ast.expr) -> bool:
    target = ast.dump(holder)
    return any(ast.dump(n) == target for n in ast.walk(node))


class _Swaps:
    """Temporary swaps of a tensor's storage: `old = p.data; p.data = t; ...; p.data = old` (also through
    a dict, `backup[name] = p.data` ... `p.data = backup[name]`, as sharpness-aware minimisation and
    adversarial weight perturbation do). While the swapped-in tensor is in use, autograd may save it
    for backward; a copy_ into the parameter (or back out of it) would change a saved tensor in place.

    Each function's `.data` stores and the values its names and dicts are filled from are read once
    (a function of N statements stays linear)."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self._by_scope: Dict[int, Dict[str, List[Tuple[int, ast.stmt]]]] = {}  # id(scope) -> _restores'
        # id(scope) -> its `.data = ...` stores
        self._stores_by_scope: Optional[Dict[int, List[Tuple[ast.Attribute, ast.expr, ast.stmt]]]] = None
        # (id(scope), name or "[dict]") -> holder dump -> first line it is saved
        self._first_filled: Dict[Tuple[int, str], Dict[str, int]] = {}

    def restored(self, holder: ast.expr, stmt: ast.stmt, scope: Scope) -> Optional[ast.stmt]:
        """The statement that puts ``holder``'s old value back, when ``stmt`` is part of such a swap (it
        runs between the saving and the putting back, or is the putting back)."""
        if scope is None:
            return None
        for saved, restore in self._restores(scope).get(ast.dump(holder), ()):
            if saved < stmt.lineno <= restore.lineno:
                return restore
        return None

    def _restores(self, scope: Scope) -> Dict[str, List[Tuple[int, ast.stmt]]]:
        """holder -> [(line of the saving, the statement putting it back)] in this function."""
        found = self._by_scope.get(id(scope))
        if found is None:
            if self._stores_by_scope is None:
                stores_by_scope: Dict[int, List[Tuple[ast.Attribute, ast.expr, ast.stmt]]] = {}
                for target, value, stmt, where in self.ctx.index.attribute_stores:
                    if target.attr == "data":
                        stores_by_scope.setdefault(id(where), []).append((target, value, stmt))
                self._stores_by_scope = stores_by_scope
            own = self._stores_by_scope.get(id(scope), [])
            found = self._by_scope[id(scope)] = {}
            stores: Dict[str, List[int]] = {}  # holder -> the lines of its `.data = ...` stores in this function
            for target, value, stmt in own:
                stores.setdefault(ast.dump(target.value), []).append(stmt.lineno)
            for target, value, stmt in own:
                holder = ast.dump(target.value)
                saved = self._saved_from(value, holder, scope, stmt)
                # A swap sets another value between the saving and the putting back; a write-back of
                # the same tensor changed in place (`w = p.data; w.mul_(s); p.data = w`) is none.
                if saved is not None and any(saved < line < stmt.lineno for line in stores[holder]):
                    found.setdefault(holder, []).append((saved, stmt))
        return found

    def _saved_from(self, value: ast.expr, holder: str, scope: Scope, stmt: ast.stmt) -> Optional[int]:
        """The line where an earlier statement of the function filled ``value``, a name (or an item of a
        dict), from ``holder`` (a dump) itself: `old = p.data`, `backup[name] = p.data.clone()`; else None."""
        if isinstance(value, ast.Name):
            key = (id(scope), value.id)
            if key not in self._first_filled:
                self._first_filled[key] = _first_lines(
                    (b.value, b.stmt.lineno) for b in scope.locals.get(value.id, ()) if b.value is not None)
        elif isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
            key = (id(scope), "[%s]" % value.value.id)
            if key not in self._first_filled:
                store = value.value.id
                self._first_filled[key] = _first_lines(
                    (earlier.value, earlier.lineno) for earlier in scope.statements
                    if isinstance(earlier, ast.Assign) and any(
                        isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == store
                        for t in earlier.targets))
        else:
            return None
        line = self._first_filled[key].get(holder)
        return line if line is not None and line < stmt.lineno else None


def _first_lines(filled: Iterable[Tuple[ast.expr, int]]) -> Dict[str, int]:
    """For (value, line) pairs: each expression the values mention (as a dump) -> the first line."""
    first: Dict[str, int] = {}
    for value, line in filled:
        for node in ast.walk(value):
            if isinstance(node, ast.expr):
                dump = ast.dump(node)
                if dump not in first or line < first[dump]:
                    first[dump] = line
    return first


def _is_tensor(ctx: FileContext, holder: ast.expr, scope: Scope) -> bool:
    kind = ctx.classify(holder, scope).kind
    if kind in TENSOR_LIKE:
        return True
    if kind is not Kind.UNKNOWN or not isinstance(holder, ast.Attribute):
        return False
    # `model.fc.weight.data = t`: the classifier cannot follow every model, the name can.
    name = holder.attr
    if not (name in PARAMETER_NAMES or name.startswith(("weight_", "bias_"))):
        return False
    return ctx.classify(holder.value, scope).kind in (Kind.UNKNOWN, Kind.MODULE)


def _finding(ctx: FileContext, target: ast.Attribute, value: ast.expr, stmt: ast.stmt, severity: Severity,
             hazard: Optional[str], restore: Optional[ast.stmt] = None) -> Finding:
    holder = ctx.text(target.value)
    if restore is not None:
        if restore is stmt:
            what = "puts the tensor's old storage back after a temporary swap"
        else:
            what = "swaps the tensor's storage for a while (its old value is put back on line %d)" % restore.lineno
        message = ("`%s.data = ...` %s, so no fix: `copy_` instead would write in place into a tensor autograd "
                   "may have saved for backward (\"modified by an inplace operation\"); to run the module with "
                   "other weights, call `torch.func.functional_call(module, {name: tensor}, args)`, which leaves "
                   "the parameters as they are" % (holder, what))
        if hazard:
            message += "; besides, %s" % hazard
        return ctx.finding(message, stmt, severity=severity)
    if hazard:
        message = "`%s.data = ...` rebinds the tensor's storage behind autograd: %s" % (holder, hazard)
    else:
        message = ("`%s.data = ...` rebinds the tensor's storage behind autograd (no version tracking, no "
                   "shape or device check); it works here, but `copy_` under torch.no_grad() says what it does"
                   % holder)
    keeps = "(keeps its shape, dtype and device)"
    if hazard and "shares the storage" in hazard:
        keeps = "(keeps its shape, dtype and device; the two tensors are no longer tied)"
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and ctx.stands_alone(stmt):
        block, import_edit = ctx.no_grad_block(stmt, "%s.copy_(%s)" % (holder, ctx.text(value)))
        fix = ctx.fix("Copy in place: `with %s(): %s.copy_(...)` %s" % (ctx.spell("torch.no_grad")[0], holder, keeps),
                      [ctx.replace(stmt, block), import_edit], safe=False, preferred=True)
    elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        # `if cond: p.data = t` on one line: a block cannot go there, an expression can.
        value_range = ctx.range(value)
        fix = ctx.fix("Copy in place through `.data`: `%s.data.copy_(...)` %s" % (holder, keeps),
                      [ctx.replace(Range(ctx.range(stmt).start, value_range.start), "%s.data.copy_(" % holder),
                       ctx.replace(Range(value_range.end, value_range.end), ")")],
                      safe=False, preferred=True)
    else:
        return ctx.finding(message, stmt, severity=severity)
    return ctx.finding(message, stmt, (fix,), severity=severity)
