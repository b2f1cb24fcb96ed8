"""Findings as plain data: what the core returns and every adapter consumes.

Positions are 1-based lines and 0-based columns counted in code points (Python
``str`` indices). Adapters convert: the CLI prints 1-based columns, the language
server sends UTF-16 columns.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import List, Optional, Tuple


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    HINT = "hint"


class Applicability(enum.Enum):
    SAFE = "safe"  # keeps the code's intent; applied by --fix and fix-all
    UNSAFE = "unsafe"  # may change behaviour; applied only when asked


@dataclass(frozen=True, order=True)
class Position:
    line: int  # 1-based
    column: int  # 0-based, code points


@dataclass(frozen=True, order=True)
class Range:
    start: Position
    end: Position

    @classmethod
    def of(cls, line: int, col: int, end_line: int, end_col: int) -> "Range":
        return cls(Position(line, col), Position(end_line, end_col))


@dataclass(frozen=True)
class Edit:
    range: Range
    new_text: str


@dataclass(frozen=True)
class Fix:
    title: str
    applicability: Applicability
    edits: Tuple[Edit, ...]
    preferred: bool = False

    @property
    def is_safe(self) -> bool:
        return self.applicability is Applicability.SAFE


@dataclass(frozen=True)
class Related:
    """Another place that explains a finding (where the optimizer was built...)."""

    range: Range
    message: str


@dataclass(frozen=True)
class Finding:
    code: str
    message: str
    severity: Severity
    range: Range
    fixes: Tuple[Fix, ...] = ()
    related: Tuple[Related, ...] = ()
    deprecated: bool = False  # editors strike the range through (TL301)
    source: str = "torchlint"

    @property
    def noqa_line(self) -> int:
        return self.range.start.line

    def with_severity(self, severity: Severity) -> "Finding":
        return Finding(self.code, self.message, severity, self.range, self.fixes,
                       self.related, self.deprecated, self.source)

    @property
    def preferred_fix(self) -> Optional[Fix]:
        """The fix the rule recommends (the first one when none is marked)."""
        return next((fix for fix in self.fixes if fix.preferred), self.fixes[0] if self.fixes else None)

    def fix_to_apply(self, unsafe: bool = False) -> Optional[Fix]:
        """The preferred fix if it may be applied (safe, or ``unsafe`` allowed), else the first that may."""
        best = self.preferred_fix
        if best is not None and (best.is_safe or unsafe):
            return best
        return next((fix for fix in self.fixes if fix.is_safe or unsafe), None)


@dataclass(frozen=True)
class ParseError:
    """The file could not be parsed; no rule ran on it."""

    message: str
    position: Position


@dataclass(frozen=True)
class UncheckedClass:
    """A class no rule checked: whether it is an nn.Module could not be told, because a base it
    names could not be read (its package is not installed in the analysed environment, or jedi
    found no definition of it)."""

    name: str
    position: Position  # of the class's name
    base: str  # the base as written: "Module", "fastai.torch_core.Module"
    reason: str  # why that base could not be read, for the user


@dataclass
class CheckResult:
    findings: List[Finding] = field(default_factory=list)
    parse_error: Optional[ParseError] = None
    internal_errors: List[str] = field(default_factory=list)  # rules that crashed (a torchlint bug)
    unchecked: List[UncheckedClass] = field(default_factory=list)  # with the jedi layer only
    # Rules that stopped at Python's recursion limit on this file (a 1,000-deep conditional
    # expression): not a bug of theirs, but their findings here are lost.
    cut_short: List[str] = field(default_factory=list)
