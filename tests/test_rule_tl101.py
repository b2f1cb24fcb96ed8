"""TL101 on the paths a tensor takes to forward (a conditional expression, a branch that does not
register it, a helper method that construction runs), its grading of 0-dim constants, and fixes
that torch accepts: never a registration before `super().__init__()`, never an integer or boolean
nn.Parameter. Each fix is run with the real torch."""
from __future__ import annotations

import textwrap

import pytest
import torch

from testkit.rules import by_title, findings, fixed, only, preferred, quiet, run
from torchlint.analysis.findings import Severity


def tl101(text):
    return {f.range.start.line: f for f in findings(text, "TL101")}


def severity_of(text, line):
    return tl101(text)[line].severity


# -- shapes ------------------------------------------------------------------------------------

CONDITIONAL = """\
import torch
import torch.nn as nn


class Normalize(nn.Module):
    def __init__(self, mean=(0.5, 0.4, 0.3)):
        super().__init__()
        self.mean = {value}
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x):
        if self.mean is not None:
            x = x - self.mean
        return self.conv(x)
"""


def test_a_tensor_on_one_arm_of_a_conditional_expression():
    finding = only(CONDITIONAL.format(value="torch.tensor(mean).view(-1, 1, 1) if mean else None"), "TL101")
    assert finding.severity is Severity.WARNING
    assert "one arm of the conditional expression" in finding.message
    quiet(CONDITIONAL.format(value="mean if mean else None"), "TL101")
    quiet(CONDITIONAL.format(value="nn.Parameter(torch.tensor(mean)) if mean else None"), "TL101")


def test_the_buffer_fix_of_a_conditional_keeps_none():
    text = CONDITIONAL.format(value="torch.tensor(mean).view(-1, 1, 1) if mean else None")
    model_class = run(fixed(text, preferred(only(text, "TL101"))))["Normalize"]
    assert "mean" in dict(model_class().named_buffers())
    assert model_class(mean=()).mean is None
    assert model_class().to(torch.float64).mean.dtype == torch.float64


BRANCHES = """\
import torch
import torch.nn as nn


class Head(nn.Module):
    def __init__(self, dim: int = 4, learnable: bool = False):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        if learnable:
            self.scale = nn.Parameter(torch.ones(dim))
        else:
            self.scale = {other}

    def forward(self, x):
        return self.proj(x) * self.scale
"""


def test_a_parameter_on_one_branch_and_a_plain_tensor_on_the_other():
    finding = only(BRANCHES.format(other="torch.ones(dim)"), "TL101")
    assert finding.range.start.line == 12 and finding.severity is Severity.WARNING
    assert "nn.Parameter only on another" in finding.message
    quiet(BRANCHES.format(other="nn.Parameter(torch.ones(dim), requires_grad=False)"), "TL101")


def test_the_branch_fix_registers_a_buffer_where_the_parameter_is_not_made():
    text = BRANCHES.format(other="torch.ones(dim)")
    fix = preferred(only(text, "TL101"))
    assert "register_buffer" in fix.title
    head = run(fixed(text, fix))["Head"]
    assert "scale" in dict(head().named_buffers())
    assert "scale" in dict(head(learnable=True).named_parameters())


LATER_PARAMETER = """\
import torch
import torch.nn as nn


class NoisePredictor(nn.Module):
    def __init__(self, steps: int = 10, learn_logvar: bool = False):
        super().__init__()
        self.net = nn.Linear(4, 4)
        self.logvar = torch.full((steps,), 0.0)
        if learn_logvar:
            self.logvar = nn.Parameter(self.logvar, requires_grad=True)
{otherwise}
    def forward(self, x):
        t = torch.randint(0, 10, (x.shape[0],), device=x.device)
        logvar_t = self.logvar[t].to(x.device)
        return self.net(x) / torch.exp(logvar_t)[:, None]
"""


def test_a_tensor_made_a_parameter_only_under_a_condition():
    # Indexed with a tensor of the input's device before the move: a warning, not "moved at each use".
    finding = only(LATER_PARAMETER.format(otherwise=""), "TL101")
    assert finding.range.start.line == 9 and finding.severity is Severity.WARNING
    otherwise = "        else:\n            self.logvar = nn.Parameter(self.logvar, requires_grad=False)\n"
    quiet(LATER_PARAMETER.format(otherwise=otherwise), "TL101")
    quiet(LATER_PARAMETER.format(otherwise="        else:\n            raise ValueError(steps)\n"), "TL101")


