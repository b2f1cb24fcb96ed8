"""Everything the rules know about one file, built once per check."""
from __future__ import annotations

import ast
from collections import Counter
from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Dict, Iterable, Iterator, List, Optional, Protocol, Sequence, Set, Tuple, Union

from .findings import Applicability, Edit, Finding, Fix, Position, Range, Related, Severity, UncheckedClass
from .imports import ImportMap, collect_imports
from .modules import moves_own_state, resolve_modules
from .forward import BaseClass, Reach, SelfUse, reach
from .scopes import ClassInfo, Index, NodeTable, Scope, block_chain, build_index, class_chain, release
from .source import Located, SourceText, statement_start
from .values import Classifier, Value

from .inference_seam import FileAnswers, Inference

if TYPE_CHECKING:
    from .construction import Construction


class RunningRule(Protocol):
    """What a finding takes from the rule whose check is running (rules.base.Rule)."""

    @property
    def code(self) -> str: ...

    @property
    def severity(self) -> Severity: ...


class FileContext:
    def __init__(self, text: str, path: str, tree: ast.Module, inference: Optional[Inference] = None,
                 show_all: bool = False, file_attribute_names: Optional[Counter[str]] = None, source: Optional[SourceText] = None) -> None:
        self.path = path
        self.show_all = show_all  # report quiet findings too (as hints)
        self.source = source if source is not None else SourceText(text)
        self.tree = tree
        # Given when ``tree`` is a reduced copy of the file (torchlint.incremental): the counts
        # of the whole file, which the reduced tree alone would understate.
        self._given_attribute_names = file_attribute_names
        self.index: Index = build_index(tree, NodeTable(tree))
        self.imports: ImportMap = collect_imports(tree, self.index.imports)
        # The inference layer's questions about this text (torchlint.inference's), or None: names only.
        self.inference: Optional[FileAnswers] = inference.for_file(text, path, self.source, tree, self.index.nodes) if inference is not None else None
        external = self.inference.is_module_base if self.inference is not None else None
        self.classes: Dict[str, ClassInfo] = resolve_modules(self.index.classes, self.imports, external)
        # Classes no rule checks because whether they are Modules could not be read (the jedi layer's)
        self.unchecked: List[UncheckedClass] = self.inference.unchecked_classes(self.index.classes) \
            if self.inference is not None else []
        self.classifier = Classifier(self.imports, self.classes,
                                     self.inference.classify if self.inference is not None else None,
                                     self.calls_of_name, self.index.scopes)

    def release(self) -> None:
        """The check is over: drop what it built, cycles included (see scopes.release)."""
        for other in list(self.__dict__.get("_other_files", {}).values()):
            other.__dict__["_other_files"] = {}  # (shared with this one: each is released once)
            other.release()
        release(self.index)
        self.__dict__.clear()

    # -- facts -------------------------------------------------------------------------------
    def classify(self, node: Optional[ast.expr], scope: Optional[Scope] = None) -> Value:
        return self.classifier.classify(node, scope)

    def classify_at(self, node: ast.expr, scope: Scope, stmt: ast.stmt) -> Value:
        """Like classify, but a local name takes the value of the assignment that reaches
        ``stmt`` when that is plain to see: the nearest earlier one, in the same block."""
        bindings = scope.locals.get(node.id, ()) if isinstance(node, ast.Name) else ()
        earlier = [b for b in bindings if b.value is not None and b.stmt.lineno < stmt.lineno]
        if earlier:
            nearest = max(earlier, key=lambda b: (b.stmt.lineno, b.stmt.col_offset))
            between = [b for b in bindings if nearest.stmt.lineno < b.stmt.lineno < stmt.lineno]
            if not between and block_chain(self.index, nearest.stmt) == block_chain(self.index, stmt):
                return self.classifier.binding_value(nearest)
        return self.classify(node, scope)

    def qualify(self, node: ast.AST) -> Optional[str]:
        return self.classifier.qualify(node)  # remembered per node: the rules ask about the same calls

    @property
    def module_classes(self) -> List[ClassInfo]:
        return [c for c in self.index.classes if c.is_module]

    def class_chain(self, info: ClassInfo) -> List[ClassInfo]:
        """The class and its bases defined in this file."""
        return class_chain(info, self.classes)

    def registered_names(self, info: ClassInfo) -> Set[str]:
        """Names registered or unregistered by hand anywhere in the class chain."""
        names: Set[str] = set()
        for cls in self.class_chain(info):
            names.update(cls.registered)
            names.update(cls.unregistered)
        return names

    def unreachable(self) -> List[Range]:
        """Where the statements that never run are: the rest of a block after a `raise`,
        `return`, `continue` or `break` in it (in a function or a compound statement)."""
        ranges = []
        for first, last in self.index.unreachable:
            start = self.range(first).start
            if getattr(first, "decorator_list", None):
                start = Position(statement_start(first), 0)
            ranges.append(Range(start, self.range(last).end))
        return ranges

    def calls_on(self, node: ast.AST) -> List[ast.Call]:
        """The method calls made on ``node``'s value (``node.zero_()``), from the index: no walk of
        the tree, and one table per file however many nodes are asked about."""
        return self._calls_by_receiver.get(id(node), [])

    @cached_property
    def _calls_by_receiver(self) -> Dict[int, List[ast.Call]]:
        table: Dict[int, List[ast.Call]] = {}
        for call in self.index.calls:
            if isinstance(call.func, ast.Attribute):
                table.setdefault(id(call.func.value), []).append(call)
        return table

    def calls_of_name(self, name: str) -> List[Tuple[ast.Call, Scope]]:
        """The calls ``name(...)`` of the file, with the scope of each (a table per file)."""
        return self._calls_by_name.get(name, [])

    @cached_property
    def _calls_by_name(self) -> Dict[str, List[Tuple[ast.Call, Scope]]]:
        table: Dict[str, List[Tuple[ast.Call, Scope]]] = {}
        for call in self.index.calls:
            if isinstance(call.func, ast.Name):
                table.setdefault(call.func.id, []).append((call, self.index.call_scopes[id(call)]))
        return table

    def module_functions(self, name: str) -> List[Scope]:
        """The scopes of the module-level functions called ``name`` (a table per file)."""
        return self._module_functions.get(name, [])

    @cached_property
    def _module_functions(self) -> Dict[str, List[Scope]]:
        table: Dict[str, List[Scope]] = {}
        for scope in self.index.scopes:
            if scope.parent is self.index.module_scope and not isinstance(scope.node, ast.ClassDef):
                table.setdefault(scope.name, []).append(scope)
        return table

    def method_calls(self, cls: ClassInfo, method: str) -> List[Tuple[ast.Call, Scope]]:
        """The calls ``self.<method>(...)`` in the methods of ``cls`` and its bases of this file, with
        the scope of each (a table per class)."""
        table = self._method_calls.get(id(cls))
        if table is None:
            table = self._method_calls[id(cls)] = {}
            for info in self.class_chain(cls):
                for scope in info.method_scopes.values():
                    for call in scope.calls:
                        func = call.func
                        if isinstance(func, ast.Attribute) and scope.is_self(func.value):
                            table.setdefault(func.attr, []).append((call, scope))
        return table.get(method, [])

    @cached_property
    def _method_calls(self) -> Dict[int, Dict[str, List[Tuple[ast.Call, Scope]]]]:
        return {}

    def scopes_within(self, outer: Scope) -> List[Scope]:
        """The scopes nested in ``outer`` at any depth (a table of children per file)."""
        found, pending = [], list(self._child_scopes.get(id(outer), ()))
        while pending:
            scope = pending.pop()
            found.append(scope)
            pending.extend(self._child_scopes.get(id(scope), ()))
        return found

    @cached_property
    def _child_scopes(self) -> Dict[int, List[Scope]]:
        table: Dict[int, List[Scope]] = {}
        for scope in self.index.scopes:
            if scope.parent is not None:
                table.setdefault(id(scope.parent), []).append(scope)
        return table

    def parent(self, node: ast.AST) -> Optional[ast.AST]:
        """The node directly holding ``node`` (None for the module). The table is built once per
        file, on the first question: asking for each of many nodes stays linear."""
        return self._parents.get(id(node))

    @cached_property
    def _parents(self) -> Dict[int, ast.AST]:
        return self.nodes.parent

    @property
    def nodes(self) -> NodeTable:
        """Every node of the file from the index's one walk: parents, and the nodes of each class
        under a function or class, so rules read slices instead of walking again."""
        nodes = self.index.nodes
        assert nodes is not None  # (dropped only by release, once the check is over)
        return nodes

    def forward_reach(self, cls: ClassInfo) -> Optional[Reach]:
        """What ``cls.forward`` runs (analysis.forward.reach), once per class however many rules ask."""
        key = id(cls)
        if key not in self._reaches:
            self._reaches[key] = reach(self, cls, self_uses=self._self_uses)
        return self._reaches[key]

    @cached_property
    def _reaches(self) -> Dict[int, Optional[Reach]]:
        return {}

    def construction(self, cls: ClassInfo) -> Optional["Construction"]:
        """What building ``cls`` runs (analysis.construction), once per class however many rules
        and assignments ask."""
        from .construction import construction  # (which reads this module)
        key = id(cls)
        if key not in self._constructions:
            self._constructions[key] = construction(self, cls)
        return self._constructions[key]

    @cached_property
    def _constructions(self) -> Dict[int, Optional["Construction"]]:
        return {}

    @cached_property
    def _self_uses(self) -> Dict[int, List[SelfUse]]:
        return {}

    def bases_elsewhere(self, cls: ClassInfo) -> Optional[List[BaseClass]]:
        """The bases of ``cls`` and of its bases in this file that other files of the project
        define, each with its own bases, read from those files (in lookup order, each once); None
        when one cannot be read (no inference layer, a class of a library, a base not found, a
        base whose own bases do not end in nn.Module). Once per class."""
        key = id(cls)
        if key not in self._bases_elsewhere:
            self._bases_elsewhere[key] = self._read_bases(cls)
        return self._bases_elsewhere[key]

    def project_class(self, named: ast.expr) -> Optional[Sequence[BaseClass]]:
        """The class ``named`` (an expression of this file, through its imports) and its bases,
        read from the project file that defines it; None without an inference layer or when it
        is not a project class."""
        return None if self.inference is None else self.inference.base_class(named)

    def _read_bases(self, cls: ClassInfo) -> Optional[List[BaseClass]]:
        if self.inference is None:
            return None
        found: List[BaseClass] = []
        for info in self.class_chain(cls):
            for base in info.node.bases:
                if isinstance(base, ast.Name) and (base.id in self.classes or base.id == "object"):
                    continue
                if self.imports.qualify(base) == "torch.nn.Module":
                    continue
                read = self.inference.base_class(base)
                if read is None:
                    return None
                found.extend(b for b in read if all(b is not other for other in found))
        return found

    @cached_property
    def _bases_elsewhere(self) -> Dict[int, Optional[List[BaseClass]]]:
        return {}

    def used_in_other_files(self, cls: ClassInfo, attr: str) -> bool:
        """Whether code in another file of the project may use ``<expr>.attr`` on an instance of
        ``cls`` (True when unsure). Names alone read no other file: False."""
        return self.inference is not None and self.inference.used_elsewhere(attr, cls.name)

    def subclassed_in_other_files(self, cls: ClassInfo) -> bool:
        """Whether another file of the project may define a subclass of ``cls`` (names alone:
        False; the inference layer reads the project's files)."""
        return self.inference is not None and self.inference.subclassed_elsewhere(cls.name)

    def function_in_project(self, func: ast.expr, method: Optional[str] = None
                            ) -> Optional[Tuple["FileContext", Scope]]:
        """The function of another file of the project that ``func`` (a name this file imports)
        stands for, or with ``method`` the method of the class ``func`` names: a FileContext of
        its file (by names alone, made once per check and file) and the function's scope. None
        without an inference layer (names alone read no other file), or when it is not a plain
        function of the project (inference_seam.FileAnswers.function_in_project)."""
        answers = self._project_answers
        if answers is None:
            return None
        found = answers.function_in_project(func, method, self._within)
        if found is None:
            return None
        other = self._other_files.get(found.path)
        if other is None:
            other = FileContext(found.text, found.path, found.tree)
            other._project_answers, other._within, other._other_files = answers, found.path, self._other_files
            self._other_files[found.path] = other
        scope = next((s for s in other.index.scopes if s.node is found.node), None)
        return (other, scope) if scope is not None else None

    # Who answers function_in_project: this file's inference layer; for a context of another file
    # (made by function_in_project), the checked file's, asked about that file (``_within``).
    @cached_property
    def _project_answers(self) -> Optional[FileAnswers]:
        return self.inference

    _within: Optional[str] = None

    @cached_property
    def _other_files(self) -> Dict[str, "FileContext"]:
        return {}

    def attribute_read_outside(self, node: ast.AST, attr: str) -> bool:
        """Whether ``<expr>.attr`` (other than ``self.attr``) appears in the file outside ``node``.
        Counted once per file and once per ``node``: asking for every class stays linear."""
        counts = self._outside_counts.get(id(node))
        if counts is None:
            counts = self._outside_counts[id(node)] = _count_attribute_names(self.nodes.under(node, ast.Attribute))
        return self._file_attribute_names[attr] > counts[attr]

    @cached_property
    def _file_attribute_names(self) -> Counter[str]:
        if self._given_attribute_names is not None:
            return self._given_attribute_names
        return _count_attribute_names(self.nodes.of_type(ast.Attribute))

    @cached_property
    def _outside_counts(self) -> Dict[int, Counter[str]]:
        return {}

    def moves_own_state(self, info: ClassInfo) -> bool:
        return moves_own_state(info, self.classes)

    def range(self, node: Located) -> Range:
        return self.source.node_range(node)

    def text(self, node: Located) -> str:
        return self.source.segment(node)

    # -- findings ----------------------------------------------------------------------------
    # The rule whose check is running (rules.base.Rule.check): anything with a ``code`` and a
    # default ``severity``, which every finding made meanwhile takes.
    running_rule: Optional[RunningRule] = None

    @contextmanager
    def running(self, rule: RunningRule) -> Iterator[None]:
        self.running_rule = rule
        try:
            yield
        finally:
            self.running_rule = None

    def finding(self, message: str, node_or_range: Union[Located, Range], fixes: Sequence[Fix] = (),
                related: Sequence[Related] = (),
                *, severity: Optional[Severity] = None, deprecated: bool = False) -> Finding:
        """A finding of the running rule; ``severity`` only where this one's grade is not the
        rule's default."""
        rule = self.running_rule
        if rule is None:
            raise RuntimeError("ctx.finding is for a rule's check (Rule.check runs it)")
        rng = node_or_range if isinstance(node_or_range, Range) else self.range(node_or_range)
        return Finding(rule.code, message, rule.severity if severity is None else severity, rng, tuple(fixes),
                       tuple(related), deprecated)

    def graded(self, severity: Optional[Severity]) -> Optional[Severity]:
        """A rule's grade for one finding: its severity, or None (quiet: no evidence of harm),
        which is reported as a hint only when everything is shown."""
        if severity is None:
            return Severity.HINT if self.show_all else None
        return severity

    def related(self, node: Located, message: str) -> Related:
        return Related(self.range(node), message)

    @staticmethod
    def fix(title: str, edits: Iterable[Optional[Edit]], safe: bool, preferred: bool = False) -> Fix:
        return Fix(title, Applicability.SAFE if safe else Applicability.UNSAFE, tuple(e for e in edits if e),
                   preferred)

    # -- edit helpers ------------------------------------------------------------------------
    def spell(self, qualified: str) -> Tuple[str, Optional[Edit]]:
        """How to write a torch name here, with the import edit it needs (if any)."""
        spelled = self.imports.spelling(qualified)
        if spelled is not None:
            return spelled, None
        return qualified, self._add_import(qualified.split(".", 1)[0])

    def _add_import(self, module: str) -> Edit:
        line = self.imports.first_import_line or self._first_code_line()
        return Edit(Range(Position(line, 0), Position(line, 0)), "import %s%s" % (module, self.source.newline()))

    def _first_code_line(self) -> int:
        body = self.tree.body
        for stmt in body:
            is_docstring = (stmt is body[0] and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                            and isinstance(stmt.value.value, str))
            if is_docstring or (isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"):
                continue
            return stmt.lineno
        return self.source.line_count

    def replace(self, node_or_range: Union[Located, Range], new_text: str) -> Edit:
        rng = node_or_range if isinstance(node_or_range, Range) else self.range(node_or_range)
        return Edit(rng, new_text)

    def wrap(self, node: Located, before: str, after: str) -> List[Edit]:
        """Two insertions around a node: whatever is inside (comments too) stays as it is."""
        rng = self.range(node)
        return [Edit(Range(rng.start, rng.start), before), Edit(Range(rng.end, rng.end), after)]

    def stands_alone(self, stmt: ast.stmt) -> bool:
        """The statement starts its first line and ends its last (no `a = 1; b = 2`, no `if x: y`)."""
        rng = self.range(stmt)
        first = self.source.line(rng.start.line)
        if first[: rng.start.column].strip():
            return False
        rest = self.source.line(rng.end.line)[rng.end.column:].strip()
        return not rest or rest.startswith("#")

    def indent(self, stmt: ast.stmt) -> str:
        return self.source.indent_of(stmt.lineno)

    @cached_property
    def indent_unit(self) -> str:
        """The file's own indentation step (4 spaces, 2 spaces, a tab)."""
        for lineno in range(1, self.source.line_count + 1):
            line = self.source.line(lineno)
            stripped = line.lstrip(" \t")
            if stripped and len(line) != len(stripped) and not stripped.startswith("#"):
                return line[: len(line) - len(stripped)]
        return "    "

    def no_grad_block(self, stmt: ast.stmt, body: str) -> Tuple[str, Optional[Edit]]:
        """`with torch.no_grad():` + body, indented to replace ``stmt`` in place."""
        no_grad, import_edit = self.spell("torch.no_grad")
        newline = self.source.newline()
        text = "with %s():%s%s%s%s" % (no_grad, newline, self.indent(stmt), self.indent_unit, body)
        return text, import_edit


def _count_attribute_names(attributes: Iterable[ast.Attribute]) -> Counter[str]:
    """How often each ``<expr>.name`` occurs among these attribute nodes, ``self.name`` left out."""
    return Counter(node.attr for node in attributes if not is_self_attribute(node))


def is_self_attribute(node: ast.Attribute) -> bool:
    return isinstance(node.value, ast.Name) and node.value.id == "self"
