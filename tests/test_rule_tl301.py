"""TL301 legacy-constructor: exact fix outputs, the look-alikes that stay quiet, and fixed code run
with torch."""
from __future__ import annotations

import textwrap

import pytest

from torchlint.analysis.findings import Severity
from testkit.rules import by_title, check, fixed, only, preferred, quiet, run


def fix_line(check, text, line=None, title=None):
    """The given (or preferred) fix of the single TL301 finding, applied; returns the changed line."""
    finding = only(text, "TL301")
    fix = by_title(finding, title) if title else preferred(finding)
    lines = fixed(text, fix).splitlines()
    return lines[line if line is not None else -1], fix


@pytest.mark.parametrize("call, expected, safe", [
    ("torch.FloatTensor([1, 2, 3])", "torch.tensor([1, 2, 3], dtype=torch.float32)", True),
    ("torch.cuda.LongTensor([[1], [2]])", 'torch.tensor([[1], [2]], dtype=torch.int64, device="cuda")', True),
    ("torch.IntTensor([i for i in range(3)])", "torch.tensor([i for i in range(3)], dtype=torch.int32)", True),
    ("torch.FloatTensor()", "torch.empty(0, dtype=torch.float32)", True),
    ("torch.cuda.FloatTensor()", 'torch.empty(0, dtype=torch.float32, device="cuda")', True),
    ("torch.FloatTensor(3, 4)", "torch.empty(3, 4, dtype=torch.float32)", True),
    ("torch.DoubleTensor(5)", "torch.empty(5, dtype=torch.float64)", True),
    ("torch.ByteTensor(x.size())", "torch.empty(x.size(), dtype=torch.uint8)", True),
    ("torch.FloatTensor(len(x))", "torch.empty(len(x), dtype=torch.float32)", True),
    ("torch.cuda.FloatTensor(2, device='cuda:1')", "torch.empty(2, device='cuda:1', dtype=torch.float32)", True),
    ("torch.FloatTensor(device='cpu')", "torch.empty(0, device='cpu', dtype=torch.float32)", True),
    ("torch.FloatTensor(*shape)", "torch.empty(*shape, dtype=torch.float32)", True),
    ("torch.FloatTensor(np.zeros(3))", "torch.tensor(np.zeros(3), dtype=torch.float32)", True),
    ("torch.FloatTensor(x.tolist())", "torch.tensor(x.tolist(), dtype=torch.float32)", True),
    ("torch.LongTensor(x.size(0) * 2)", "torch.empty(x.size(0) * 2, dtype=torch.int64)", True),
    ("torch.FloatTensor(ones)", "torch.as_tensor(ones, dtype=torch.float32)", False),
    ("torch.Tensor([1, 2])", "torch.tensor([1, 2], dtype=torch.get_default_dtype())", True),
    ("torch.Tensor([[0.5, 1]])", "torch.tensor([[0.5, 1]])", True),
    ("torch.Tensor(2, 3)", "torch.empty(2, 3)", True),
    ("torch.Tensor()", "torch.empty(0)", True),
])
def test_tl301_typed_constructor_fixes(call, expected, safe):
    line, fix = fix_line(check, "import numpy as np\nimport torch\nones = torch.ones(3)\nt = %s\n" % call)
    assert line == "t = " + expected
    assert fix.is_safe is safe


@pytest.mark.parametrize("call", ["torch.FloatTensor(n)", "torch.Tensor(idxs)", "torch.LongTensor(load())",
                                  "torch.Tensor(self_mean)"])
def test_tl301_argument_of_unknown_kind_gets_no_fix(call):
    """Data or a size? Reading it either way breaks the code when it is the other: no fix, and why."""
    finding = only("import torch\nt = %s\n" % call, "TL301")
    assert finding.fixes == ()
    assert "no fix offered: torchlint cannot tell whether" in finding.message


def test_tl301_tuple_that_reads_like_a_shape_keeps_the_data_reading_first():
    """`torch.FloatTensor((n, 1))` builds a 2-element tensor: the preferred fix does the same."""
    finding = only("import torch\nt = torch.FloatTensor((x.shape[0], 1))\n", "TL301")
    assert [(f.title.split("`")[1].split("(")[0], f.is_safe, f.preferred) for f in finding.fixes] == [
        ("torch.tensor", False, True), ("torch.empty", False, False)]


SIZED_BY_PARAMETERS = """\
import torch
import torch.nn as nn


class Layer(nn.Module):
    def __init__(self, {signature}):
        super().__init__()
        {extra}
        self.bias = nn.Parameter(torch.Tensor({name}).zero_())
"""


