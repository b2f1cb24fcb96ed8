"""Per rule: what the syntactic layer finds alone, and what it finds with jedi.

Counts the `# expect: TLxxx` marks of the test fixtures (tests/fixtures/rules and the
multi-file tests/fixtures/jedi_project) and compares them with what each layer reports.
Prints a markdown table: the one README.md shows (tests/test_readme_accuracy.py compares them).

    .venv/bin/python benchmarks/accuracy.py           # print it
    .venv/bin/python benchmarks/accuracy.py --write   # and write it into README.md
"""
from __future__ import annotations

import collections
import sys
from pathlib import Path

from torchlint.engine import check_source
from torchlint.inference.layer import JediInference
from torchlint.rules import ALL_RULES

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
sys.path.insert(0, str(ROOT / "tests"))
from testkit.expectations import expected_findings  # noqa: E402  (the tests' own reading of `# expect:`)


README = ROOT / "README.md"
TABLE_HEADER = "| rule | expected | names only | with jedi | false positives (names / jedi) |"


def readme_table(text: str) -> list:
    """The lines of README's accuracy table (from its header to the first line not a row)."""
    lines = text.splitlines()
    start = lines.index(TABLE_HEADER)
    end = next((n for n in range(start, len(lines)) if not lines[n].startswith("|")), len(lines))
    return lines[start:end]


def table() -> list:
    files = sorted((FIXTURES / "rules").glob("*.py")) + sorted((FIXTURES / "jedi_project").rglob("*.py"))
    layers = {"names": None, "jedi": JediInference(str(FIXTURES / "jedi_project"))}
    expected = collections.Counter()
    found = {name: collections.Counter() for name in layers}
    wrong = {name: collections.Counter() for name in layers}
    for path in files:
        text = path.read_text(encoding="utf-8")
        marks = expected_findings(text)
        for _, code in marks:
            expected[code] += 1
        for name, layer in layers.items():
            result = check_source(text, str(path), inference=layer)
            reported = {(f.range.start.line, f.code) for f in result.findings}
            for _, code in reported & marks:
                found[name][code] += 1
            for _, code in reported - marks:
                wrong[name][code] += 1
    layers["jedi"].close()
    rows = [TABLE_HEADER, "|---|---|---|---|---|"]
    for rule in ALL_RULES:
        code = rule.code
        rows.append("| %s %s | %d | %d | %d | %d / %d |" % (code, rule.name, expected[code], found["names"][code],
                                                          found["jedi"][code], wrong["names"][code], wrong["jedi"][code]))
    total = sum(expected.values())
    rows.append("| all | %d | %d | %d | %d / %d |" % (total, sum(found["names"].values()), sum(found["jedi"].values()),
                                                    sum(wrong["names"].values()), sum(wrong["jedi"].values())))
    print("%d files (%s)" % (len(files), ", ".join(sorted({p.parent.name for p in files}))), file=sys.stderr)
    return rows


def main() -> int:
    rows = table()
    print("\n".join(rows))
    if "--write" in sys.argv[1:]:
        text = README.read_text(encoding="utf-8")
        README.write_text(text.replace("\n".join(readme_table(text)), "\n".join(rows)), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
