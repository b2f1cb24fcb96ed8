"""Check again only what an edit touched: the language server's first wave.

A file is a run of top-level statements, "chunks" here. After an edit, the chunks it touched
are parsed again on their own, and the rules run on a reduced copy of the file: those chunks,
every chunk whose findings may depend on them, and what all of these need to be understood
(imports, base classes, helpers, globals), with every other line blanked so that no position
moves. The other chunks keep their findings, moved by the lines the edit added or removed.

What a chunk may learn from another goes through names: the module-level names it binds and
reads, the attributes it mentions, the bases it names. A chunk is checked again when a name it
reads is bound by a chunk checked again (transitively: a base class of a base class), when it
binds a name the edit started or stopped reading (a subclass appeared), or when it stores an
attribute whose read count changed (TL106 counts reads across the file). Module-level script
code (the statements that are not imports, classes or functions) is one scope whose findings
rest on each other's order: an optimizer built in one statement grades a `.data` assignment in
another and makes a replacement stale when a third uses it. So when a rule that runs declares it
(``Rule.reads_script_flow``), an edit to any script statement, or a re-check of one, re-checks
all of them.

The result equals a full check: tests/test_incremental.py replays edits on real files, on
random programs with script code (benchmarks/fuzz_incremental.py, a differential fuzzer) and on
notebook cells, and compares after every edit. What this does not follow falls back to a full check: the first check of a text,
other options, an edited region that does not parse on its own, an edit that adds or removes an
import, a star import, ``torch.set_default_device`` or a ``noqa`` comment, a byte-order mark,
or a reduced copy holding most of the file anyway.
"""
from __future__ import annotations

import ast
import bisect
import re
import threading
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import (Any, Callable, Container, Dict, FrozenSet, Iterator, List, Mapping, Optional, Sequence, Set, Tuple,
                    Union, cast)

from .analysis.context import is_self_attribute
from .analysis.findings import CheckResult, Edit, Finding, Position, Range, Related, UncheckedClass
from .analysis.inference_seam import Inference
from . import collection
from .analysis.parsing import parse, parse_fresh
from .analysis.source import SourceText, last_line, line_groups, statement_start
from .engine import DEFAULT_OPTIONS, CheckOptions, check_tree
from .rules import ALL_RULES

# A reduced copy above this share of the file costs about what the whole file does.
MOST_OF_THE_FILE = 0.5
_DEFINITIONS = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class Chunk:
    """Top-level statements sharing lines (one, almost always), decorators included."""

    first: int
    last: int
    kind: str  # "class", "function", "import" (an import anywhere in it), "other"
    defines: FrozenSet[str]  # module-level names it binds
    references: FrozenSet[str]  # names it reads
    attributes: Counter[str]  # `<expr>.name` reads, self.name left out: as FileContext counts them
    stored_attributes: FrozenSet[str]  # `<expr>.name = ...` anywhere in it (TL106's candidates)
    pinned: bool  # a star import or torch.set_default_device: every chunk depends on it
    docstring_or_future: bool  # skipped where a new import goes (FileContext._first_code_line)
    findings: Tuple[Finding, ...] = ()
    unchecked: Tuple[UncheckedClass, ...] = ()  # its classes no rule checked (CheckResult.unchecked)


@dataclass
class Plan:
    """How much of a full check an incremental one did: for tests and the benchmark."""

    full: bool = True
    reason: str = "first check"
    rechecked: int = 0  # chunks whose findings were computed again
    included_lines: int = 0  # lines of the reduced copy that were not blanked


@dataclass
class _Known:
    options: CheckOptions
    inference: Optional[Inference]  # the jedi layer the findings came from, or None
    text: str
    lines: List[str]
    chunks: List[Chunk]
    attributes: Counter[str] = field(default_factory=Counter)  # of the whole file


