"""TL107 attribute-then-register: the KeyError is real, the message and the fixes are exact, the
fixed code builds with torch, and the registrations that work stay quiet."""
from __future__ import annotations

import pytest

from torchlint.analysis.findings import Severity
from testkit.rules import by_title, fixed, only, preferred, quiet, run

ENCODING = """\
import torch
import torch.nn as nn

class Encoding(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        pe = torch.arange(n, dtype=torch.float32)
        self.pe = pe
        self.register_buffer("pe", pe)

    def forward(self, x):
        return x + self.pe
"""


def _registered(source):
    """The Encoding the source builds: its buffers, and that forward runs."""
    model = run(source)["Encoding"]()
    assert model(run("import torch\nx = torch.zeros(4)\n")["x"]).shape == (4,)
    return dict(model.named_buffers())


def test_tl107_the_bug_is_real():
    with pytest.raises(KeyError, match="attribute 'pe' already exists"):
        run(ENCODING)["Encoding"]()


def test_tl107_message_severity_and_where_the_attribute_became_plain():
    finding = only(ENCODING, "TL107")
    assert finding.severity is Severity.ERROR
    assert finding.message == ("`register_buffer(\"pe\", ...)` raises KeyError \"attribute 'pe' already exists\": "
                               "line 8 already made `self.pe` a plain attribute")
    assert (finding.range.start.line, finding.range.start.column) == (9, 8)
    assert [(r.range.start.line, r.message) for r in finding.related] == [
        (8, "`self.pe` becomes a plain attribute here")]


def test_tl107_preferred_fix_removes_the_plain_assignment_and_the_buffer_is_registered():
    fix = preferred(only(ENCODING, "TL107"))
    assert fix.is_safe and fix.title == "Remove the plain assignment on line 8 (the registration sets the attribute)"
    result = fixed(ENCODING, fix)
    assert "self.pe = pe" not in result
    assert list(_registered(result)) == ["pe"]


def test_tl107_delete_first_fix_runs():
    fix = by_title(only(ENCODING, "TL107"), "Delete the plain attribute first")
    assert fix.is_safe and not fix.preferred
    result = fixed(ENCODING, fix)
    assert "        self.pe = pe\n        del self.pe\n        self.register_buffer" in result
    assert list(_registered(result)) == ["pe"]


def test_tl107_value_read_back_before_registering_is_kept_in_a_local():
    source = ENCODING.replace('        self.register_buffer("pe", pe)',
                              '        total = self.pe.sum()\n        self.register_buffer("pe", pe / total)')
    finding = only(source, "TL107")
    fix = preferred(finding)
    assert fix.title == "Keep the value in a local variable `pe_value` until it is registered"
    result = fixed(source, fix)
    assert "pe_value = pe\n        total = pe_value.sum()\n" in result
    assert float(_registered(result)["pe"].sum()) == pytest.approx(1.0)


def test_tl107_placeholder_none_before_register_parameter():
    source = """\
    import torch
    import torch.nn as nn

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = None
            self.register_parameter("scale", nn.Parameter(torch.ones(2)))
    """
    finding = only(source, "TL107")
    assert finding.related[0].range.start.line == 7
    with pytest.raises(KeyError):
        run(source)["Head"]()
    assert [name for name, _ in run(fixed(source, preferred(finding)))["Head"]().named_parameters()] == ["scale"]


@pytest.mark.parametrize("body", [
    "self.pe = pe\n        del self.pe\n        self.register_buffer('pe', pe)",  # deleted first
    "self.register_buffer('pe', pe)\n        self.pe = pe * 2\n        self.register_buffer('pe', self.pe)",  # a buffer
    "self.pe = nn.Parameter(pe)\n        self.register_parameter('pe', nn.Parameter(pe))",  # the same kind of member
    "if n:\n            self.pe = pe\n        else:\n            self.register_buffer('pe', pe)",  # another branch
    "self.other = pe\n        self.register_buffer('pe', pe)",  # another name
])
def test_tl107_quiet_where_the_registration_works(body):
    source = ENCODING.replace('self.pe = pe\n        self.register_buffer("pe", pe)', body)
    assert source != ENCODING
    quiet(source, "TL107")
    run(source)["Encoding"](n=4)  # builds: torch agrees there is no KeyError


def test_tl107_quiet_outside_modules():
    quiet(ENCODING.replace("class Encoding(nn.Module):", "class Encoding:").replace("super().__init__()", "pass"),
          "TL107")
