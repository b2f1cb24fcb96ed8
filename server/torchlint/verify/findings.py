"""Where each verification issue belongs: a file and a line, from the core's static knowledge.

The probe says *which* attribute (``blocks.0.gamma_1``) of *which* module class holds it
(``owner_class`` ScaledBlock, defined in ``owner_file``); the analysis core says *where*
that class assigns it (``self.gamma_1 = ...`` in the class or one of its bases in that
file). When the holder is not the project's (an ``nn.Linear`` inside the model), the
issue goes on the verified class's ``self.<first part> = ...``. Failures keep the line
of their traceback. What cannot be placed goes on the class line, then on line 1: every
issue gets a line (``place_issues``), in text, JSON and LSP alike.
"""
from __future__ import annotations

import ast
import os
import re
from typing import Dict, List, Optional, Tuple

from ..analysis.context import FileContext
from ..analysis.findings import Finding, Range, Severity
from ..analysis.parsing import parse
from ..analysis.scopes import ClassInfo
from .report import Issue, VerifyReport

SOURCE = "torchlint-verify"
SEVERITIES = {"error": Severity.ERROR, "warning": Severity.WARNING, "info": Severity.INFO}
_FOREIGN = re.compile(r"(^|[\\/])(site-packages|dist-packages)([\\/]|$)")


def _same(a: Optional[str], b: Optional[str]) -> bool:
    if not a or not b:
        return False
    return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))


def attribute_names(issue: Issue) -> List[str]:
    """The names a `self.<name> = ...` may carry for this issue, innermost first:
    ``blocks.0.gamma_1`` -> gamma_1, 0, blocks; ``layers[0].weight`` -> weight, layers."""
    path = issue.attribute or (issue.paths[0] if issue.paths else "")
    names = [re.sub(r"\[.*$", "", part) for part in path.split(".")]
    names = [name for name in reversed(names) if name.isidentifier()]
    if issue.owner_attribute and issue.owner_attribute.isidentifier():
        names = [issue.owner_attribute] + [name for name in names if name != issue.owner_attribute]
    return names


class _Source:
    """One parsed file and its classes (None when it does not parse)."""

    def __init__(self, text: str, path: str) -> None:
        tree, _ = parse(text, path)
        self.ctx = FileContext(text, path, tree) if tree is not None else None

    def classes(self, name: Optional[str]) -> List[ClassInfo]:
        if self.ctx is None or not name:
            return []
        return [info for info in self.ctx.index.classes if info.name == name]

    def assignment(self, class_name: Optional[str], names: List[str], outside_init: bool = False,
                   ran: Optional[int] = None) -> Optional[Range]:
        """The first `self.<name> = ...` of the class (``__init__`` first; with ``outside_init``,
        another method first: where forward creates it), then of its bases; the statement on line
        ``ran`` (the one the probe saw store it) before any other."""
        ctx = self.ctx
        if ctx is None:
            return None
        for info in self.classes(class_name):
            for name in names:
                for cls in ctx.class_chain(info):
                    bindings = [b for b in cls.attr_assignments if b.name == name]
                    bindings.sort(key=lambda b: (not _covers(b.stmt, ran),
                                                 (b.scope.name == "__init__") if outside_init
                                                 else (b.scope.name != "__init__"), b.stmt.lineno))
                    for binding in bindings:
                        target = _target(binding.stmt, name)
                        return ctx.range(target if target is not None else binding.stmt)
                    registered = cls.registered.get(name)  # register_buffer("name", ...)
                    if registered is not None:
                        return ctx.range(registered)
        return None

    def class_range(self, class_name: Optional[str]) -> Optional[Range]:
        ctx = self.ctx
        if ctx is None:
            return None
        for info in self.classes(class_name):
            node = info.node
            line = ctx.source.line(node.lineno)
            start = line.find(node.name, max(line.find("class"), 0))
            if start < 0:
                return self.line_range(node.lineno)
            return Range.of(node.lineno, start, node.lineno, start + len(node.name))
        return None

    def line_range(self, line: int) -> Range:
        if self.ctx is None:
            return Range.of(max(line, 1), 0, max(line, 1), 0)
        line = min(max(line, 1), self.ctx.source.line_count)
        text = self.ctx.source.line(line)
        start = len(text) - len(text.lstrip())
        return Range.of(line, start, line, len(text.rstrip()))