class IncrementalChecker:
    """The findings of one document, kept between versions (one checker per open document).

    ``check`` may run in several threads at once: each starts from the newest complete state,
    and any complete state is a valid starting point."""

    def __init__(self, path: str, options: CheckOptions = DEFAULT_OPTIONS) -> None:
        self.path = path
        self.options = options
        self.last_plan = Plan()
        self._known: Optional[_Known] = None
        self._lock = threading.Lock()

    def check(self, text: str, options: Optional[CheckOptions] = None, inference: Optional[Inference] = None) -> CheckResult:
        """Findings of ``text``. ``inference``: the jedi layer (torchlint.inference.layer.JediInference)
        or None; its answers can depend on other files, so whoever changes those calls
        :meth:`forget`."""
        options = self.options if options is None else options
        with self._lock:
            known = self._known
        with collection.paused():
            if known is None or known.options != options or known.inference is not inference:
                return self._full(text, options, inference, "first check" if known is None else "other options or jedi layer")
            if text == known.text:
                self.last_plan = Plan(False, "same text")
                return _result(known.chunks)
            return self._incremental(known, text, options, inference)

    def forget(self) -> None:
        """The next check is a full one (files the findings depend on may have changed)."""
        with self._lock:
            self._known = None

    # -- full -------------------------------------------------------------------------------
    def _full(self, text: str, options: CheckOptions, inference: Optional[Inference], reason: str) -> CheckResult:
        self.last_plan = Plan(True, reason)
        tree, error = parse(text, self.path)
        if tree is None:
            return CheckResult([], error)  # the last state that parsed stays the starting point
        source = SourceText(text)
        result = check_tree(text, self.path, tree, options, inference, source=source)
        known = None
        if not text.startswith("\ufeff") and not result.internal_errors and not result.cut_short:
            plain = _chunks(tree.body, at_file_start=True)
            chunks = _with_findings(plain, result, range(len(plain)), {})
            if chunks is not None:
                total: Counter[str] = Counter()
                for chunk in chunks:
                    total.update(chunk.attributes)
                known = _Known(options, inference, text, _lines(source), chunks, total)
        with self._lock:
            self._known = known
        return result

    # -- incremental ------------------------------------------------------------------------
    def _incremental(self, known: _Known, text: str, options: CheckOptions, inference: Optional[Inference]) -> CheckResult:
        if text.startswith("\ufeff"):
            return self._full(text, options, inference, "byte-order mark")
        source = SourceText(text)
        lines = _lines(source)
        old_lines, chunks = known.lines, known.chunks
        prefix = _common_prefix(old_lines, lines)
        suffix = _common_suffix(old_lines, lines, min(len(old_lines), len(lines)) - prefix)
        last_changed = len(old_lines) - suffix  # old lines prefix+1 .. last_changed changed
        delta = len(lines) - len(old_lines)

        # The region: from the chunk holding the first changed line, or the one before when the
        # edit may continue it (typing at the end of a class), to the line before the first chunk
        # after the edit.
        firsts = [chunk.first for chunk in chunks]
        start = bisect.bisect_right(firsts, prefix + 1) - 1
        if start >= 0 and chunks[start].last <= prefix and _starts_a_statement(lines, prefix):
            start += 1
        start = max(start, 0)
        stop = max(bisect.bisect_right(firsts, last_changed), start)
        low = min(chunks[start].first, prefix + 1) if start < len(chunks) else prefix + 1
        high = chunks[stop].first - 1 if stop < len(chunks) else len(old_lines)
        old_region = chunks[start:stop]
        region_text = "".join(lines[low - 1: high + delta])
        if any(c.kind == "import" or c.pinned for c in old_region):
            return self._full(text, options, inference, "an import, star import or set_default_device edited")
        if "noqa" in region_text.lower() or any("noqa" in line.lower() for line in old_lines[low - 1: high]):
            return self._full(text, options, inference, "a noqa comment in the edited region")
        tree, _ = parse_fresh("\n" * (low - 1) + region_text, self.path)
        if tree is None:
            return self._full(text, options, inference, "the edited region does not parse alone")
        new_region = _chunks(tree.body, at_file_start=start == 0 and low == 1)
        if any(c.kind == "import" or c.pinned for c in new_region):
            return self._full(text, options, inference, "an import, star import or set_default_device added")

        def moved(line: int) -> int:
            return line if line < low else line + delta

        new_chunks = chunks[:start] + new_region + [
            replace(c, first=c.first + delta, last=c.last + delta) for c in chunks[stop:]]
        region_indexes = set(range(start, start + len(new_region)))
        recheck = _to_recheck(new_chunks, region_indexes, old_region, new_region, low, high, delta,
                              _reads_script_flow(options))
        included = _context(new_chunks, recheck)
        included_lines = sum(new_chunks[i].last - new_chunks[i].first + 1 for i in included)
        if included_lines > MOST_OF_THE_FILE * len(lines):
            return self._full(text, options, inference, "the edit reaches most of the file")

        keep = bytearray(len(lines))
        for i in included:
            keep[new_chunks[i].first - 1: new_chunks[i].last] = b"\x01" * (new_chunks[i].last - new_chunks[i].first + 1)
        reduced = "".join(line if kept else "\n" for line, kept in zip(lines, keep))
        reduced_tree, _ = parse_fresh(reduced, self.path)
        if reduced_tree is None:  # cannot happen for chunks that parsed: play safe
            return self._full(text, options, inference, "the reduced copy does not parse")
        attributes = known.attributes.copy()
        for chunk in old_region:
            attributes.subtract(chunk.attributes)
        for chunk in new_region:
            attributes.update(chunk.attributes)
        result = check_tree(text, self.path, reduced_tree, options, inference, file_attribute_names=attributes,
                            source=source)
        if result.internal_errors or result.cut_short:
            return self._full(text, options, inference, "a rule failed on the reduced copy")

        outside = {i: c for i, c in enumerate(new_chunks) if i not in recheck}
        for i, kept in outside.items():
            if kept.findings or kept.unchecked:
                outside[i] = replace(kept, findings=tuple(_moved_finding(f, moved) for f in kept.findings),
                                     unchecked=tuple(replace(u, position=Position(moved(u.position.line),
                                                                                  u.position.column))
                                                     for u in kept.unchecked))
        final = _with_findings(new_chunks, result, recheck, outside)
        if final is None:
            return self._full(text, options, inference, "a finding outside every statement")
        with self._lock:
            self._known = _Known(options, inference, text, lines, final, attributes)
        self.last_plan = Plan(False, "incremental", len(recheck), included_lines)
        return _result(final)


