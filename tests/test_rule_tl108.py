"""TL108 module-created-in-forward: the optimizer really misses the layer, the message and the fix
are exact, the fixed module trains its head, and what forward may make stays quiet."""
from __future__ import annotations

import pytest
import torch

from torchlint.analysis.findings import Severity
from testkit.rules import fixed, only, preferred, quiet, run

LATE_HEAD = """\
import torch
import torch.nn as nn

class LateHead(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.body = nn.Linear(12, 20)
        self.head = None
        self.classes = classes

    def forward(self, x):
        x = self.body(x)
        if self.head is None:
            self.head = nn.Linear(x.shape[-1], self.classes)
        return self.head(x)
"""


def _head_trained(source) -> bool:
    """Whether one optimizer step, with the optimizer built before the first batch as training
    loops do, changes the head's weight."""
    torch.manual_seed(0)
    model = run(source)["LateHead"]()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model(torch.randn(4, 12)).square().sum().backward()
    before = model.head.weight.detach().clone()
    optimizer.step()
    return not torch.equal(before, model.head.weight.detach())


def test_tl108_the_bug_is_real():
    assert not _head_trained(LATE_HEAD)


def test_tl108_message_and_severity():
    finding = only(LATE_HEAD, "TL108")
    assert finding.severity is Severity.ERROR
    assert (finding.range.start.line, finding.range.start.column) == (14, 12)
    assert finding.message == (
        "`self.head` is made in forward: a layer with parameters (`nn.Linear(x.shape[-1], self.classes)`) on the "
        "first call, after an optimizer built from model.parameters() took its list, so it never updates it; "
        "DistributedDataParallel, .to(device) and checkpoints taken before then miss it too")


def test_tl108_fix_builds_a_lazy_layer_in_init_and_the_head_trains():
    fix = preferred(only(LATE_HEAD, "TL108"))
    assert not fix.is_safe and fix.title == "Build self.head in __init__ as nn.LazyLinear"
    result = fixed(LATE_HEAD, fix)
    assert "self.head = None" not in result and "if self.head is None" not in result
    assert result.rstrip().endswith("x = self.body(x)\n        return self.head(x)")
    assert "        self.classes = classes\n        self.head = nn.LazyLinear(self.classes)\n" in result
    assert _head_trained(result)
    quiet(result, "TL108")


def test_tl108_a_second_size_from_forward_gets_no_fix_and_says_why():
    finding = only(LATE_HEAD.replace("nn.Linear(x.shape[-1], self.classes)", "nn.Linear(x.shape[-1], x.shape[0])"),
                   "TL108")
    assert finding.fixes == ()
    assert finding.message.endswith("(no fix: its arguments come from forward's own values (x): build it in "
                                    "__init__ from the sizes the constructor knows)")


def test_tl108_a_parameter_made_in_a_method_forward_calls():
    source = LATE_HEAD.replace(
        "        if self.head is None:\n            self.head = nn.Linear(x.shape[-1], self.classes)\n",
        "        self.extend()\n").replace(
        "    def forward(self, x):",
        "    def extend(self):\n        self.gate = nn.Parameter(torch.ones(20))\n\n    def forward(self, x):")
    finding = only(source, "TL108")
    assert finding.message.startswith("`self.gate` is made in `extend()` (which forward calls): a new nn.Parameter "
                                      "`nn.Parameter(torch.ones(20))` on every call")


@pytest.mark.parametrize("made", [
    "self.act = nn.ReLU()",  # no parameters
    "self.current = self.body",  # an existing layer
    "head = nn.Linear(20, 3)",  # a local
])
def test_tl108_quiet_on_what_forward_may_make(made):
    source = LATE_HEAD.replace("        x = self.body(x)\n", "        %s\n        x = self.body(x)\n" % made)
    assert only(source, "TL108").range.start.line == 15  # the late head only


def test_tl108_quiet_in_a_method_forward_does_not_call():
    source = LATE_HEAD.replace(
        "    def forward(self, x):",
        "    def reset_head(self):\n        self.head = nn.Linear(20, self.classes)\n\n    def forward(self, x):")
    assert only(source, "TL108").range.start.line == 17  # the late head only
