"""Renderers: turn the per-file reports of a run into text, JSON, SARIF or GitHub annotations.

Every renderer is a function ``render(reports, options) -> str``; nothing here reads files
or decides exit codes.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, Optional, Tuple

from ..analysis.findings import Finding, ParseError, Position, UncheckedClass
from ..analysis.notebook import CellMap
from ..files import display_path, inside

# display_path and inside: for the renderers, which import them from here.
__all__ = ["FORMATS", "FileReport", "OutputOptions", "cell_position", "display_path", "inside", "render", "renderers",
           "sorted_findings"]


@dataclass
class FileReport:
    """What a run found in one file. Plain data: it travels back from worker processes."""

    path: str  # absolute
    findings: List[Finding] = field(default_factory=list)
    error: Optional[ParseError] = None  # the file could not be read, decoded or parsed
    internal_errors: List[str] = field(default_factory=list)  # rules or fixes that crashed
    fixed: int = 0  # findings fixed (--fix) or fixable (--diff)
    unwritten: int = 0  # --fix: fixes computed but not written (e.g. a read-only file)
    unwritten_why: str = ""  # why, in a few words ("read-only file")
    diff: str = ""  # --diff: what --fix would change
    cells: Optional[CellMap] = None  # a notebook: positions are in its joined cells (see cell_position)
    unchecked: List[UncheckedClass] = field(default_factory=list)  # classes no rule checked (a base unread)
    cut_short: List[str] = field(default_factory=list)  # rules that stopped at the recursion limit here
    # Why jedi's answers stopped short in this file, so that the rest was checked by names alone
    # (its inference budget ran out, jedi could not run); "" when jedi answered all it was asked.
    names_only: str = ""


def cell_position(report: FileReport, pos: Position) -> Tuple[Optional[int], Position]:
    """(cell number, position in that cell) in a notebook; (None, the position) in a file."""
    if report.cells is None:
        return None, pos
    return report.cells.locate(pos)


@dataclass(frozen=True)
class OutputOptions:
    unsafe_fixes: bool = False  # unsafe fixes count as applicable
    fix_mode: bool = False  # --fix ran: the summary says what was fixed
    quiet: bool = False  # findings only, no summary
    show_hints: bool = False  # text: print hints too (else only counted in the summary)
    cwd: str = field(default_factory=os.getcwd)
    files_not_checked: int = 0  # files not read (too large, unreadable): said as errors, not in the reports


def sorted_findings(reports: List[FileReport]) -> Iterator[Tuple[FileReport, Finding]]:
    """(report, finding) pairs in path, then position order."""
    for report in sorted(reports, key=lambda r: r.path):
        for finding in sorted(report.findings, key=lambda f: (f.range.start, f.code)):
            yield report, finding


def renderers() -> Dict[str, Callable[[List[FileReport], OutputOptions], str]]:
    from . import github, json_format, sarif, text
    return {"text": text.render, "json": json_format.render, "sarif": sarif.render, "github": github.render}


FORMATS = ("text", "json", "sarif", "github")


def render(reports: List[FileReport], fmt: str, options: OutputOptions = OutputOptions()) -> str:
    return renderers()[fmt](reports, options)
