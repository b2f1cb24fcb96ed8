"""The analysis core's contract: text in, plain data out, never a crash, never torch."""
from __future__ import annotations

import dataclasses
import enum
import subprocess
import sys
from textwrap import dedent

import pytest

from testkit.support import ROOT
from torchlint.engine import CheckOptions, check_source
from torchlint.analysis.findings import (Applicability, CheckResult, Edit, Finding, Fix, ParseError, Position,
                                         Range, Severity)
from torchlint.analysis.source import apply_edits

HEADER = dedent("""\
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
    """)
FIRST = HEADER.count("\n") + 1


def module_with(*lines: str) -> str:
    return HEADER + "".join("        %s\n" % line for line in lines)


def clean(text: str, **kwargs) -> CheckResult:
    result = check_source(text, "model.py", **kwargs)
    assert result.parse_error is None, result.parse_error
    assert not result.internal_errors, "\n".join(result.internal_errors)
    return result


# -- plain data ----------------------------------------------------------------------------

PLAIN = (str, int, float, bool, type(None), enum.Enum)


def _leaves(value):
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _leaves(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


def test_result_is_plain_data():
    result = clean(module_with("self.w = torch.randn(3, requires_grad=True)", "self.mask = torch.ones(3)"))
    assert isinstance(result, CheckResult)
    assert len(result.findings) == 2
    for finding in result.findings:
        assert isinstance(finding, Finding)
        hash(finding)  # frozen: safe to cache and compare
        for fix in finding.fixes:
            assert isinstance(fix, Fix) and isinstance(fix.applicability, Applicability)
            assert all(isinstance(edit, Edit) for edit in fix.edits)
    bad = [leaf for leaf in _leaves(dataclasses.asdict(result)) if not isinstance(leaf, PLAIN)]
    assert not bad, "not plain data: %r" % bad[:5]


def test_requires_grad_tensor_is_an_error():
    result = clean(module_with("self.w = torch.randn(3, requires_grad=True)"))
    (finding,) = result.findings
    assert finding.code == "TL101"
    assert finding.severity is Severity.ERROR
    assert finding.range.start == Position(FIRST, 8)
    preferred = [fix for fix in finding.fixes if fix.preferred]
    assert len(preferred) == 1 and "Parameter" in preferred[0].title


def test_constant_tensor_is_a_warning():
    (finding,) = clean(module_with("self.mask = torch.tril(torch.ones(4, 4))")).findings
    assert finding.code == "TL101"
    assert finding.severity is Severity.WARNING


def test_clean_file_has_no_findings():
    result = clean(module_with("self.fc = nn.Linear(3, 3)", "self.scale = 3 ** -0.5"))
    assert result.findings == []


@pytest.mark.parametrize("text", ["", "\n", "# just a comment\n", "\"\"\"docstring\"\"\"\n"])
def test_trivial_files(text):
    assert clean(text).findings == []


def test_byte_order_mark_does_not_crash():
    # Readers decode with utf-8-sig; a BOM that reaches the core anyway must not break it.
    result = check_source("\ufeffimport torch\n", "bom.py")
    assert result.findings == [] and not result.internal_errors


# -- files that do not parse ---------------------------------------------------------------

def test_syntax_error_is_reported_with_its_line():
    text = module_with("self.mask = torch.ones(3)", "self.broken = (", "") + "\n\nx = 1\n"
    result = check_source(text, "broken.py")
    assert result.findings == []
    assert isinstance(result.parse_error, ParseError)
    assert result.parse_error.position.line >= FIRST + 1
    assert result.parse_error.message


def test_indentation_error_is_a_parse_error():
    result = check_source("class A:\npass\n", "bad.py")
    assert result.parse_error is not None and result.parse_error.position.line == 2


@pytest.mark.parametrize("text", [
    "x = 1\x00\n",
    module_with("self.m = torch.ones(3)\x00"),
    "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n",
    "x = " + "-" * 100000 + "1\n",
    module_with("self.x = " + " + ".join(["torch.ones(1)"] * 20000)),
    module_with("self.x = self" + ".a" * 20000),
    "\udcff = 1\n",
])
def test_hostile_input_does_not_crash(text):
    result = check_source(text, "hostile.py")
    assert result.parse_error is not None
    assert result.parse_error.position.line >= 1
    assert result.findings == []


@pytest.mark.parametrize("depth", [100, 1000])
def test_deep_but_valid_code_is_analysed(depth):
    deep = [
        module_with("self.x = " + " + ".join(["torch.ones(1)"] * depth)),
        module_with("self.x = torch.ones(1)" + ".float()" * depth),
        module_with("self.x = " + "-" * depth + "torch.ones(1)"),
        module_with("self.x = torch.ones(1)" + "[0]" * depth),
        module_with("self.x = " + "lambda: " * depth + "torch.ones(1)"),
        "".join("    " * i + "def f%d():\n" % i for i in range(90)) + "    " * 90 + "pass\n",
    ]
    for text in deep:
        clean(text)  # no parse error, no rule crash


# -- options -------------------------------------------------------------------------------

TWO_RULES = module_with("self.g = torch.cuda.FloatTensor([1.0])")


def test_all_rules_by_default():
    assert [f.code for f in clean(TWO_RULES).findings] == ["TL101", "TL301"]


def test_enabled_filters_rules():
    assert [f.code for f in clean(TWO_RULES, options=CheckOptions(enabled=frozenset({"TL301"}))).findings] == ["TL301"]
    assert clean(TWO_RULES, options=CheckOptions(enabled=frozenset())).findings == []


def test_severities_override():
    options = CheckOptions(severities={"TL101": Severity.ERROR, "TL301": Severity.INFO})
    by_code = {f.code: f.severity for f in clean(TWO_RULES, options=options).findings}
    assert by_code == {"TL101": Severity.ERROR, "TL301": Severity.INFO}


def test_severity_override_can_lower_an_error():
    options = CheckOptions(severities={"TL101": Severity.HINT})
    (finding,) = clean(module_with("self.w = torch.randn(3, requires_grad=True)"), options=options).findings
    assert finding.severity is Severity.HINT


# -- positions -----------------------------------------------------------------------------

@pytest.mark.parametrize("before", ["コメント", "naïve café", "😀 emoji", "日本語😀"])
def test_columns_are_code_points_after_non_ascii_text(before):
    line = 'note = "%s"; self.mask = torch.ones(3)' % before
    (finding,) = clean(module_with(line)).findings
    full_line = "        " + line
    assert finding.range.start == Position(FIRST, full_line.index("self.mask"))
    assert finding.range.end == Position(FIRST, len(full_line))


def test_fix_edits_use_code_point_columns():
    line = 'self.mask = torch.ones(3)  # マスク'
    text = module_with("note = '日本語'; " + line)
    (finding,) = clean(text).findings
    for fix in finding.fixes:
        fixed = apply_edits(text, fix.edits)
        assert "日本語" in fixed and "# マスク" in fixed
        clean(fixed)


def test_crlf_gives_the_same_positions_as_lf():
    lf = module_with("self.w = torch.randn(3, requires_grad=True)", "self.mask = torch.ones(", "    3,", ")",
                     "self.g = torch.cuda.FloatTensor([1.0])")
    crlf = lf.replace("\n", "\r\n")

    def positions(text):
        return [(f.code, f.range, f.message) for f in clean(text).findings]

    assert positions(crlf) == positions(lf)
    assert len(positions(lf)) >= 3


def test_fixes_keep_crlf_line_endings():
    crlf = ("import torch\r\nfrom torch import nn\r\n\r\n\r\nclass Model(nn.Module):\r\n"
            "    def __init__(self):\r\n        super().__init__()\r\n        self.w = torch.randn(3)\r\n")
    (finding,) = clean(crlf).findings
    for fix in finding.fixes:
        fixed = apply_edits(crlf, fix.edits)
        assert "\n" not in fixed.replace("\r\n", ""), "fix %r mixed line endings: %r" % (fix.title, fixed)


def test_form_feed_does_not_shift_lines():
    # Python treats \f as whitespace; str.splitlines would see a line break there.
    text = "import torch\n\x0c\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n" \
           "    def __init__(self):\n        super().__init__()\n        self.mask = torch.ones(3)  \x0c\n"
    (finding,) = clean(text).findings
    assert finding.range.start == Position(9, 8)


def test_findings_are_sorted():
    text = dedent("""\
        import torch
        import torch.nn as nn


        class B(nn.Module):
            def __init__(self):
                super().__init__()
                self.z = torch.zeros(2); self.a = torch.ones(2)
                self.g = torch.cuda.FloatTensor([1.0])


        class A(nn.Module):
            def __init__(self):
                super().__init__()
                self.m = torch.ones(2)
        """)
    findings = clean(text).findings
    assert len(findings) >= 4
    keys = [(f.range.start, f.code) for f in findings]
    assert keys == sorted(keys)
    assert [f.range.start.line for f in findings] == [8, 8, 9, 9, 15]


def test_range_and_position_order():
    assert Position(1, 5) < Position(2, 0) < Position(2, 1)
    assert Range.of(1, 0, 1, 4).start == Position(1, 0)


# -- the core never imports torch ----------------------------------------------------------

def test_core_never_imports_torch():
    code = dedent("""\
        import sys
        import torchlint.engine, torchlint.rules
        from torchlint.engine import check_source
        assert 'torch' not in sys.modules, 'importing the core imported torch'
        src = open(sys.argv[1], encoding='utf-8').read()
        check_source(src, sys.argv[1])
        assert 'torch' not in sys.modules, 'checking a file imported torch'
        """)
    fixture = ROOT / "tests" / "fixtures" / "rules" / "tl101_seed_linear.py"
    proc = subprocess.run([sys.executable, "-c", code, str(fixture)], cwd=str(ROOT),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "", "the core printed: %r" % proc.stdout
