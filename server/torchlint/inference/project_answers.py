"""Answers the project's own files give without jedi (issue 23).

On real code most questions the checks leave to jedi have a few shapes: an attribute of a
parameter annotated with a project class (``config.hidden_size`` in ``def __init__(self,
config: LlamaConfig)``, ``self.config.rope_theta``), ``getattr(config, "x", default)``, a name
imported from another module of the project (``ACT2FN``). To answer one, jedi parses the
checked file (about half of the inference's time) and the modules it follows. Their syntax gives
the same answer: this module reads the files (through :class:`~.project_files.ProjectFiles`,
which keeps them parsed) and answers as jedi would, or says :data:`ASK` when it cannot be sure (a
shape it does not know, a value it cannot type), and jedi is asked. Every file an answer was
read from is added to the caller's ``read`` set (answers kept on disk depend on them).

What is copied from jedi: an instance's attribute is found in the first of these that binds
it: the ``self.<name> = ...`` assignments in the methods of each class of the MRO, then the
class bodies, in MRO order. Its values are the union of what each binding infers to: for a
parameter, its annotation, else its default (jedi does not search the calls); for a class
attribute, its annotation, else its value. The answer is a plain value (OTHER) when every value
is an int, a float, a str, a bool, bytes or None; unknown (None) when some value is another
instance (a list, a project class that is not a Module), a function or a class; and jedi's
when a value may be a tensor or a Module (see file_inference.FileInference._values).

Not copied, but never less safe: an attribute's value built of such parts (``self.hidden //
self.heads``, ``kwargs.get("labels", self.labels or 2)``, ``int(x)``, ``a if flag else b``) is
plain when every part is plain, else unknown: jedi may find a plain value where this says
unknown, never a tensor or a Module where this answers (a part that may be one is asked). An
attribute met again while its own value is typed adds nothing, as in jedi.
"""
from __future__ import annotations

import ast
import builtins
import importlib.util
import os
import re
import threading
import weakref
from typing import Dict, FrozenSet, Iterable, Iterator, List, Optional, Protocol, Set, Tuple, Union

from .project_files import ProjectFiles, TextLines, TopLevelNames, name_bindings, statement_binds
from ..analysis.values import OTHER, Value


class Ask:
    def __repr__(self) -> str:
        return "ASK"


ASK = Ask()  # the files cannot tell: ask jedi
QUESTION_FILE = "__torchlint_question__.py"  # where jedi reads a question's own text: beside the file asking
FilesAnswer = Union[None, Value, Ask]  # an answer, or ASK
KeptReturn = Tuple[str, int, int]  # a function of the project, by its file, and the line and column of its name
KeptReturns = Dict[KeptReturn, Tuple[Optional[Value], FrozenSet[str]]]  # its answer, the files it was read from


class _Source(Protocol):
    """A parsed file: the checked one, or one read by ProjectFiles."""

    @property
    def tree(self) -> Optional[ast.Module]: ...

    @property
    def bindings(self) -> Dict[str, List[str]]: ...

    @property
    def top_level(self) -> TopLevelNames: ...

    def lines(self, first: int, last: int) -> List[str]: ...


class _Class:
    """A class read from a file: its statement, and the file (its path, tree and bindings)."""

    __slots__ = ("path", "source", "node")

    def __init__(self, path: str, source: _Source, node: ast.ClassDef) -> None:
        self.path, self.source, self.node = path, source, node

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Class) and other.node is self.node

    def __hash__(self) -> int:
        return id(self.node)


# What a value is, as far as the answer goes: a plain value, another instance that is neither a
# tensor nor a Module, or no instance (a function, a class object); or an instance of a project
# class (to look attributes up in, or to ask whether it is a Module). A set stands for a union.
_PLAIN, _NOT_PLAIN = "plain", "not plain"
Values = FrozenSet[Union[str, _Class]]
_NOTHING: Values = frozenset()
_PLAIN_ONLY: Values = frozenset([_PLAIN])
_NOT_PLAIN_ONLY: Values = frozenset([_NOT_PLAIN])

# The classes whose instances jedi's answer calls plain values ("other"), by jedi's full names.
PLAIN_TYPES = frozenset(["builtins.int", "builtins.float", "builtins.str", "builtins.bool", "builtins.NoneType",
                         "builtins.bytes", "torch.device", "torch.dtype", "torch.Size", "torch._C.device",
                         "torch._C.dtype", "torch.types.Device"])
_PLAIN_BUILTINS = frozenset(name[len("builtins."):] for name in PLAIN_TYPES
                            if name.startswith("builtins.") and name != "builtins.NoneType")
_CONTAINER_BUILTINS = frozenset(["list", "dict", "tuple", "set", "frozenset"])
_TYPING_CONTAINERS = frozenset(["List", "Dict", "Tuple", "Set", "FrozenSet"])
# math's functions whose stubs return a float or an int.
_MATH_NUMBERS = frozenset(["sqrt", "log", "log2", "log10", "exp", "floor", "ceil", "pow", "cos", "sin", "tan",
                           "fabs", "isqrt"])
# Builtins whose call is a plain value, a container, or a number of numbers (_method_value).
_PLAIN_RESULTS = frozenset(["int", "float", "str", "bool", "len", "isinstance", "issubclass", "hasattr", "callable",
                            "repr", "ord", "chr"])
_CONTAINER_RESULTS = frozenset(["list", "tuple", "dict", "set", "frozenset", "sorted", "range", "enumerate", "zip"])
_NUMBER_FUNCTIONS = frozenset(["min", "max", "abs", "round"])
_SLOTS = ("__getattr__", "__getattribute__")
_MAX_DEPTH = 12  # imports and bases followed for one answer


class CheckedFile(TextLines):
    """What the answers need of the file being checked: its tree, its nodes' parents and how it
    binds each name (project_files.name_bindings)."""

    def __init__(self, path: str, tree: ast.Module, parents: Dict[int, ast.AST],
                 bindings: Dict[str, List[str]], text: Optional[str] = None) -> None:
        self.path, self.tree, self.parents, self.bindings, self.text = path, tree, parents, bindings, text
        self.top_level = TopLevelNames(tree)
        # class id -> (the class, its MRO, the files read to find it): see ProjectAnswers._mro
        self.mros: Dict[int, Tuple[ast.ClassDef, Optional[List[Optional[_Class]]], FrozenSet[str]]] = {}

    def function_of(self, node: ast.AST) -> Optional[ast.AST]:
        function = self.parents.get(id(node))
        while function is not None and not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = self.parents.get(id(function))
        return function

    def bound_once(self, name: str) -> bool:
        return len(self.bindings.get(name, ())) == 1 and "*" not in self.bindings


