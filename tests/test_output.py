"""The renderers: text, JSON (ruff's shape), SARIF 2.1.0 and GitHub annotations."""
from __future__ import annotations

import json
import re

import pytest

from torchlint import __version__, cli
from torchlint.engine import CheckOptions, check_source
from torchlint.analysis.findings import Applicability, Edit, Finding, Fix, ParseError, Position, Range, Severity
from torchlint.output import FileReport, OutputOptions, json_format, render
from torchlint.output.github import escape_data, escape_property
from torchlint.output.text import render_statistics
from torchlint.rules import ALL_RULES

MASK = '''import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.mask = torch.tril(torch.ones(4, 4))
        self.w = torch.randn(3, requires_grad=True)
'''


@pytest.fixture
def reports(tmp_path):
    model = tmp_path / "src" / "model.py"
    result = check_source(MASK, str(model), CheckOptions(enabled=frozenset({"TL101"})))
    assert [f.code for f in result.findings] == ["TL101", "TL101"]
    broken = FileReport(str(tmp_path / "src" / "broken.py"), error=ParseError("SyntaxError: invalid syntax",
                                                                              Position(3, 4)))
    return [FileReport(str(model), findings=result.findings), broken]


@pytest.fixture
def options(tmp_path):
    return OutputOptions(cwd=str(tmp_path))


def test_text(reports, options):
    lines = render(reports, "text", options).splitlines()
    assert lines[0] == "src/broken.py:3:5: SyntaxError: invalid syntax"
    assert re.match(r"^src/model\.py:8:9: TL101 \[warning\] \[\*\] `self\.mask` ", lines[1])
    assert re.match(r"^src/model\.py:9:9: TL101 \[error\] \[-\] `self\.w` ", lines[2])  # unsafe fixes only
    assert lines[3] == ""
    assert lines[4] == "Found 3 findings (1 fixable with --fix; 1 more fixable with --unsafe-fixes, marked [-])."
    unsafe = render(reports, "text", OutputOptions(cwd=options.cwd, unsafe_fixes=True)).splitlines()
    assert re.match(r"^src/model\.py:9:9: TL101 \[error\] \[\*\] `self\.w` ", unsafe[2])  # --fix --unsafe-fixes does
    assert "[-]" not in "\n".join(unsafe)


def test_text_clean_and_quiet(options, reports):
    assert render([], "text", options) == "All checks passed!\n"
    quiet = OutputOptions(quiet=True, cwd=options.cwd)
    assert render([], "text", quiet) == ""
    assert "Found" not in render(reports, "text", quiet)


def graded(tmp_path):
    """One finding of each severity (the hint and the information with a safe fix) in one file."""
    safe = Fix("Do it", Applicability.SAFE, (Edit(Range.of(1, 0, 1, 1), "x"),), preferred=True)
    return [FileReport(str(tmp_path / "a.py"), findings=[
        Finding("TL101", "an error", Severity.ERROR, Range.of(1, 0, 1, 1)),
        Finding("TL102", "a warning", Severity.WARNING, Range.of(2, 0, 2, 1)),
        Finding("TL106", "an information", Severity.INFO, Range.of(3, 0, 3, 1), fixes=(safe,)),
        Finding("TL301", "a hint", Severity.HINT, Range.of(4, 0, 4, 1), fixes=(safe,)),
        Finding("TL301", "another hint", Severity.HINT, Range.of(5, 0, 5, 1)),
    ])]


def test_text_says_each_severity_and_hides_hints_unless_asked(tmp_path, options):
    lines = render(graded(tmp_path), "text", options).splitlines()
    assert lines == ["a.py:1:1: TL101 [error] an error", "a.py:2:1: TL102 [warning] a warning",
                     "a.py:3:1: TL106 [info] [*] an information", "",
                     "Found 3 findings (1 fixable with --fix); 2 hints hidden (--show-hints shows them)."]
    shown = OutputOptions(cwd=options.cwd, show_hints=True)
    lines = render(graded(tmp_path), "text", shown).splitlines()
    assert lines[3:] == ["a.py:4:1: TL301 [hint] [*] a hint", "a.py:5:1: TL301 [hint] another hint", "",
                         "Found 5 findings (2 fixable with --fix)."]


def test_summary_with_hints_only(tmp_path, options):
    hint = Finding("TL301", "a hint", Severity.HINT, Range.of(1, 0, 1, 1))
    reports = [FileReport(str(tmp_path / "a.py"), findings=[hint])]
    assert render(reports, "text", options) == "All checks passed! 1 hint hidden (--show-hints shows them).\n"
    assert render(reports, "text", OutputOptions(cwd=options.cwd, quiet=True)) == ""
    fixed = [FileReport(str(tmp_path / "a.py"), findings=[hint], fixed=2)]  # --fix fixed two, hints included
    assert render(fixed, "text", OutputOptions(cwd=options.cwd, fix_mode=True)) == \
        "Found 2 findings (2 fixed, 0 remaining); 1 hint hidden (--show-hints shows them).\n"


