"""TL103, TL104, TL201: the exact text of their fixes, and that the fixed code runs right with torch."""
from __future__ import annotations

import textwrap

import pytest
import torch

from rule_helpers import by_title, check, findings, fixed, only, preferred, quiet, run
from torchlint.engine import check_source
from torchlint.analysis.source import apply_edits


# -- TL103 -----------------------------------------------------------------------------------

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


# -- TL104 -----------------------------------------------------------------------------------

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


# -- TL201 -----------------------------------------------------------------------------------

DATA = """\
import torch
import torch.nn as nn
model = nn.Linear(10, 5)
new_weight_data = torch.randn(5, 10)
model.weight.data = new_weight_data  # load
"""


def test_tl201_fix_text():
    finding = only(DATA, "TL201")
    fix = preferred(finding)
    assert not fix.is_safe
    assert fixed(DATA, fix).splitlines()[4:] == [
        "with torch.no_grad():", "    model.weight.copy_(new_weight_data)  # load"]


def test_tl201_uses_the_torch_alias_and_the_files_indent():
    text = "import torch as T\nfor p in net.parameters():\n\tp.data = T.zeros_like(p)\n"
    fix = only(text, "TL201").fixes[0]
    assert fixed(text, fix).splitlines()[2:] == ["\twith T.no_grad():", "\t\tp.copy_(T.zeros_like(p))"]


def test_tl201_one_line_if_gets_an_expression_fix():
    text = "import torch\nfor n, p in net.named_parameters():\n    if n.endswith('bias'): p.data = p.data * 0\n"
    fix = only(text, "TL201").fixes[0]
    assert fixed(text, fix).splitlines()[2] == "    if n.endswith('bias'): p.data.copy_(p.data * 0)"


def test_tl201_quiet_on_in_place_and_datasets():
    text = """\
    import torch
    import torch.nn as nn
    from torch.utils.data import Dataset

    class Pairs(Dataset):
        def __init__(self, data):
            self.data = data

    layer = nn.Linear(3, 3)
    layer.weight.data.normal_(0, 0.02)
    layer.weight.data[0] = 1.0
    layer.bias.data.copy_(torch.zeros(3))
    for p in layer.parameters():
        p.data = p.data.half()
    record.data = [1, 2]
    """
    assert findings(text, "TL201") == []


def test_tl201_fix_keeps_the_parameter_object():
    import torch
    
    (finding,) = [f for f in check_source(DATA).findings if f.code == "TL201"]
    namespace = {}
    exec(apply_edits(DATA, finding.fixes[0].edits), namespace)
    weight, source = namespace["model"].weight, namespace["new_weight_data"]
    assert torch.equal(weight.detach(), source)
    assert weight.data_ptr() != source.data_ptr()  # copied, not aliased
    assert weight.is_leaf and weight.requires_grad


SWAP = """\
import torch
import torch.nn as nn


def loss_with(layer, w, x):
    old = layer.weight.data
    layer.weight.data = w
    loss = layer(x).pow(2).sum()
    layer.weight.data = old
    return loss


def perturbed(model, x, eps):
    backup = {}
    for name, p in model.named_parameters():
        backup[name] = p.data.clone()
        p.data = p.data + eps
    loss = model(x).sum()
    for name, p in model.named_parameters():
        p.data = backup[name]
    return loss


def load(layer, w):
    old = layer.weight.data.clone()
    layer.weight.data = w
    return old


def reload(layer, w, x):
    layer.weight.data = w
    old = layer.weight.data
    layer.weight.data = w * 2
    y = layer(x)
    layer.weight.data = old
    return y


def fuse(layer, scale):
    weight = layer.weight.data
    weight.mul_(scale)
    layer.weight.data = weight
"""


def test_tl201_temporary_swap_gets_no_copy_fix_but_functional_call_advice():
    found = {f.range.start.line: f for f in check(SWAP).findings if f.code == "TL201"}
    assert sorted(found) == [7, 9, 17, 20, 26, 31, 33, 35, 42]
    # Before the saving: no part of the swap, so it keeps its fix.
    assert preferred(found[31]).title.startswith("Copy in place")
    assert found[33].fixes == found[35].fixes == () and "put back on line 35" in found[33].message
    for line in (7, 9, 17, 20):
        assert found[line].fixes == () and "torch.func.functional_call" in found[line].message, line
    assert "put back on line 9" in found[7].message and "put back on line 20" in found[17].message
    # Saved but never put back, or written back after an in-place change with nothing set in between:
    # ordinary rebinds, which copy_ mends.
    assert preferred(found[26]).title.startswith("Copy in place")
    assert preferred(found[42]).title.startswith("Copy in place")


def test_tl201_copy_in_a_temporary_swap_breaks_backward():
    """Why there is no fix: the copy_ rewrite of the swap modifies the weight autograd saved."""
    import torch

    rewritten = SWAP.replace("    layer.weight.data = w\n", "    with torch.no_grad():\n        layer.weight.copy_(w)\n")
    rewritten = rewritten.replace("    layer.weight.data = old\n",
                                  "    with torch.no_grad():\n        layer.weight.copy_(old)\n")
    layer, x = torch.nn.Linear(3, 2), torch.randn(4, 3, requires_grad=True)
    run(SWAP)["loss_with"](layer, torch.ones(2, 3), x).backward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        run(rewritten)["loss_with"](layer, torch.ones(2, 3), x).backward()