@pytest.mark.parametrize("signature, extra, name, reading", [
    ("in_features, out_features", "self.weight = nn.Parameter(torch.Tensor(out_features, in_features))",
     "out_features", "sizes"),
    ("width, classes", "self.fc = nn.Linear(width, classes)", "classes", "sizes"),
    ("count: int", "pass", "count", "sizes"),
    ("count=4", "pass", "count", "sizes"),
    ("count=DEFAULT", "self.fc = nn.Linear(count, count)", "count", "sizes"),  # the default says nothing
    ("num_anchors", "pass", "num_anchors", "sizes"),
    ("size", "self.steps = [i for i in range(size)]", "size", "sizes"),
    ("values=(1.0, 2.0)", "pass", "values", "data"),
    ("values: list", "pass", "values", "data"),
    ("items", "count = 0\n        for _ in items:\n            count += 1", "count", "sizes"),
    ("items", "count = 0\n        for _ in items:\n            count += 0.5", "count", None),
    ("init", "pass", "init", None),
    ("width, init", "self.fc = nn.Linear(width, width)", "init", None),
])
def test_tl301_reads_a_parameter_by_its_annotation_default_use_or_name(signature, extra, name, reading):
    text = SIZED_BY_PARAMETERS.format(signature=signature, extra=extra, name=name)
    line = text.splitlines().index("        self.bias = nn.Parameter(torch.Tensor(%s).zero_())" % name) + 1
    finding = [f for f in check(text).findings if f.code == "TL301" and f.range.start.line == line][0]
    functions = [f.title.split("`")[1].split("(")[0] for f in finding.fixes]
    assert functions == {"sizes": ["torch.zeros"], "data": ["torch.tensor"], None: []}[reading]


def test_tl301_size_fix_keeps_the_bias_a_vector():
    """The reported bug: `torch.Tensor(out_channels)` read as data made the bias one number."""
    text = SIZED_BY_PARAMETERS.format(signature="in_channels, out_channels",
                                      extra="self.conv = nn.Conv2d(in_channels, out_channels, 3)", name="out_channels")
    finding = [f for f in check(text).findings if f.code == "TL301"][0]
    fix = preferred(finding)
    assert fix.is_safe
    old, new = run(text)["Layer"](3, 8), run(fixed(text, fix))["Layer"](3, 8)
    assert new.bias.shape == old.bias.shape == (8,)
    assert new.bias.dtype == old.bias.dtype


def test_tl301_is_deprecated_and_covers_the_constructor_name():
    finding = only("import torch\nt = torch.cuda.FloatTensor([1.0]).zero_()\n", "TL301")
    # A deprecation alone: a hint, tagged deprecated.
    assert finding.deprecated and finding.severity is Severity.HINT
    assert (finding.range.start.column, finding.range.end.column) == (4, 26)
    assert 'torch.tensor(data, dtype=torch.float32, device="cuda")' in finding.message


def test_tl301_uses_the_file_alias():
    line, _ = fix_line(check, "import torch as T\nt = T.cuda.FloatTensor(2, 3)\n")
    assert line == 't = T.empty(2, 3, dtype=T.float32, device="cuda")'


def test_tl301_adds_a_single_import_torch_when_missing():
    text = "from torch import FloatTensor\n\nt = FloatTensor([1, 2])\n"
    finding = only(text, "TL301")
    assert fixed(text, preferred(finding)) == \
        "import torch\nfrom torch import FloatTensor\n\nt = torch.tensor([1, 2], dtype=torch.float32)\n"


def test_tl301_multiline_call_keeps_its_comment():
    text = "import torch\nt = torch.FloatTensor(\n    [1, 2],  # two\n)\n"
    finding = only(text, "TL301")
    assert fixed(text, preferred(finding)) == \
        "import torch\nt = torch.tensor(\n    [1, 2], dtype=torch.float32,  # two\n)\n"


