"""TL106 submodule-unused-in-forward: information with no fix, the layer that really gets no
gradient, and the look-alikes that stay quiet."""
from __future__ import annotations

import pytest
import torch

from torchlint.analysis.findings import Severity
from torchlint.rules import RULES_BY_CODE
from testkit.rules import only, quiet, run


UNUSED = """\
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self, dim=4, classes=3):
        super().__init__()
        self.encoder = nn.Linear(dim, dim)
        self.aux_head = nn.Linear(dim, classes)
        self.head = nn.Linear(dim, classes)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return self.head(self.encoder(x))
"""


def test_tl106_is_information_with_ddp_consequence_and_no_fix():
    finding = only(UNUSED, "TL106")
    assert finding.severity is Severity.INFO
    assert (finding.range.start.line, finding.range.start.column) == (8, 8)
    assert "`self.aux_head` (nn.Linear)" in finding.message
    assert "find_unused_parameters=True" in finding.message
    assert finding.fixes == ()
    assert not RULES_BY_CODE["TL106"].offers_fixes
    assert "no quick fix" in RULES_BY_CODE["TL106"].doc()


def test_tl106_the_layer_really_gets_no_gradient():
    model = run(UNUSED)["Classifier"]()
    model(torch.randn(2, 4)).sum().backward()
    assert model.aux_head.weight.grad is None and model.head.weight.grad is not None


@pytest.mark.parametrize("forward", [
    "return self.head(self.encoder(x)) + self.aux_head(x).mean()",
    "return self._both(x)\n\n    def _both(self, x):\n        return self.head(self.encoder(x)) + self.aux_head(x)",
    "return getattr(self, self.which)(x)",
    "return super().forward(x)",
    "return sum(m(x) for m in self.children() if isinstance(m, nn.Linear))",
    "raise NotImplementedError",
])
def test_tl106_quiet_when_forward_uses_it_or_is_dynamic(forward):
    quiet(UNUSED.replace("return self.head(self.encoder(x))", forward), "TL106")


def test_tl106_quiet_when_another_method_uses_it_or_a_subclass_exists():
    quiet(UNUSED + "\n    def auxiliary(self, x):\n        return self.aux_head(x)\n", "TL106")
    quiet(UNUSED + "\n\nclass Two(Classifier):\n    pass\n", "TL106")