class Placer:
    """Places issues of one report; files other than the verified one are read from disk once."""

    def __init__(self, text: str, path: str) -> None:
        self.path = path
        self.own = _Source(text, path)  # the verified file's
        self._sources: Dict[str, Optional[_Source]] = {os.path.normcase(os.path.realpath(path)): self.own}

    def source(self, path: str) -> Optional[_Source]:
        key = os.path.normcase(os.path.realpath(path))
        if key not in self._sources:
            try:
                with open(path, "rb") as handle:
                    self._sources[key] = _Source(handle.read().decode("utf-8", "replace"), path)
            except OSError:
                self._sources[key] = None
        return self._sources[key]

    def place(self, issue: Issue) -> Tuple[str, Range]:
        """(file, range) for the issue; always somewhere."""
        mine = self.own
        if issue.code == "TL905" and issue.line:
            return self.path, mine.line_range(issue.line)
        names = attribute_names(issue)
        owner_file = issue.owner_file or (self.path if issue.owner_class else None)
        if names and issue.owner_class and owner_file and not _FOREIGN.search(owner_file):
            source = self.source(owner_file) if os.path.isfile(owner_file) else None
            # TL906: a parameter forward made is placed where forward makes it.
            created = issue.code == "TL906" or issue.in_forward
            ran = issue.owner_line if names[0] == issue.owner_attribute else None
            found = source.assignment(issue.owner_class, names, created, ran) if source is not None else None
            if found is not None:
                return owner_file, found
        # The holder is torch's or unknown: the verified class's own attribute on the way to it.
        if names:
            outer = [n for n in reversed(names) if n != issue.owner_attribute] or names
            found = mine.assignment(issue.class_name, outer, issue.code == "TL906" or issue.in_forward)
            if found is not None:
                return self.path, found
        if issue.line:
            return self.path, mine.line_range(issue.line)
        for name in (issue.class_name, issue.owner_class):
            found = mine.class_range(name)
            if found is not None:
                return self.path, found
        return self.path, mine.line_range(1)


def _covers(stmt: ast.stmt, line: Optional[int]) -> bool:
    return line is not None and stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno)


def _target(stmt: ast.AST, attribute: str) -> Optional[ast.Attribute]:
    """The `self.<attribute>` target node inside an assignment statement."""
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    for target in targets:
        for node in ast.walk(target) if isinstance(target, ast.AST) else ():
            if isinstance(node, ast.Attribute) and node.attr == attribute:
                return node
    return None


def place_issues(report: VerifyReport, text: Optional[str] = None) -> None:
    """Give every issue of the report its ``file`` and ``line`` (``text``: the verified file's
    text, read from disk when not given)."""
    if text is None:
        try:
            with open(report.path, "rb") as handle:
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            text = ""
    placer = Placer(text, report.path)
    for issue in report.issues:
        file, found = placer.place(issue)
        issue.file, issue.line = file, found.start.line


def report_to_findings(report: VerifyReport, text: str, path: str) -> List[Finding]:
    """One Finding per issue of the report on this document, sorted by position (source
    ``torchlint-verify``). An issue placed in another file of the project goes on the
    verified class's line here, naming where it belongs."""
    findings = [finding for found in findings_by_class(report, text, path).values() for finding in found]
    findings.sort(key=lambda f: (f.range.start, f.code))
    return findings


def findings_by_class(report: VerifyReport, text: str, path: str) -> Dict[Optional[str], List[Finding]]:
    """report_to_findings' findings by the class whose run found them: every class the report
    built or skipped has an entry (empty: nothing found), so that a run of one class replaces that
    class's findings only (the editor keeps the others); None holds the file's own (an import that
    failed)."""
    placer = Placer(text, path)
    mine = placer.own
    by_class: Dict[Optional[str], List[Finding]] = {cls.name: [] for cls in report.classes}
    for issue in report.issues:
        file, found = placer.place(issue)
        where = ""
        if issue.paths and issue.paths[0] not in issue.message:
            where = " (%s)" % issue.paths[0]
        if not _same(file, path):
            where += " (in %s:%d)" % (os.path.basename(file), found.start.line)
            found = mine.class_range(issue.class_name) or mine.line_range(1)
        by_class.setdefault(issue.class_name, []).append(Finding(
            code=issue.code, message=issue.message + where, severity=SEVERITIES.get(issue.severity, Severity.WARNING),
            range=found, source=SOURCE))
    return by_class