LOOKUP_TABLE = """\
import torch
import torch.nn as nn


class CharLookup(nn.Module):
    def __init__(self, words: int):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.table = torch.zeros(words, 3, dtype=torch.long)

    def forward(self, words):
        ids = torch.as_tensor(words)
        chars = self.table[ids.{index_move}]{rows_move}
        return self.emb(chars)
"""


@pytest.mark.parametrize("index_move", ["type_as(self.table)", "to(self.table.device)"])
def test_a_table_indexed_where_it_is_then_moved_is_a_hint(index_move):
    # The index goes to the table's device and the rows to the input's (fairseq's character
    # embedder): it works after .to(), at a copy per call.
    finding = only(LOOKUP_TABLE.format(index_move=index_move, rows_move=".type_as(ids)"), "TL101")
    assert finding.severity is Severity.HINT and "each use moves it" in finding.message
    # The rows left where the table is: the embedding on CUDA meets CPU indices.
    finding = only(LOOKUP_TABLE.format(index_move=index_move, rows_move=""), "TL101")
    assert finding.severity is Severity.WARNING


def test_a_table_indexed_with_an_index_moved_elsewhere_is_a_warning():
    text = LOOKUP_TABLE.format(index_move="to(self.emb.weight.device)", rows_move=".type_as(ids)")
    assert only(text, "TL101").severity is Severity.WARNING


def test_the_later_parameter_still_replaces_the_registered_buffer():
    text = LATER_PARAMETER.format(otherwise="")
    model_class = run(fixed(text, preferred(only(text, "TL101"))))["NoisePredictor"]
    assert "logvar" in dict(model_class().named_buffers())
    learnt = model_class(learn_logvar=True)
    assert "logvar" in dict(learnt.named_parameters()) and "logvar" not in dict(learnt.named_buffers())


def test_a_conditional_with_a_parameter_arm_gets_a_frozen_parameter():
    text = BRANCHES.format(other="torch.ones(dim)").replace(
        "        if learnable:\n            self.scale = nn.Parameter(torch.ones(dim))\n        else:\n"
        "            self.scale = torch.ones(dim)\n",
        "        self.scale = nn.Parameter(torch.ones(dim)) if learnable else torch.ones(dim)\n")
    finding = only(text, "TL101")
    assert [f.title for f in finding.fixes] == ["Wrap in `nn.Parameter(..., requires_grad=False)` (registered, not "
                                                "trained)"]
    head = run(fixed(text, finding.fixes[0]))["Head"]
    assert not head().scale.requires_grad and "scale" in dict(head().named_parameters())
    assert head(learnable=True).scale.requires_grad


HELPER = """\
import torch
import torch.nn as nn


class Sampler(nn.Module):
    def __init__(self, steps: int = 10):
        super().__init__()
        self.net = nn.Linear(4, 4)
        self.make_schedule(steps)

    def make_schedule(self, steps):
        self.betas = torch.linspace(1e-4, 0.02, steps)

    def forward(self, x):
{forward}        return self.net(x) * self.betas.mean()
"""


def test_a_tensor_first_assigned_in_a_helper_that_init_calls():
    finding = only(HELPER.format(forward=""), "TL101")
    assert finding.range.start.line == 12 and finding.severity is Severity.WARNING
    assert "make_schedule()" in finding.message
    model_class = run(fixed(HELPER.format(forward=""), preferred(finding)))["Sampler"]
    assert model_class().to(torch.float64).betas.dtype == torch.float64


def test_a_helper_that_forward_calls_too_is_run_time_state():
    quiet(HELPER.format(forward="        self.make_schedule(10)\n"), "TL101")


def test_a_helper_called_through_an_instance_is_not_construction_alone():
    quiet(HELPER.format(forward="") + "\n\nmodel = Sampler()\nmodel.make_schedule(20)\n", "TL101")


def test_a_method_that_a_base_init_calls():
    text = """\
    import torch
    import torch.nn as nn


    class Backbone(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Linear(4, 4)
            self.build()

        def build(self):
            pass

        def forward(self, x):
            return self.net(x)


    class WithBias(Backbone):
        def build(self):
            self.bias = torch.randn(4)

        def forward(self, x):
            return self.net(x) + self.bias
    """
    finding = only(text, "TL101")
    assert finding.range.start.line == 20
    model = run(fixed(text, preferred(finding)))["WithBias"]()
    assert "bias" in dict(model.named_parameters())  # a bias added to a layer's output: trained


# -- grading: 0-dim constants ------------------------------------------------------------------

SCALAR = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class WeightedBCE(nn.Module):
    def __init__(self, pos_weight: float = 2.0):
        super().__init__()
        self.head = nn.Linear(4, 1)
        self.pw = {value}

    def forward(self, x):
        logits = self.head(x)
        return {use}
