"""SARIF 2.1.0, for code-scanning upload (GitHub, Azure DevOps, IDE viewers).

Lines and columns are 1-based; columns count Unicode code points (``columnKind``).
Files that could not be read or parsed are reported as tool execution notifications,
since they are not findings of a rule.

Every finding is a result, hints included. SARIF has four levels: ``error``, ``warning``,
``note`` ("a minor problem or an opportunity to improve the code", §3.27.10) and ``none``, which
is only for results whose ``kind`` is not ``fail`` (a pass, or something not applicable). A hint
is an opportunity to improve the code, so it is a ``note``, like an information; each result's
``properties.severity`` keeps torchlint's own severity, which tells the two apart.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, List, cast

from .. import __version__
from ..analysis.findings import Finding, Position
from ..rules import ALL_RULES
from ..rules.base import Rule
from ..files import relative_path
from . import FileReport, OutputOptions, cell_position, inside, sorted_findings

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://pypi.org/project/torchlint/"
LEVELS = {"error": "error", "warning": "warning", "info": "note", "hint": "note"}
SOURCE_ROOT = "%SRCROOT%"

# A SARIF object, as json.dumps writes it (_in_notebook edits a result's nested objects in place).
SarifObject = Dict[str, Any]


def _full_description(rule: Rule) -> str:
    """The first paragraph of the doc's "What it finds" section (the summary without a doc)."""
    try:
        doc = rule.doc()
    except OSError:
        return rule.summary
    match = re.search(r"^## What it finds\s*\n(.*?)(?:\n\s*\n|\n#|\Z)", doc, re.S | re.M)
    return " ".join(match.group(1).split()) if match else rule.summary


def _rule(rule: Rule) -> SarifObject:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": _full_description(rule)},
        "helpUri": rule.doc_url(),
        "defaultConfiguration": {"level": LEVELS[rule.severity.value]},
    }


def _artifact(path: str, cwd: str) -> SarifObject:
    if inside(path, cwd):
        return {"uri": relative_path(path, cwd), "uriBaseId": SOURCE_ROOT}
    return {"uri": Path(path).resolve().as_uri()}


def _region(start: Position, end: Position) -> SarifObject:
    return {"startLine": start.line, "startColumn": start.column + 1,
            "endLine": end.line, "endColumn": end.column + 1}


def _result(report: FileReport, finding: Finding, rule_index: Dict[str, int], cwd: str) -> SarifObject:
    artifact = _artifact(report.path, cwd)
    result: SarifObject = {
        "ruleId": finding.code,
        "level": LEVELS[finding.severity.value],
        "message": {"text": finding.message},
        "properties": {"severity": finding.severity.value},
        "locations": [{"physicalLocation": {"artifactLocation": artifact,
                                            "region": _region(finding.range.start, finding.range.end)}}],
    }
    if report.cells is not None:
        return _in_notebook(report, result, finding, rule_index)
    if finding.code in rule_index:
        result["ruleIndex"] = rule_index[finding.code]
    if finding.related:
        result["relatedLocations"] = [
            {"id": i, "message": {"text": related.message},
             "physicalLocation": {"artifactLocation": artifact,
                                  "region": _region(related.range.start, related.range.end)}}
            for i, related in enumerate(finding.related)]
    fix = finding.preferred_fix
    if fix is not None:
        result["fixes"] = [{
            "description": {"text": fix.title},
            "artifactChanges": [{"artifactLocation": artifact, "replacements": [
                {"deletedRegion": _region(edit.range.start, edit.range.end), "insertedContent": {"text": edit.new_text}}
                for edit in fix.edits]}],
        }]
    return result


def _in_notebook(report: FileReport, result: SarifObject, finding: Finding, rule_index: Dict[str, int]) -> SarifObject:
    """A notebook's lines are not the .ipynb file's: the location is the file, the message says
    the cell and its line (no region, no fix regions that would point into the JSON)."""
    cell, position = cell_position(report, finding.range.start)
    result["message"]["text"] = "cell %d, line %d, column %d: %s" % (cast(int, cell), position.line,
                                                                     position.column + 1, finding.message)
    for location in result["locations"]:
        del location["physicalLocation"]["region"]
    if finding.code in rule_index:
        result["ruleIndex"] = rule_index[finding.code]
    return result


def sarif_log(reports: List[FileReport], options: OutputOptions) -> SarifObject:
    rule_index = {rule.code: i for i, rule in enumerate(ALL_RULES)}
    notifications = [
        {"level": "error", "message": {"text": report.error.message},
         "locations": [{"physicalLocation": {"artifactLocation": _artifact(report.path, options.cwd),
                                             "region": _region(report.error.position, report.error.position)}}]}
        for report in sorted(reports, key=lambda r: r.path) if report.error is not None] + [
        {"level": "note", "message": {"text": "checked by names alone: %s" % report.names_only},
         "locations": [{"physicalLocation": {"artifactLocation": _artifact(report.path, options.cwd)}}]}
        for report in sorted(reports, key=lambda r: r.path) if report.names_only]
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "torchlint", "version": __version__, "semanticVersion": __version__,
                                "informationUri": INFORMATION_URI, "rules": [_rule(rule) for rule in ALL_RULES]}},
            "originalUriBaseIds": {SOURCE_ROOT: {"uri": Path(options.cwd).resolve().as_uri().rstrip("/") + "/"}},
            "columnKind": "unicodeCodePoints",
            "invocations": [{"executionSuccessful": not any(r.internal_errors for r in reports),
                             "toolExecutionNotifications": notifications}],
            "results": [_result(report, finding, rule_index, options.cwd)
                        for report, finding in sorted_findings(reports)],
        }],
    }


def render(reports: List[FileReport], options: OutputOptions) -> str:
    return json.dumps(sarif_log(reports, options), indent=2, ensure_ascii=False) + "\n"
