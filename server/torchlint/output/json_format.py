"""A JSON array in ruff's shape (``ruff check --output-format json``), plus ``severity``.

Rows and columns are 1-based. A file that could not be parsed (or read) is an entry
with ``code: null``.
"""
from __future__ import annotations

import json
import os
from typing import List

from ..analysis.findings import Position
from ..fixing import preferred_fix
from ..rules import RULES_BY_CODE
from . import FileReport, OutputOptions, sorted_findings


def location(pos: Position) -> dict:
    return {"row": pos.line, "column": pos.column + 1}


def finding_entry(filename: str, finding) -> dict:
    fix = preferred_fix(finding)
    rule = RULES_BY_CODE.get(finding.code)
    return {
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


def error_entry(filename: str, error) -> dict:
    return {
        "code": None,
        "message": error.message,
        "filename": filename,
        "location": location(error.position),
        "end_location": location(error.position),
        "fix": None,
        "url": None,
        "noqa_row": None,
        "severity": "error",
    }


def entries(reports: List[FileReport]) -> List[dict]:
    result = [error_entry(os.path.abspath(r.path), r.error) for r in sorted(reports, key=lambda r: r.path)
              if r.error is not None]
    result += [finding_entry(os.path.abspath(report.path), finding) for report, finding in sorted_findings(reports)]
    result.sort(key=lambda e: (e["filename"], e["location"]["row"], e["location"]["column"]))
    return result


def render(reports: List[FileReport], options: OutputOptions) -> str:
    return json.dumps(entries(reports), indent=2, ensure_ascii=False) + "\n"
