"""Plant the registration bugs users make into real model files, for `bench_verify.py --fresh-set`.

A generic AST pass, the same for any corpus: in each class's ``__init__`` it finds an
unconditional statement that registers something (``self.x = nn.Parameter(t)``,
``self.register_buffer("x", t)``, ``self.x = nn.ModuleList(...)`` / ``nn.ModuleDict(...)`` /
``nn.Sequential(...)``) and rewrites it into the bug a user writes instead (a plain tensor, a plain
attribute, a plain list or dict). Two kinds touch ``forward``: a parameter re-wrapped in a new
``nn.Parameter`` on every call (TL906) and the only use of a parameter cut off by ``.detach()``
(TL904). One twin of a file carries one kind; each class of the twin that has a site of that kind
gets one plant (its first site). Every rewrite keeps the file's line numbers (a statement that
shrinks is padded with newlines inside parentheses), so the findings on a twin line up with its
clean original, and each plant knows its line: the span of the statement it rewrote.

    python benchmarks/plant_bugs.py FILE.py [KIND]   # print the plants (and with KIND, the twin)

Nothing here imports torch; nothing measures: it makes the benchmark's inputs.
"""
from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

# kind -> the verify codes that confirm it (reported at warning or error level on the plant's line)
KINDS: Dict[str, Tuple[str, ...]] = {
    "parameter-as-tensor": ("TL901", "TL902"),  # nn.Parameter(t) -> t
    "parameter-as-trainable-tensor": ("TL901", "TL903"),  # nn.Parameter(t) -> t.requires_grad_()
    "buffer-as-attribute": ("TL901", "TL902", "TL907"),  # register_buffer("n", t) -> self.n = t
    "modulelist-as-list": ("TL901",),  # nn.ModuleList(xs) -> list(xs)
    "moduledict-as-dict": ("TL901",),  # nn.ModuleDict(xs) -> dict(xs)
    "sequential-as-list": ("TL901",),  # nn.Sequential(*xs) -> list(xs)
    "parameter-rewrapped-in-forward": ("TL906",),  # forward: self.p = nn.Parameter(self.p.detach())
    "parameter-detached-in-forward": ("TL904",),  # the one use of self.p in forward: self.p.detach()
}


@dataclass(frozen=True)
class Plant:
    kind: str
    class_name: str
    attribute: str
    line: int  # first line of the statement rewritten (or, in forward, of the statement it prefixes)
    end_line: int  # its last line: a finding anywhere in [line, end_line] is on it

    def codes(self) -> Tuple[str, ...]:
        return KINDS[self.kind]


def _name(func: ast.expr) -> Optional[str]:
    """`nn.Parameter` / `torch.nn.Parameter` / `Parameter` -> "Parameter"."""
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _self_name(function: ast.FunctionDef) -> Optional[str]:
    args = function.args.posonlyargs + function.args.args
    return args[0].arg if args else None


def _method(cls: ast.ClassDef, name: str) -> Optional[ast.FunctionDef]:
    return next((node for node in cls.body if isinstance(node, ast.FunctionDef) and node.name == name), None)


def _unconditional(body: Sequence[ast.stmt]) -> List[ast.stmt]:
    """The statements that run whenever the body does (those of `with` blocks too)."""
    found: List[ast.stmt] = []
    for statement in body:
        found.append(statement)
        if isinstance(statement, (ast.With, ast.AsyncWith)):
            found.extend(_unconditional(statement.body))
    return found


def _self_assignment(statement: ast.stmt, self_name: str) -> Optional[Tuple[str, ast.Call]]:
    """`self.<attr> = <call>(...)` -> (attr, call)."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target, value = statement.targets[0], statement.value
    elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
        target, value = statement.target, statement.value
    else:
        return None
    if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == self_name
            and isinstance(value, ast.Call)):
        return target.attr, value
    return None


class Source:
    """A file's text with edits by (line, column) spans that keep its line count."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.edits: List[Tuple[int, int, int, int, str]] = []

    def segment(self, node: ast.AST) -> str:
        segment = ast.get_source_segment(self.text, node)
        assert segment is not None
        return segment

    def replace(self, node: ast.AST, new: str, prefix: str = "") -> None:
        """Put ``prefix`` and ``new`` where ``node`` was; a ``new`` that spans lines, or shrinks the
        statement, goes in parentheses, padded with newlines to the node's line count."""
        lines = node.end_lineno - node.lineno + 1  # type: ignore[attr-defined]
        missing = lines - (new.count("\n") + 1)
        if missing > 0 or "\n" in new:
            new = "(%s%s)" % (new, "\n" * max(missing, 0))
        new = prefix + new
        self.edits.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, new))  # type: ignore[attr-defined]

    def insert(self, line: int, column: int, new: str) -> None:
        self.edits.append((line, column, line, column, new))

    def result(self) -> str:
        offsets = [0]
        for line in self.lines:
            offsets.append(offsets[-1] + len(line))

        def offset(line: int, column: int) -> int:
            # ast columns are UTF-8 byte offsets
            return offsets[line - 1] + len(self.lines[line - 1].encode("utf-8")[:column].decode("utf-8", "replace"))

        text = self.text
        for start_line, start_col, end_line, end_col, new in sorted(self.edits, reverse=True):
            text = text[:offset(start_line, start_col)] + new + text[offset(end_line, end_col):]
        return text