class ProjectAnswers:
    """Answers read from the project's files; what it learns of classes is kept with their trees."""

    def __init__(self, files: ProjectFiles, returns: Optional[KeptReturns] = None) -> None:
        self.files = files
        # What jedi found a project function returns, by (file, line, column of its name): see
        # file_inference.FileInference._returned. A call of a function found there is answered
        # without jedi; the others are left to jedi, which adds them.
        self.returns = returns if returns is not None else {}
        self._attributes: "weakref.WeakKeyDictionary[ast.ClassDef, _ClassAttributes]" = weakref.WeakKeyDictionary()
        self._answering = threading.local()  # .checked: the file whose question is being answered

    def answer(self, checked: CheckedFile, node: ast.expr, read: Set[str]) -> FilesAnswer:
        self._answering.checked = checked
        try:
            return self._answer(checked, node, read)
        finally:
            self._answering.checked = None

    def _answer(self, checked: CheckedFile, node: ast.expr, read: Set[str]) -> FilesAnswer:
        if _of_numpy(checked, node):
            return None  # numpy's values are never torch's (jedi names an ndarray or a number: unknown or plain)
        if self._of_a_missing_package(checked, node):
            return None  # jedi finds no module, so no value
        if isinstance(node, ast.Call):
            if self._calls_an_instance(checked, node.func, read):
                return None  # jedi's answer for a call of an instance, whatever else the callee may be
            returned = self._returned(checked, node.func, read)
            if returned is not ASK:
                return returned
            values = self._annotated_return(checked, node.func, read)
            if isinstance(values, Ask):
                values = self._call(checked, node, read)
        elif isinstance(node, ast.Attribute):
            values = self._attribute_chain(checked, node, read)
        elif isinstance(node, ast.Name):
            values = self._name(checked, node, read)
        else:
            return ASK
        return self._answer_of(values, read)

    def _of_a_missing_package(self, checked: CheckedFile, node: ast.expr) -> bool:
        """``node`` reads, calls or indexes a name the file binds only by an absolute import of a
        package that no folder of the search path holds (``timm.create_model(...)``, a modular
        file's ``from transformers.models.llama import LlamaRMSNorm``, where they are not installed)."""
        root = _root_name(node, through_arithmetic=False)
        if root is None or not checked.bound_once(root):
            return False
        how, _, dotted = checked.bindings[root][0].partition(" ")  # ("import", "timm"), ("from", "a.b.name")
        return how in ("import", "from") and bool(dotted) \
            and not self.files.importable(dotted.split(".", 1)[0], self.files.search_path(checked.path))

    def _answer_of(self, values: Union[Values, Ask], read: Set[str]) -> FilesAnswer:
        if isinstance(values, Ask):
            return ASK
        kinds = set()
        for value in values:
            if isinstance(value, _Class):
                if self.files.class_is_module(value.path, value.node.lineno, read=read):
                    return ASK  # a Module: jedi's answer names its class
                value = _NOT_PLAIN
            kinds.add(value)
        return OTHER if kinds == {_PLAIN} else None

    def question_key(self, checked: CheckedFile, node: ast.expr) -> Optional[Tuple[object, ...]]:
        """What a question asks about, named the same in every file that asks it, or None: an
        imported name (``AutoModel``, ``nn.utils``), or a call of one (``AutoModel.from_config(c)``).
        jedi's answer depends on nothing else: it infers what the name is, and runs a function
        without the call's arguments (file_inference.FileInference._classify); so one file's
        answer is every file's (kept per process: :attr:`FileInference.project`'s ``asked``).
        Also a builtin called (``max(a, b)``), and a classmethod called on a project class
        (``Model._from_config(c)``), by the method: jedi runs it with ``cls`` the class it is
        called on, so an answer that is an instance of that class is kept as such (see
        :meth:`called_class`), any other for every class."""
        call = isinstance(node, ast.Call)
        expr = node.func if isinstance(node, ast.Call) else node
        attributes: List[str] = []
        while isinstance(expr, ast.Attribute):
            attributes.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name) or checked.tree is None:
            return None
        if expr.id not in checked.bindings and "*" not in checked.bindings and hasattr(builtins, expr.id):
            return (call, ("builtin", expr.id), tuple(reversed(attributes)))
        if not checked.bound_once(expr.id):
            return None
        if call and len(attributes) == 1:
            owner = self._definition(checked.path, checked, expr.id, 0, set())
            method = self._class_function(owner, attributes[0], set()) if isinstance(owner, _Class) else None
            if isinstance(owner, _Class) and method is not None and _decorated_only_by(method[2], "classmethod"):
                return (call, ("classmethod", method[0], method[2].lineno), ())
        for statement in checked.tree.body:
            if not isinstance(statement, (ast.Import, ast.ImportFrom)):
                continue
            for alias in statement.names:
                if isinstance(statement, ast.Import):
                    if (alias.asname or alias.name.split(".", 1)[0]) == expr.id:
                        imported: Tuple[object, ...] = ("import", alias.name if alias.asname else expr.id)
                        return (call, imported, tuple(reversed(attributes)))
                elif (alias.asname or alias.name) == expr.id and alias.name != "*":
                    if statement.level:
                        module = self._module_of(checked.path, statement, project_only=False)
                        if module is None or module == checked.path:
                            return None
                        imported = ("from file", module, alias.name)
                    else:
                        imported = ("from", statement.module, alias.name)
                    return (call, imported, tuple(reversed(attributes)))
        return None

    def called_class(self, checked: CheckedFile, node: ast.expr) -> Optional[Tuple[str, int, str]]:
        """For ``Class.method(...)`` with ``Class`` a project class: its file, line and name."""
        func = node.func if isinstance(node, ast.Call) else None
        if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name) \
                or not checked.bound_once(func.value.id):
            return None
        owner = self._definition(checked.path, checked, func.value.id, 0, set())
        return (owner.path, owner.node.lineno, owner.node.name) if isinstance(owner, _Class) else None

    def question_text(self, checked: CheckedFile, node: ast.expr) -> Optional[Tuple[str, int, int]]:
        """A few lines that ask jedi what ``node`` asks, and the (line, column) to ask at; None
        when the question needs the checked file's own text. jedi parses the text it is given
        before answering (half of the inference's time); for a question about an imported or
        builtin name (``AutoModel.from_config(c)``, ``max(a, b)``) or about a parameter whose
        annotation names imported classes (``config.num_labels`` in ``def f(self, config: LlamaConfig)``), the import
        statements and that parameter say all jedi reads to answer: what the name is, the
        annotation, the classes' files; a call's arguments it never reads."""
        target = node.func if isinstance(node, ast.Call) else node
        parts: List[str] = []
        root: ast.expr = target
        while isinstance(root, ast.Attribute):
            parts.append(root.attr)
            root = root.value
        if not isinstance(root, ast.Name) or checked.tree is None:
            return None
        expression = ".".join([root.id] + parts[::-1])
        imports = _top_level_imports(checked.tree)
        definitions: List[Definition] = []  # of the checked file, that the question reads
        if checked.bound_once(root.id) and root.id in imports:
            lines = [imports[root.id], expression]
        elif root.id not in checked.bindings and "*" not in checked.bindings and hasattr(builtins, root.id):
            lines = [expression]
        elif checked.bound_once(root.id) and self._own_definitions(checked, root.id, imports, definitions, 0):
            # a function of the file (`yarn_apply_mscale(...)`): its text, and what it reads of the file
            lines = sorted(set(imports.values())) + _definition_lines(checked, definitions) + [expression]
            if any("\n" in line for line in imports.values()):
                return None
        else:
            comprehension = _binding_comprehension(checked, root)
            if comprehension is not None:
                if isinstance(node, ast.Call):
                    return None
                return self._comprehension_question(checked, comprehension, expression, imports)
            function = checked.function_of(root)
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return None
            args = function.args
            params = args.posonlyargs + args.args + args.kwonlyargs
            param = next((a for a in params if a.arg == root.id), None)
            local: List[str] = []  # a local name's one assignment, from the parameter alone
            if param is not None and param is params[0] and parts \
                    and isinstance(checked.parents.get(id(function)), ast.ClassDef):
                # `self.config.x`: what `self.config = config` in the class's own methods holds
                held = self._held_parameter(checked, function, parts[-1])
                if held is None:
                    return None
                function, param = held
                expression = ".".join([param.arg] + parts[-2::-1])
            elif param is None:
                assigned = _assigned_once(function, root.id, node)
                read = {n.id for n in ast.walk(assigned.value) if isinstance(n, ast.Name)} if assigned else set()
                if assigned is None or len(read) != 1:
                    return None
                param = next((a for a in params if a.arg in read), None)
                local = ["    %s = %s" % (root.id, ast.unparse(assigned.value))]
            header = self._parameter_header(checked, function, param, imports)
            if header is None:
                return None
            lines = header + local + ["    " + expression]
        if any("\n" in line for line in lines[-2:]):
            return None
        column = len(lines[-1]) - len(expression.rsplit(".", 1)[-1])
        return "\n".join(lines) + ("()\n" if isinstance(node, ast.Call) else "\n"), len(lines), column

    def _held_parameter(self, checked: CheckedFile, method: Union[ast.FunctionDef, ast.AsyncFunctionDef],
                        name: str) -> Optional[Tuple[Union[ast.FunctionDef, ast.AsyncFunctionDef], ast.arg]]:
        """For ``self.<name>`` in ``method`` of a class of the checked file: the method and its
        parameter that the class's one ``self.<name> = parameter`` assigns, when that is all jedi
        reads for it (the class is the first of the instance's MRO; nothing in its body binds the
        name); None otherwise."""
        cls = checked.parents.get(id(method))  # (a class: see question_text)
        if not isinstance(cls, ast.ClassDef) or _static_or_class_method(method):
            return None
        attributes = self._attributes_of(_Class(checked.path, checked, cls))
        bindings = attributes.assigned.get(name)
        if not isinstance(bindings, list) or len(bindings) != 1 or attributes.class_level(name) is not None:
            return None
        function, statement = bindings[0]
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or not isinstance(statement, ast.Assign) \
                or not isinstance(statement.value, ast.Name) or checked.parents.get(id(function)) is not cls:
            return None
        args = function.args
        params = args.posonlyargs + args.args + args.kwonlyargs
        param = next((a for a in params[1:] if a.arg == statement.value.id), None)
        return (function, param) if param is not None and not rebinds(function, param.arg, param) else None

    def _parameter_header(self, checked: CheckedFile, function: Union[ast.FunctionDef, ast.AsyncFunctionDef],
                          param: Optional[ast.arg], imports: Dict[str, str]) -> Optional[List[str]]:
        """The lines that give a question's own text ``param`` of ``function`` as jedi reads it
        there: the imports and classes of the file its annotation names, then ``def question(param:
        annotation):``. None when the parameter has no annotation jedi would read alike."""
        if param is None or param.annotation is None or rebinds(function, param.arg, param):
            return None
        annotation = _unquoted(param.annotation)
        names = {n.id for n in ast.walk(annotation) if isinstance(n, ast.Name)}
        classes: List[Definition] = []  # of the checked file, that the annotation names
        for name in sorted(names):
            if name in checked.bindings and not (checked.bound_once(name) and (
                    name in imports or self._own_definitions(checked, name, imports, classes, 0))):
                return None
        if isinstance(annotation, ast.Constant):
            return None
        wanted = set(imports.values()) if classes else {imports[name] for name in names if name in imports}
        lines = sorted(wanted)
        if any("\n" in line for line in lines):
            return None
        lines += _definition_lines(checked, classes)
        return lines + ["def question(%s: %s):" % (param.arg, ast.unparse(annotation))]

    def _comprehension_question(self, checked: CheckedFile, comprehension: _Comprehension, expression: str,
                                imports: Dict[str, str]) -> Optional[Tuple[str, int, int]]:
        """``expression``, whose root a comprehension's ``for`` binds (``[i[0] for i in sizes]``),
        asked in ``[expression for ...]``: jedi infers the name from the iterable alone. Only when
        what the ``for`` clauses read is builtins and at most one annotated parameter."""
        if any(g.is_async for g in comprehension.generators):
            return None  # (`async for` belongs in the file's own async function)
        bound = {n.id for g in comprehension.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        read = {n.id for g in comprehension.generators for n in ast.walk(g) if isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Load) and n.id not in bound}
        unbound_builtins = {name for name in read if name not in checked.bindings and "*" not in checked.bindings
                            and hasattr(builtins, name)}
        clauses = "".join(ast.unparse(g) for g in comprehension.generators)
        if not read - unbound_builtins:
            lines, indent = [], ""
        else:
            function = checked.function_of(comprehension)
            if len(read - unbound_builtins) > 1 or not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return None
            args = function.args
            param = next((a for a in args.posonlyargs + args.args + args.kwonlyargs if a.arg in read), None)
            header = self._parameter_header(checked, function, param, imports)
            if header is None:
                return None
            lines, indent = header, "    "
        question = "%s[%s%s]" % (indent, expression, clauses)
        if "\n" in question:
            return None
        last = expression.rsplit(".", 1)[-1]
        return "\n".join(lines + [question]) + "\n", len(lines) + 1, len(indent) + 1 + len(expression) - len(last)

    def _own_definitions(self, checked: CheckedFile, name: str, imports: Dict[str, str],
                         definitions: List[Definition], depth: int) -> bool:
        """Add to ``definitions`` the class or function ``name`` of the checked file and the ones
        of the file it reads (a base, a helper), when what they read of the file is only its
        imports and each other (their text then asks jedi what the file would); False otherwise."""
        found = checked.top_level.binding(name, stars=False)
        if depth > 4 or checked.text is None or len(found) != 1 \
                or not isinstance(found[0], (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                or isinstance(found[0], ast.ClassDef) and found[0].keywords:
            return False
        definition = found[0]
        if definition in definitions:
            return True
        definitions.insert(0, definition)  # (a base before the classes deriving from it)
        for read in ast.walk(definition):
            if not (isinstance(read, ast.Name) and isinstance(read.ctx, ast.Load)) or read.id == definition.name:
                continue
            bound = checked.top_level.binding(read.id, stars=False)
            if not bound or read.id in imports and checked.bound_once(read.id):
                continue  # a builtin, a local, or an import
            if not self._own_definitions(checked, read.id, imports, definitions, depth + 1):
                return False
        return True

    # -- the shapes -----------------------------------------------------------------------
    def _call(self, checked: CheckedFile, node: ast.Call, read: Set[str]) -> Union[Values, Ask]:
        func = node.func
        if isinstance(func, ast.Name):
            builtin = func.id not in checked.bindings and "*" not in checked.bindings
            if func.id == "getattr" and builtin:
                return _NOTHING  # jedi runs the builtin without the call's arguments: nothing
            if func.id == "sorted" and builtin:
                return _NOT_PLAIN_ONLY  # a list
            if checked.bound_once(func.id):
                found = self._definition(checked.path, checked, func.id, 0, read)
                if isinstance(found, _Class) and not found.node.decorator_list:
                    return frozenset([found])  # a new instance
            return ASK
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.attr in _MATH_NUMBERS \
                and checked.bindings.get(func.value.id) == ["import math"] and "*" not in checked.bindings:
            return _PLAIN_ONLY
        return ASK

    def _calls_an_instance(self, checked: CheckedFile, func: ast.expr, read: Set[str]) -> bool:
        """Whether jedi finds an instance among what ``func`` is, for sure: then it answers
        "unknown" for the call (a Module's ``__call__`` is the syntactic layer's business, see
        file_inference.FileInference._answer), whatever else ``func`` may be. ``norm(x)`` with a
        parameter typed by its annotation or default (``norm=None``); ``self.proj(x)`` where an
        assignment jedi reads for ``self.proj`` stores an instance (``self.proj = None``,
        ``self.proj = Projection(dim)``, ``self.proj = norm``)."""
        if isinstance(func, ast.Name):
            values = self._parameter_of_checked(checked, func, read)
            # (nothing: jedi's answer is "unknown" too)
            return not isinstance(values, Ask) or _optional_parameter(checked, func) \
                or self._kept_by_or(checked, func, read)
        if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
            return False
        owners = self._parameter_of_checked(checked, func.value, read)
        return not isinstance(owners, Ask) and any(
            isinstance(owner, _Class) and self._holds_an_instance(owner, func.attr, read) for owner in owners)

    def _kept_by_or(self, checked: CheckedFile, name: ast.Name, read: Set[str]) -> bool:
        """``norm(x)`` after ``norm = norm or nn.LayerNorm``, a statement of the function's own body,
        with ``norm: Optional[Type[nn.Module]] = None``. jedi reads the last binding before the
        call's statement (one in the function's own body: the others are not looked at), and keeps
        the left operand's values of an ``or`` when some are true and some false: the parameter's,
        a class (true) and a NoneType instance (false), which makes the call "unknown"."""
        found = _parameter_read(checked, name)
        if found is None:
            return False
        function, param = found
        annotation = param.annotation
        if annotation is None or "*" in checked.bindings or _function_bindings(function).get(name.id) != 2:
            return False  # (the parameter and one more binding, the `or`)
        rebound = [s for s in function.body if isinstance(s, ast.Assign) and len(s.targets) == 1
                   and isinstance(s.targets[0], ast.Name) and s.targets[0].id == name.id]
        if len(rebound) != 1 or not isinstance(rebound[0].value, ast.BoolOp) \
                or not isinstance(rebound[0].value.op, ast.Or) or not isinstance(rebound[0].value.values[0], ast.Name) \
                or rebound[0].value.values[0].id != name.id:
            return False
        statement: Optional[ast.stmt] = None  # the call's statement, in the function's own scope
        node: Optional[ast.AST] = checked.parents.get(id(name))
        while node is not None and node is not function:
            if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                return False
            if isinstance(node, ast.stmt) and statement is None:
                statement = node
            node = checked.parents.get(id(node))
        after = rebound[0].end_lineno, rebound[0].end_col_offset
        if statement is None or node is None or (statement.lineno, statement.col_offset) < after:
            return False
        return _holds_none(annotation, checked.bindings) and any(
            self._a_true_member(checked, member, read) for member in _members(annotation, checked.bindings))

    def _a_true_member(self, checked: CheckedFile, member: ast.expr, read: Set[str]) -> bool:
        """A member of an annotation that jedi surely makes a value whose truth is not "false" of:
        ``Type[C]`` with C ``nn.Module`` or a class of the project (a class), ``Callable``."""
        bindings = checked.bindings
        head = member.value if isinstance(member, ast.Subscript) else member
        if isinstance(head, ast.Name) and head.id == "Callable" and bindings.get("Callable") == ["from typing.Callable"]:
            return True
        if not isinstance(member, ast.Subscript) or not isinstance(head, ast.Name) \
                or bindings.get(head.id) != ["from typing.Type"]:
            return False
        inner = _unquoted(member.slice)
        if _qualified_in(inner, bindings) == "torch.nn.Module":
            return True
        return isinstance(inner, ast.Name) and len(bindings.get(inner.id, ())) == 1 \
            and isinstance(self._definition(checked.path, checked, inner.id, 0, read), _Class)

    def _annotated_return(self, checked: CheckedFile, func: ast.expr, read: Set[str]) -> Union[Values, Ask]:
        """``config.to_dict()``, ``self.config.get_text_config()``: a method of a project class with a
        return annotation, called on an instance of that class. jedi runs it without the call's
        arguments and, when its annotation gives values, answers with those alone (never its body).
        Not on a class with a base from the environment (a Module): that base may assign an
        instance attribute of the name, which jedi would read first."""
        if not isinstance(func, ast.Attribute) or not isinstance(func.value, (ast.Name, ast.Attribute)):
            return ASK
        owners = self._parameter_of_checked(checked, func.value, read) if isinstance(func.value, ast.Name) \
            else self._attribute_chain(checked, func.value, read)
        if isinstance(owners, Ask) or len(owners) != 1:
            return ASK
        owner = next(iter(owners))
        if not isinstance(owner, _Class):
            return ASK
        mro = self._mro(owner, read) or [None]
        classes = [each for each in mro if each is not None]
        if len(classes) != len(mro) or any(self._attributes_of(each).assigned.get(func.attr) for each in classes):
            return ASK  # (a base of the environment, or an instance attribute of that name first)
        found = self._class_function(owner, func.attr, read)
        if found is None:
            return ASK
        path, source, method = found
        if not isinstance(method, ast.FunctionDef) or method.returns is None or any(
                not (isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod")) for d in method.decorator_list):
            return ASK  # (an async method returns a coroutine; a decorator may return anything)
        values = self._annotation(path, source, method.returns, read)
        return values if values else ASK  # (an annotation jedi types as nothing: it reads the body then)

    def _holds_an_instance(self, cls: _Class, name: str, read: Set[str]) -> bool:
        """Whether one of the ``self.<name> = ...`` assignments jedi reads for an instance of
        ``cls`` (those of the first class of its MRO that has any) stores an instance for sure."""
        for each in self._mro(cls, read) or [None]:
            if each is None:
                return False  # a base from the environment may assign it first
            bindings = self._attributes_of(each).assigned.get(name)
            if isinstance(bindings, Ask):
                return False
            if bindings:
                return any(self._an_instance(each, function, statement.value, read)
                           for function, statement in bindings if isinstance(statement, ast.Assign))
        return False

    def _an_instance(self, cls: _Class, function: ast.AST, value: ast.expr, read: Set[str]) -> bool:
        """Whether jedi's values of ``value``, assigned in ``function`` of ``cls``, hold an instance
        for sure: a value written out (``None``, a list), a parameter typed by its annotation or
        default, or a new instance of an undecorated project class named once in its file."""
        if isinstance(value, ast.Name) and isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            typed = self._parameter_value(_InMethod(cls, function, cls, frozenset()), value.id, read)
            return not isinstance(typed, Ask) and bool(typed)
        if not isinstance(value, ast.Call):
            return not isinstance(_literal(value), Ask)
        if not isinstance(value.func, ast.Name):
            return False
        name, bindings = value.func.id, cls.source.bindings
        if len(bindings.get(name, ())) != 1 or "*" in bindings:
            return False  # (a parameter or a local of that name: not the top level's)
        found = self._definition(cls.path, cls.source, name, 0, read)
        return isinstance(found, _Class) and not found.node.decorator_list and not found.node.keywords

    def _returned(self, checked: CheckedFile, func: ast.expr, read: Set[str]) -> FilesAnswer:
        """What a call of a function of another project file returns, when jedi has said already:
        ``helper(x)``, ``Class.method(x)`` (a classmethod or a staticmethod)."""
        if not self.returns:
            return ASK
        found: Union[None, _Class, Tuple[str, _Source, ast.stmt]] = None
        if isinstance(func, ast.Name) and checked.bound_once(func.id):
            found = self._definition(checked.path, checked, func.id, 0, read)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and checked.bound_once(func.value.id):
            owner = self._definition(checked.path, checked, func.value.id, 0, read)
            if isinstance(owner, _Class):
                found = self._class_function(owner, func.attr, read)
        if not isinstance(found, tuple) or found[0] == checked.path:
            return ASK  # (jedi does not keep what a function of the checked file returns)
        path, source, function = found
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or any(
                not (isinstance(d, ast.Name) and d.id in ("classmethod", "staticmethod"))
                for d in function.decorator_list):
            return ASK
        column = _name_column(source, function)
        kept = self.returns.get((path, function.lineno, column)) if column is not None else None
        if kept is None:
            return ASK
        value, depends_on = kept
        read.update(depends_on)
        return value

    def _class_function(self, cls: _Class, name: str, read: Set[str]) -> Optional[Tuple[str, _Source, ast.stmt]]:
        """The function ``Class.name`` is, found in the class bodies of the MRO (None: anything else)."""
        for each in self._mro(cls, read) or [None]:
            if each is None:
                return None
            found = self._attributes_of(each).class_level(name)
            if found is not None:
                if isinstance(found, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    return each.path, each.source, found
                return None
        return None

    def _name(self, checked: CheckedFile, node: ast.Name, read: Set[str]) -> Union[Values, Ask]:
        """A name bound once, at the top level, to a class, a function, or a new instance."""
        if not checked.bound_once(node.id):
            return ASK
        found = self._definition(checked.path, checked, node.id, 0, read)
        if isinstance(found, _Class):
            return _NOT_PLAIN_ONLY  # the class itself (jedi keeps it through a decorator it cannot run)
        if isinstance(found, tuple):
            path, source, statement = found
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return ASK if statement.decorator_list else _NOT_PLAIN_ONLY
            if isinstance(statement, ast.Assign):
                return self._module_value(path, source, statement.value, read)
        return ASK

    def _module_value(self, path: str, source: _Source, value: ast.expr, read: Set[str]) -> Union[Values, Ask]:
        """A value assigned at the top level of a file: a constant, or a new instance of a class."""
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
            found = self._definition(path, source, value.func.id, 0, read)
            if isinstance(found, _Class) and not found.node.decorator_list:
                return frozenset([found])
            return ASK
        return _literal(value)

    def _attribute_chain(self, checked: CheckedFile, node: ast.Attribute, read: Set[str]) -> Union[Values, Ask]:
        """``root.a.b``: the root a parameter annotated with a project class, or a method's self."""
        names: List[str] = []
        root: ast.expr = node
        while isinstance(root, ast.Attribute):
            names.append(root.attr)
            root = root.value
        if not isinstance(root, ast.Name):
            return ASK
        values = self._parameter_of_checked(checked, root, read)
        for name in reversed(names):
            if isinstance(values, Ask) or not values:
                return values
            values = _union(self._instance_attribute(value, name, read) if isinstance(value, _Class) else ASK
                            for value in values)
        return values

    def _parameter_of_checked(self, checked: CheckedFile, name: ast.Name, read: Set[str]) -> Union[Values, Ask]:
        found = _parameter_read(checked, name)
        if found is None or rebinds(found[0], name.id, found[1]):
            return ASK
        function, param = found
        positional = function.args.posonlyargs + function.args.args
        owner = checked.parents.get(id(function))
        if param.annotation is None and isinstance(owner, ast.ClassDef) and positional and positional[0] is param:
            # self: the instance whatever the other decorators (jedi's rule: _static_or_class_method)
            return ASK if _static_or_class_method(function) else frozenset([_Class(checked.path, checked, owner)])
        if param.annotation is None:
            return _unannotated(function, param, checked)
        return self._annotation(checked.path, checked, param.annotation, read)

    # -- definitions, through imports -----------------------------------------------------
    def _definition(self, path: str, source: _Source, name: str, depth: int,
                    read: Set[str]) -> Union[None, _Class, Tuple[str, _Source, ast.stmt]]:
        """What ``name`` is bound to at the top level of the file at ``path``, following ``from``
        imports of the project's modules: a class, else ``(path, tree, statement)`` for a function
        or a single plain assignment; None when anything else may bind it (a condition, a star
        import, a module of the environment)."""
        if depth > _MAX_DEPTH or source.tree is None:
            return None
        found: Optional[ast.stmt] = None
        for stmt in source.top_level.binding(name):
            if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
                found = stmt
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                if any(alias.name == "*" for alias in stmt.names):
                    return None
                if any((alias.asname or alias.name.split(".", 1)[0]) == name for alias in stmt.names):
                    found = stmt
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                    and stmt.targets[0].id == name:
                found = stmt
            elif statement_binds(stmt, name):
                return None
        if isinstance(found, ast.ClassDef):
            return _Class(path, source, found)
        if isinstance(found, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Assign)):
            return path, source, found
        if not isinstance(found, ast.ImportFrom):
            return None
        alias = next(a for a in found.names if (a.asname or a.name) == name)
        module = self._module_of(path, found)
        if module is None:
            return None
        read.add(module)
        return self._definition(module, self.files.read_file(module), alias.name, depth + 1, read)

    def _module_of(self, path: str, node: ast.ImportFrom, project_only: bool = True) -> Optional[str]:
        """The project file a ``from`` import reads (None: a package's submodule, one of the
        environment's unless not ``project_only``)."""
        if not node.module:
            return None
        if node.level:
            folder = path
            for _ in range(node.level):
                folder = os.path.dirname(folder)
            folders: Tuple[str, ...] = (folder,)
        else:
            folders = self.files.search_path(path)
        module = self.files.module_file(node.module.split("."), folders)
        if module is None or project_only and (not module.endswith(".py")
                                               or module.startswith(self.files.environment_dirs)):
            return None
        return module

    # -- attributes of instances ----------------------------------------------------------
    def _instance_attribute(self, cls: _Class, name: str, read: Set[str],
                            looking_up: FrozenSet[str] = frozenset()) -> Union[Values, Ask]:
        """``looking_up``: the attributes of the same instance whose values led here (met again:
        nothing)."""
        if name in looking_up:
            return _NOTHING  # its own value again: adds nothing (jedi stops such a recursion with nothing too)
        mro = self._mro(cls, read)
        if mro is None or name.startswith("__") and not name.endswith("__"):
            return ASK  # (a private name is mangled)
        for each in mro:
            if each is None:
                return ASK  # a base from the environment may assign it (torch's Module does so)
            bindings = self._attributes_of(each).assigned.get(name)
            if bindings is ASK:
                return ASK
            if bindings:
                return _union(self._assigned(each, function, statement, read, cls, looking_up | {name})
                              for function, statement in bindings)  # type: ignore[union-attr]
        for each in mro:
            if each is None:
                return ASK
            found = self._attributes_of(each).class_level(name)
            if found is ASK:
                return ASK
            if found is not None:
                return self._class_level(each, found, read)  # type: ignore[arg-type]
        if any(each is not None and self._attributes_of(each).custom_getattr for each in mro):
            return ASK  # jedi runs __getattr__ for a name found nowhere
        return _NOTHING

    def _attributes_of(self, cls: _Class) -> "_ClassAttributes":
        attributes = self._attributes.get(cls.node)
        if attributes is None:
            attributes = self._attributes[cls.node] = _ClassAttributes(cls.node)
        return attributes

    def _mro(self, cls: _Class, read: Set[str]) -> Optional[List[Optional[_Class]]]:
        """The class and its bases, left to right and depth first (C3 but for diamonds); None
        stands for a base of the environment, past which nothing is known. None when a base is
        neither. Kept while a file is checked (not longer: it holds the trees it was read from)."""
        checked: Optional[CheckedFile] = getattr(self._answering, "checked", None)
        kept = checked.mros.get(id(cls.node)) if checked is not None else None
        if kept is not None:
            read.update(kept[2])
            return kept[1]
        bases_read: Set[str] = set()
        mro = self._linearized(cls, 0, bases_read)
        if checked is not None:
            checked.mros[id(cls.node)] = (cls.node, mro, frozenset(bases_read))
        read.update(bases_read)
        return mro

    def _linearized(self, cls: _Class, depth: int, read: Set[str]) -> Optional[List[Optional[_Class]]]:
        node = cls.node
        if depth > _MAX_DEPTH or node.keywords:
            return None
        order: List[Optional[_Class]] = [cls]
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id == "object":
                continue
            found = self._definition(cls.path, cls.source, base.id, depth + 1, read) \
                if isinstance(base, ast.Name) else None
            if found is None:
                order.append(None)
                continue
            if not isinstance(found, _Class):
                return None
            bases = self._linearized(found, depth + 1, read)
            if bases is None:
                return None
            order.extend(b for b in bases if b is None or b not in order)
        return order

    def _assigned(self, cls: _Class, function: ast.AST, statement: ast.stmt, read: Set[str], instance: _Class,
                  looking_up: FrozenSet[str]) -> Union[Values, Ask]:
        """The values of ``self.<name> = value`` in a method of ``cls``, for an ``instance``."""
        if isinstance(statement, ast.AnnAssign):
            return self._annotation(cls.path, cls.source, statement.annotation, read)
        assert isinstance(statement, ast.Assign) and isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
        return self._method_value(_InMethod(cls, function, instance, looking_up), statement.value, read)

    def _method_value(self, method: "_InMethod", node: ast.expr, read: Set[str]) -> Union[Values, Ask]:
        """What ``node``, an expression in a method, may be. A parameter, ``self.<other>`` and a
        value written out are typed as jedi types them. An expression built of typed parts
        (arithmetic, a comparison, a conditional, ``kwargs.get(name, default)``, a builtin's call,
        an attribute of a parameter) is typed as far as a tensor or a Module goes: plain when each
        part is plain, else unknown, never a tensor or Module jedi could find (it says less than
        jedi at most: unknown where jedi may say plain). ASK for anything else."""
        def part(child: ast.expr) -> Union[Values, Ask]:
            return self._method_value(method, child, read)
        if isinstance(node, ast.Name):
            return self._parameter_value(method, node.id, read)
        if isinstance(node, ast.Attribute):
            if method.is_self(node.value):
                return self._instance_attribute(method.instance, node.attr, read, method.looking_up)
            owner = part(node.value)
            if isinstance(owner, Ask) or owner == _PLAIN_ONLY:
                return ASK if isinstance(owner, Ask) else _NOT_PLAIN_ONLY  # an int's, a str's attribute
            return _union(self._instance_attribute(value, node.attr, read) if isinstance(value, _Class) else ASK
                          for value in owner)
        if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Compare)):
            if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) or isinstance(node, ast.Compare) and all(
                    isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops):
                return _PLAIN_ONLY  # a bool, whatever the operands
            operands = [node.left, node.right] if isinstance(node, ast.BinOp) else [node.operand] \
                if isinstance(node, ast.UnaryOp) else [node.left] + node.comparators
            values = _union(part(operand) for operand in operands)
            if isinstance(values, Ask) or any(isinstance(value, _Class) for value in values):
                return ASK  # (a project class may overload the operator)
            if not values:
                return _NOTHING  # (jedi's operation on nothing)
            return _PLAIN_ONLY if values == _PLAIN_ONLY or isinstance(node, ast.Compare) else _NOT_PLAIN_ONLY
        if isinstance(node, ast.BoolOp):
            # jedi keeps the first operand's values unless it knows their truth: never more than
            # all the operands' values, of which only the classes are worth telling apart
            values = _union(part(value) for value in node.values)
            if isinstance(values, Ask) or any(isinstance(value, _Class) for value in values):
                return values
            return _NOT_PLAIN_ONLY if values else _NOTHING
        if isinstance(node, ast.IfExp):
            return _union([part(node.body), part(node.orelse)])
        if isinstance(node, ast.Subscript):
            if method.is_kwargs(node.value):
                return _NOT_PLAIN_ONLY  # a value a caller passed (jedi does not search the calls)
            return _PLAIN_ONLY if part(node.value) == _PLAIN_ONLY else ASK  # a str's item
        if isinstance(node, ast.Call) and not node.keywords and not any(isinstance(a, ast.Starred) for a in node.args):
            func = node.func
            if isinstance(func, ast.Name) and func.id not in method.cls.source.bindings \
                    and "*" not in method.cls.source.bindings:
                if func.id in _PLAIN_RESULTS:
                    return _PLAIN_ONLY
                if func.id in _CONTAINER_RESULTS:
                    return _NOT_PLAIN_ONLY
                if func.id in _NUMBER_FUNCTIONS:
                    values = _union(part(argument) for argument in node.args)
                    return _PLAIN_ONLY if values == _PLAIN_ONLY else ASK
            if isinstance(func, ast.Attribute) and func.attr in ("get", "pop") and method.is_kwargs(func.value) \
                    and 1 <= len(node.args) <= 2:
                return _union([_NOT_PLAIN_ONLY] + [part(default) for default in node.args[1:]])
        return _literal(node)

    def _parameter_value(self, method: "_InMethod", name: str, read: Set[str]) -> Union[Values, Ask]:
        """A parameter of a method: its annotation, else its default (jedi does not search the calls)."""
        args = method.function.args
        positional = args.posonlyargs + args.args
        if args.vararg is not None and args.vararg.arg == name or args.kwarg is not None and args.kwarg.arg == name:
            return _NOT_PLAIN_ONLY  # a tuple, a dict
        param = next((a for a in positional + args.kwonlyargs if a.arg == name), None)
        if param is None or param is positional[0] or rebinds(method.function, name, param):
            return ASK
        if param.annotation is not None:
            return self._annotation(method.cls.path, method.cls.source, param.annotation, read)
        return _unannotated(method.function, param, method.cls.source)

    def _class_level(self, cls: _Class, statement: ast.stmt, read: Set[str]) -> Union[Values, Ask]:
        if isinstance(statement, ast.AnnAssign):  # the annotation is what jedi reads
            return self._annotation(cls.path, cls.source, statement.annotation, read)
        if isinstance(statement, ast.Assign):
            return _literal(statement.value)
        assert isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        return ASK if statement.decorator_list else _NOT_PLAIN_ONLY  # a method, a nested class

    def _annotation(self, path: str, source: _Source, node: ast.expr, read: Set[str]) -> Union[Values, Ask]:
        """What an annotation in the file at ``path`` says the value is."""
        node = _unquoted(node)
        if isinstance(node, ast.Constant) and node.value is None:
            return _PLAIN_ONLY
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return _union([self._annotation(path, source, node.left, read),
                           self._annotation(path, source, node.right, read)])
        bindings = source.bindings
        if "*" in bindings:
            return ASK
        if isinstance(node, ast.Name):
            if node.id not in bindings:
                if node.id in _PLAIN_BUILTINS:
                    return _PLAIN_ONLY
                return _NOT_PLAIN_ONLY if node.id in _CONTAINER_BUILTINS else ASK
            found = self._definition(path, source, node.id, 0, read) if len(bindings[node.id]) == 1 else None
            return frozenset([found]) if isinstance(found, _Class) else ASK
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            head = node.value.id
            from_typing = bindings.get(head) == ["from typing.%s" % head]
            if head in _CONTAINER_BUILTINS and head not in bindings or from_typing and head in _TYPING_CONTAINERS:
                return _NOT_PLAIN_ONLY
            members = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if from_typing and head == "Optional" and len(members) == 1:
                return _union([self._annotation(path, source, members[0], read), _PLAIN_ONLY])
            if from_typing and head == "Union":
                return _union(self._annotation(path, source, member, read) for member in members)
        return ASK


class _InMethod:
    """Where an expression of a method is typed (ProjectAnswers._method_value): the method, its
    class, the instance whose attribute is looked up, and the attributes being looked up."""

    __slots__ = ("cls", "function", "instance", "looking_up", "_self", "_kwargs")

    def __init__(self, cls: _Class, function: Union[ast.FunctionDef, ast.AsyncFunctionDef], instance: _Class,
                 looking_up: FrozenSet[str]) -> None:
        self.cls, self.function, self.instance, self.looking_up = cls, function, instance, looking_up
        args = function.args
        positional = args.posonlyargs + args.args
        me = positional[0] if positional else None
        self._self = me.arg if me is not None and not rebinds(function, me.arg, me) else None
        kwargs = args.kwarg
        self._kwargs = kwargs.arg if kwargs is not None and not rebinds(function, kwargs.arg, kwargs) else None

    def is_self(self, node: ast.expr) -> bool:
        return isinstance(node, ast.Name) and node.id == self._self

    def is_kwargs(self, node: ast.expr) -> bool:
        """``node`` is the method's ``**kwargs``, bound nowhere else."""
        return isinstance(node, ast.Name) and node.id == self._kwargs


class _ClassAttributes:
    """What one class body binds, found in one pass: ``self.<name>`` assignments in its methods
    (ASK for a name bound in a way not typed here: a tuple target, ``+=``, a loop, a nested
    function) and the names of the class body."""

    def __init__(self, node: ast.ClassDef) -> None:
        self.assigned: Dict[str, Union[Ask, List[Tuple[ast.AST, ast.stmt]]]] = {}
        self._body: Dict[str, Union[Ask, ast.stmt]] = {}
        self.custom_getattr = False  # a __getattr__ / __getattribute__ that may answer what is found nowhere
        for statement in node.body:
            self._body_statement(statement)
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._method(statement)
                if statement.name in _SLOTS and not _returns_objects_own(statement):
                    self.custom_getattr = True

    def class_level(self, name: str) -> Union[None, Ask, ast.stmt]:
        return self._body.get(name)

    def _body_statement(self, statement: ast.stmt) -> None:
        name = None
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            name = statement.target.id
        elif isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                and isinstance(statement.targets[0], ast.Name):
            name = statement.targets[0].id
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = statement.name
        if name is not None:  # bound twice: which binding jedi reads is not copied here
            self._body[name] = ASK if name in self._body else statement
            return
        for bound in _names_bound(statement):
            self._body[bound] = ASK

    def _method(self, method: Union[ast.FunctionDef, ast.AsyncFunctionDef]) -> None:
        positional = method.args.posonlyargs + method.args.args
        if not positional:
            return
        me = positional[0].arg  # jedi's self: the first parameter, whatever the decorators
        for statement, nested in _statements(method):
            targets = _targets(statement)
            for target in targets:
                for store in _attribute_stores(target):
                    if not (isinstance(store.value, ast.Name) and store.value.id == me):
                        continue
                    simple = not nested and target is store and (
                        isinstance(statement, ast.Assign) and len(statement.targets) == 1
                        or isinstance(statement, ast.AnnAssign))
                    known = self.assigned.get(store.attr)
                    if not simple:
                        self.assigned[store.attr] = ASK
                    elif known is not ASK:
                        self.assigned.setdefault(store.attr, []).append((method, statement))  # type: ignore[union-attr]


def _top_level_imports(tree: ast.Module) -> Dict[str, str]:
    """Each name the top level of a module imports, and one statement that imports just it."""
    found: Dict[str, str] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                found[alias.asname or alias.name.split(".", 1)[0]] = "import " + ast.unparse(alias)
        elif isinstance(statement, ast.ImportFrom) and statement.module != "__future__":
            for alias in statement.names:
                if alias.name != "*":
                    found[alias.asname or alias.name] = "from %s%s import %s" % (
                        "." * statement.level, statement.module or "", ast.unparse(alias))
    return found


def _static_or_class_method(function: Union[ast.FunctionDef, ast.AsyncFunctionDef]) -> bool:
    """Whether a method's first parameter is not the instance, as jedi tells: a decorator written
    ``@staticmethod`` or ``@classmethod`` (jedi compares the decorator's text; any other decorator,
    ``@torch.no_grad()``, ``@auto_docstring``, one it cannot infer, leaves the instance)."""
    return any(isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod") for d in function.decorator_list)


def _optional_parameter(checked: CheckedFile, name: ast.Name) -> bool:
    """Whether ``name`` is a parameter of the function it is read in, bound nowhere else there,
    annotated with a union that holds None (``norm: Optional[Type[nn.Module]] = None``): jedi
    finds a NoneType instance among its values, whatever it makes of the other members."""
    found = _parameter_read(checked, name)
    return found is not None and found[1].annotation is not None and not rebinds(found[0], name.id, found[1]) \
        and "*" not in checked.bindings and _holds_none(found[1].annotation, checked.bindings)


def _parameter_read(checked: CheckedFile, name: ast.Name) -> Optional[Tuple[Union[ast.FunctionDef, ast.AsyncFunctionDef],
                                                                           ast.arg]]:
    """The function ``name`` is read in and its parameter of that name (None: not a parameter there)."""
    function = checked.function_of(name)
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    args = function.args
    param = next((a for a in args.posonlyargs + args.args + args.kwonlyargs if a.arg == name.id), None)
    return (function, param) if param is not None else None


def _holds_none(annotation: ast.expr, bindings: Dict[str, List[str]]) -> bool:
    """``Optional[X]``, ``X | None``, ``Union[X, None]``."""
    return any(isinstance(member, ast.Constant) and member.value is None for member in _members(annotation, bindings))


def _members(annotation: ast.expr, bindings: Dict[str, List[str]]) -> List[ast.expr]:
    """The members of a union annotation, quoted or not (``Optional[X]``: X and None; ``X | Y``;
    ``Union[X, Y]``, typing's names bound by ``from typing import`` alone); else the annotation."""
    node = _unquoted(annotation)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _members(node.left, bindings) + _members(node.right, bindings)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in ("Optional", "Union") \
            and bindings.get(node.value.id) == ["from typing.%s" % node.value.id]:
        members = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        found = [m for member in members for m in _members(member, bindings)]
        return found + [ast.Constant(value=None)] if node.value.id == "Optional" else found
    return [node]


def _qualified_in(node: ast.expr, bindings: Dict[str, List[str]]) -> Optional[str]:
    """The dotted name ``node`` stands for by the file's one import of its first name
    (``nn.Module`` with ``from torch import nn``: torch.nn.Module); None for anything else."""
    parts: List[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or len(bindings.get(node.id, ())) != 1:
        return None
    how, _, module = bindings[node.id][0].partition(" ")
    if how not in ("import", "from") or not module:
        return None
    return ".".join([module] + parts[::-1])


def _decorated_only_by(function: ast.stmt, decorator: str) -> bool:
    return isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and len(function.decorator_list) == 1 \
        and isinstance(function.decorator_list[0], ast.Name) and function.decorator_list[0].id == decorator


def _name_column(source: _Source, function: ast.AST) -> Optional[int]:
    """The column of a ``def``'s name in its line, in code points (as jedi counts)."""
    text = getattr(source, "text", None)
    if not isinstance(text, str) or not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    lines = text.splitlines()
    if function.lineno > len(lines):
        return None
    match = re.search(r"\bdef\s+(%s)\b" % re.escape(function.name), lines[function.lineno - 1])
    return match.start(1) if match else None


def _targets(statement: ast.stmt) -> List[ast.expr]:
    if isinstance(statement, (ast.Assign, ast.Delete)):
        return statement.targets
    if isinstance(statement, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
        return [statement.target]
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return [item.optional_vars for item in statement.items if item.optional_vars is not None]
    return []


def _attribute_stores(target: ast.expr) -> Iterator[ast.Attribute]:
    if isinstance(target, ast.Attribute):
        yield target
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _attribute_stores(element)
    elif isinstance(target, ast.Starred):
        yield from _attribute_stores(target.value)


def _names_bound(statement: ast.stmt) -> Iterator[str]:
    """Names a class-body statement other than a plain assignment or definition may bind."""
    for node in ast.walk(statement):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            yield node.id
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name
        elif isinstance(node, ast.alias):
            yield node.asname or node.name.split(".", 1)[0]


def _statements(function: ast.AST) -> Iterator[Tuple[ast.stmt, bool]]:
    """The statements in ``function``'s body, nested ones too, each with whether it is inside a
    nested function or class."""
    todo = [(child, False) for child in ast.iter_child_nodes(function) if isinstance(child, ast.stmt)]
    while todo:
        statement, nested = todo.pop()
        yield statement, nested
        inner = nested or isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        for child in ast.iter_child_nodes(statement):
            if isinstance(child, ast.stmt):
                todo.append((child, inner))
            elif isinstance(child, (ast.ExceptHandler, ast.match_case)):
                todo.extend((grandchild, inner) for grandchild in child.body)


def _returns_objects_own(function: ast.AST) -> bool:
    """A ``__getattribute__`` that returns what ``object``'s does (``super().__getattribute__(key)``):
    jedi finds nothing there either."""
    returns = [n for n in ast.walk(function) if isinstance(n, ast.Return)]
    return bool(returns) and all(
        isinstance(r.value, ast.Call) and isinstance(r.value.func, ast.Attribute)
        and r.value.func.attr == "__getattribute__" and isinstance(r.value.func.value, ast.Call)
        and isinstance(r.value.func.value.func, ast.Name) and r.value.func.value.func.id == "super"
        for r in returns)


def _unannotated(function: Union[ast.FunctionDef, ast.AsyncFunctionDef], param: ast.arg,
                 source: _Source) -> Union[Values, Ask]:
    """A parameter without an annotation, as jedi types it when it does not search the calls
    (the jedi layer turns dynamic_params off): its default, or nothing. ASK when jedi may read a
    type in words (typed_in_words)."""
    if typed_in_words(function, param.arg, source.lines(function.lineno, body_line(function))):
        return ASK
    default = parameter_default(function, param)
    return _NOTHING if default is None else _literal(default)


def parameter_default(function: Union[ast.FunctionDef, ast.AsyncFunctionDef], param: ast.arg) -> Optional[ast.expr]:
    """The default written for ``param`` of ``function``, or None."""
    args = function.args
    positional = args.posonlyargs + args.args
    if param in positional:
        index = positional.index(param) - (len(positional) - len(args.defaults))
        return args.defaults[index] if index >= 0 else None
    return args.kw_defaults[args.kwonlyargs.index(param)]


def typed_in_words(function: Union[ast.FunctionDef, ast.AsyncFunctionDef], name: str, signature: List[str]) -> bool:
    """Whether jedi may read parameter ``name``'s type from words: its function's docstring in a
    form jedi reads, or a type comment on the signature (``signature``: its lines, to the body's
    first)."""
    doc = ast.get_docstring(function, clean=False)
    if doc and (_NUMPYDOC_IMPORTABLE and re.search(r"\b%s\b" % re.escape(name), doc)
                or any(re.search(pattern % re.escape(name), doc) for pattern in _DOCSTRING_TYPES)):
        return True
    return any("type:" in line for line in signature)


def body_line(function: Union[ast.FunctionDef, ast.AsyncFunctionDef]) -> int:
    """The line of the first statement of ``function``'s body: where its signature ends."""
    return function.body[0].lineno if function.body else function.lineno


# The docstring forms jedi reads a parameter's type from (jedi.inference.docstrings): Sphinx's and
# Epydoc's; numpydoc's too where the numpydoc package can be imported.
_DOCSTRING_TYPES = (r"\s*:type\s+%s:", r"\s*:param\s+\w+\s+%s:", r"\s*@type\s+%s:")
_NUMPYDOC_IMPORTABLE = importlib.util.find_spec("numpydoc") is not None


def _of_numpy(checked: CheckedFile, node: ast.expr) -> bool:
    """``np.linspace(...)``, ``np.pi``, ``numpy.random.rand(3).T``: an attribute or a call rooted at
    a name the file binds only by ``import numpy`` (jedi parses numpy's stubs to answer, a second
    or so per process, and finds no tensor or Module there); also through an item and through
    arithmetic with a number on its right: ``(np.cumsum(sizes) - 1).tolist()``, ``np.arange(n)[::-1]``
    (jedi takes the operation from the left operand's class, numpy's)."""
    root = _root_name(node, through_arithmetic=True)
    return root is not None and checked.bindings.get(root) == ["import numpy"] and "*" not in checked.bindings


def _root_name(node: ast.expr, through_arithmetic: bool) -> Optional[str]:
    """The name an attribute, item or call chain starts from (``np`` in ``np.arange(5)[::-1]``);
    ``through_arithmetic``: also through an operation with a number on its right. None when the
    chain starts elsewhere."""
    while True:
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        elif through_arithmetic and isinstance(node, ast.BinOp) and _number(node.right):
            node = node.left
        else:
            return node.id if isinstance(node, ast.Name) else None


def _number(node: ast.expr) -> bool:
    """An int or a float written out (``1``, ``-0.5``)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def _union(parts: Iterable[Union[Values, Ask]]) -> Union[Values, Ask]:
    values: Set[Union[str, _Class]] = set()
    for part in parts:
        if isinstance(part, Ask):
            return ASK
        values |= part
    return frozenset(values)


def _literal(node: ast.expr) -> Union[Values, Ask]:
    """A value written out: a constant, a display (a list, a dict...)."""
    if isinstance(node, ast.Constant):
        return _PLAIN_ONLY if node.value is None or type(node.value) in (int, float, str, bool, bytes) else ASK
    if isinstance(node, ast.JoinedStr):
        return _PLAIN_ONLY
    if isinstance(node, (ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
        return _NOT_PLAIN_ONLY
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) \
            and isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float):
        return _PLAIN_ONLY
    return ASK


def _unquoted(node: ast.expr) -> ast.expr:
    """The expression a string annotation holds."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return ast.parse(node.value.strip(), mode="eval").body
        except SyntaxError:
            return node
    return node


Definition = Union[ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef]
_Comprehension = Union[ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp]


def _definition_lines(checked: CheckedFile, definitions: List[Definition]) -> List[str]:
    """The checked file's lines of each definition, its decorators first."""
    lines: List[str] = []
    for definition in definitions:
        first = definition.decorator_list[0].lineno if definition.decorator_list else definition.lineno
        lines += checked.lines(first, definition.end_lineno or definition.lineno)
    return lines


def _binding_comprehension(checked: CheckedFile, name: ast.Name) -> Optional[_Comprehension]:
    """The innermost comprehension around ``name`` whose ``for`` binds it, where it is read in that
    comprehension's scope (not in its first iterable, which the enclosing scope evaluates)."""
    child: ast.AST = name
    parent = checked.parents.get(id(name))
    while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                                         ast.ClassDef, ast.Module)):
        if isinstance(parent, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            first_iterable = parent.generators[0].iter
            outside = child is parent.generators[0] and any(n is name for n in ast.walk(first_iterable))
            targets = {n.id for g in parent.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
            if name.id in targets and not outside:
                return parent
        child, parent = parent, checked.parents.get(id(parent))
    return None


def _assigned_once(function: Union[ast.FunctionDef, ast.AsyncFunctionDef], name: str,
                   used: ast.expr) -> Optional[ast.Assign]:
    """``name = value``, a statement of ``function``'s own body before ``used``, when nothing else
    in the function binds ``name`` or declares it global or nonlocal (nested code included): what
    jedi infers the name to be there is what it infers ``value`` to be."""
    if _function_bindings(function).get(name, 0) != 1:
        return None
    for statement in function.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                and isinstance(statement.targets[0], ast.Name) and statement.targets[0].id == name:
            return statement if statement.lineno < used.lineno else None
    return None


def rebinds(function: ast.AST, name: str, param: ast.arg) -> bool:
    """Whether anything in ``function`` but its parameter ``param`` (named ``name``) binds ``name``,
    nested code too."""
    return _function_bindings(function).get(name, 0) > 1


_BINDINGS_IN: "weakref.WeakKeyDictionary[ast.AST, Dict[str, int]]" = weakref.WeakKeyDictionary()


def _function_bindings(function: ast.AST) -> Dict[str, int]:
    """How many times each name is bound in a function (its parameters too), found once per function."""
    counted = _BINDINGS_IN.get(function)
    if counted is None:
        counted = _BINDINGS_IN[function] = {name: len(kinds) for name, kinds in name_bindings(function).items()}
    return counted
