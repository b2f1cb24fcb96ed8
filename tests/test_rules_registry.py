"""The registry of codes (torchlint.rules.ALL_CODES): every code torchlint can print, rules and
runtime verification alike, with its page; the README's tables and ranges written from it; and
``ctx.finding``, which takes a finding's code and default severity from the rule that runs."""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from torchlint.analysis.context import FileContext
from torchlint.analysis.findings import Severity
from torchlint.rules import ALL_CODES, ALL_RULES, RULES_BY_CODE, VERIFY_CODES, base
from torchlint.verify import report

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import rule_tables  # noqa: E402


def test_every_code_has_its_page_and_every_page_its_code():
    for code, entry in ALL_CODES.items():
        assert entry.code == code
        assert entry.doc().startswith("# %s %s" % (code, entry.name)), entry.doc_path()
        assert entry.doc_url() == base.page_url(code)
    pages = {p.stem for p in base.DOCS_DIR.glob("TL*.md")}
    assert pages == set(ALL_CODES)


def test_rules_and_verification_codes_are_apart():
    assert set(RULES_BY_CODE).isdisjoint(VERIFY_CODES)
    assert all(code.startswith("TL9") for code in VERIFY_CODES)
    assert not any(code.startswith("TL9") for code in RULES_BY_CODE)
    for rule in ALL_RULES:  # the file is found by its name: tlNNN_<name>.py
        assert type(rule).__module__.rsplit(".", 1)[1].startswith(rule.code.lower() + "_")


def test_every_code_verification_reports_is_registered():
    # The probe and the runner name their codes as literals.
    verify_dir = Path(report.__file__).parent
    used = {code for path in verify_dir.glob("*.py") for code in re.findall(r"\bTL9\d\d\b", path.read_text("utf-8"))}
    assert used and used <= set(VERIFY_CODES), used - set(VERIFY_CODES)


def test_the_readme_is_as_the_registry_says():
    assert rule_tables.main(["--check"]) == 0, "run tools/rule_tables.py"


def test_a_stale_readme_is_rewritten():
    readme = rule_tables.README.read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| TL203 |"))
    last = max(code for code in RULES_BY_CODE if code.startswith("TL1"))  # the range the README gives TL1
    current = "TL101-%s" % last
    assert current in readme
    older = "TL101-TL1%02d" % (int(last[2:]) - 101)  # (one rule fewer)
    without_row = readme.replace(row + "\n", "")
    with_old_range = readme.replace(current, older)
    assert without_row != readme and rule_tables.render(without_row) == readme
    assert with_old_range != readme and rule_tables.render(with_old_range) == readme


def test_a_readme_without_its_markers_is_refused():
    with pytest.raises(SystemExit, match="verify-codes"):
        rule_tables.render(re.sub(r"<!-- end of verify-codes table -->", "", rule_tables.README.read_text("utf-8")))


def test_unknown_codes_and_wrong_names_are_reported():
    path = rule_tables.ROOT / "benchmarks" / "README.md"
    unknown = next("TL1%02d" % n for n in range(99, 0, -1) if "TL1%02d" % n not in ALL_CODES)  # (TL199 may be a rule)
    text = "| TL107 attribute-then-register | 2 |\n| TL108 module-made-in-forward |\n%s and TL101 fine\n" % unknown
    assert rule_tables.name_problems(path, text) == [
        "benchmarks/README.md:2: TL108 is named module-created-in-forward, not module-made-in-forward",
        "benchmarks/README.md:3: %s is no registered code" % unknown]


def test_table_cells_keep_markdown_out_of_plain_text():
    assert rule_tables._markdown("in __init__, `self.__x` | y") == "in \\_\\_init\\_\\_, `self.__x` \\| y"


# -- ctx.finding ---------------------------------------------------------------------------------

class _Probe(base.Rule):
    """A rule of the test's own: one finding per assignment, graded error on `bad = ...`."""
    code = "TL999"
    name = "probe"
    summary = "an assignment"
    severity = Severity.INFO

    def find(self, ctx):
        for stmt in ctx.tree.body:
            if isinstance(stmt, ast.Assign):
                graded = Severity.ERROR if stmt.targets[0].id == "bad" else None
                yield ctx.finding("assigned", stmt, severity=graded)


def test_a_finding_takes_the_running_rules_code_and_default_severity():
    text = "good = 1\nbad = 2\n"
    ctx = FileContext(text, "model.py", ast.parse(text))
    found = _Probe().check(ctx)
    assert [(f.code, f.severity, f.range.start.line) for f in found] == [
        ("TL999", Severity.INFO, 1), ("TL999", Severity.ERROR, 2)]
    assert ctx.running_rule is None  # the check is over
    with pytest.raises(RuntimeError):
        ctx.finding("no rule runs", ctx.tree.body[0])
