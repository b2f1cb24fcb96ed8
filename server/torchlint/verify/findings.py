"""A verification report as torchlint findings, on the lines that assigned the attributes.

The probe says *which* attribute of *which* class (``ScaledBlock.gamma_1``); the
analysis core says *where* the file assigns it (``self.gamma_1 = ...`` in that
class or a base class of the same file). Failures carry their line from the
traceback. What cannot be placed goes on the class line, then on line 1.
"""
from __future__ import annotations

import ast
from typing import Dict, List, Optional

from ..analysis.context import FileContext
from ..analysis.engine import parse
from ..analysis.findings import Finding, Range, Severity
from ..analysis.scopes import ClassInfo
from .report import Issue, VerifyReport

SOURCE = "torchlint-verify"
SEVERITIES = {"error": Severity.ERROR, "warning": Severity.WARNING, "info": Severity.INFO}


class _Placer:
    def __init__(self, text: str, path: str):
        tree, _ = parse(text, path)
        self.ctx = FileContext(text, path, tree) if tree is not None else None

    def classes(self, name: Optional[str]) -> List[ClassInfo]:
        if self.ctx is None or not name:
            return []
        return [info for info in self.ctx.index.classes if info.name == name]

    def place(self, issue: Issue) -> Range:
        if self.ctx is None:
            return self._line_range(issue.line or 1)
        if issue.line:
            return self._line_range(issue.line)
        for info in self.classes(issue.class_name):
            if issue.attribute:
                found = self._assignment(info, issue.attribute)
                if found is not None:
                    return found
            return self._class_range(info)
        return self._line_range(1)

    def _assignment(self, info: ClassInfo, attribute: str) -> Optional[Range]:
        """The first `self.<attribute> = ...` of the class (``__init__`` first), then of its bases."""
        for cls in self.ctx.class_chain(info):
            bindings = [b for b in cls.attr_assignments if b.name == attribute]
            bindings.sort(key=lambda b: (b.scope.name != "__init__", b.stmt.lineno))
            for binding in bindings:
                target = _target(binding.stmt, attribute)
                return self.ctx.range(target if target is not None else binding.stmt)
        return None

    def _class_range(self, info: ClassInfo) -> Range:
        node = info.node
        line = self.ctx.source.line(node.lineno)
        start = line.find(node.name, max(line.find("class"), 0))
        if start < 0:
            return self._line_range(node.lineno)
        return Range.of(node.lineno, start, node.lineno, start + len(node.name))

    def _line_range(self, line: int) -> Range:
        if self.ctx is None:
            return Range.of(line, 0, line, 0)
        line = min(max(line, 1), self.ctx.source.line_count)
        text = self.ctx.source.line(line)
        start = len(text) - len(text.lstrip())
        return Range.of(line, start, line, len(text.rstrip()))


def _target(stmt: ast.stmt, attribute: str) -> Optional[ast.AST]:
    """The `self.<attribute>` target node inside an assignment statement."""
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
    for target in targets:
        for node in ast.walk(target) if target is not None else ():
            if isinstance(node, ast.Attribute) and node.attr == attribute:
                return node
    return None


def report_to_findings(report: VerifyReport, text: str, path: str) -> List[Finding]:
    """One Finding per issue of the report, sorted by position (source ``torchlint-verify``)."""
    placer = _Placer(text, path)
    findings = []
    for issue in report.issues:
        where = ""
        if issue.paths and issue.paths[0] not in issue.message:
            where = " (%s)" % issue.paths[0]
        findings.append(Finding(code=issue.code, message=issue.message + where,
                                severity=SEVERITIES.get(issue.severity, Severity.WARNING),
                                range=placer.place(issue), source=SOURCE))
    findings.sort(key=lambda f: (f.range.start, f.code))
    return findings


def issue_lines(report: VerifyReport, text: str, path: str) -> Dict[int, int]:
    """id(issue) -> the line its finding sits on (for the text report)."""
    placer = _Placer(text, path)
    return {id(issue): placer.place(issue).start.line for issue in report.issues}