"""
BCE = "F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits), pos_weight=self.pw)"


@pytest.mark.parametrize("value", ["torch.tensor(2.0)", "torch.tensor(-1)", "torch.tensor(pos_weight)",
                                   "torch.zeros(())", "torch.scalar_tensor(3.0)", "torch.tensor(2.0).float()"])
def test_a_0_dim_constant_used_as_a_number_is_a_hint(value):
    assert severity_of(SCALAR.format(value=value, use=BCE), 10) is Severity.HINT
    assert severity_of(SCALAR.format(value=value, use="logits * self.pw - 1"), 10) is Severity.HINT


@pytest.mark.parametrize("value, use", [
    ("torch.tensor([2.0])", BCE),  # one element, not 0-dim: CUDA refuses it
    ("torch.tensor(pos_weight).view(1)", BCE),
    ("torch.tensor(2.0)", "torch.cat([logits, self.pw.expand(logits.shape)])"),
    ("torch.tensor(2.0)", "logits @ self.pw.view(1, 1)"),
    ("torch.tensor(2.0)", "F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits), self.pw)"),
])
def test_other_uses_and_shapes_stay_warnings(value, use):
    assert severity_of(SCALAR.format(value=value, use=use), 10) is Severity.WARNING


def test_a_0_dim_tensor_that_requires_grad_stays_an_error():
    value = "torch.tensor(2.0, requires_grad=True)"
    assert severity_of(SCALAR.format(value=value, use=BCE), 10) is Severity.ERROR


def test_cuda_really_accepts_the_hinted_shape_from_the_cpu():
    # What the hint relies on (run only where CUDA is): a 0-dim CPU tensor meets CUDA tensors.
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    logits = torch.randn(3, 1, device="cuda")
    torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.ones_like(logits),
                                                         pos_weight=torch.tensor(2.0))
    assert (logits * torch.tensor(2.0)).is_cuda
    with pytest.raises(RuntimeError):
        torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.ones_like(logits),
                                                             pos_weight=torch.tensor([2.0]))
    with pytest.raises(RuntimeError):  # what makes `self.logvar[t].to(x.device)` a warning
        torch.zeros(10)[torch.tensor([1, 2], device="cuda")]


def test_a_none_check_is_not_a_use():
    text = """\
    import torch
    import torch.nn as nn


    class Grads(nn.Module):
        def __init__(self, n: int = 4):
            super().__init__()
            self.lin = nn.Linear(n, n)
            self.grads = torch.zeros(n)

        def forward(self, x):
            if self.grads is not None:
                {use}
            return self.lin(x)
    """
    assert findings(text.replace("{use}", "self.grads.zero_()"), "TL101") == []  # quiet: written in place only
    assert severity_of(text.replace("{use}", "x = x + self.grads"), 9) is Severity.WARNING


# -- fixes: never before super().__init__() ----------------------------------------------------

BEFORE_SUPER = """\
import torch
import torch.nn as nn


class Standardize(nn.Module):
    def __init__(self, center: float = 0.5):
        # the offset every input is shifted by
        self.offset = torch.full((4,), center)
{between}        super().__init__()
        self.net = nn.Linear(4, 4)

    def forward(self, x):
        return self.net(x - self.offset)
