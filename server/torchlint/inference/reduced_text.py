"""The reduced texts the jedi layer gives jedi (:meth:`.file_inference.FileInference._script_for`):
of a file's top-level functions and classes, and of those classes' methods, only those a question
needs; the other lines blank, so that no position moves.
"""
from __future__ import annotations

import ast
import bisect
import re
from typing import Dict, List, Optional, Set, Tuple, cast

from ..analysis.scopes import nodes_by_type
from ..analysis.source import SourceText, line_groups, statement_start

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class TopLevel:
    """A file's top-level statements, for the reduced texts FileInference._script_for gives jedi:
    a function or class is kept only when needed; the rest (imports, assignments, ``if`` blocks:
    what the module runs) always is. Statements that share a line are one unit.

    The methods of a top-level class are units of their own (members): a kept class keeps its own
    statements (the ``class`` line, its decorators, docstring and class-level assignments), its
    dunder methods, and the other methods only when needed: named as a word of what is kept, or
    assigning an attribute so named (jedi reads every ``self.x = ...`` of a class to answer
    ``self.x``). A method alone never keeps its class: only the class's name does, or a method
    that holds what a question asks about."""

    def __init__(self, tree: ast.Module, source: SourceText) -> None:
        self.source = source
        self.spans: List[Tuple[int, int]] = []  # each unit's first and last line, decorators included
        self.definers: Dict[str, List[int]] = {}  # name -> the top-level units (functions, classes) defining it
        self.member_definers: Dict[str, List[int]] = {}  # name -> the methods defining it or storing an attribute so named
        self.names: Dict[int, Set[str]] = {}  # a method's unit -> those names
        self.others: Set[int] = set()  # the units always kept
        self.scanned: Set[int] = set()  # the others whose words count (not `__all__ = [...]`: it
        # names every definition, and tells jedi nothing about this file's values)
        self.members: Dict[int, List[int]] = {}  # a class's unit -> its methods' units, in order
        self.owner: Dict[int, int] = {}  # a method's unit -> its class's unit
        self.dunders: Set[int] = set()  # the methods kept whenever their class is (__init__, __getattr__...)
        self.bare: Set[int] = set()  # the classes whose body is only methods (see text_of)
        top: List[int] = []
        for group in line_groups(tree.body):
            index = self._unit(group)
            top.append(index)
            if len(group) == 1 and isinstance(group[0], (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.definers.setdefault(group[0].name, []).append(index)
                if isinstance(group[0], ast.ClassDef):
                    self._add_members(index, group[0])
                continue
            self.others.add(index)
            if not all(_assigns_all(stmt) for stmt in group):
                self.scanned.add(index)
        self.firsts = [self.spans[index][0] for index in top]
        self.top = top

    def _unit(self, group: List[ast.stmt]) -> int:
        self.spans.append((statement_start(group[0]), max(stmt.end_lineno or stmt.lineno for stmt in group)))
        return len(self.spans) - 1

    def _add_members(self, cls: int, node: ast.ClassDef) -> None:
        members: List[int] = []
        for group in line_groups(node.body):
            method = group[0]
            if len(group) != 1 or not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            index = self._unit(group)
            members.append(index)
            self.owner[index] = cls
            if method.name.startswith("__") and method.name.endswith("__"):
                self.dunders.add(index)
            self.names[index] = {method.name} | _attributes_stored(method)
            for name in self.names[index]:
                self.member_definers.setdefault(name, []).append(index)
        if members and len(members) == len(node.body):
            self.bare.add(cls)
        self.members[cls] = members

    def holding(self, line: int) -> Optional[int]:
        """The unit holding ``line`` (a method rather than its class), or None (a line between units)."""
        index = bisect.bisect_right(self.firsts, line) - 1
        if index < 0:
            return None
        unit = self.top[index]
        if line > self.spans[unit][1]:
            return None
        for member in self.members.get(unit, ()):
            if self.spans[member][0] <= line <= self.spans[member][1]:
                return member
        return unit

    def closure(self, start: Set[int]) -> Set[int]:
        """``start``, the others, and every definition whose name is a word of what is kept."""
        kept: Set[int] = set()
        pending: List[int] = []
        words: Set[str] = set()

        def keep(unit: int) -> None:
            if unit in kept:
                return
            kept.add(unit)
            if unit not in self.others or unit in self.scanned:
                pending.append(unit)
            if unit in self.owner:
                keep(self.owner[unit])
            for member in self.members.get(unit, ()):
                if member in self.dunders or self.names[member] & words:
                    keep(member)
        for unit in set(start) | self.others:
            keep(unit)
        while pending:
            for word in set(_WORD.findall(self._own_text(pending.pop()))) - words:
                words.add(word)
                for index in self.definers.get(word, ()):
                    keep(index)
                for member in self.member_definers.get(word, ()):
                    if self.owner[member] in kept:  # (the methods of a class kept later are seen then)
                        keep(member)
        return kept

    def lines(self, kept: Set[int]) -> int:
        return sum(self.spans[i][1] - self.spans[i][0] + 1 for i in kept if i not in self.owner) - sum(
            self.spans[m][1] - self.spans[m][0] + 1 for i in kept for m in self.members.get(i, ()) if m not in kept)

    def text_of(self, kept: Set[int]) -> str:
        """The text with the lines of every unit not in ``kept`` blank. A class whose body is only
        methods, none of them kept, gets ``pass`` on its first method's first line."""
        pieces, line = [], 1
        for index in sorted(kept, key=lambda unit: self.spans[unit][0]):
            if index in self.owner:
                continue
            first, last = self.spans[index]
            pieces.append("\n" * (first - line))
            line = first
            members = self.members.get(index, [])
            if index in self.bare and not any(member in kept for member in members):
                opening = self.spans[members[0]][0]
                pieces.append(self._text(line, opening - 1))
                text = self._text(opening, opening)
                pieces.append(text[:len(text) - len(text.lstrip())] + "pass\n")
                line = opening + 1
            for member in members:
                if member not in kept:
                    start, end = self.spans[member]
                    pieces.append(self._text(line, start - 1))
                    pieces.append("\n" * (end - max(start, line) + 1))  # (its first line may be the `pass`)
                    line = end + 1
            pieces.append(self._text(line, last))
            line = last + 1
        return "".join(pieces)

    def _own_text(self, unit: int) -> str:
        """A unit's text, its class's methods left out (they are units of their own)."""
        first, last = self.spans[unit]
        pieces, line = [], first
        for member in self.members.get(unit, ()):
            start, end = self.spans[member]
            pieces.append(self._text(line, start - 1))
            line = end + 1
        pieces.append(self._text(line, last))
        return "".join(pieces)

    def _text(self, first: int, last: int) -> str:
        if last < first:
            return ""
        starts, text = self.source.line_starts, self.source.text
        return text[starts[first - 1]: starts[last] if last < len(starts) else len(text)]


def _attributes_stored(function: ast.AST) -> Set[str]:
    """The attributes a function assigns (``self.x = ...``, ``for o.y in ...``), whatever the object."""
    return {node.attr for node in cast(List[ast.Attribute], nodes_by_type(function).get(ast.Attribute, []))
            if not isinstance(node.ctx, ast.Load)}


def _assigns_all(stmt: ast.stmt) -> bool:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    return isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and any(
        isinstance(t, ast.Name) and t.id == "__all__" for t in targets)
