"""The jedi layer's view of one file (:class:`FileInference`): the questions the syntactic layer
leaves open about that file's expressions and class bases, answered from the file's stored
answers, by reading other files, or by jedi within the file's budget; and the answers as stored
on disk (:func:`_encode`).
"""
from __future__ import annotations

import ast
import logging
import os
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Set, Tuple, TypeVar, Union, cast

from ..analysis import torch_names as tn
from .inference_cache import Entry, dependency
from . import jedi_access
from .jedi_access import BudgetSpent, JediName, JediScript, with_frame_room, within_deadline
from .project_answers import (ASK, PLAIN_TYPES, QUESTION_FILE, Ask, CheckedFile, FilesAnswer, body_line,
                              parameter_default, rebinds, typed_in_words)
from .project_files import ImportNode, is_builtin_class, name_bindings, statement_walk
from .reduced_text import TopLevel
from ..analysis.findings import UncheckedClass
from ..analysis.forward import BaseClass
from ..analysis.inference_seam import ProjectFunction
from ..analysis.scopes import ClassInfo, NodeTable, Scope, dotted_name
from ..analysis.source import SourceText
from ..analysis.values import OTHER, Kind, Value

if TYPE_CHECKING:
    from .layer import JediInference

log = logging.getLogger("torchlint")
Answer = TypeVar("Answer")

_UNREADABLE_PREFIX = "u:"
_UNREADABLE = _UNREADABLE_PREFIX + "%d:%d"  # the answers' key of why a base could not be read (at its line, column)
_TENSOR_CLASSES = frozenset(["torch.Tensor", "torch._tensor.Tensor", "torch._C.TensorBase", "torch._C._TensorBase"])
MOST_OF_THE_TEXT = 0.6  # a reduced text for jedi above this share of the lines: the whole text instead
# Kept for a classmethod called on a project class (project_answers.question_key) when jedi's answer
# is an instance of that class: each call's answer is then an instance of the class it is called on.
_THE_CALLED_CLASS = Value(Kind.MODULE, module_class="(the class the classmethod is called on)")