# -- chunks -------------------------------------------------------------------------------------
def _chunks(body: Sequence[ast.stmt], at_file_start: bool) -> List[Chunk]:
    """The chunks of top-level statements, with what each defines and reads. ``at_file_start``:
    ``body`` starts the file (its first statement may be the module's docstring)."""
    return [_summary(group, is_first=at_file_start and index == 0) for index, group in enumerate(line_groups(body))]


def _summary(group: List[ast.stmt], is_first: bool) -> Chunk:
    references: Set[str] = set()
    stores: Set[str] = set()
    nested: Set[str] = set()
    imported: Set[str] = set()
    declared_global: Set[str] = set()
    stored: Set[str] = set()
    attributes: Counter[str] = Counter()
    has_import = pinned = False
    node: Any  # (each of the walk's nodes, told apart by its class below)
    for stmt in group:
        for node in ast.walk(stmt):
            kind = type(node)
            if kind is ast.Name:
                # Every load, a function's own locals included: the rules match uses by name
                # across scopes (TL202 counts `optimizer.step()` in a function taking an
                # `optimizer` parameter as a later use of the script's optimizer).
                (references if isinstance(node.ctx, ast.Load) else stores).add(node.id)
            elif kind is ast.Attribute:
                if not isinstance(node.ctx, ast.Load):
                    stored.add(node.attr)
                if not is_self_attribute(node):
                    attributes[node.attr] += 1
            elif kind is ast.Import or kind is ast.ImportFrom:
                has_import = True
                for alias in node.names:
                    pinned = pinned or alias.name == "*"
                    imported.add((alias.asname or alias.name).split(".")[0])
            elif kind is ast.Global:
                declared_global.update(node.names)
            elif isinstance(node, _DEFINITIONS):
                nested.add(node.name)
            elif kind is ast.Match:
                pinned = True  # binds names in patterns: rare at module level, not followed
    head = group[0]
    if has_import:
        kind_name = "import"
    elif len(group) == 1 and isinstance(head, ast.ClassDef):
        kind_name = "class"
    elif len(group) == 1 and isinstance(head, (ast.FunctionDef, ast.AsyncFunctionDef)):
        kind_name = "function"
    else:
        kind_name = "other"
    if kind_name in ("class", "function"):
        defines = {cast(Union[ast.ClassDef, ast.FunctionDef], head).name} | declared_global
    else:
        defines = stores | nested | imported | declared_global
    pinned = pinned or "set_default_device" in references or "set_default_device" in attributes
    docstring = (is_first and isinstance(head, ast.Expr) and isinstance(head.value, ast.Constant)
                 and isinstance(head.value.value, str))
    future = all(isinstance(s, ast.ImportFrom) and s.module == "__future__" for s in group)
    return Chunk(statement_start(head), max(last_line(s) for s in group), kind_name, frozenset(defines), frozenset(references),
                 attributes, frozenset(stored), pinned, docstring or future)


