"""TL201 data-assignment: the fixes' exact text, the look-alikes that stay quiet, and that the
fixed code runs right with torch."""
from __future__ import annotations

import pytest

from testkit.rules import check, findings, fixed, only, preferred, run
from torchlint.engine import check_source
from torchlint.analysis.source import apply_edits


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
