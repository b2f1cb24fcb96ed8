"""TL106 submodule-unused-in-forward: information with no fix, the layer that really gets no
gradient, and the look-alikes that stay quiet."""
from __future__ import annotations

import pytest
import torch

from torchlint.analysis.findings import Severity
from torchlint.rules import RULES_BY_CODE
from testkit.rules import findings, only, quiet, run


UNUSED = """\
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self, dim=4, classes=3):
        super().__init__()
        self.encoder = nn.Linear(dim, dim)
        self.aux_head = nn.Linear(dim, classes)
        self.head = nn.Linear(dim, classes)

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


PARAMETER_FREE = """\
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self, dim=4, classes=3, p=0.1):
        super().__init__()
        self.head = nn.Linear(dim, classes)
        self.spare = nn.Linear(dim, classes)
        self.drop = nn.Dropout(p)
        self.tail = nn.Sequential(nn.Flatten(), nn.Dropout(p))
        self.act = nn.ReLU()
        self.pools = nn.ModuleList([nn.MaxPool1d(2), nn.Identity()])
        self.identity = nn.Identity()
        self.mixed = nn.Sequential(nn.ReLU(), nn.Linear(dim, dim))

    def forward(self, x):
        return self.head(x)
"""


def test_tl106_says_a_parameter_free_layer_is_never_applied_and_a_layer_with_weights_stops_ddp():
    found = {f.range.start.line: f for f in findings(PARAMETER_FREE, "TL106")}
    assert sorted(found) == [8, 9, 10, 11, 12, 14]  # not the Identity
    for line in (9, 10, 11, 12):
        assert "DistributedDataParallel" not in found[line].message
        assert "holds no parameters" in found[line].message
    assert "`self.drop` (nn.Dropout)" in found[9].message
    assert "the dropout it was built for is never applied" in found[9].message
    assert "the nn.Flatten and nn.Dropout it was built for are never applied" in found[10].message
    assert "the nn.MaxPool1d it was built for is never applied" in found[12].message
    # a dropout lost changes how the model trains; an activation may be applied as F.relu
    assert [found[line].severity for line in (9, 10, 11, 12)] == [Severity.INFO, Severity.INFO,
                                                                   Severity.HINT, Severity.HINT]
    for line in (8, 14):  # weights: the DDP error and the optimizer state, as information
        assert "Expected to have finished reduction" in found[line].message
        assert found[line].severity is Severity.INFO


def test_tl106_a_parameter_free_container_filled_later_is_judged_as_a_container():
    text = PARAMETER_FREE.replace("        self.identity = nn.Identity()\n",
                                  "        self.pools.append(nn.Linear(dim, dim))\n")
    found = {f.range.start.line: f for f in findings(text, "TL106")}
    assert "Expected to have finished reduction" in found[12].message


def test_a_container_registering_what_another_attribute_holds_is_not_unused():
    # tianshou's multi-agent policy: a plain dict forward runs, registered by a ModuleList beside it.
    text = """
import torch.nn as nn


class Team(nn.Module):
    def __init__(self, members: dict):
        super().__init__()
        self.members = members
        self._registered = nn.ModuleList(members.values())
        self.head = nn.Linear(4, 4)

    def forward(self, x):
        return sum(m(x) for m in self.members.values())
"""
    found = findings(text, "TL106")
    assert [f.message.split("`")[1] for f in found] == ["self.head"], found
