"""``# noqa`` suppression, with flake8's and ruff's syntax.

- ``x = 1  # noqa`` silences every finding on the line;
- ``x = 1  # noqa: TL101, TL203`` silences those codes;
- a line ``# torchlint: noqa`` anywhere silences the whole file, and
  ``# torchlint: noqa: TL101`` silences one code in the whole file.

Only comments count: ``s = "# noqa"`` or a docstring line reading ``# torchlint: noqa`` does
not. Comments are found with Python's tokenizer, run only over the lines that contain
``noqa``, each from the nearest place the syntax tree says a statement starts.

:func:`add_noqa` writes the directives that silence given findings (``check --add-noqa``).
"""
from __future__ import annotations

import ast
import bisect
import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Any, Container, Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

from .findings import Edit, Finding, Position, Range
from .source import SourceText, apply_edits

_CODES = r"(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*)"
_LINE = re.compile(r"#\s*noqa(?::\s*" + _CODES + r")?", re.IGNORECASE)
_MENTION = re.compile("noqa", re.IGNORECASE)
_FILE = re.compile(r"^\s*#\s*torchlint\s*:\s*noqa(?::\s*" + _CODES + r")?", re.IGNORECASE)

ALL = frozenset(["*"])


def _codes(match: "re.Match[str]") -> FrozenSet[str]:
    codes = match.group("codes")
    if not codes:
        return ALL
    return frozenset(c.upper() for c in re.split(r"[\s,]+", codes) if c)


@dataclass
class Directives:
    lines: Dict[int, FrozenSet[str]] = field(default_factory=dict)  # line -> codes (ALL = every code)
    file_codes: FrozenSet[str] = frozenset()

    def suppresses(self, finding: Finding) -> bool:
        if self.file_codes is ALL or finding.code in self.file_codes:
            return True
        for line in {finding.range.start.line, finding.range.end.line}:
            codes = self.lines.get(line)
            if codes is not None and (codes is ALL or finding.code in codes):
                return True
        return False


def parse_directives(source: SourceText, tree: Optional[ast.AST] = None) -> Directives:
    """The file's noqa comments. ``tree`` (the parsed source) lets the tokenizer start near each
    candidate line instead of at the top of the file."""
    directives = Directives()
    candidates = _lines_mentioning_noqa(source)
    if not candidates:
        return directives
    file_codes: Set[str] = set()
    for lineno, (column, comment) in sorted(comments_on(source, candidates, tree).items()):
        whole_file = _FILE.match(comment) if not source.line(lineno)[:column].strip() else None
        if whole_file:
            codes = _codes(whole_file)
            if codes is ALL:
                directives.file_codes = ALL
                return directives
            file_codes |= codes
            continue
        match = _LINE.search(comment)
        if match:
            directives.lines[lineno] = _codes(match)
    directives.file_codes = frozenset(file_codes)
    return directives


def _lines_mentioning_noqa(source: SourceText) -> List[int]:
    lowered = source.text.lower()
    if "noqa" not in lowered:
        return []
    if len(lowered) != len(source.text):  # lower() changed the length (rare letters): offsets differ
        return sorted({source.position(match.start()).line for match in _MENTION.finditer(source.text)})
    lines: List[int] = []
    offset = lowered.find("noqa")
    while offset >= 0:
        line = source.position(offset).line
        if not lines or lines[-1] != line:
            lines.append(line)
        offset = lowered.find("noqa", offset + 4)
    return lines


def comments_on(source: SourceText, lines: Iterable[int], tree: Optional[ast.AST] = None) -> Dict[int, Tuple[int, str]]:
    """line -> (column, text) of the comment on each of ``lines`` that has one."""
    found: Dict[int, Tuple[int, str]] = {}
    wanted = sorted(set(lines))
    starts = _StatementStarts(tree) if tree is not None else None
    index = 0
    while index < len(wanted):
        start = (1, 0)
        if starts is not None:
            line, byte_column = starts.before(wanted[index])
            start = (line, source.column(line, byte_column))
        # Tokenizing on from a start stays right for any number of lines: go on through the next
        # wanted lines while starting afresh for them would not start any later.
        last = index
        while last + 1 < len(wanted) and (starts is None or starts.before(wanted[last + 1])[0] <= wanted[last]):
            last += 1
        found.update(_tokenize_comments(source, start, wanted[last]))
        index = last + 1
    return {line: found[line] for line in wanted if line in found}


