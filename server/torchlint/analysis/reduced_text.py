"""The reduced texts the jedi layer gives jedi (:meth:`.file_inference.FileInference._script_for`):
of a file's top-level functions and classes, only those a question needs; the other lines blank,
so that no position moves.
"""
from __future__ import annotations

import ast
import bisect
import re
from typing import Dict, List, Optional, Set, Tuple

from .source import SourceText, line_groups, statement_start

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class TopLevel:
    """A file's top-level statements, for the reduced texts FileInference._script_for gives jedi:
    a function or class is kept only when needed; the rest (imports, assignments, ``if`` blocks:
    what the module runs) always is. Statements that share a line are one unit."""

    def __init__(self, tree: ast.Module, source: SourceText) -> None:
        self.source = source
        self.spans: List[Tuple[int, int]] = []  # each unit's first and last line, decorators included
        self.definers: Dict[str, List[int]] = {}  # name -> the units (functions, classes) defining it
        self.others: Set[int] = set()  # the units always kept
        self.scanned: Set[int] = set()  # the others whose words count (not `__all__ = [...]`: it
        # names every definition, and tells jedi nothing about this file's values)
        for group in line_groups(tree.body):
            index = len(self.spans)
            self.spans.append((statement_start(group[0]), max(stmt.end_lineno or stmt.lineno for stmt in group)))
            if len(group) == 1 and isinstance(group[0], (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.definers.setdefault(group[0].name, []).append(index)
                continue
            self.others.add(index)
            if not all(_assigns_all(stmt) for stmt in group):
                self.scanned.add(index)
        self.firsts = [first for first, _ in self.spans]

    def holding(self, line: int) -> Optional[int]:
        """The unit holding ``line``, or None (a line between units)."""
        index = bisect.bisect_right(self.firsts, line) - 1
        return index if index >= 0 and line <= self.spans[index][1] else None

    def closure(self, start: Set[int]) -> Set[int]:
        """``start``, the others, and every definition whose name is a word of what is kept."""
        kept = set(start) | self.others
        pending = list((set(start) - self.others) | self.scanned)
        words: Set[str] = set()
        while pending:
            first, last = self.spans[pending.pop()]
            for word in set(_WORD.findall(self._text(first, last))) - words:
                words.add(word)
                for index in self.definers.get(word, ()):
                    if index not in kept:
                        kept.add(index)
                        pending.append(index)
        return kept

    def lines(self, kept: Set[int]) -> int:
        return sum(self.spans[i][1] - self.spans[i][0] + 1 for i in kept)

    def text_of(self, kept: Set[int]) -> str:
        """The text with the lines of every unit not in ``kept`` blank."""
        pieces, line = [], 1
        for index in sorted(kept):
            first, last = self.spans[index]
            pieces.append("\n" * (first - line))
            pieces.append(self._text(first, last))
            line = last + 1
        return "".join(pieces)

    def _text(self, first: int, last: int) -> str:
        starts, text = self.source.line_starts, self.source.text
        return text[starts[first - 1]: starts[last] if last < len(starts) else len(text)]


def _assigns_all(stmt: ast.stmt) -> bool:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    return isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and any(
        isinstance(t, ast.Name) and t.id == "__all__" for t in targets)