def _torch_nn(tree: ast.Module) -> Optional[str]:
    """How the file names torch.nn at module level ("nn", "torch.nn"), or None."""
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "torch.nn" and alias.asname:
                    return alias.asname
                if alias.name == "torch" and not alias.asname:
                    return "torch.nn"
        if isinstance(node, ast.ImportFrom) and node.module == "torch" and node.level == 0:
            for alias in node.names:
                if alias.name == "nn":
                    return alias.asname or "nn"
    return None


def _parameter_sites(cls: ast.ClassDef) -> List[Tuple[str, ast.stmt, ast.Call]]:
    init = _method(cls, "__init__")
    self_name = _self_name(init) if init else None
    if init is None or self_name is None:
        return []
    sites = []
    for statement in _unconditional(init.body):
        found = _self_assignment(statement, self_name)
        if found and _name(found[1].func) == "Parameter" and found[1].args and not any(
                isinstance(arg, ast.Starred) for arg in found[1].args):
            sites.append((found[0], statement, found[1]))
    return sites


# What a plain list / dict has: a container plant whose __init__ then calls anything else on it
# (``self.convs.apply(init_weights)``, ``self.transformer.parameters()``) crashes the construction,
# a bug no user ships silently: such sites are not planted.
_PLAIN_METHODS = {"modulelist-as-list": set(dir(list)), "sequential-as-list": set(dir(list)),
                  "moduledict-as-dict": set(dir(dict))}


def _constructs_with(init: ast.FunctionDef, self_name: str, attribute: str, kind: str, after: int) -> bool:
    """Does __init__, after line ``after``, use self.<attribute> only in ways the plain container allows?"""
    allowed = _PLAIN_METHODS.get(kind)
    if allowed is None:
        return True
    for node in ast.walk(init):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                and isinstance(node.value.value, ast.Name) and node.value.value.id == self_name
                and node.value.attr == attribute and node.lineno > after and node.attr not in allowed):
            return False
    return True


def _plant_in_init(cls: ast.ClassDef, kind: str, source: Source) -> Optional[Plant]:
    init = _method(cls, "__init__")
    self_name = _self_name(init) if init else None
    if init is None or self_name is None:
        return None
    for statement in _unconditional(init.body):
        span = (statement.lineno, statement.end_lineno or statement.lineno)
        if kind == "buffer-as-attribute":
            call = statement.value if isinstance(statement, ast.Expr) else None
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "register_buffer" and isinstance(call.func.value, ast.Name)
                    and call.func.value.id == self_name and call.args
                    and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)
                    and call.args[0].value.isidentifier()):
                continue
            value = call.args[1] if len(call.args) > 1 else next(
                (k.value for k in call.keywords if k.arg == "tensor"), None)
            if value is None or (isinstance(value, ast.Constant) and value.value is None):
                continue
            name = call.args[0].value
            source.replace(statement, source.segment(value), prefix="%s.%s = " % (self_name, name))
            return Plant(kind, cls.name, name, *span)
        found = _self_assignment(statement, self_name)
        if not found:
            continue
        attribute, call = found
        called = _name(call.func)
        if kind in ("parameter-as-tensor", "parameter-as-trainable-tensor") and called == "Parameter":
            if not call.args or isinstance(call.args[0], ast.Starred):
                continue
            frozen = any(k.arg == "requires_grad" for k in call.keywords) or len(call.args) > 1
            if kind == "parameter-as-tensor":
                source.replace(call, source.segment(call.args[0]))
            elif frozen:
                continue
            else:
                source.replace(call, "(%s).requires_grad_()" % source.segment(call.args[0]))
            return Plant(kind, cls.name, attribute, *span)
        if call.keywords or any(isinstance(arg, ast.Starred) for arg in call.args) and kind != "sequential-as-list":
            continue
        if not _constructs_with(init, self_name, attribute, kind, statement.end_lineno or statement.lineno):
            continue
        if kind == "modulelist-as-list" and called == "ModuleList" and len(call.args) <= 1:
            source.replace(call, "list(%s)" % source.segment(call.args[0]) if call.args else "[]")
            return Plant(kind, cls.name, attribute, *span)
        if kind == "moduledict-as-dict" and called == "ModuleDict" and len(call.args) <= 1:
            source.replace(call, "dict(%s)" % source.segment(call.args[0]) if call.args else "{}")
            return Plant(kind, cls.name, attribute, *span)
        if kind == "sequential-as-list" and called == "Sequential" and not call.keywords:
            args = call.args
            if not args:
                continue  # an empty Sequential is an identity: a plain [] loses nothing to register
            if len(args) == 1 and isinstance(args[0], ast.Starred):
                new = "list(%s)" % source.segment(args[0].value)
            elif len(args) == 1 and isinstance(args[0], ast.Call) and _name(args[0].func) == "OrderedDict":
                continue  # named layers: a plain dict would be another bug
            else:
                new = "[%s]" % ", ".join(source.segment(arg) for arg in args)
            source.replace(call, new)
            return Plant(kind, cls.name, attribute, *span)
    return None


