"""TL109 buffer-registered-late: the load of a trained checkpoint into a new instance really
raises, the message and the fix are exact, the fixed module loads, and buffers a new instance
has (or that are never saved) stay quiet."""
from __future__ import annotations

import pytest
import torch

from torchlint.analysis.findings import Severity
from testkit.rules import fixed, only, preferred, quiet, run

FILLED_LATER = """\
import torch
import torch.nn as nn

class Normalizer(nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("scale", None)

    def forward(self, x):
        if self.scale is None:
            self.scale = x.detach().abs().amax(0)
        return self.proj(x / self.scale)
"""

FIRST_IN_FORWARD = """\
import torch
import torch.nn as nn

class Normalizer(nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        if not hasattr(self, "scale"):
            self.register_buffer("scale", x.detach().abs().amax(0))
        return self.proj(x / self.scale)
"""


def _loads_into_a_new_instance(source) -> bool:
    """Whether the state_dict of a model that ran one forward loads into a new one (strict)."""
    torch.manual_seed(0)
    cls = run(source)["Normalizer"]
    trained = cls()
    trained(torch.randn(8, 4))
    try:
        cls().load_state_dict(trained.state_dict())
    except RuntimeError as err:
        assert "Unexpected key(s) in state_dict" in str(err) and '"scale"' in str(err)
        return False
    return True


@pytest.mark.parametrize("source", [FILLED_LATER, FIRST_IN_FORWARD], ids=["none-placeholder", "first-in-forward"])
def test_tl109_the_bug_is_real_and_the_fix_loads(source):
    assert not _loads_into_a_new_instance(source)
    fix = preferred(only(source, "TL109"))
    assert not fix.is_safe and fix.title == "Pass persistent=False (not saved in state_dict)"
    result = fixed(source, fix)
    assert _loads_into_a_new_instance(result)
    quiet(result, "TL109")


def test_tl109_messages_and_severity():
    placeholder = only(FILLED_LATER, "TL109")
    assert placeholder.severity is Severity.WARNING
    assert (placeholder.range.start.line, placeholder.range.start.column) == (12, 12)
    assert placeholder.message == (
        "`self.scale` is registered as a buffer holding None at construction and gets its tensor in forward: "
        "state_dict() leaves None buffers out, so a new instance's state_dict() has no `scale`, and "
        "load_state_dict() of a checkpoint saved after a forward raises \"Unexpected key(s) in state_dict: "
        "'...scale'\"; register a tensor of its shape in __init__, or pass persistent=False if it need not be saved")
    first = only(FIRST_IN_FORWARD, "TL109")
    assert (first.range.start.line, first.range.start.column) == (11, 12)
    assert first.message.startswith("`self.scale` is first registered as a buffer in forward, so a new instance's")
    # The placeholder's fix is on the registration in __init__, the other's on the one in forward.
    assert "self.register_buffer(\"scale\", None, persistent=False)" in fixed(FILLED_LATER, preferred(placeholder))


def test_tl109_a_placeholder_filled_by_a_method_forward_does_not_call():
    source = FILLED_LATER.replace(
        "    def forward(self, x):\n        if self.scale is None:\n            self.scale = x.detach().abs().amax(0)\n",
        "    def calibrate(self, batch):\n        self.scale = batch.abs().amax(0)\n\n    def forward(self, x):\n")
    finding = only(source, "TL109")
    assert "gets its tensor in `calibrate()`" in finding.message
    assert "saved after `calibrate()` ran raises" in finding.message


@pytest.mark.parametrize("change", [
    ('self.register_buffer("scale", None)', 'self.register_buffer("scale", torch.ones(dim))'),  # a tensor from the start
    ('self.register_buffer("scale", None)', 'self.register_buffer("scale", None, persistent=False)'),  # not saved
    ("    def forward(self, x):", "    def _load_from_state_dict(self, *args):\n        pass\n\n    def forward(self, x):"),
    ("class Normalizer(nn.Module):", "class Normalizer(nn.modules.lazy.LazyModuleMixin, nn.Module):"),
])
def test_tl109_quiet_where_a_new_instance_loads(change):
    quiet(FILLED_LATER.replace(*change), "TL109")


def test_tl109_a_buffer_first_registered_outside_forward_is_left_alone():
    """`build()` may be a second construction step callers run before loading too."""
    source = FIRST_IN_FORWARD.replace(
        "    def forward(self, x):\n        if not hasattr(self, \"scale\"):\n",
        "    def build(self, x):\n        if not hasattr(self, \"scale\"):\n").replace(
        "        return self.proj(x / self.scale)", "\n    def forward(self, x):\n        return self.proj(x / self.scale)")
    quiet(source, "TL109")