class FileInference:
    """jedi's view of one file's text; created per check, asked only about unknowns.

    Answers are kept by question (``c:line:col:type`` for an expression, ``b:line:col`` for a
    base class); with a disk cache they are loaded before the first question and, when jedi had
    to be asked, stored by :meth:`finish` with the project files they were read from.
    """

    def __init__(self, project: JediInference, text: str, path: str, source: SourceText,
                 tree: Optional[ast.Module] = None, nodes: Optional[NodeTable] = None) -> None:
        self.project = project
        self.text = text
        # The tree the check is using: the file's, or a reduced copy of it (torchlint.incremental)
        # that holds every statement binding a name the check asks about, and every import.
        self._tree = tree
        self._nodes = nodes  # that tree's scopes.NodeTable, when the check built one
        self.path = path if os.path.isabs(path) else os.path.abspath(path)
        self.source = source  # SourceText: ast byte columns -> jedi code-point columns
        self._script: Optional[JediScript] = None
        self._answers: Dict[str, object] = {}  # question -> answer, as stored (see _encode)
        self._asked = False  # jedi answered something not stored yet
        self._read: Set[str] = set()  # files of other modules the answers came from
        self.spent = 0.0  # seconds of jedi on this file
        self.note: Optional[str] = None  # why inference stopped early on this file, for the user
        self._stopped_here = False  # this check's budget ran out (not an earlier run's, from the cache)
        self._cache_key: Optional[str] = None
        self._import_nodes: Optional[List[ImportNode]] = None  # of this text, found on the first base asked about
        self.name_bindings: Optional[Dict[str, List[str]]] = None  # see name_bindings, found on first use
        self._units: Optional[TopLevel] = None  # see _script_for
        self._kept: Optional[Set[int]] = None  # top-level statements the script's text holds (None: all)
        self._unknowable: Dict[Tuple[int, str], str] = {}  # see _of_an_unknowable_parameter
        self._checked: Optional[CheckedFile] = None  # see _from_files
        self._question: Optional[JediScript] = None  # the last Script of a question's own text (_classify)
        self._bases_read: Set[str] = set()  # files base_class, function_in_project read (ProjectFiles.read_for)
        self._asked_index = False  # the check asked the project index (ProjectFiles.index_askers)
        if project.cache is not None:
            self._cache_key = project.cache.key(project.environment_id, self.path, text)
            entry = project.cache.load(self._cache_key)
            if entry is not None and not valid_answers(entry.answers):
                project.cache.discard(self._cache_key)
                entry = None
            if entry is not None and (entry.note is None or entry.budget == project.budget):
                self._answers, self.note = entry.answers, entry.note  # stopped early: the same answers again

    @property
    def script(self) -> JediScript:
        if self._script is None:
            self._script = self.project.new_script(self.text, self.path)
        return self._script

    def _script_for(self, node: ast.AST) -> JediScript:
        """The jedi Script to ask about ``node``. In a run that shares states (the CLI), its text
        keeps, of the file's top-level functions and classes, the one holding ``node`` and those
        whose names appear as words (in strings and comments too) in what it keeps, transitively;
        the other lines are blank, so no position moves. jedi parses the text before its first
        answer, and seldom needs all of it. A later question outside what is kept, or a kept part
        that is most of the file, gets the whole text: a second reduced text would parse again
        much of what the first one did."""
        if not self.project.share_states or (self._script is not None and self._kept is None):
            return self.script
        if self._units is None:
            tree = self._checked_tree()
            if tree is None:
                return self.script
            self._units = TopLevel(tree, self.source)
        unit = self._units.holding(getattr(node, "lineno", 0))
        if self._script is not None and (unit is None or self._kept is not None and unit in self._kept):
            return self._script
        kept = None if self._script is not None else self._units.closure({unit} if unit is not None else set())
        if kept is None or self._units.lines(kept) > MOST_OF_THE_TEXT * self.source.line_count:
            self._kept = None
            self._script = self.project.new_script(self.text, self.path)
            return self._script
        self._kept = kept
        self._script = self.project.new_script(self._units.text_of(kept), self.path)
        return self._script

    # -- hooks the syntactic layer calls --------------------------------------------------------
    def is_module_base(self, info: Optional[ClassInfo], base: ast.expr) -> bool:
        key = "b:%d:%d" % (base.lineno, base.col_offset)
        stored = self._answers.get(key)
        if isinstance(stored, bool):
            return stored
        if self.project.failure is not None or self.note is not None:
            return False
        found = False if is_builtin_class(base, self._file_bindings) else self._base_from_files(base)
        if found is not None:
            self._remember(key, found)  # with the files it was read from: a warm run reads none
            if found is False and self._import_nodes is not None:
                missing = self.project.missing_package(self.path, self._import_nodes, base)
                if missing is not None:
                    self._remember(_UNREADABLE % (base.lineno, base.col_offset), _not_found_why(self.path, missing))
            return found
        try:
            answer = self._ask(lambda: self.project.base_is_module(self._script_for(base), base, self.text, 1,
                                                                    self._read),
                               into_torch=False)
        except BudgetSpent:
            return False
        except Exception:  # the interpreter timed out, or a jedi bug: names alone then
            log.debug("jedi base resolution failed in %s", self.path, exc_info=True)
            return False
        self._remember(key, bool(answer))
        if answer is None and self._imported_maybe(base):
            self._remember(_UNREADABLE % (base.lineno, base.col_offset), "no definition of it was found")
        return bool(answer)

    def _imported_maybe(self, base: ast.expr) -> bool:
        """Whether ``base``'s first name may come from another module: an import binds it, or a star
        import may. A name nothing binds is a NameError mid-typing, not a package that is missing."""
        head = (dotted_name(base) or "").partition(".")[0]
        bindings = self._file_bindings()
        return "*" in bindings or any(kind.startswith(("import ", "from ")) for kind in bindings.get(head, ()))

    def unchecked_classes(self, classes: Sequence[ClassInfo]) -> List[UncheckedClass]:
        """The classes of the file, not Modules, with a base whose Module-ness could not be read (see
        is_module_base), or a base that is such a class of the file: no rule checked them."""
        why: Dict[str, UncheckedClass] = {}
        changed = any(key.startswith(_UNREADABLE_PREFIX) for key in self._answers)
        while changed:
            changed = False
            for info in classes:
                if info.is_module or info.name in why:
                    continue
                for base in info.node.bases:
                    reason = self._answers.get(_UNREADABLE % (base.lineno, base.col_offset))
                    inherited = why.get(base.id) if isinstance(base, ast.Name) else None
                    if isinstance(reason, str):
                        why[info.name] = UncheckedClass(info.name, self.source.node_range(info.node).start,
                                                        dotted_name(base) or "?", reason)
                    elif inherited is not None:
                        why[info.name] = replace(inherited, name=info.name,
                                                 position=self.source.node_range(info.node).start)
                    else:
                        continue
                    changed = True
                    break
        return sorted(why.values(), key=lambda c: (c.position.line, c.position.column))

    def _base_from_files(self, base: ast.expr) -> Optional[bool]:
        """A base resolved by reading the files its import names (no jedi); None: ask jedi."""
        import_nodes = self._imports()
        if import_nodes is None:
            return None
        try:
            return self.project.base_from_files(self.path, import_nodes, base, 1, self._read)
        except (OSError, ValueError, RecursionError):
            return None

    def _imports(self) -> Optional[List[ImportNode]]:
        """Every Import/ImportFrom of the checked tree, in ast.walk's order (None: no tree)."""
        if self._import_nodes is None:
            tree = self._checked_tree()
            if tree is None:
                return None
            if self._nodes is not None:  # the same nodes in the same order, without a walk
                nodes = self._nodes
                self._import_nodes = cast(List[ImportNode], nodes.in_walk_order(nodes.positions_of(ast.Import) +
                                                                                nodes.positions_of(ast.ImportFrom)))
            else:
                self._import_nodes = [n for n in statement_walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
        return self._import_nodes

    def base_class(self, base: ast.expr) -> Optional[Sequence[BaseClass]]:
        """Read from the project's files, without jedi: never stored with the answers (what they
        say changes with those files), kept per file while it is unchanged (ProjectFiles)."""
        import_nodes = self._imports()
        if import_nodes is None:
            return None
        try:
            return self.project.bases_in_project(self.path, import_nodes, base, self._bases_read)
        except (OSError, ValueError, RecursionError):
            return None

    def function_in_project(self, func: ast.expr, method: Optional[str] = None,
                            within: Optional[str] = None) -> Optional[ProjectFunction]:
        """Read from the project's files, without jedi, like base_class (the files read make this
        check one to run again when they are saved: ProjectFiles.read_for)."""
        if within is None:
            path, import_nodes = self.path, self._imports()
        elif self.project.in_project(within):
            path, import_nodes = within, self.project.read_imports(within)
        else:
            return None
        if import_nodes is None:
            return None
        try:
            return self.project.function_in_project(path, import_nodes, func, method, self._bases_read)
        except (OSError, ValueError, RecursionError):
            return None

    def used_elsewhere(self, attr: str, class_name: str) -> bool:
        self._asked_index = True
        return self.project.project_index.used_elsewhere(self.path, attr, class_name)

    def subclassed_elsewhere(self, name: str) -> bool:
        self._asked_index = True
        return self.project.project_index.subclassed_elsewhere(self.path, name)

    def classify(self, node: ast.expr, scope: Optional[Scope]) -> Optional[Value]:
        if not self.project.torch_available or not isinstance(node, (ast.Name, ast.Attribute, ast.Call)):
            return None
        key = answer_key(node)
        stored = self._answers.get(key, False)
        if stored is None:
            return None  # asked before: jedi could not tell
        if stored is not False and _decode(stored) is not None:
            return _decode(stored)
        if self.project.failure is not None or self.note is not None or self._never_a_value(node) \
                or self._of_an_unknowable_parameter(node):
            return None
        read = self._from_files(node)
        if not isinstance(read, Ask):
            self._remember(key, _encode(read))
            return read
        asked = self._question_key(node)
        question = None if asked is not None and asked in self.project.asked else self._question_text(node)
        if asked is None and question is not None:
            # The same lines beside the same folder get the same answer (`config.num_labels` for
            # each class of a file that takes the same config: benchmarks/README.md#tuned-constants).
            asked = (QUESTION_FILE, os.path.dirname(self.path)) + question
        if asked is not None and asked in self.project.asked:
            value, depended_on = self.project.asked[asked]
            if value is _THE_CALLED_CLASS:
                value = self._instance_of_called_class(node)
            if value is not _THE_CALLED_CLASS:
                self._read.update(depended_on)
                self._remember(key, _encode(value))
                return value
            question = self._question_text(node)  # (an instance of a class of another file: jedi names it)
        try:
            value = self._ask(lambda: self._classify(node, question))
        except BudgetSpent:
            return None
        except Exception:  # jedi has its own bugs; an unknown is always a safe answer
            log.debug("jedi inference failed at %s:%s", self.path, node.lineno, exc_info=True)
            value = None
            asked = None
        if self.project.failure is None:  # an answer cut short by a timeout is not one to keep
            self._remember(key, _encode(value))
            script = self._question if question is not None else self._script
            if asked is not None and script is not None:
                # What jedi read so far for this file: more than this answer needs, which only
                # makes a later change elsewhere re-ask more often.
                depends_on = self.project.loaded_files(script)
                if depends_on is not None:
                    kept = _THE_CALLED_CLASS if self._names_called_class(node, value) else value
                    self.project.asked[asked] = (kept, frozenset(depends_on - {self.path}))
        return value

    def _called_class(self, node: ast.expr) -> Optional[Tuple[str, int, str]]:
        """See project_answers.ProjectAnswers.called_class."""
        checked = self._checked_file()
        return self.project.answers.called_class(checked, node) if checked is not None else None

    def _names_called_class(self, node: ast.expr, value: Optional[Value]) -> bool:
        """``Class.method(...)``'s answer is an instance of ``Class`` (a classmethod's ``cls(...)``)."""
        called = self._called_class(node)
        name = value.module_class if value is not None and value.kind is Kind.MODULE else None
        return called is not None and name is not None and (name == called[2] or name.endswith("." + called[2]))

    def _instance_of_called_class(self, node: ast.expr) -> Optional[Value]:
        """An instance of the class ``Class.method(...)`` is called on, as jedi names it: for a class of
        this file, its local name; _THE_CALLED_CLASS for another file's (jedi's full name: asked)."""
        called = self._called_class(node)
        if called is None or os.path.abspath(called[0]) != self.path:
            return _THE_CALLED_CLASS
        if self.project.class_is_module(self.path, called[1], read=self._read):
            return Value(Kind.MODULE, module_class=called[2])
        return None

    def _from_files(self, node: ast.expr) -> FilesAnswer:
        """The answer the project's files give without jedi (see project_answers), or ASK."""
        checked = self._checked_file()
        if checked is None:
            return ASK
        try:
            return self.project.answers.answer(checked, node, self._read)
        except (OSError, ValueError, RecursionError):
            return ASK

    def _checked_file(self) -> Optional[CheckedFile]:
        if self._checked is None and self._nodes is not None:
            tree = self._checked_tree()
            if tree is not None:
                self._checked = CheckedFile(self.path, tree, self._nodes.parent, self._file_bindings(), self.text)
        return self._checked

    def _question_key(self, node: ast.expr) -> Optional[Tuple[object, ...]]:
        """See project_answers.ProjectAnswers.question_key; only in a run that shares states (the
        CLI's), where files do not change while it lasts."""
        checked = self._checked_file() if self.project.share_states else None
        return self.project.answers.question_key(checked, node) if checked is not None else None

    def _file_bindings(self) -> Dict[str, List[str]]:
        if self.name_bindings is None:
            tree = self._checked_tree()
            self.name_bindings = name_bindings(tree, self._nodes) if tree is not None else {"*": ["*"]}
        return self.name_bindings

    def _own_class_line(self, name: str) -> Optional[int]:
        """The line of the class statement of this file's top-level class ``name`` (None: none)."""
        tree = self._checked_tree()
        found = [s.lineno for s in tree.body if isinstance(s, ast.ClassDef) and s.name == name] if tree else []
        return found[0] if len(found) == 1 else None

    def _checked_tree(self) -> Optional[ast.Module]:
        if self._tree is None:
            from ..analysis.parsing import parse  # the tree the check is using (kept for a while)
            self._tree, _ = parse(self.text, self.path)
        return self._tree

    def _never_a_value(self, node: ast.expr) -> bool:
        """Questions whose answer names already give: jedi would say "unknown" (None). A module
        (a name bound only by ``import x``), and a new instance of a builtin or standard-library
        class that is neither a tensor nor a plain value (``list(...)``, ``defaultdict(deque)``):
        :meth:`_value_of_class` knows no such class. Only for names nothing else in the file binds."""
        bindings = self._file_bindings()
        if isinstance(node, ast.Name):
            kinds = bindings.get(node.id) or []
            return bool(kinds) and all(kind.startswith("import ") for kind in kinds)
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        if isinstance(func, ast.Name):
            kinds = bindings.get(func.id) or []
            if not kinds:
                return "*" not in bindings and "builtins." + func.id in _NEVER_VALUE_CLASSES
            return len(kinds) == 1 and kinds[0].startswith("from ") and kinds[0][5:] in _NEVER_VALUE_CLASSES
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            kinds = bindings.get(func.value.id) or []
            return len(kinds) == 1 and kinds[0].startswith("import ") \
                and "%s.%s" % (kinds[0][7:], func.attr) in _NEVER_VALUE_CLASSES
        return False

    def _of_an_unknowable_parameter(self, node: ast.expr) -> bool:
        """``config.hidden_size``, ``config.get(...)``, ``getattr(config, "x", 0)`` where ``config`` is a
        parameter jedi infers nothing for, so that it answers "unknown" (None) without being asked.
        jedi infers a parameter of a function it has not seen called (dynamic_params is off) from
        its annotation, its docstring, a ``# type:`` comment, pytest's fixtures, its default, or, for
        a method's first parameter, the class. Here: none of those (a default of ``None`` gives no
        attribute but dunders), no decorator, and no other binding of the name in the function."""
        if self._nodes is None:
            return False
        call = node if isinstance(node, ast.Call) else None
        root = node
        getattr_args = call.args if call is not None and isinstance(call.func, ast.Name) and call.func.id == "getattr" \
            and 2 <= len(call.args) <= 3 and not call.keywords and "getattr" not in self._file_bindings() \
            and "*" not in self._file_bindings() else None
        if getattr_args is not None:
            root = getattr_args[0]  # the builtin: jedi's getattr looks the name up on what it infers the object is
        attrs: List[str] = []
        while True:
            if isinstance(root, ast.Attribute):
                attrs.append(root.attr)
                root = root.value
            elif isinstance(root, ast.Call):
                root = root.func
            elif isinstance(root, ast.Subscript):
                root = root.value
            else:
                break
        if not isinstance(root, ast.Name) or root is node:
            return False
        parents = self._nodes.parent
        function = parents.get(id(root))
        while function is not None and not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = parents.get(id(function))
        if function is None:
            return False
        key = (id(function), root.id)
        cached = self._unknowable.get(key)
        if cached is None:
            cached = self._unknowable[key] = _unknowable_parameter(function, root.id, parents, self.source)
        if cached == "default-none":  # None's attributes are its dunders
            if getattr_args is not None:
                name = getattr_args[1]
                attrs.append(name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else "__")
            return not any(a.startswith("__") for a in attrs)
        return cached == "unknowable"

    def finish(self) -> None:
        """The check is over: leave the budget note for the owner, store what jedi was asked
        about this text (when a disk cache is in use)."""
        if self.note is not None:
            self.project.notes[self.path] = self.note
        if self._bases_read:
            self.project.read_for.setdefault(self.path, set()).update(self._bases_read)
        if self._asked_index:
            self.project.index_askers.add(self.path)
        if self._checked is not None:
            self._checked.mros.clear()  # its own classes hold it: a cycle the collector would have to find
        cache = self.project.cache
        keep = cache is not None and (self._asked or self._stopped_here) and self.project.failure is None
        last = self._script if self._script is not None else self._question
        loaded: Optional[Set[str]] = self.project.loaded_files(last) if keep and last is not None else set()
        self.project.done_with(self._script)
        if self._question is not None:
            self.project.done_with(self._question)
        if cache is None or self._cache_key is None or not keep or loaded is None:
            return  # loaded None: cannot tell what the answers depend on (kept for this run only)
        read = (self._read | loaded) - {self.path}
        dependencies = [d for d in (dependency(p) for p in read if self.project.is_project_file(p)) if d]
        if len(dependencies) < len([p for p in read if self.project.is_project_file(p)]):
            return  # a file the answers came from is gone already
        cache.store(self._cache_key, Entry(self._answers, self.note, self.project.budget), dependencies)

    def _remember(self, key: str, answer: object) -> None:
        self._answers[key] = answer
        self._asked = True

    def _ask(self, question: Callable[[], Answer], into_torch: bool = True) -> Answer:
        """Run one jedi question within what is left of the file's budget. Past the budget the
        file's remaining questions are not asked (BudgetSpent) and :attr:`note` says so.
        ``into_torch``: the question is about values, which sends jedi into torch."""
        budget = self.project.budget
        if into_torch:
            self.project.warm()  # jedi's first trip into torch is the process's cost, not this file's
        started = time.monotonic()
        try:
            with within_deadline(None if budget is None else max(budget - self.spent, 0.0)):
                return with_frame_room(question)
        except BudgetSpent as spent:  # (only raised within a budget)
            self._spoiled()
            if budget is not None:
                self._stop(budget, spent.where)
            raise
        except Exception:  # jedi failed midway: what it kept may be partial
            self._spoiled()
            raise
        finally:
            self.spent += time.monotonic() - started
            if budget is not None and self.spent >= budget and self.note is None:
                self._stop(budget)

    def _spoiled(self) -> None:
        """A question failed midway: its state is not shared any more, and its script, whose
        tree jedi no longer keeps, is not asked again (a later question gets a fresh one). What its
        earlier answers were read from is kept for the disk cache first."""
        for script in (self._script, self._question):
            loaded = self.project.loaded_files(script) if script is not None else set()
            if loaded is None:
                self._cache_key = None  # what the answers came from is not known: not kept on disk
            else:
                self._read |= loaded
        self.project.done_with(self._script, spoiled=True)
        self.project.done_with(self._question, spoiled=True)
        self._script, self._kept, self._question = None, None, None

    def _stop(self, budget: float, where: Optional[str] = None) -> None:
        """No more questions about this file. Its answers so far are kept (on disk too, with the
        note): the next run with this budget finds the same, without asking."""
        self.note = ("type inference stopped after %.3g s (the per-file budget, --infer-budget)%s; "
                     "the rest of this file was checked by names alone"
                     % (budget, " while jedi read `%s`" % where if where else ""))
        self._stopped_here = True

    def _classify(self, node: ast.expr, question: Optional[Tuple[str, int, int]] = None) -> Optional[Value]:
        """jedi's answer: in ``question``'s own text (see _question_text) when there is one, else
        in the file's."""
        if question is not None:
            text, at_line, at_column = question
            script = self._question = self.project.new_script(text, os.path.join(os.path.dirname(self.path),
                                                                                 QUESTION_FILE))
            try:
                return self._answer(node, script.infer(at_line, at_column), script)
            finally:
                self._read |= self.project.loaded_files(script) or set()
                jedi_access.forget_parsed(script.path)
        target = node.func if isinstance(node, ast.Call) else node
        line, column = last_token(target, self.text, self.source)
        if line is None:
            return None
        script = self._script_for(node)
        return self._answer(node, script.infer(line, column), script)

    def _question_text(self, node: ast.expr) -> Optional[Tuple[str, int, int]]:
        """See project_answers.ProjectAnswers.question_text; in a run that shares states (the CLI's).
        None (the file's text) for an expression too deep to write out again."""
        checked = self._checked_file() if self.project.share_states else None
        try:
            return self.project.answers.question_text(checked, node) if checked is not None else None
        except (ValueError, RecursionError):
            return None

    def _answer(self, node: ast.expr, names: List[JediName], script: JediScript) -> Optional[Value]:
        """The answer jedi's ``names`` (what it inferred at ``node`` in ``script``) give."""
        if not names:
            return None
        if isinstance(node, ast.Call):
            if len(names) == 1 and names[0].type == "function":
                return self._returned(names[0], script)
            results: List[JediName] = []
            for name in names:
                if name.type == "function":
                    results.extend(name.execute())
                elif name.type == "class":
                    results.append(name)  # constructing: an instance of that class
                else:
                    return None  # calling an instance: Module.__call__ is the syntactic layer's business
            names = results
            if not names:
                return None
            return self._values(names, constructed=True)
        return self._values(names, constructed=False)

    def _returned(self, function: JediName, script: JediScript) -> Optional[Value]:
        """What a helper returns. jedi executes it without the call's arguments, so the answer is
        the function's own: one helper defined in another file is executed once per process."""
        module_path = str(function.module_path or "")
        key = (module_path, function.line or 0, function.column or 0)
        if not module_path or os.path.abspath(module_path) == self.path or not function.line \
                or os.path.basename(module_path) == QUESTION_FILE:  # (a question's own lines: not kept by place)
            return self._values(function.execute(), constructed=True)
        if key not in self.project.return_cache:
            read: Set[str] = {module_path}
            outer, self._read = self._read, read
            try:
                value = self._values(function.execute(), constructed=True)
            finally:
                self._read = outer
            if self.path in read:
                # through a class of this file (`cls(...)` of a classmethod called on it): this
                # file's answer, not the helper's, so not kept by the helper's place
                self._read.update(read - {self.path})
                return value
            # Everything this file's jedi state has read so far: more than the helper needs,
            # which only makes a later change elsewhere re-ask more often.
            read |= self.project.loaded_files(script) or set()
            read.discard(self.path)  # the file that asked first: not what the helper depends on
            self.project.return_cache[key] = (value, frozenset(read))
        value, read_from = self.project.return_cache[key]
        self._read.update(read_from)
        return value

    def _values(self, names: Sequence[JediName], constructed: bool) -> Optional[Value]:
        if not names:
            return None
        values: Set[Value] = set()
        for name in names:
            if name.type not in ("instance", "class") or (name.type == "class" and not constructed):
                return None
            values.add(self._value_of_class(name))
        if len(values) == 1:
            value = values.pop()
            return value if value.kind is not Kind.UNKNOWN else None
        return None

    def _value_of_class(self, name: JediName) -> Value:
        full_name = name.full_name or ""
        if full_name in _TENSOR_CLASSES:
            return Value(Kind.TENSOR)
        canonical = tn.canonical(full_name)
        if canonical == "torch.nn.Parameter":
            return Value(Kind.PARAMETER)
        if canonical == "torch.nn.Buffer":
            return Value(Kind.BUFFER)
        if full_name in PLAIN_TYPES:
            return OTHER
        if tn.is_module_class(canonical):
            return Value(Kind.MODULE, module_class=canonical)
        module_path, line = str(name.module_path or ""), name.line
        if os.path.basename(module_path) == QUESTION_FILE:
            # a class of this file copied into a question's own text: the file's own, as on its text
            module_path, line = self.path, self._own_class_line(full_name.rsplit(".", 1)[-1])
        if self.project.readable_source(module_path) and line \
                and self.project.class_is_module(module_path, line, read=self._read):
            local = full_name.rsplit(".", 1)[-1] if os.path.abspath(module_path) == self.path else full_name
            return Value(Kind.MODULE, module_class=local)
        if module_path and self.project.is_project_file(module_path):
            self._read.add(module_path)
        return Value(Kind.UNKNOWN)


def _encode(value: Optional[Value]) -> Optional[List[object]]:
    """A Value as plain JSON data (None: jedi could not tell)."""
    if value is None:
        return None
    return [value.kind.value, bool(value.requires_grad), value.factory, value.module_class, bool(value.empty)]


def _decode(data: object) -> Optional[Value]:
    """The Value _encode wrote, or None for anything else (a damaged entry: ask again)."""
    if not isinstance(data, (list, tuple)) or len(data) != 5:
        return None
    kind, requires_grad, factory, module_class, empty = data
    if kind not in _KIND_VALUES or not isinstance(requires_grad, bool) or not isinstance(empty, bool) \
            or not all(isinstance(x, (str, type(None))) for x in (factory, module_class)):
        return None
    return Value(Kind(kind), requires_grad, factory, module_class, empty)


_KIND_VALUES = frozenset(kind.value for kind in Kind)


def valid_answers(answers: Dict[str, object]) -> bool:
    """Whether ``answers`` (read from the disk cache) holds only what this module stores: for a
    base (``b:``) a bool, for a value (``c:``) None or an encoded Value, for why a base could not be
    read (``u:``) a sentence. Anything else is not an answer this version gave: never used."""
    for key, answer in answers.items():
        if not isinstance(key, str):
            return False
        if key.startswith("b:"):
            if not isinstance(answer, bool):
                return False
        elif key.startswith("c:"):
            if answer is not None and _decode(answer) is None:
                return False
        elif not (key.startswith(_UNREADABLE_PREFIX) and isinstance(answer, str)):
            return False
    return True


# Classes whose new instances jedi's answer (_value_of_class) always calls unknown: builtins and
# standard-library classes that are neither tensors, Modules nor plain values (int, str: OTHER).
_NEVER_VALUE_CLASSES = frozenset(["builtins." + name for name in (
    "list", "tuple", "set", "frozenset", "dict", "bytearray", "object", "type", "slice", "memoryview",
    "enumerate", "zip", "map", "filter", "reversed", "super", "property", "staticmethod", "classmethod")] + [
    "collections.defaultdict", "collections.OrderedDict", "collections.deque", "collections.Counter",
    "functools.partial", "contextlib.ExitStack", "pathlib.Path", "io.BytesIO", "io.StringIO",
    "argparse.ArgumentParser", "threading.Thread", "threading.Event", "queue.Queue",
    "weakref.WeakKeyDictionary", "weakref.WeakValueDictionary", "weakref.WeakSet"])


def _not_found_why(path: str, missing: str) -> str:
    """Why the package of ``missing`` (a dotted name a file imports) was not found, for the user: not
    installed, or, where the file is inside a package of that name (a package importing itself
    absolutely: ``from transformers.modeling_utils import ...`` in transformers' own models),
    not on the path because the check starts below the folder holding it."""
    top = missing.split(".", 1)[0]
    folder = os.path.dirname(path)
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        if os.path.basename(folder) == top:
            return ("`%s`, the package this file is in, is not on the analysed path: check from the folder "
                    "that holds it (%s), or install it" % (top, os.path.dirname(folder)))
        folder = os.path.dirname(folder)
    return "`%s` is not installed in the analysed environment" % top


def answer_key(node: ast.expr) -> str:
    """What a file's answer about ``node`` is kept under: where it begins and ends, and what it is
    (`t.argmin()` and `t.argmin().item()` begin at the same place)."""
    return "c:%d:%d:%s:%s:%s" % (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset,
                                 type(node).__name__)


def last_token(node: ast.expr, text: str, source: Optional[SourceText] = None) -> Tuple[Optional[int], int]:
    """jedi's (line, column) of the last name in ``a.b.c`` / ``name``: where inference looks."""
    if isinstance(node, ast.Name):
        line, byte_col = node.lineno, node.col_offset
    elif isinstance(node, ast.Attribute) and node.end_lineno is not None and node.end_col_offset is not None:
        line = node.end_lineno  # (a parsed tree has end positions)
        byte_col = node.end_col_offset - len(node.attr.encode("utf-8"))
    else:
        return None, 0
    source = source if source is not None else SourceText(text)
    return line, source.column(line, byte_col)


def _unknowable_parameter(function: Union[ast.FunctionDef, ast.AsyncFunctionDef], name: str,
                          parents: Dict[int, ast.AST], source: SourceText) -> str:
    """Whether jedi can infer nothing for parameter ``name`` of ``function`` inside it: "unknowable",
    "default-none" (its default is None, which has no attributes but dunders), or "no"."""
    if function.decorator_list or function.name.startswith("test"):
        return "no"  # a decorator may wrap it; pytest's plugin infers fixtures for test functions
    args = function.args
    positional = args.posonlyargs + args.args
    param = next((a for a in positional + args.kwonlyargs if a.arg == name), None)
    if param is None or param.annotation is not None:
        return "no"
    if isinstance(parents.get(id(function)), ast.ClassDef) and positional and positional[0] is param:
        return "no"  # a method's self (or cls): the class's instance
    default = parameter_default(function, param)
    if default is not None and not (isinstance(default, ast.Constant) and default.value is None):
        return "no"
    if typed_in_words(function, name, [source.line(n) for n in range(function.lineno, body_line(function) + 1)]):
        return "no"  # jedi reads parameter types from docstrings and type comments
    if rebinds(function, name, param):  # any other binding of the name in the function, nested code too
        return "no"
    return "default-none" if default is not None else "unknowable"