"""


def test_registering_in_place_before_super_init_would_raise():
    text = BEFORE_SUPER.format(between="").replace("self.offset = torch.full((4,), center)",
                                                   'self.register_buffer("offset", torch.full((4,), center))')
    with pytest.raises(AttributeError, match="before Module.__init__"):
        run(text)["Standardize"]()


@pytest.mark.parametrize("kind", ["Register as a buffer", "Register as a non-persistent", "Wrap in"])
def test_every_fix_before_super_init_registers_after_it(kind):
    text = BEFORE_SUPER.format(between="")
    finding = only(text, "TL101")
    fix = by_title(finding, kind)
    assert not fix.is_safe  # it moves a statement
    after = fixed(text, fix)
    lines = after.splitlines()
    assert lines.index("        super().__init__()") < lines.index("        # the offset every input is shifted by")
    model = run(after)["Standardize"]()
    assert model.to(torch.float64).offset.dtype == torch.float64
    model(torch.randn(2, 4, dtype=torch.float64))


def test_no_fix_when_a_statement_between_reads_what_the_move_changes():
    for between in ("        center = center * 2\n", "        print(self.offset)\n"):
        finding = only(BEFORE_SUPER.format(between=between), "TL101")
        assert finding.fixes == () and "no fix offered" in finding.message and "super().__init__()" in finding.message
    # ... or when it shares its line with another statement (the move takes whole lines).
    text = BEFORE_SUPER.format(between="").replace("torch.full((4,), center)", "torch.full((4,), center); k = 1")
    finding = only(text, "TL101")
    assert finding.fixes == () and "no fix offered" in finding.message and "super().__init__()" in finding.message


def test_no_fix_for_a_helper_called_before_super_init():
    text = """\
    import torch
    import torch.nn as nn


    class EarlySchedule(nn.Module):
        def __init__(self, steps: int = 10):
            self.set_steps(steps)
            super().__init__()
            self.net = nn.Linear(4, 4)

        def set_steps(self, steps):
            self.betas = torch.linspace(1e-4, 0.02, steps)

        def forward(self, x):
            return self.net(x) * self.betas.mean()
    """
    finding = only(text, "TL101")
    assert finding.fixes == () and "no fix offered" in finding.message
    # ... and a helper called after super().__init__() keeps its fixes.
    after = textwrap.dedent(text).replace("        self.set_steps(steps)\n        super().__init__()\n",
                                          "        super().__init__()\n        self.set_steps(steps)\n")
    assert after != textwrap.dedent(text)
    model = run(fixed(after, preferred(only(after, "TL101"))))["EarlySchedule"]()
    assert "betas" in dict(model.named_buffers())


def test_no_fix_when_init_never_calls_super_init():
    text = """\
    import torch
    import torch.nn as nn


    class Sampler(nn.Module):
        def __init__(self, ts: torch.Tensor):
            self.ts = ts.clone().detach()

        def forward(self, x):
            return x * self.ts
    """
    finding = only(text, "TL101")
    assert finding.fixes == () and "calls no `super().__init__()`" in finding.message


def test_a_name_assigned_by_a_base_init_first_gets_no_buffer_fix():
    # register_buffer refuses a name that exists already ("attribute 'table' already exists").
    text = """\
    import torch
    import torch.nn as nn


    class Base(nn.Module):
        def __init__(self):
            super().__init__()
            self.table = None


    class Table(Base):
        def __init__(self, n: int = 4):
            super().__init__()
            self.table = torch.randn(n)

        def forward(self, x):
            return x * self.table
    """
    finding = only(text, "TL101")
    assert not [f for f in finding.fixes if "buffer" in f.title]
    model = run(fixed(text, preferred(finding)))["Table"]()
    assert "table" in dict(model.named_parameters())


# -- fixes: never an integer or boolean nn.Parameter -------------------------------------------

INTEGRAL = """\
import torch
import torch.nn as nn


class Mix(nn.Module):
    def __init__(self, n: int = 4):
        super().__init__()
        self.proj = nn.Linear(n, n)
        self.t = {value}

    def forward(self, x):
        return self.proj(x) * self.t
"""


@pytest.mark.parametrize("value", [
    "torch.arange(n)", "torch.zeros(n, dtype=torch.long)", "torch.tensor([1, 2, 3, 4])",
    "torch.ones(n, dtype=torch.bool)", "torch.randn(n).long()", "torch.tril(torch.ones(n, n)).bool()[0]",
    "torch.randint(0, 5, (n,))", "torch.full((n,), 1)", "torch.arange(n).view(1, n) + 1",
    "torch.LongTensor([1, 2, 3, 4])",
])
def test_an_integer_or_bool_tensor_gets_a_buffer_never_a_parameter(value):
    text = INTEGRAL.format(value=value)
    finding = only(text, "TL101")
    assert finding.fixes and not [f for f in finding.fixes if "Parameter" in f.title], [f.title for f in finding.fixes]
    assert "register_buffer" in preferred(finding).title
    with pytest.raises(RuntimeError, match="floating point"):
        nn_parameter_of(run(text)["Mix"]().t)
    model = run(fixed(text, preferred(finding)))["Mix"]()
    assert "t" in dict(model.named_buffers())
    model(torch.randn(2, 4))


def nn_parameter_of(tensor):
    return torch.nn.Parameter(tensor)


@pytest.mark.parametrize("value", ["torch.ones(n)", "torch.arange(n) * 0.5", "torch.arange(0, 1, 0.25)",
                                   "torch.tensor([1.0, 2, 3, 4])", "torch.randint(0, 5, (n,)).float()"])
def test_a_float_tensor_used_as_a_weight_still_prefers_a_parameter(value):
    finding = only(INTEGRAL.format(value=value), "TL101")
    assert preferred(finding).title.startswith("Wrap in `nn.Parameter(")
    model = run(fixed(INTEGRAL.format(value=value), preferred(finding)))["Mix"]()
    assert "t" in dict(model.named_parameters())


def test_an_integer_tensor_with_no_place_for_a_buffer_gets_no_fix_and_says_why():
    text = INTEGRAL.format(value="torch.arange(n); self.k = 2")
    finding = only(text, "TL101")
    assert finding.fixes == () and "no fix offered" in finding.message and "integer" in finding.message



# -- fixes: a safe fix never freezes a weight ---------------------------------------------------

HAND_LINEAR = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class HandLinear(nn.Module):
    def __init__(self, in_features: int = 4, out_features: int = 3):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features))
        self.{attr} = {value}

    def forward(self, x):
        return {use}
"""


