"""Write the README's tables of codes from the registry (torchlint.rules.ALL_CODES).

The rule table and the table of the codes runtime verification reports sit between marker
comments in README.md and are rewritten whole; code ranges such as ``TL101-TL108`` in README.md
are set to the first and last registered code of their hundred. The other documents that name
codes (benchmarks/README.md) are only read: a code the registry does not know, or a code
followed by a name that is not its own (``TL107 attribute-then-register``), is reported.

    .venv/bin/python tools/rule_tables.py           # rewrite README.md
    .venv/bin/python tools/rule_tables.py --check   # exit 1 when anything is out of date

tests/test_rules_registry.py runs ``--check``.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Dict, Iterable, List

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "server"))  # torchlint from this source tree, installed or not

from torchlint.analysis.findings import Severity  # noqa: E402
from torchlint.rules import ALL_CODES, ALL_RULES, VERIFY_CODES  # noqa: E402

README = ROOT / "README.md"
# Documents checked against the registry but written by hand (benchmark figures are dated:
# their ranges say which rules existed then, so only names and codes are checked there).
CHECKED = [README, ROOT / "benchmarks" / "README.md"]

SEVERITY_WORDS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "information",
                  Severity.HINT: "hint"}
TABLES = {"rules": lambda: _table(ALL_RULES), "verify-codes": lambda: _table(VERIFY_CODES.values())}
_BLOCK = re.compile(r"(<!-- (?P<name>[\w-]+) table: written by tools/rule_tables\.py -->\n)(?P<body>.*?)"
                    r"(<!-- end of (?P=name) table -->)", re.S)
_RANGE = re.compile(r"\bTL(\d)(\d\d)([-\u2013])TL\1(\d\d)\b")
_CODE = re.compile(r"\bTL\d{3}\b")
_CODE_AND_NAME = re.compile(r"\b(TL\d{3}) ([a-z]+(?:-[a-z]+)+)\b")


def _markdown(text: str) -> str:
    """Plain text in a table cell: what is not in backticks keeps its underscores and bars."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("_", "\\_").replace("*", "\\*").replace("|", "\\|")
    return "`".join(parts)


def _severity(entry) -> str:
    words = entry.grading or SEVERITY_WORDS[entry.severity]
    return words if getattr(entry, "offers_fixes", True) else words + " (no fix)"  # only rules have fixes to offer


def _table(entries: Iterable) -> str:
    rows = ["| code | name | finds | default severity | doc |", "|---|---|---|---|---|"]
    for entry in entries:
        page = entry.doc_path().relative_to(ROOT).as_posix()
        rows.append("| %s | %s | %s | %s | [%s](%s) |" % (entry.code, entry.name, _markdown(entry.summary),
                                                          _markdown(_severity(entry)), entry.code, page))
    return "\n".join(rows) + "\n"


def _family_ranges() -> Dict[str, tuple]:
    """Each hundred of codes ("1" for TL1xx): its first and last code."""
    ranges: Dict[str, tuple] = {}
    for code in sorted(ALL_CODES):
        first, _ = ranges.get(code[2], (code, code))
        ranges[code[2]] = (first, code)
    return ranges


def render(text: str) -> str:
    """README.md's text with its tables and code ranges as the registry says."""
    names = set()

    def table(match):
        names.add(match.group("name"))
        if match.group("name") not in TABLES:
            raise SystemExit("README.md: no table is called %r (known: %s)" % (match.group("name"), ", ".join(TABLES)))
        return match.group(1) + TABLES[match.group("name")]() + match.group(4)

    text = _BLOCK.sub(table, text)
    missing = sorted(set(TABLES) - names)
    if missing:
        raise SystemExit("README.md: no markers for the %s table" % ", ".join(missing))
    ranges = _family_ranges()

    def code_range(match):
        family = ranges.get(match.group(1))
        return "%s%s%s" % (family[0], match.group(3), family[1]) if family else match.group(0)

    return _RANGE.sub(code_range, text)


def name_problems(path: Path, text: str) -> List[str]:
    """Codes the registry does not know, and codes followed by a kebab-case name not their own."""
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        for code in _CODE.findall(line):
            if code not in ALL_CODES:
                problems.append("%s:%d: %s is no registered code" % (path.relative_to(ROOT), number, code))
        for code, name in _CODE_AND_NAME.findall(line):
            if code in ALL_CODES and name != ALL_CODES[code].name:
                problems.append("%s:%d: %s is named %s, not %s" % (path.relative_to(ROOT), number, code,
                                                                    ALL_CODES[code].name, name))
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when anything is out of date")
    args = parser.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    wanted = render(text)
    failed = False
    if wanted != text:
        if args.check:
            print("README.md: the code tables or ranges are out of date (run tools/rule_tables.py)", file=sys.stderr)
            failed = True
        else:
            README.write_text(wanted, encoding="utf-8")
            print("README.md rewritten")
    for path in CHECKED:
        for problem in name_problems(path, wanted if path == README else path.read_text(encoding="utf-8")):
            print(problem, file=sys.stderr)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
