"""Source text with the line arithmetic every part needs.

Lines are split the way Python's tokenizer splits them (``\\r\\n``, ``\\r``, ``\\n``),
not with ``str.splitlines``, which also breaks on form feeds and Unicode separators
and would put ``ast`` line numbers out of step with the text.
"""
from __future__ import annotations

import ast
import itertools
import re
from typing import Iterable, List, Optional, Protocol, Sequence, Union, cast

from .findings import Edit, Position, Range

_LINE_END = re.compile(r"\r\n|\r|\n")


class Located(Protocol):
    """A node with a place in the text: an ``ast.expr``, ``ast.stmt``, ``ast.arg``, ..."""

    lineno: int
    col_offset: int
    end_lineno: Optional[int]  # None only in a tree built by hand, never in a parsed one
    end_col_offset: Optional[int]


class SourceText:
    def __init__(self, text: str) -> None:
        self.text = text
        starts = [0]
        if "\r" in text:
            starts.extend(m.end() for m in _LINE_END.finditer(text))
        else:  # the common case, three times faster: only "\n" ends a line
            starts.extend(itertools.accumulate(len(line) + 1 for line in text.split("\n")[:-1]))
        self.line_starts = starts  # offset of each line, index 0 = line 1

    @property
    def line_count(self) -> int:
        return len(self.line_starts)

    def line(self, lineno: int) -> str:
        """The text of a 1-based line, without its line ending."""
        start = self.line_starts[lineno - 1]
        end = self.line_starts[lineno] if lineno < len(self.line_starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")

    def lines_with_endings(self) -> List[str]:
        """Every line with its line ending: ``"".join`` of them is the text, and line ``n`` of a
        tree is item ``n - 1`` (``str.splitlines`` also splits at form feeds)."""
        ends = self.line_starts[1:] + [len(self.text)]
        return [self.text[start:end] for start, end in zip(self.line_starts, ends)]

    def newline(self) -> str:
        m = _LINE_END.search(self.text)
        return m.group(0) if m else "\n"

    def offset(self, pos: Position) -> int:
        return self.line_starts[pos.line - 1] + pos.column

    def position(self, offset: int) -> Position:
        lo, hi = 0, len(self.line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return Position(lo + 1, offset - self.line_starts[lo])

    def column(self, lineno: int, byte_col: int) -> int:
        """Convert an ``ast`` column (UTF-8 bytes) into code points."""
        text = self.line(lineno)
        if text.isascii():
            return byte_col
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", "replace"))

    def node_range(self, node: Located) -> Range:
        end_lineno, end_col_offset = node.end_lineno, node.end_col_offset
        assert end_lineno is not None and end_col_offset is not None  # (a parsed tree's node)
        return Range(
            Position(node.lineno, self.column(node.lineno, node.col_offset)),
            Position(end_lineno, self.column(end_lineno, end_col_offset)),
        )

    def segment(self, node_or_range: Union[Located, Range]) -> str:
        rng = node_or_range if isinstance(node_or_range, Range) else self.node_range(node_or_range)
        return self.text[self.offset(rng.start):self.offset(rng.end)]

    def indent_of(self, lineno: int) -> str:
        line = self.line(lineno)
        return line[: len(line) - len(line.lstrip())]


def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    """Apply non-overlapping edits; raises ValueError when two overlap."""
    src = SourceText(text)
    spans = sorted(((src.offset(e.range.start), src.offset(e.range.end), e.new_text) for e in edits),
                   key=lambda s: (s[0], s[1]))
    out: List[str] = []
    cursor = 0
    for start, end, new_text in spans:
        if start < cursor:
            raise ValueError("overlapping edits")
        out.append(text[cursor:start])
        out.append(new_text)
        cursor = end
    out.append(text[cursor:])
    return "".join(out)


def first_line(node: ast.AST) -> int:
    """The line a node of a parsed tree starts on (the node of a function's or a class's scope)."""
    return cast(Located, node).lineno


def last_line(node: ast.AST) -> int:
    """The line a node of a parsed tree ends on (``end_lineno``, which only hand-built nodes lack)."""
    end_lineno = cast(Located, node).end_lineno
    assert end_lineno is not None
    return end_lineno


def statement_start(stmt: ast.stmt) -> int:
    """The line a statement starts on, its decorators included."""
    decorators: List[ast.expr] = getattr(stmt, "decorator_list", [])
    return min([stmt.lineno] + [d.lineno for d in decorators])


def line_groups(body: Sequence[ast.stmt]) -> List[List[ast.stmt]]:
    """Statements of a block in order, those that share a line (``a = 1; b = 2``) grouped."""
    groups: List[List[ast.stmt]] = []
    last = 0
    for stmt in body:
        if groups and statement_start(stmt) <= last:
            groups[-1].append(stmt)
        else:
            groups.append([stmt])
        last = max(last, stmt.end_lineno or stmt.lineno)
    return groups