@pytest.mark.parametrize("call, expected", [
    ("Variable(x)", "x"),
    ("Variable(x, volatile=True)", "x"),
    ("Variable(x, requires_grad=False)", "x"),
    ("Variable(x, requires_grad=True)", "x.detach().requires_grad_()"),
    ("Variable(x, requires_grad=flag)", "x.detach().requires_grad_(flag)"),
    ("Variable(x + 1)", "(x + 1).detach()"),  # an expression: it may carry a graph
    ("Variable(x * 2, requires_grad=True)", "(x * 2).detach().requires_grad_()"),
    ("Variable(torch.randn(3), requires_grad=True)", "torch.randn(3).requires_grad_()"),
    ("Variable(torch.randn(3).type(dtype), requires_grad=True)", "torch.randn(3).type(dtype).requires_grad_()"),
    # not a fresh factory: it may carry a graph, which Variable() cut
    ("Variable(x.float(), requires_grad=True)", "x.float().detach().requires_grad_()"),
    ("Variable(w)", "w.detach()"),  # a Parameter: Variable() really detached it
])
def test_tl301_variable_fixes(call, expected):
    text = ("import torch\nimport torch.nn as nn\nfrom torch.autograd import Variable\n"
            "x = torch.ones(3)\nw = nn.Parameter(torch.ones(3))\ny = %s\n" % call)
    line, fix = fix_line(check, text)
    assert line == "y = " + expected
    assert fix.is_safe


def test_tl301_variable_of_an_unknown_value_keeps_the_detach():
    """`Variable(out)` on a model's output cut the graph: plain `out` would let gradients through."""
    text = """\
    from torch.autograd import Variable

    def train(model, loader):
        for inputs in loader:
            inputs = Variable(inputs)
            out = Variable(model(inputs))
    """
    finding = [f for f in check(textwrap.dedent(text)).findings if f.code == "TL301"]
    lines = [fixed(text, preferred(f)).splitlines()[f.range.start.line - 1].strip() for f in finding]
    assert lines == ["inputs = inputs.detach()", "out = model(inputs).detach()"]
    assert all(preferred(f).is_safe for f in finding)


def test_tl301_torch_tensor_as_a_type_stays_quiet():
    text = """\
    from typing import List
    import torch

    class Masked(torch.Tensor):
        @staticmethod
        def __new__(cls, data: torch.Tensor):
            return torch.Tensor._make_subclass(cls, data)

    def f(xs: List[torch.Tensor]) -> torch.Tensor:
        assert isinstance(xs[0], (torch.Tensor, torch.FloatTensor))
        torch.set_default_tensor_type(torch.FloatTensor)
        return xs[0].type(torch.cuda.HalfTensor)
    """
    quiet(text, "TL301")


def test_tl101_and_tl301_both_fire_on_the_seed_line():
    text = """\
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.g = torch.cuda.FloatTensor([1.0])

        def forward(self, x):
            return x * self.g
    """
    codes = sorted(f.code for f in check(textwrap.dedent(text)).findings if f.range.start.line == 7)
    assert codes == ["TL101", "TL301"]


EQUIVALENT_ON_CPU = [
    "torch.FloatTensor([1, 2, 3])",
    "torch.LongTensor([1.7, -1.7])",
    "torch.IntTensor([i * 2 for i in range(4)])",
    "torch.Tensor([1, 2])",
    "torch.Tensor([[0.5, 1]])",
    "torch.BoolTensor([1, 0])",
    "torch.ByteTensor((1, 2))",
    "Variable(torch.arange(3.0))",
    "Variable(torch.ones(2), requires_grad=True)",
    "Variable(x * 2, requires_grad=True)",
    "Variable(w)",
    "Variable(w * 2, requires_grad=True)",
    "Variable(torch.ones(2).type(torch.DoubleTensor), requires_grad=True)",
]


@pytest.mark.parametrize("call", EQUIVALENT_ON_CPU)
def test_tl301_safe_fixes_build_the_same_tensor(call):
    text = ("import torch\nimport torch.nn as nn\nfrom torch.autograd import Variable\n"
            "x = torch.ones(3)\nw = nn.Parameter(torch.ones(3))\nt = %s\n" % call)
    fix = preferred(only(text, "TL301"))
    assert fix.is_safe
    old, new = run(text)["t"], run(fixed(text, fix))["t"]
    import torch
    assert (new.dtype, new.shape, new.requires_grad, new.is_leaf) == \
        (old.dtype, old.shape, old.requires_grad, old.is_leaf)
    assert torch.equal(new.detach(), old.detach())


@pytest.mark.parametrize("call", ["torch.FloatTensor()", "torch.DoubleTensor(2, 3)", "torch.Tensor(4)",
                                  "torch.ByteTensor(torch.ones(2, 5).size())", "torch.HalfTensor(len([1, 2]))"])
def test_tl301_size_fixes_build_the_same_shape_and_dtype(call):
    text = "import torch\nt = %s\n" % call
    fix = preferred(only(text, "TL301"))
    old, new = run(text)["t"], run(fixed(text, fix))["t"]
    assert (new.dtype, new.shape, new.device) == (old.dtype, old.shape, old.device)