def _loads_of(cls: ast.ClassDef, self_attributes: Dict[ast.FunctionDef, str], attribute: str) -> List[
        Tuple[ast.FunctionDef, ast.Attribute]]:
    """Every read of `self.<attribute>` in the class's methods other than __init__."""
    found = []
    for method, self_name in self_attributes.items():
        if method.name == "__init__":
            continue
        for node in ast.walk(method):
            if (isinstance(node, ast.Attribute) and node.attr == attribute and isinstance(node.ctx, ast.Load)
                    and isinstance(node.value, ast.Name) and node.value.id == self_name):
                found.append((method, node))
    return found


def _plant_in_forward(cls: ast.ClassDef, kind: str, source: Source, nn_name: Optional[str]) -> Optional[Plant]:
    forward = _method(cls, "forward")
    self_name = _self_name(forward) if forward else None
    if forward is None or self_name is None:
        return None
    methods = {node: _self_name(node) for node in cls.body if isinstance(node, ast.FunctionDef)}
    methods = {node: name for node, name in methods.items() if name}
    for attribute, statement, _call in _parameter_sites(cls):
        if kind == "parameter-rewrapped-in-forward":
            if nn_name is None:
                return None
            body = forward.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                body = body[1:]  # the docstring
            first = body[0] if body else None
            # a simple statement that starts its line: "<new>; <it>" stays one line
            if first is None or isinstance(first, (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.FunctionDef,
                                                   ast.ClassDef, ast.AsyncFor, ast.AsyncWith, ast.AsyncFunctionDef)):
                return None
            line_text = source.lines[first.lineno - 1]
            if line_text[:first.col_offset].strip():
                return None
            source.insert(first.lineno, first.col_offset, "%s.%s = %s.Parameter(%s.%s.detach()); " % (
                self_name, attribute, nn_name, self_name, attribute))
            return Plant(kind, cls.name, attribute, first.lineno, first.lineno)
        if kind == "parameter-detached-in-forward":
            loads = _loads_of(cls, methods, attribute)
            if len(loads) != 1 or loads[0][0] is not forward:
                continue
            read = loads[0][1]
            source.replace(read, "%s.detach()" % source.segment(read))
            return Plant(kind, cls.name, attribute, statement.lineno, statement.end_lineno or statement.lineno)
    return None


def plant(text: str, kind: str) -> Tuple[str, List[Plant]]:
    """The twin of a file's text with one bug of ``kind`` per class that has a site for it, and its plants."""
    tree = ast.parse(text)
    source = Source(text)
    nn_name = _torch_nn(tree)
    plants: List[Plant] = []
    for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        if kind in ("parameter-rewrapped-in-forward", "parameter-detached-in-forward"):
            found = _plant_in_forward(cls, kind, source, nn_name)
        else:
            found = _plant_in_init(cls, kind, source)
        if found:
            plants.append(found)
    if not plants:
        return text, []
    twin = source.result()
    ast.parse(twin)  # a twin always parses
    assert twin.count("\n") == text.count("\n"), "a plant moved the file's lines"
    return twin, plants


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    text = open(args[0], encoding="utf-8").read()
    for kind in ([args[1]] if len(args) > 1 else list(KINDS)):
        twin, plants = plant(text, kind)
        for found in plants:
            print("%s:%d-%d %s %s.%s" % (args[0], found.line, found.end_line, kind, found.class_name,
                                         found.attribute))
        if len(args) > 1:
            sys.stdout.write(twin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