def _reads_script_flow(options: CheckOptions) -> bool:
    """Whether a rule that runs declares findings resting on the order of module-level script code."""
    return any(rule.reads_script_flow for rule in ALL_RULES if options.enabled is None or rule.code in options.enabled)


def _to_recheck(chunks: List[Chunk], region: Set[int], old_region: List[Chunk], new_region: List[Chunk],
                low: int, high: int, delta: int, script_flow: bool) -> Set[int]:
    """The chunks whose findings may differ from before: the edited ones and their dependents.
    ``script_flow``: module-level script code is one scope whose findings rest on each other
    (Rule.reads_script_flow): an edit to any of it re-checks all of it."""
    old_references = set().union(*(c.references for c in old_region))
    new_references = set().union(*(c.references for c in new_region))
    started_or_stopped = old_references ^ new_references
    all_references = old_references | new_references
    old_attributes = sum((c.attributes for c in old_region), Counter())
    new_attributes = sum((c.attributes for c in new_region), Counter())
    recounted = {name for name in set(old_attributes) | set(new_attributes)
                 if old_attributes[name] != new_attributes[name]}
    # Facts about a name can change only where it is bound: the edited chunks, then (below)
    # whatever reads what they bind. Chunks checked again for another reason keep their facts.
    changed = set().union(*(c.defines for c in old_region), *(c.defines for c in new_region))
    recheck = set(region)
    for i, chunk in enumerate(chunks):
        if i in recheck:
            continue
        if ((chunk.kind in ("class", "function") and chunk.defines & started_or_stopped)
                or (chunk.kind == "other" and chunk.defines & all_references)
                or chunk.stored_attributes & recounted
                or any(low <= line <= high for f in chunk.findings for line in _finding_lines(f))
                or any(low <= line and (delta or line <= high) for f in chunk.findings for line in _lines_named(f))):
            recheck.add(i)
    # Whatever reads a name bound by a chunk checked again is checked again, transitively.
    readers: Dict[str, List[int]] = {}
    for i, chunk in enumerate(chunks):
        for name in chunk.references:
            readers.setdefault(name, []).append(i)
    pending = list(changed)
    seen = set(pending)
    while pending:
        name = pending.pop()
        for i in readers.get(name, ()):
            if i not in recheck:
                recheck.add(i)
                for defined in chunks[i].defines - seen:
                    seen.add(defined)
                    pending.append(defined)
    if script_flow and (any(c.kind == "other" for c in old_region) or any(chunks[i].kind == "other" for i in recheck)):
        recheck.update(i for i, c in enumerate(chunks) if c.kind == "other")
    return recheck


def _context(chunks: List[Chunk], recheck: Set[int]) -> Set[int]:
    """The chunks the reduced copy keeps: those checked again and the chunks that read what they
    bind (a finding may depend on its uses: a tensor later given to an optimizer, a subclass),
    everything these read (transitively), every import and pinned chunk, and the head of the
    file (where a new import goes)."""
    definers: Dict[str, List[int]] = {}
    readers: Dict[str, List[int]] = {}
    for i, chunk in enumerate(chunks):
        for name in chunk.defines:
            definers.setdefault(name, []).append(i)
        for name in chunk.references:
            readers.setdefault(name, []).append(i)
    included = set(recheck)
    for i in recheck:
        for name in chunks[i].defines:
            included.update(readers.get(name, ()))
    included.update(i for i, c in enumerate(chunks) if c.kind == "import" or c.pinned)
    if chunks:
        included.add(0)
        included.add(next((i for i, c in enumerate(chunks) if not c.docstring_or_future), 0))
    pending = list(included)
    while pending:
        for name in chunks[pending.pop()].references:
            for i in definers.get(name, ()):
                if i not in included:
                    included.add(i)
                    pending.append(i)
    return included


