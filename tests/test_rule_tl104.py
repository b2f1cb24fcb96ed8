"""TL104 tensor-into-parameter-slot: the fixes' exact text, the look-alikes that stay quiet, and
that the fixed code runs right with torch."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from testkit.rules import by_title, findings, fixed, only, preferred, run
from torchlint.engine import check_source
from torchlint.analysis.source import apply_edits


LAYER = """\
import torch
import torch.nn as nn
layer = nn.Linear(3, 4)
layer.weight = torch.ones(4, 3)
"""


def test_tl104_copy_fix_text():
    finding = only(LAYER, "TL104")
    assert finding.related and finding.related[0].range.start.line == 3
    fix = preferred(finding)
    assert not fix.is_safe
    assert fixed(LAYER, fix).splitlines()[3:] == ["with torch.no_grad():", "    layer.weight.copy_(torch.ones(4, 3))"]


def test_tl104_wrap_fix_uses_the_alias():
    text = "import torch\nimport torch.nn as tnn\nlayer = tnn.Linear(3, 4)\nlayer.bias = torch.zeros(4)\n"
    fix = by_title(only(text, "TL104"), "Replace the parameter")
    assert "`tnn.Parameter(...)`" in fix.title
    assert fixed(text, fix).splitlines()[3] == "layer.bias = tnn.Parameter(torch.zeros(4))"


def test_tl104_forward_softmax_in_a_method():
    text = """\
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Mix(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(3))

        def forward(self, x):
            self.w = F.softmax(self.w, dim=0)
            return x * self.w
    """
    finding = only(text, "TL104")
    assert finding.range.start.line == 11 and finding.related[0].range.start.line == 8
    # A differentiable result of the parameter itself, in forward: neither copy_ (it would change the
    # weights on every call) nor a new Parameter (it would drop the trained one), but a local variable.
    assert [f.title.split(" ")[0] for f in finding.fixes] == ["Keep"]
    result = fixed(text, preferred(finding))
    assert result.splitlines()[10:12] == ["        w = F.softmax(self.w, dim=0)", "        return x * w"]
    import torch
    model = run(result)["Mix"]()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    before = model.w.detach().clone()
    out = model(torch.randn(2, 3))
    assert torch.equal(model.w.detach(), before)  # forward leaves the parameter alone
    (out * torch.tensor([1.0, -1.0, 2.0])).sum().backward()
    optimizer.step()
    assert not torch.equal(model.w.detach(), before)  # and it trains


CLIPPED = """\
import torch
import torch.nn as nn

class Clipped(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.full((1,), 20.0))
        self.opt = None

    def forward(self, x):
        self.scale.data.clamp_(-50.0, 50.0)
        self.scale = self.scale.clamp(0.0, 10.0)
        self.scale.data.clamp_(0.0, 10.0)
        if self.scale.grad is not None:
            self.scale.grad.zero_()
        self.opt = torch.optim.SGD([self.scale], lr=0.1)
        return x * self.scale
