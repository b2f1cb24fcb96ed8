"""Recall on bugs rebuilt from public reports, by category, and false positives on look-alikes.

Reads tests/fixtures/real_bugs/: each `# expect: TLnnn` mark is one reported bug (its category is
the code); every finding on a line without a mark is a false positive (the `quiet_*.py` files are
look-alikes of the reported shapes that work as written). Findings count when torchlint shows them
by default (any severity; not the quiet ones that only `show-all` shows). Prints a markdown table
for the syntactic layer alone and with jedi.

    .venv/bin/python benchmarks/real_bugs.py
"""
from __future__ import annotations

import collections
import sys
from pathlib import Path

from torchlint.engine import check_source
from torchlint.inference.layer import JediInference
from torchlint.rules import RULES_BY_CODE

ROOT = Path(__file__).resolve().parent.parent
REAL_BUGS = ROOT / "tests" / "fixtures" / "real_bugs"
sys.path.insert(0, str(ROOT / "tests"))
from testkit.expectations import expected_findings  # noqa: E402  (the tests' own reading of `# expect:`)


def measure(inference=None):
    """(expected per code, found per code, false positives as 'file:line code' strings)."""
    expected, found, false = collections.Counter(), collections.Counter(), []
    for path in sorted(REAL_BUGS.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        marks = expected_findings(text)
        result = check_source(text, str(path), inference=inference)
        reported = {(f.range.start.line, f.code) for f in result.findings}
        for _, code in marks:
            expected[code] += 1
        for _, code in reported & marks:
            found[code] += 1
        false += ["%s:%d %s" % (path.name, line, code) for line, code in sorted(reported - marks)]
    return expected, found, false


def main() -> int:
    layers = {"names": measure(None), "jedi": measure(JediInference(str(REAL_BUGS)))}
    expected = layers["names"][0]
    print("| category | reports | found (names) | found (with jedi) |")
    print("|---|---|---|---|")
    for code in sorted(expected):
        name = RULES_BY_CODE[code].name if code in RULES_BY_CODE else "(no rule yet)"
        print("| %s %s | %d | %d | %d |" % (code, name, expected[code], layers["names"][1][code],
                                           layers["jedi"][1][code]))
    total = sum(expected.values())
    names_found, jedi_found = sum(layers["names"][1].values()), sum(layers["jedi"][1].values())
    print("| all | %d | %d (%.2f) | %d (%.2f) |" % (total, names_found, names_found / total, jedi_found,
                                                    jedi_found / total))
    for layer, (_, _, false) in layers.items():
        print("\nfalse positives (%s): %d%s" % (layer, len(false), "".join("\n  " + f for f in false)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
