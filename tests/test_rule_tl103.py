"""TL103 parameter-lost-by-move: the fixes' exact text, the look-alikes that stay quiet, and that
the fixed code runs right with torch."""
from __future__ import annotations

import textwrap

import pytest

from testkit.rules import by_title, check, findings, fixed, only, preferred, quiet, run
from torchlint.engine import check_source
from torchlint.analysis.source import apply_edits


CUDA_RANDN = """\
import torch
import torch.nn as nn
w = nn.Parameter(torch.randn(3)).cuda()
"""


def test_tl103_moves_the_call_inside():
    finding = only(CUDA_RANDN, "TL103")
    fix = by_title(finding, "Move the call inside")
    assert fixed(CUDA_RANDN, fix).splitlines()[2] == "w = nn.Parameter(torch.randn(3).cuda())"
    assert fix.is_safe


def test_tl103_puts_device_on_the_factory():
    finding = only(CUDA_RANDN, "TL103")
    fix = by_title(finding, "Create it there")
    assert fixed(CUDA_RANDN, fix).splitlines()[2] == 'w = nn.Parameter(torch.randn(3, device="cuda"))'
    # randn on another device draws other numbers: not safe, so moving the call is preferred.
    assert not fix.is_safe and preferred(finding).title.startswith("Move the call inside")


def test_tl103_prefers_the_factory_keyword_when_values_cannot_change():
    text = "import torch\nimport torch.nn as nn\nb = nn.Parameter(torch.zeros(2, 4)).half()\n"
    fix = preferred(only(text, "TL103"))
    assert fix.is_safe
    assert fixed(text, fix).splitlines()[2] == "b = nn.Parameter(torch.zeros(2, 4, dtype=torch.float16))"


def test_tl103_honours_import_aliases():
    text = "import torch as T\nimport torch.nn as tnn\ng = tnn.Parameter(T.ones(4)).to(dev).double()\n"
    finding = only(text, "TL103")
    assert "`tnn.Parameter(...).to(dev)`" in finding.message
    assert fixed(text, by_title(finding, "Move the call inside")).splitlines()[2] == \
        "g = tnn.Parameter(T.ones(4).to(dev).double())"
    assert fixed(text, by_title(finding, "Create it there")).splitlines()[2] == \
        "g = tnn.Parameter(T.ones(4, device=dev, dtype=T.float64))"


def test_tl103_parenthesises_a_compound_argument():
    text = "import torch\nfrom torch.nn import Parameter\np = Parameter(torch.randn(8) * 0.02).to(device)\n"
    finding = only(text, "TL103")
    assert [f.title.split(":")[0] for f in finding.fixes] == ["Move the call inside"]
    assert fixed(text, finding.fixes[0]).splitlines()[2] == "p = Parameter((torch.randn(8) * 0.02).to(device))"


def test_tl103_integer_conversion_turns_off_grad():
    text = "import torch\nimport torch.nn as nn\nidx = nn.Parameter(torch.arange(4.0)).long()\n"
    fix = only(text, "TL103").fixes[0]
    assert fixed(text, fix).splitlines()[2] == "idx = nn.Parameter(torch.arange(4.0).long(), requires_grad=False)"


def test_tl103_reports_a_chain_once_and_keeps_inner_comments():
    text = """\
    import torch
    import torch.nn as nn
    w = nn.Parameter(
        torch.ones(3)  # start at one
    ).cuda().half()
    """
    finding = only(text, "TL103")
    assert finding.range.start.line == 3
    out = fixed(text, by_title(finding, "Move the call inside"))
    assert out.splitlines()[3:5] == ["    torch.ones(3).cuda().half()  # start at one", ")"]


def test_tl103_quiet_on_in_place_and_modules():
    text = """\
    import torch
    import torch.nn as nn
    a = nn.Parameter(torch.ones(3)).requires_grad_(False)
    b = nn.Parameter(torch.ones(3).cuda())
    m = nn.Linear(3, 3).cuda()
    n = nn.Parameter(torch.ones(3)).type()
    """
    assert findings(text, "TL103") == []


def test_tl103_no_tl101_on_the_same_line():
    text = """\
    import torch
    import torch.nn as nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(3)).cuda()
    """
    assert [f.code for f in check(textwrap.dedent(text)).findings] == ["TL103"]


def test_tl103_fixes_register_the_parameter():
    import torch
    
    text = textwrap.dedent("""\
        import torch
        import torch.nn as nn

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.zeros(3)).double()
                self.v = nn.Parameter(torch.randn(2) * 0.1).to("cpu", torch.float64)
    """)
    finding_lines = {f.range.start.line: f for f in check_source(text).findings if f.code == "TL103"}
    assert sorted(finding_lines) == [7, 8]
    for fix in finding_lines[7].fixes:
        for other in finding_lines[8].fixes:
            namespace = {}
            exec(compile(apply_edits(text, fix.edits + other.edits), "fixed", "exec"), namespace)
            params = dict(namespace["M"]().named_parameters())
            assert set(params) == {"w", "v"}
            assert all(p.dtype is torch.float64 and p.is_leaf for p in params.values())


REBOUND = """\
import torch
import torch.nn as nn


class Table(nn.Module):
    def __init__(self, n, double=False):
        super().__init__()
        w = nn.Parameter(torch.ones(n, 2))
        if double:
            w = w.double()
        self.w = w

    def forward(self, i):
        return self.w[i]
"""


def test_tl103_parameter_rebound_to_its_move_under_an_option():
    finding = only(REBOUND, "TL103")
    assert (finding.range.start.line, finding.range.start.column) == (10, 16)
    assert "`self.w = w`" in finding.message and finding.related[0].range.start.line == 11
    fix = preferred(finding)
    assert fix.is_safe and fixed(REBOUND, fix).splitlines()[9] == "            w = nn.Parameter(w.double())"


def test_tl103_rebound_fix_registers_the_parameter_on_that_path():
    import torch

    assert list(run(REBOUND)["Table"](3, double=True).parameters()) == []  # the bug, for real
    model = run(fixed(REBOUND, preferred(only(REBOUND, "TL103"))))["Table"](3, double=True)
    (param,) = model.parameters()
    assert param is model.w and param.dtype == torch.float64 and param.is_leaf
    assert list(run(REBOUND)["Table"](3).parameters())[0].dtype == torch.float32  # the other path unchanged


@pytest.mark.parametrize("change", [
    ("        self.w = w\n", "        return\n"),  # never stored
    ("nn.Parameter(torch.ones(n, 2))", "torch.ones(n, 2)"),  # not a Parameter
    ("w = w.double()", "v = w.double()"),  # another name: w itself is stored
    ("w = w.double()", "w = w.requires_grad_(False)"),  # in place: the same Parameter
    ("        self.w = w\n", "        w = nn.Parameter(w)\n        self.w = w\n"),  # wrapped again before
])
def test_tl103_rebound_look_alikes_stay_quiet(change):
    quiet(REBOUND.replace(*change), "TL103")


def test_tl103_rebound_keeps_requires_grad_given_to_the_parameter():
    text = REBOUND.replace("nn.Parameter(torch.ones(n, 2))", "nn.Parameter(torch.ones(n, 2), requires_grad=False)")
    out = fixed(text, preferred(only(text, "TL103")))
    assert out.splitlines()[9] == "            w = nn.Parameter(w.double(), requires_grad=w.requires_grad)"
    assert run(out)["Table"](3, double=True).w.requires_grad is False