"""


def test_tl104_local_rewrite_keeps_the_uses_that_work_on_the_parameter():
    finding = only(CLIPPED, "TL104")
    fix = preferred(finding)
    assert fix.title.startswith("Keep the result in a local variable `scale`")
    assert fix.title.endswith("the uses that work on the parameter itself stay `self.scale`")
    # Only the plain read after the assignment becomes the local: the in-place clamps (before and
    # after), the gradient and the optimizer's list still address the Parameter.
    assert fixed(CLIPPED, fix).splitlines()[10:17] == [
        "        self.scale.data.clamp_(-50.0, 50.0)",
        "        scale = self.scale.clamp(0.0, 10.0)",
        "        self.scale.data.clamp_(0.0, 10.0)",
        "        if self.scale.grad is not None:",
        "            self.scale.grad.zero_()",
        "        self.opt = torch.optim.SGD([self.scale], lr=0.1)",
        "        return x * scale",
    ]
    import torch

    with pytest.raises(TypeError):
        run(CLIPPED)["Clipped"]()(torch.ones(2))
    model = run(fixed(CLIPPED, fix))["Clipped"]()
    out = model(torch.ones(2))
    assert torch.equal(out, torch.full((2,), 10.0))
    assert isinstance(model.scale, torch.nn.Parameter)
    assert torch.equal(model.scale.detach(), torch.full((1,), 10.0))  # clamped in place, as written
    assert model.opt.param_groups[0]["params"][0] is model.scale  # the optimizer got the Parameter
    model.scale.data.fill_(4.0)
    model(torch.ones(2)).sum().backward()
    model.opt.step()
    assert torch.equal(model.scale.detach(), torch.full((1,), 3.8))  # 4 - 0.1 * d(2 * scale)/d(scale)


def test_tl104_no_local_rewrite_where_the_local_could_be_unbound():
    text = """\
    import torch
    import torch.nn as nn

    class Masked(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(3))
            self.register_buffer("mask", torch.ones(3))

        def forward(self, x):
            if self.training:
                self.w = self.w * self.mask
            return x * self.w
    """
    finding = only(text, "TL104")
    # `return x * w` would raise UnboundLocalError in eval mode, and a new Parameter made in forward
    # would leave the trained one behind: no fix, only the finding.
    assert "keep it in a local variable" in finding.message and finding.fixes == ()


def test_tl104_shape_decides_between_copy_and_a_new_parameter():
    same = "import torch\nimport torch.nn as nn\nlayer = nn.Linear(3, 4)\nlayer.weight = torch.ones(4, 3)\n"
    other = same.replace("torch.ones(4, 3)", "torch.ones(2, 3)")
    unknown = same.replace("torch.ones(4, 3)", "weights[0]")
    assert preferred(only(same, "TL104")).title.startswith("Copy into the existing parameter")
    # Another shape: copy_ would raise, so it is not offered.
    assert [f.title.split(":")[0] for f in only(other, "TL104").fixes] == ["Replace the parameter"]
    # Unknown shapes: only the new Parameter, which runs whatever the shape; copy_ could raise.
    titles = [f.title for f in only(unknown.replace("weights[0]", "torch.randn(4, 3).t().t()"), "TL104").fixes]
    assert [t.split(":")[0] for t in titles] == ["Replace the parameter"]


LINEAR_SLOT = "import torch\nimport torch.nn as nn\nlayer = nn.Linear(3, 4)\nkeep = torch.tensor([0, 2])\n"


@pytest.mark.parametrize("value, copies", [
    ("layer.weight * 0.5", True),
    ("layer.weight.clamp(-1, 1)", True),
    ("torch.sigmoid(layer.weight.data) * 2", True),
    ("layer.weight + torch.ones(4, 3)", True),
    ("layer.weight + torch.ones(3)", True),  # broadcasts to the weight's (4, 3)
    ("torch.zeros_like(layer.weight)", True),
    ("layer.weight[keep]", False),  # channel pruning: fewer rows
    ("layer.weight[:, :2]", False),
    ("layer.weight.view(2, 6)", False),
    ("layer.weight.reshape(-1)", False),
    ("layer.weight.flatten()", False),
    ("layer.weight.t()", False),
    ("layer.weight.T", False),
    ("layer.weight.permute(1, 0)", False),
    ("layer.weight.half()", False),  # copy_ would undo the conversion
    ("layer.weight + torch.ones(2, 4, 3)", False),  # broadcasts to a larger shape
    ("layer.weight.roll(1, 0)", False),  # a call it cannot size
    ("layer.weight @ torch.ones(3, 3)", False),
])
def test_tl104_copies_only_when_the_shape_surely_stays(value, copies):
    finding = only(LINEAR_SLOT + "layer.weight = %s\n" % value, "TL104")
    titles = [f.title.split(":")[0] for f in finding.fixes]
    assert titles == (["Copy into the existing parameter", "Replace the parameter"] if copies
                      else ["Replace the parameter"])
    assert preferred(finding).title.split(":")[0] == titles[0]


def test_tl104_pruning_fix_runs_where_copy_would_raise():
    """`conv.weight = conv.weight[keep]`: the fix makes the pruned weight the new Parameter."""
    text = """\
    import torch
    import torch.nn as nn

    conv = nn.Conv2d(3, 8, 3)
    keep = torch.tensor([0, 2, 5])
    conv.weight = conv.weight[keep]
    """
    finding = only(text, "TL104")
    assert "rather than copying" in finding.message
    out = run(fixed(text, preferred(finding)))
    assert isinstance(out["conv"].weight, torch.nn.Parameter) and out["conv"].weight.shape == (3, 3, 3, 3)


def test_tl104_quiet_on_parameters_none_buffers_and_weight_norm():
    text = """\
    import torch
    import torch.nn as nn

    class M(nn.Module):
        def __init__(self, learnable):
            super().__init__()
            if learnable:
                self.g = nn.Parameter(torch.ones(1))
            else:
                self.g = torch.ones(1)
            self.register_buffer("mask", torch.ones(3))
            self.weight = nn.Parameter(torch.ones(3))
            del self._parameters["weight"]

        def forward(self, x):
            self.mask = self.mask.to(x.device)
            self.weight = self.mask * 2
            return x

    layer = nn.Linear(3, 4)
    layer.weight = nn.Parameter(torch.ones(4, 3))
    layer.bias = None
    layer.weight = checkpoint["w"]
    """
    assert findings(text, "TL104") == []


BETA = """\
import torch
import torch.nn as nn


class MarginLoss(nn.Module):
    def __init__(self, beta=1.2, num_classes=None, learn_beta=False):
        super().__init__()
        self.learn_beta = learn_beta
        {before}self.initialize_beta(beta, num_classes)

    def forward(self, x):
        return x * self.beta.to(x.device)

    def initialize_beta(self, beta, num_classes):
        self.beta = torch.tensor([float(beta)])
        if num_classes:
            self.beta = torch.ones(num_classes) * self.beta
        if self.learn_beta:
            self.beta = torch.nn.Parameter(self.beta)
"""


def test_tl104_a_helper_of_construction_that_makes_the_parameter_last():
    # pytorch_metric_learning's MarginLoss: the helper only __init__ runs makes beta a Parameter
    # after its plain assignments, which therefore raise nothing.
    text = BETA.format(before="")
    assert findings(text, "TL104") == []
    model_class = run(text)["MarginLoss"]
    assert isinstance(model_class(num_classes=3, learn_beta=True).beta, nn.Parameter)
    # A Parameter made before the helper runs is a slot there: both plain assignments raise.
    text = BETA.format(before="self.beta = nn.Parameter(torch.ones(1))\n        ")
    assert [f.range.start.line for f in findings(text, "TL104")] == [16, 18]
    with pytest.raises(TypeError):
        run(text)["MarginLoss"]()


def test_tl104_fixes_run():
    import torch
    
    with pytest.raises(TypeError):
        exec(LAYER, {})
    (finding,) = [f for f in check_source(LAYER).findings if f.code == "TL104"]
    for fix in finding.fixes:
        namespace = {}
        exec(apply_edits(LAYER, fix.edits), namespace)
        weight = namespace["layer"].weight
        assert isinstance(weight, torch.nn.Parameter) and torch.equal(weight.detach(), torch.ones(4, 3))