def test_statistics_of_hints(tmp_path, options):
    rows = [line.split("\t") for line in render_statistics(graded(tmp_path), options).splitlines()]
    assert [(n.strip(), code.strip(), rest) for n, code, rest in rows] == [
        ("1", "TL101", "    unregistered-tensor"), ("1", "TL102", "    unregistered-container"),
        ("1", "TL106", "[*] submodule-unused-in-forward"), ("2", "", "    hints (--show-hints counts them per rule)")]
    shown = render_statistics(graded(tmp_path), OutputOptions(cwd=options.cwd, show_hints=True))
    assert shown.splitlines()[0] == "2\tTL301\t[*] legacy-constructor" and "hints (" not in shown


def test_statistics_mark_a_rule_whose_findings_have_unsafe_fixes_only(tmp_path, options):
    unsafe = Fix("Maybe", Applicability.UNSAFE, (Edit(Range.of(1, 0, 1, 1), "x"),), preferred=True)
    reports = [FileReport(str(tmp_path / "a.py"), findings=[
        Finding("TL101", "an error", Severity.ERROR, Range.of(1, 0, 1, 1), fixes=(unsafe,))])]
    assert render_statistics(reports, options) == "1\tTL101\t[-] unregistered-tensor\n"


def test_statistics(reports, options):
    lines = render_statistics(reports, options).splitlines()
    assert re.match(r"^2\tTL101\t\[\*\] unregistered-tensor$", lines[0])
    assert re.match(r"^1\t\s*\t\s+syntax-error$", lines[1])


def test_statistics_json_counts_every_finding_hints_included(tmp_path, options, reports):
    assert json.loads(json_format.render_statistics(graded(tmp_path), options)) == [
        {"code": "TL301", "name": "legacy-constructor", "count": 2, "fixable": True},
        {"code": "TL101", "name": "unregistered-tensor", "count": 1, "fixable": False},
        {"code": "TL102", "name": "unregistered-container", "count": 1, "fixable": False},
        {"code": "TL106", "name": "submodule-unused-in-forward", "count": 1, "fixable": True},
    ]
    rows = json.loads(json_format.render_statistics(reports, options))
    assert rows == [{"code": "TL101", "name": "unregistered-tensor", "count": 2, "fixable": True},
                    {"code": None, "name": "syntax-error", "count": 1, "fixable": False}]
    unsafe = OutputOptions(cwd=options.cwd, unsafe_fixes=True)
    assert json.loads(json_format.render_statistics(graded(tmp_path), unsafe))[1]["fixable"] is False


def test_summary_counts_fixes_not_written(tmp_path):
    warning = Finding("TL101", "a warning", Severity.WARNING, Range.of(1, 0, 1, 1))
    fix_mode = OutputOptions(cwd=str(tmp_path), fix_mode=True)
    locked = FileReport(str(tmp_path / "a.py"), findings=[warning], unwritten=3, unwritten_why="read-only file")
    assert render([locked], "text", fix_mode).splitlines()[-1] == \
        "Found 1 finding (3 fixes not written: read-only file)."
    moved = FileReport(str(tmp_path / "b.py"), unwritten=1, unwritten_why="changed on disk while it was being fixed")
    assert render([moved], "text", fix_mode) == "Found 0 findings (1 fix not written: changed on disk while it " \
                                                 "was being fixed).\n"
    assert render([locked, moved], "text", fix_mode).splitlines()[-1] == \
        "Found 1 finding (4 fixes not written: see the errors above)."


def test_json_shape(reports, options, tmp_path):
    entries = json.loads(render(reports, "json", options))
    assert len(entries) == 3
    keys = {"cell", "code", "message", "filename", "location", "end_location", "fix", "url", "noqa_row", "severity"}
    assert all(set(entry) == keys for entry in entries)
    assert all(entry["cell"] is None for entry in entries)  # a .py file (ruff: the cell of a notebook)

    error, mask, trainable = entries
    assert error["code"] is None and error["fix"] is None
    assert error["filename"] == str(tmp_path / "src" / "broken.py")
    assert error["location"] == {"row": 3, "column": 5} and error["severity"] == "error"

    assert mask["code"] == "TL101"
    assert mask["filename"] == str(tmp_path / "src" / "model.py")
    assert mask["location"] == {"row": 8, "column": 9}
    assert mask["end_location"] == {"row": 8, "column": 49}
    assert mask["noqa_row"] == 8 and mask["severity"] == "warning"
    assert mask["url"].startswith("file://") and mask["url"].endswith("TL101.md")
    # The preferred fix, safe or not: registering a buffer.
    assert set(mask["fix"]) == {"applicability", "message", "edits"}
    assert mask["fix"]["applicability"] == "unsafe" and "register_buffer" in mask["fix"]["message"]
    for edit in mask["fix"]["edits"]:
        assert set(edit) == {"content", "location", "end_location"}
        assert set(edit["location"]) == {"row", "column"} and edit["location"]["column"] >= 1
    assert mask["fix"]["edits"][0] == {"content": 'self.register_buffer("mask", ',
                                       "location": {"row": 8, "column": 9}, "end_location": {"row": 8, "column": 21}}

    assert trainable["severity"] == "error" and trainable["location"] == {"row": 9, "column": 9}