def _tokenize_comments(source: SourceText, start: Tuple[int, int], last: int) -> Dict[int, Tuple[int, str]]:
    """Comments on lines ``start[0]``..``last``, tokenizing from ``start`` (line, code-point
    column), where no string or bracket is open. Leading whitespace is dropped from each line so
    that indentation, which cannot change where strings and comments are, never trips the tokenizer."""
    first, first_column = start
    offsets = []
    lines = []
    for lineno in range(first, last + 1):
        text = source.line(lineno)
        cut = first_column if lineno == first else len(text) - len(text.lstrip(" \t\f"))
        if lineno == 1 and cut == 0 and text.startswith("\ufeff"):
            cut = 1  # a byte-order mark is not code
        offsets.append(cut)
        lines.append(text[cut:] + "\n")
    comments = _comments_without_strings(lines, offsets, first)
    if comments is not None:
        return comments
    comments = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO("".join(lines)).readline):
            if token.type == tokenize.COMMENT:
                lineno = first + token.start[0] - 1
                comments[lineno] = (offsets[token.start[0] - 1] + token.start[1], token.string)
    except (tokenize.TokenError, SyntaxError):  # the slice ends inside a string or brackets
        pass
    return comments


_UNQUOTED = re.compile(r"[^'\"#\n]*")


def _comments_without_strings(lines: List[str], offsets: List[int], first: int) -> Optional[Dict[int, Tuple[int, str]]]:
    """The comments of a slice in which no quote comes before a ``#`` (the common case, and then
    every ``#`` starts a comment); None when there is a quote: the tokenizer must decide."""
    comments: Dict[int, Tuple[int, str]] = {}
    for index, line in enumerate(lines):
        unquoted = _UNQUOTED.match(line)
        assert unquoted is not None  # (it matches the empty string too)
        end = unquoted.end()
        if line[end] == "#":
            comments[first + index] = (offsets[index] + end, line[end:].rstrip("\n"))
        elif line[end] != "\n":
            return None
    return comments


_BLOCKS = ("body", "handlers", "orelse", "finalbody", "cases")


class _StatementStarts:
    """Where statements start, to begin tokenizing near a line rather than at the top of the file."""

    def __init__(self, tree: ast.AST) -> None:
        self.tree = tree
        self._members: Dict[int, Tuple[List[Tuple[int, int]], List[ast.AST]]] = {}  # id(node) -> (starts, members)
        self._before: Dict[int, Tuple[int, int]] = {}

    def before(self, lineno: int) -> Tuple[int, int]:
        point = self._before.get(lineno)
        if point is None:
            point = self._before[lineno] = self._find(lineno)
        return point

    def _find(self, lineno: int) -> Tuple[int, int]:
        """(line, byte column) of the last place at or before ``lineno`` where a statement,
        decorator, ``except`` clause or ``case`` of the innermost block holding the line starts:
        no string or bracket is open there. A line after the end of such a member starts fresh too."""
        point = (1, 0)
        node = self.tree
        while True:
            starts, members = self._block_members(node)
            index = bisect.bisect_right(starts, (lineno, float("inf"))) - 1
            if index < 0:
                return point
            point, member = starts[index], members[index]
            end = _end_line(member)
            if end < lineno:
                return (end + 1, 0)
            node = member

    def _block_members(self, node: ast.AST) -> Tuple[List[Tuple[int, int]], List[ast.AST]]:
        cached = self._members.get(id(node))
        if cached is None:
            pairs = [(begin, child) for name in _BLOCKS for child in getattr(node, name, None) or ()
                     for begin in (_begin(child),) if begin is not None]
            pairs.sort(key=lambda pair: pair[0])
            cached = self._members[id(node)] = ([begin for begin, _ in pairs], [child for _, child in pairs])
        return cached


def _begin(node: Any) -> Optional[Tuple[int, int]]:  # Any: a statement, handler or ``case``
    """Where a block member starts, as (line, byte column); for a ``case``, its pattern."""
    decorators = getattr(node, "decorator_list", None)
    if decorators:
        node = decorators[0]
    elif not hasattr(node, "lineno") and hasattr(node, "pattern"):
        node = node.pattern
    if not hasattr(node, "lineno"):
        return None
    return (node.lineno, node.col_offset)


def _end_line(node: ast.AST) -> int:
    end: Optional[int] = getattr(node, "end_lineno", None)
    if end is None:  # a ``case``: it ends with its body
        end = max((_end_line(child) for child in getattr(node, "body", ())), default=0)
    return end


def noqa_edit(source: SourceText, line: int, code: str, tree: Optional[ast.AST] = None) -> Optional[Edit]:
    """The edit that adds ``code`` to the line's noqa comment (None: already silenced)."""
    text = source.line(line)
    comment = comments_on(source, [line], tree).get(line) if "noqa" in text.lower() else None
    match = _LINE.search(comment[1]) if comment else None
    if match and match.group("codes") is None:
        return None
    if match:
        codes = _codes(match)
        if code in codes:
            return None
        assert comment is not None  # (``match`` is in it)
        end = comment[0] + match.end("codes")
        return Edit(Range(Position(line, end), Position(line, end)), ", " + code)
    end = len(text)
    stripped = text.rstrip()
    pad = "  " if stripped else ""
    return Edit(Range(Position(line, len(stripped)), Position(line, end)), "%s# noqa: %s" % (pad, code))


