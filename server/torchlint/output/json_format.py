"""A JSON array in ruff's shape (``ruff check --output-format json``), plus ``severity``.

Rows and columns are 1-based. A file that could not be parsed (or read) is an entry
with ``code: null``; so is a file checked in part by names alone (its inference budget ran out),
with ``severity: "info"``, so that two runs' findings can be told apart by what each could see.
"""
from __future__ import annotations

import json
import os
from collections import Counter
from typing import List, Optional, TypedDict

from ..analysis.findings import Finding, ParseError, Position
from ..rules import RULES_BY_CODE
from . import FileReport, OutputOptions, cell_position, sorted_findings


class Location(TypedDict):
    row: int
    column: int


class EditEntry(TypedDict):
    content: str
    location: Location
    end_location: Location


class FixEntry(TypedDict):
    applicability: str
    message: str
    edits: List[EditEntry]


class Entry(TypedDict):
    """One element of the JSON array: a finding, or a file with ``code: null``."""

    cell: Optional[int]
    code: Optional[str]
    message: str
    filename: str
    location: Location
    end_location: Location
    fix: Optional[FixEntry]
    url: Optional[str]
    noqa_row: Optional[int]
    severity: str


class StatisticsRow(TypedDict):
    code: Optional[str]
    name: Optional[str]
    count: int
    fixable: bool


def location(pos: Position) -> Location:
    return {"row": pos.line, "column": pos.column + 1}


def finding_entry(filename: str, finding: Finding, report: Optional[FileReport] = None) -> Entry:
    fix = finding.preferred_fix
    rule = RULES_BY_CODE.get(finding.code)
    # A notebook's rows are those of the cell (ruff's shape); "cell" is null in a .py file.
    cells = report if report is not None and report.cells is not None else None

    def location(pos: Position) -> Location:
        return _location(cells, pos)

    return {
        "cell": cell_position(cells, finding.range.start)[0] if cells is not None else None,
        "code": finding.code,
        "message": finding.message,
        "filename": filename,
        "location": location(finding.range.start),
        "end_location": location(finding.range.end),
        "fix": None if fix is None else {
            "applicability": fix.applicability.value,
            "message": fix.title,
            "edits": [{"content": edit.new_text, "location": location(edit.range.start),
                       "end_location": location(edit.range.end)}
                      for edit in sorted(fix.edits, key=lambda e: (e.range.start, e.range.end))],
        },
        "url": rule.doc_url() if rule is not None else None,
        "noqa_row": finding.noqa_line,
        "severity": finding.severity.value,
    }


def _location(report: Optional[FileReport], pos: Position) -> Location:
    return location(pos if report is None else cell_position(report, pos)[1])


def error_entry(filename: str, error: ParseError, report: Optional[FileReport] = None) -> Entry:
    cells = report if report is not None and report.cells is not None else None
    return {
        "cell": cell_position(cells, error.position)[0] if cells is not None else None,
        "code": None,
        "message": error.message,
        "filename": filename,
        "location": _location(cells, error.position),
        "end_location": _location(cells, error.position),
        "fix": None,
        "url": None,
        "noqa_row": None,
        "severity": "error",
    }


def names_only_entry(report: FileReport) -> Entry:
    start: Location = {"row": 1, "column": 1}
    return {"cell": None, "code": None, "message": "checked by names alone: %s" % report.names_only,
            "filename": os.path.abspath(report.path), "location": start, "end_location": start, "fix": None,
            "url": None, "noqa_row": None, "severity": "info"}


def entries(reports: List[FileReport]) -> List[Entry]:
    result = [error_entry(os.path.abspath(r.path), r.error, r) for r in sorted(reports, key=lambda r: r.path)
              if r.error is not None]
    result += [names_only_entry(report) for report in reports if report.names_only]
    result += [finding_entry(os.path.abspath(report.path), finding, report)
               for report, finding in sorted_findings(reports)]
    result.sort(key=lambda e: (e["filename"], e["cell"] or 0, e["location"]["row"], e["location"]["column"]))
    return result


def render(reports: List[FileReport], options: OutputOptions) -> str:
    return json.dumps(entries(reports), indent=2, ensure_ascii=False) + "\n"


def statistics(reports: List[FileReport], options: OutputOptions) -> List[StatisticsRow]:
    """``--statistics --format json``: one entry per rule with findings, most frequent first, in
    ruff's shape (``code``, ``name``, ``count``, ``fixable``). Like the JSON report, it counts
    every finding, hints included; files that do not parse are one ``"code": null`` entry."""
    counts = Counter(f.code for r in reports for f in r.findings)
    fixable = {f.code for r in reports for f in r.findings if f.fix_to_apply(options.unsafe_fixes)}
    rows: List[StatisticsRow] = [{"code": code, "name": getattr(RULES_BY_CODE.get(code), "name", None), "count": count,
             "fixable": code in fixable}
            for code, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    errors = sum(1 for r in reports if r.error is not None)
    if errors:
        rows.append({"code": None, "name": "syntax-error", "count": errors, "fixable": False})
    return rows


def render_statistics(reports: List[FileReport], options: OutputOptions) -> str:
    return json.dumps(statistics(reports, options), indent=2, ensure_ascii=False) + "\n"