def test_json_fix_null_and_safe(tmp_path, options):
    rng = Range.of(1, 0, 1, 5)
    safe = Fix("Do it", Applicability.SAFE, (Edit(rng, "x"),), preferred=True)
    reports = [FileReport(str(tmp_path / "a.py"), findings=[
        Finding("TL101", "no fix", Severity.HINT, rng),
        Finding("TL101", "fixed", Severity.INFO, Range.of(2, 0, 2, 1), fixes=(safe,)),
    ])]
    no_fix, fixed = json.loads(render(reports, "json", options))
    assert no_fix["fix"] is None and no_fix["severity"] == "hint"
    assert fixed["fix"] == {"applicability": "safe", "message": "Do it", "edits": [
        {"content": "x", "location": {"row": 1, "column": 1}, "end_location": {"row": 1, "column": 6}}]}


def test_sarif_structure(reports, options):
    log = json.loads(render(reports, "sarif", options))
    assert log["version"] == "2.1.0"
    assert log["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json"
    assert len(log["runs"]) == 1
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "torchlint" and driver["version"] == __version__
    assert driver["informationUri"].startswith("https://")
    assert [rule["id"] for rule in driver["rules"]] == [rule.code for rule in ALL_RULES]
    for rule in driver["rules"]:
        assert rule["name"] and rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
        assert rule["helpUri"].endswith("%s.md" % rule["id"])
        assert rule["defaultConfiguration"]["level"] in ("error", "warning", "note")

    results = run["results"]
    assert len(results) == 2
    for result in results:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"] == "TL101"
        assert result["message"]["text"]
        (location,) = result["locations"]
        physical = location["physicalLocation"]
        assert physical["artifactLocation"]["uri"] == "src/model.py"
        region = physical["region"]
        assert set(region) == {"startLine", "startColumn", "endLine", "endColumn"}
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
    assert [r["level"] for r in results] == ["warning", "error"]
    assert results[0]["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 8, "startColumn": 9, "endLine": 8, "endColumn": 49}

    (notification,) = run["invocations"][0]["toolExecutionNotifications"]
    assert notification["level"] == "error" and "SyntaxError" in notification["message"]["text"]
    assert run["invocations"][0]["executionSuccessful"] is True


def test_sarif_levels_for_info_and_hint(tmp_path, options):
    rng = Range.of(1, 0, 1, 1)
    reports = [FileReport(str(tmp_path / "a.py"), findings=[Finding("TL101", "m", Severity.INFO, rng),
                                                            Finding("TL101", "m", Severity.HINT, rng)])]
    results = json.loads(render(reports, "sarif", options))["runs"][0]["results"]
    assert [r["level"] for r in results] == ["note", "note"]
    # SARIF's "none" is for results that are not problems (kind other than "fail"); a hint is a
    # note, and torchlint's own severity tells the two notes apart.
    assert [r["properties"] for r in results] == [{"severity": "info"}, {"severity": "hint"}]
    assert all("kind" not in r for r in results)  # "fail", the default


def test_every_severity_in_every_machine_format(tmp_path, options):
    entries = json.loads(render(graded(tmp_path), "json", options))
    assert [e["severity"] for e in entries] == ["error", "warning", "info", "hint", "hint"]
    results = json.loads(render(graded(tmp_path), "sarif", options))["runs"][0]["results"]
    assert [(r["level"], r["properties"]["severity"]) for r in results] == [
        ("error", "error"), ("warning", "warning"), ("note", "info"), ("note", "hint"), ("note", "hint")]
    lines = render(graded(tmp_path), "github", options).splitlines()
    assert [(line.split(" ", 1)[0], line.split("::", 2)[2]) for line in lines] == [
        ("::error", "TL101 [error] an error"), ("::warning", "TL102 [warning] a warning"),
        ("::notice", "TL106 [info] an information"), ("::notice", "TL301 [hint] a hint"),
        ("::notice", "TL301 [hint] another hint")]


def test_github_annotations(reports, options):
    lines = render(reports, "github", options).splitlines()
    assert lines[0] == "::error title=torchlint,file=src/broken.py,line=3,col=5,endLine=3,endColumn=5::" \
                       "SyntaxError: invalid syntax"
    assert lines[1].startswith("::warning title=torchlint (TL101),file=src/model.py,line=8,col=9,endLine=8,"
                               "endColumn=49::TL101 [warning] `self.mask`")
    assert lines[2].startswith("::error title=torchlint (TL101),file=src/model.py,line=9,col=9,")


def test_github_escaping():
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


def test_every_format_through_the_cli(tmp_path, capsys):
    (tmp_path / "model.py").write_text(MASK, encoding="utf-8")
    for fmt in ("text", "json", "sarif", "github"):
        code = cli.main(["check", "--select", "TL101", "--format", fmt, str(tmp_path / "model.py")])
        out, _ = capsys.readouterr()
        assert code == 1
        if fmt in ("json", "sarif"):
            json.loads(out)
        assert "TL101" in out
