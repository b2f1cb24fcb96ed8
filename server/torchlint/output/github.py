"""GitHub Actions workflow commands: one ``::error``/``::warning``/``::notice`` per finding,
hints included, shown as annotations on the pull request's diff. Information and hints are both
notices: the message says the severity, as the text output does (``TL301 [hint] ...``)."""
from __future__ import annotations

from typing import List, Optional, cast

from ..analysis.findings import Position
from . import FileReport, OutputOptions, cell_position, display_path, sorted_findings

LEVELS = {"error": "error", "warning": "warning", "info": "notice", "hint": "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(level: str, title: str, path: str, start: Position, end: Position, message: str,
               report: Optional[FileReport] = None) -> str:
    properties = [("title", title), ("file", path), ("line", start.line), ("col", start.column + 1),
                  ("endLine", end.line), ("endColumn", end.column + 1)]
    if report is not None and report.cells is not None:
        # A notebook's lines are not the .ipynb file's: annotate the file, say the cell in the message.
        cell, position = cell_position(report, start)
        properties = properties[:2]
        message = "cell %d, line %d, column %d: %s" % (cast(int, cell), position.line, position.column + 1, message)
    return "::%s %s::%s" % (level, ",".join("%s=%s" % (key, escape_property(str(value))) for key, value in properties),
                            escape_data(message))


def render(reports: List[FileReport], options: OutputOptions) -> str:
    lines = []
    for report in sorted(reports, key=lambda r: r.path):
        if report.error is not None:
            pos = report.error.position
            lines.append(annotation("error", "torchlint", display_path(report.path, options.cwd), pos, pos,
                                    report.error.message, report))
    for report, finding in sorted_findings(reports):
        lines.append(annotation(LEVELS[finding.severity.value], "torchlint (%s)" % finding.code,
                                display_path(report.path, options.cwd), finding.range.start, finding.range.end,
                                "%s [%s] %s" % (finding.code, finding.severity.value, finding.message), report))
    return "".join(line + "\n" for line in lines)