@pytest.mark.parametrize("attr, value, use", [
    ("bias", "torch.randn(out_features)", "x @ self.weight.T + self.bias"),  # added to a layer's output
    ("offset", "torch.zeros(out_features)", "F.linear(x, self.weight) + self.offset"),
    ("proj", "torch.randn(out_features, out_features)", 'torch.einsum("bo,op->bp", F.linear(x, self.weight), self.proj)'),
    ("proj", "torch.randn(out_features, out_features)", "torch.mm(F.linear(x, self.weight), self.proj)"),
    ("shift", "torch.randn(out_features)", "F.linear(x, self.weight, self.shift)"),
])
def test_a_tensor_forward_combines_like_a_weight_gets_no_safe_fix_and_prefers_a_parameter(attr, value, use):
    text = HAND_LINEAR.format(attr=attr, value=value, use=use)
    finding = only(text, "TL101")
    assert not [f.title for f in finding.fixes if f.is_safe]
    assert preferred(finding).title.startswith("Wrap in `nn.Parameter(")
    model = run(fixed(text, preferred(finding)))["HandLinear"]()
    assert attr in dict(model.named_parameters())
    model(torch.randn(2, 4)).sum().backward()
    assert getattr(model, attr).grad is not None  # trained now


TRAINED_ELSEWHERE = """\
import torch
import torch.nn as nn


class Tempered(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.temp = torch.tensor(2.0)
        {training}

    def forward(self, x):
        return self.proj(x).softmax(-1) if self.temp > 0 else x
"""


@pytest.mark.parametrize("training", [
    "self.opt = torch.optim.SGD([self.temp], lr=0.1)",
    "self.temp.requires_grad_()",
])
def test_a_tensor_trained_elsewhere_gets_no_safe_fix(training):
    finding = only(TRAINED_ELSEWHERE.format(training=training), "TL101")
    assert not [f.title for f in finding.fixes if f.is_safe]


def test_a_name_that_says_weight_withholds_the_safe_fix_but_the_use_chooses():
    text = TRAINED_ELSEWHERE.format(training="").replace("self.temp", "self.gamma")
    finding = only(text, "TL101")
    assert not [f.title for f in finding.fixes if f.is_safe]
    assert "register_buffer" in preferred(finding).title  # compared with 0: a constant by its use


CONSTANTS = """\
import math

import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, n: int = 8, dim: int = 4):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.{attr} = {value}

    def forward(self, x):
        y = self.proj(x)
        return {use}
"""


@pytest.mark.parametrize("attr, value, use", [
    ("causal", "torch.tril(torch.ones(n, n))", "y * self.causal[:y.size(1), :y.size(2)]"),
    ("causal", "torch.tril(torch.ones(n, n))", "y.masked_fill(self.causal[:y.size(1), :y.size(2)] == 0, 0.0)"),
    ("keep", "torch.bernoulli(torch.rand(n, dim))", "y * self.keep[:y.size(1)]"),
    ("positions", "torch.sin(torch.arange(n).float()[:, None] / 10 ** (torch.arange(dim) / dim))",
     "y + self.positions[:y.size(1)]"),
    ("mean", "torch.tensor([0.5, 0.4, 0.3, 0.2])", "(y - self.mean) / math.sqrt(2.0)"),
    ("anchors", "torch.linspace(0, 1, dim)", "(y > self.anchors).float()"),
])
def test_a_mask_a_table_or_positions_keep_the_safe_buffer_fix(attr, value, use):
    text = CONSTANTS.format(attr=attr, value=value, use=use)
    finding = only(text, "TL101")
    assert [f.title for f in finding.fixes if f.is_safe] == [
        "Register as a non-persistent buffer (moved by .to(), not saved)"]
    assert "register_buffer" in preferred(finding).title
    safe = next(f for f in finding.fixes if f.is_safe)
    model = run(fixed(text, safe))["Attention"]()
    assert attr in dict(model.named_buffers()) and not dict(model.named_parameters()).get(attr)
    model(torch.randn(2, 8, 4))