# -- adding noqa comments to a whole file (``torchlint check --add-noqa``) ----------------------

# A comment that must stay last on its line (black's): the noqa goes before it.
_MUST_STAY_LAST = re.compile(r"#\s*fmt\s*:\s*skip\s*$", re.IGNORECASE)


@dataclass
class AddedNoqa:
    """What :func:`add_noqa` did to a text."""

    text: str  # the new text (the original when nothing was added)
    lines: List[int] = field(default_factory=list)  # the lines that got a directive or more codes
    unplaced: List[Finding] = field(default_factory=list)  # findings no comment can silence (see add_noqa)

    @property
    def added(self) -> int:
        """Directives added or extended: one per line, whatever the number of codes."""
        return len(self.lines)


def noqa_line_for(finding: Finding, commentable: Container[int]) -> Optional[int]:
    """The line whose ``# noqa`` silences ``finding`` (its first line, else its last, as
    :meth:`Directives.suppresses` reads them) among the lines a comment can end; None if neither can."""
    for line in (finding.range.start.line, finding.range.end.line):
        if line in commentable:
            return line
    return None


def add_noqa(text: str, findings: Iterable[Finding]) -> AddedNoqa:
    """``text`` with a ``# noqa: CODE`` comment for each finding, on the line where it takes
    effect (the finding's first line; its last when the first one cannot end with a comment).

    One comment per line, new codes sorted; a ``# noqa: X`` already there gets the new codes
    after its own, a bare ``# noqa`` is left as it is, and any other comment is kept, the
    directive written after it (before a trailing ``# fmt: skip``, which must stay last). A
    line that ends inside a string or with a backslash continuation cannot take a comment:
    a finding whose first and last lines both are such lines is returned in ``unplaced``.
    Raises SyntaxError (from the tokenizer) when the text does not tokenize."""
    source = SourceText(text)
    commentable, comments = _line_ends(source)
    wanted: Dict[int, Set[str]] = {}
    result = AddedNoqa(text)
    for finding in findings:
        line = noqa_line_for(finding, commentable)
        if line is None:
            result.unplaced.append(finding)
        else:
            wanted.setdefault(line, set()).add(finding.code.upper())
    edits: List[Edit] = []
    for line in sorted(wanted):
        edit = _noqa_comment_edit(source, line, sorted(wanted[line]), comments.get(line))
        if edit is not None:
            edits.append(edit)
            result.lines.append(line)
    if edits:
        result.text = apply_edits(text, edits)
    return result


def _line_ends(source: SourceText) -> Tuple[Set[int], Dict[int, Tuple[int, str]]]:
    """The lines that end outside any string and without a backslash continuation (a comment
    may end them), and line -> (column, text) of each comment. The lines are SourceText's."""
    lines = [source.line(n) + "\n" for n in range(1, source.line_count + 1)]
    offset = 0
    if lines and lines[0].startswith("\ufeff"):  # a byte-order mark is not code
        lines[0], offset = lines[0][1:], 1
    commentable, comments = set(), {}
    feed = iter(lines)
    for token in tokenize.generate_tokens(lambda: next(feed, "")):
        if token.type in (tokenize.NEWLINE, tokenize.NL):
            commentable.add(token.start[0])
        elif token.type == tokenize.COMMENT:
            line = token.start[0]
            commentable.add(line)
            comments[line] = (token.start[1] + (offset if line == 1 else 0), token.string)
    return commentable, comments


def _noqa_comment_edit(source: SourceText, line: int, codes: List[str],
                       comment: Optional[Tuple[int, str]]) -> Optional[Edit]:
    text = source.line(line)
    if comment is not None:
        column, comment_text = comment
        match = _LINE.search(comment_text)
        if match is not None:
            if match.group("codes") is None:
                return None  # a bare noqa silences every code already
            new = [code for code in codes if code not in _codes(match)]
            if not new:
                return None
            at = Position(line, column + match.end("codes"))
            return Edit(Range(at, at), ", " + ", ".join(new))
        directive = "# noqa: " + ", ".join(codes)
        last = _MUST_STAY_LAST.search(comment_text)
        if last is not None and last.start() > 0:  # `# type: ignore  # fmt: skip`
            before = comment_text[: last.start()].rstrip()
            start = Position(line, column + len(before))
            return Edit(Range(start, Position(line, column + last.start())), "  %s  " % directive)
        if last is not None:  # the comment is `# fmt: skip` itself
            at = Position(line, column)
            return Edit(Range(at, at), directive + "  ")
        end = column + len(comment_text.rstrip())
        return Edit(Range(Position(line, end), Position(line, len(text))), "  " + directive)
    stripped = text.rstrip()
    return Edit(Range(Position(line, len(stripped)), Position(line, len(text))),
                "%s# noqa: %s" % ("  " if stripped else "", ", ".join(codes)))