def _with_findings(chunks: List[Chunk], result: CheckResult, fresh: Container[int],
                   outside: Mapping[int, Chunk]) -> Optional[List[Chunk]]:
    """``chunks`` with their findings (and unchecked classes): from ``result`` for the chunks in
    ``fresh``, from ``outside`` (the kept chunks, by index) for the others. None when a finding starts
    outside them all."""
    firsts = [chunk.first for chunk in chunks]

    def chunk_of(line: int) -> Optional[int]:
        i = bisect.bisect_right(firsts, line) - 1
        return None if i < 0 or line > chunks[i].last else i
    found: List[List[Finding]] = [[] for _ in chunks]
    for finding in result.findings:
        i = chunk_of(finding.range.start.line)
        if i is None:
            return None
        if i in fresh:
            found[i].append(finding)
    unchecked: List[List[UncheckedClass]] = [[] for _ in chunks]
    for unread in result.unchecked:
        i = chunk_of(unread.position.line)
        if i is None:
            return None
        if i in fresh:
            unchecked[i].append(unread)
    return [replace(chunk, findings=tuple(found[i]), unchecked=tuple(unchecked[i])) if i in fresh else outside[i]
            for i, chunk in enumerate(chunks)]


def _result(chunks: Sequence[Chunk]) -> CheckResult:
    findings = sorted((f for chunk in chunks for f in chunk.findings), key=lambda f: (f.range.start, f.code))
    return CheckResult(findings, unchecked=[u for chunk in chunks for u in chunk.unchecked])


# -- positions ----------------------------------------------------------------------------------
def _finding_lines(finding: Finding) -> Iterator[int]:
    yield finding.range.start.line
    yield finding.range.end.line
    for related in finding.related:
        yield related.range.start.line
        yield related.range.end.line
    for fix in finding.fixes:
        for edit in fix.edits:
            yield edit.range.start.line
            yield edit.range.end.line


_LINE_NUMBER = re.compile(r"\blines? (\d+)")


def _lines_named(finding: Finding) -> Iterator[int]:
    """Line numbers a finding's words name ("the optimizer on line 12"): text cannot be moved."""
    texts = [finding.message] + [r.message for r in finding.related] + [fix.title for fix in finding.fixes]
    for text in texts:
        if "line" in text:
            for match in _LINE_NUMBER.finditer(text):
                yield int(match.group(1))


def _moved_finding(finding: Finding, moved: Callable[[int], int]) -> Finding:
    def position(p: Position) -> Position:
        line = moved(p.line)
        return p if line == p.line else Position(line, p.column)

    def span(r: Range) -> Range:
        return Range(position(r.start), position(r.end))

    return replace(finding, range=span(finding.range),
                   related=tuple(Related(span(r.range), r.message) for r in finding.related),
                   fixes=tuple(replace(fix, edits=tuple(Edit(span(e.range), e.new_text) for e in fix.edits))
                               for fix in finding.fixes))


# -- lines --------------------------------------------------------------------------------------
def _lines(source: SourceText) -> List[str]:
    """The text's lines with their endings, split as Python's tokenizer splits them."""
    text, starts = source.text, source.line_starts
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]


_CONTINUATIONS = ("else", "elif", "except", "finally")


def _starts_a_statement(lines: List[str], index: int) -> bool:
    """Whether the first line of code from ``lines[index]`` on starts a new top-level statement,
    rather than continuing the one before it (an indented line, ``else:``...)."""
    for line in lines[index:]:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        word = re.match(r"\w*", stripped).group(0)  # type: ignore[union-attr]  # (it matches "" too)
        return not line[0].isspace() and word not in _CONTINUATIONS and stripped[0] not in ")]}"
    return True


def _common_prefix(a: List[str], b: List[str]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _common_suffix(a: List[str], b: List[str], limit: int) -> int:
    i = 0
    while i < limit and a[-1 - i] == b[-1 - i]:
        i += 1
    return i
