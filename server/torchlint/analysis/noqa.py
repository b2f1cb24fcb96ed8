"""``# noqa`` suppression, with flake8's and ruff's syntax.

- ``x = 1  # noqa`` silences every finding on the line;
- ``x = 1  # noqa: TL101, TL203`` silences those codes;
- a line ``# torchlint: noqa`` anywhere silences the whole file, and
  ``# torchlint: noqa: TL101`` silences one code in the whole file.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Optional

from .findings import Edit, Finding, Position, Range
from .source import SourceText

_CODES = r"(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*)"
_LINE = re.compile(r"#\s*noqa(?::\s*" + _CODES + r")?", re.IGNORECASE)
_FILE = re.compile(r"^\s*#\s*torchlint\s*:\s*noqa(?::\s*" + _CODES + r")?", re.IGNORECASE)

ALL = frozenset(["*"])


def _codes(match: "re.Match") -> FrozenSet[str]:
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


def parse_directives(source: SourceText) -> Directives:
    directives = Directives()
    if "noqa" not in source.text and "NOQA" not in source.text.upper():
        return directives
    file_codes = set()
    for lineno in range(1, source.line_count + 1):
        line = source.line(lineno)
        if "noqa" not in line.lower():
            continue
        whole_file = _FILE.match(line)
        if whole_file:
            codes = _codes(whole_file)
            if codes is ALL:
                directives.file_codes = ALL
                return directives
            file_codes |= codes
            continue
        match = _LINE.search(line)
        if match:
            directives.lines[lineno] = _codes(match)
    directives.file_codes = frozenset(file_codes)
    return directives


def noqa_edit(source: SourceText, line: int, code: str) -> Optional[Edit]:
    """The edit that adds ``code`` to the line's noqa comment (None: already silenced)."""
    text = source.line(line)
    match = _LINE.search(text)
    if match and match.group("codes") is None:
        return None
    if match:
        codes = _codes(match)
        if code in codes:
            return None
        end = match.end("codes")
        return Edit(Range(Position(line, end), Position(line, end)), ", " + code)
    end = len(text)
    stripped = text.rstrip()
    pad = "  " if stripped else ""
    return Edit(Range(Position(line, len(stripped)), Position(line, end)), "%s# noqa: %s" % (pad, code))
