"""TL105 non-leaf-parameter: exact messages and fix outputs, the look-alikes that stay quiet, and
fixed code run with torch."""
from __future__ import annotations

import pytest
import torch

from torchlint.analysis.findings import Severity
from testkit.rules import by_title, fixed, only, preferred, quiet, run


SCRIPT = """\
import math
import torch

weights = torch.randn(4, 2, requires_grad=True) / math.sqrt(4)
bias = torch.zeros(2, requires_grad=True)
optimizer = torch.optim.SGD([weights, bias], lr=0.1)
"""


def test_tl105_finds_the_scaled_weight_given_to_the_optimizer():
    finding = only(SCRIPT, "TL105")
    assert finding.severity is Severity.ERROR
    assert (finding.range.start.line, finding.range.start.column) == (4, 10)
    assert "can't optimize a non-leaf Tensor" in finding.message
    (related,) = finding.related
    assert related.range.start.line == 6


def test_tl105_requires_grad_last_fix_is_safe_and_really_makes_a_leaf():
    with pytest.raises(ValueError, match="non-leaf"):
        run(SCRIPT)
    fix = preferred(only(SCRIPT, "TL105"))
    assert fix.is_safe and fix.title.startswith("Set requires_grad last")
    text = fixed(SCRIPT, fix)
    assert text.splitlines()[3] == "weights = (torch.randn(4, 2) / math.sqrt(4)).requires_grad_()"
    namespace = run(text)
    weights = namespace["weights"]
    assert weights.is_leaf and weights.requires_grad
    before = weights.detach().clone()
    (weights.sum() * 2).backward()
    namespace["optimizer"].step()
    assert not torch.equal(before, weights.detach())


def test_tl105_move_of_a_named_leaf_removes_requires_grad_at_the_factory():
    source = """\
    import torch

    def build(device):
        scale = torch.ones(3, requires_grad=True)
        scale = scale.to(device)
        return torch.optim.Adam([scale])
    """
    fix = preferred(only(source, "TL105"))
    lines = fixed(source, fix).splitlines()
    assert lines[3] == "    scale = torch.ones(3)"
    assert lines[4] == "    scale = scale.to(device).requires_grad_()"
    optimizer = run(fixed(source, fix))["build"]("cpu")
    (param,) = optimizer.param_groups[0]["params"]
    assert param.is_leaf


def test_tl105_module_attribute_prefers_a_parameter():
    source = """\
    import torch
    from torch import nn

    class FiLM(nn.Module):
        def __init__(self, dim=3):
            super().__init__()
            self.gamma = torch.ones(dim, requires_grad=True) * 2
    """
    finding = only(source, "TL105")
    assert "stored on the Module as `self.gamma`" in finding.message
    fix = preferred(finding)
    assert not fix.is_safe and fix.title.startswith("Wrap in `nn.Parameter(...)`")
    model = run(fixed(source, fix))["FiLM"]()
    assert [name for name, _ in model.named_parameters()] == ["gamma"]


def test_tl105_requires_grad_last_is_unsafe_when_another_operand_may_need_a_gradient():
    source = """\
    import torch

    def build(other):
        w = torch.randn(3, requires_grad=True) * other
        return torch.optim.SGD([w], lr=0.1)
    """
    fix = by_title(only(source, "TL105"), "Set requires_grad last")
    assert not fix.is_safe


@pytest.mark.parametrize("line", [
    "weights = torch.randn(4, 2, requires_grad=True)",
    "weights = (torch.randn(4, 2) / math.sqrt(4)).requires_grad_()",
    "weights = torch.nn.Parameter(torch.randn(4, 2, requires_grad=True) / math.sqrt(4))",
    "weights = torch.randn(4, 2, requires_grad=True).float()",
    "weights = torch.randn(4, 2, requires_grad=True).to(reference)",
    "weights = (torch.randn(4, 2, requires_grad=True) / 2).detach().requires_grad_()",
])
def test_tl105_quiet_on_leaves(line):
    quiet(SCRIPT.replace("weights = torch.randn(4, 2, requires_grad=True) / math.sqrt(4)", line), "TL105")


def test_tl105_quiet_when_the_non_leaf_is_not_used_as_a_weight():
    quiet("""\
    import torch

    def probe(model):
        x = torch.zeros(3, requires_grad=True) * 2
        return torch.autograd.grad(model(x).sum(), x)
    """, "TL105")


LISTS = """\
import torch

def build(layers=3):
    scales = [torch.ones(2, requires_grad=True) * 0.5 for _ in range(layers)]
    return torch.optim.Adam(scales, lr=0.01)
"""


def test_tl105_follows_a_list_comprehension_given_to_the_optimizer_and_the_fix_makes_leaves():
    finding = only(LISTS, "TL105")
    assert (finding.range.start.line, finding.range.start.column) == (4, 14)
    assert "can't optimize a non-leaf Tensor" in finding.message
    with pytest.raises(ValueError, match="non-leaf"):
        run(LISTS)["build"]()
    fix = preferred(finding)
    assert fix.is_safe
    text = fixed(LISTS, fix)
    assert text.splitlines()[3] == "    scales = [(torch.ones(2) * 0.5).requires_grad_() for _ in range(layers)]"
    optimizer = run(text)["build"]()
    assert all(p.is_leaf and p.requires_grad for p in optimizer.param_groups[0]["params"])


def test_tl105_list_on_a_module_offers_no_parameter_that_a_plain_list_would_not_register():
    source = """\
    import torch
    from torch import nn

    class Prompts(nn.Module):
        def __init__(self, n=2):
            super().__init__()
            self.prompts = [torch.zeros(3, requires_grad=True) * 2 for _ in range(n)]
    """
    finding = only(source, "TL105")
    assert "in a plain list" in finding.message
    assert [f.title.split(":")[0] for f in finding.fixes] == ["Set requires_grad last"]


def test_tl105_quiet_when_the_comprehension_variable_shadows_a_local():
    quiet("""\
    import torch

    def build(weights):
        w = torch.randn(3, requires_grad=True)
        return torch.optim.Adam([w * 2 for w in weights]), w
    """, "TL105")
