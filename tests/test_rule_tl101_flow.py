"""TL101 follows a plain tensor attribute out of the expression that reads it (issue 43): through
locals, tuples, returns, the methods forward calls, layers taken from loops and comprehensions,
tensor methods and functions of the file. A value that ends combined with the input, passed to a
layer, indexed with a tensor or returned from forward is a warning; one moved before any of that,
a hint; one that goes nowhere, quiet."""
from __future__ import annotations

import pytest

from testkit.rules import findings, only, quiet
from torchlint.analysis.findings import Severity

HEADER = """\
import torch
import torch.nn as nn


"""


def tl101(body):
    return only(HEADER + body, "TL101")


RETURNED = HEADER + """\
class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Conv2d(3, 8, 3)
        self.priors = torch.rand(64, 4)

    def forward(self, x):
        return {value}
"""


@pytest.mark.parametrize("value", ["self.body(x), self.priors", "self.priors", "[self.body(x), self.priors]",
                                   "{'maps': self.body(x), 'priors': self.priors}", "self.get_priors()"])
def test_a_tensor_forward_returns_is_a_warning(value):
    text = RETURNED.format(value=value) + "\n    def get_priors(self):\n        return self.priors\n"
    finding = only(text, "TL101")
    assert finding.severity is Severity.WARNING
    assert "forward returns it" in finding.message or value == "self.get_priors()"


def test_a_returned_tensor_moved_first_is_a_hint():
    finding = only(RETURNED.format(value="self.body(x), self.priors.to(x.device)"), "TL101")
    assert finding.severity is Severity.HINT


def test_a_0_dim_tensor_forward_returns_stays_a_hint():
    text = RETURNED.format(value="self.body(x) * 2, self.priors").replace("torch.rand(64, 4)", "torch.tensor(0.5)")
    assert only(text, "TL101").severity is Severity.HINT


CELL_STATE = HEADER + """\
class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.LSTM(8, 8)
        self.c_start = torch.zeros(1, 1, 8)

    def forward(self, feats):
        {lines}
"""


@pytest.mark.parametrize("lines", [
    "start = self.c_start.expand_as(feats)\n        return self.cell(feats, (feats, start))",
    "start = self.c_start\n        state = (feats, start)\n        return self.cell(feats, state)",
    "h, start = feats, self.c_start\n        return self.cell(feats, (h, start))",
    "for _ in range(2):\n            start = self.c_start\n            feats, _ = self.cell(feats, (feats, start))\n"
    "        return feats",
])
def test_a_state_reaching_a_layer_through_locals_is_a_warning(lines):
    assert tl101(CELL_STATE.format(lines=lines)[len(HEADER):]).severity is Severity.WARNING


@pytest.mark.parametrize("lines", [
    "start = self.c_start.to(feats.device)\n        return self.cell(feats, (feats, start))",
    "start = self.c_start\n        start = start.to(feats.device)\n        return self.cell(feats, (feats, start))",
])
def test_a_state_moved_before_the_layer_is_a_hint(lines):
    assert tl101(CELL_STATE.format(lines=lines)[len(HEADER):]).severity is Severity.HINT


def test_a_local_nothing_reads_is_quiet():
    quiet(CELL_STATE.format(lines="start = self.c_start\n        return self.cell(feats)"), "TL101")


HEADS = HEADER + """\
class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(8, 8)

    def forward(self, x, mask):
        return self.q(x).masked_fill(mask, 0.0)


class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = {heads}
        self.causal = {mask}

    def forward(self, x):
        {body}
"""
LOOP = "outs = []\n        for head in self.heads:\n            outs.append(head(x, self.causal))\n" \
       "        return torch.cat(outs, dim=-1)"


@pytest.mark.parametrize("heads", ["nn.ModuleList([Head() for _ in range(4)])", "[Head() for _ in range(4)]",
                                   "nn.ModuleList([Head(), Head()])"])
@pytest.mark.parametrize("body", [
    LOOP,
    "return torch.cat([head(x, self.causal) for head in self.heads], dim=-1)",
    "return torch.cat([head(x, self.causal) for i, head in enumerate(self.heads)], dim=-1)",
    "return sum(head(x, self.causal) for head, w in zip(self.heads, range(4)))",
    "head = self.heads[0]\n        return head(x, self.causal)",
    "return self.heads[0](x, self.causal)",
])
def test_a_mask_handed_to_each_layer_of_a_loop_is_a_warning(heads, body):
    text = HEADS.format(heads=heads, mask="torch.tril(torch.ones(8, 8)) == 0", body=body)
    assert only(text, "TL101").severity is Severity.WARNING


def test_a_comparison_of_tensors_is_a_tensor():
    text = HEADS.format(heads="nn.ModuleList([Head()])", mask="torch.tril(torch.ones(8, 8)) == 0", body=LOOP)
    assert "`self.causal` holds a tensor" in only(text, "TL101").message
    quiet(HEADS.format(heads="nn.ModuleList([Head()])", mask="8 == 0", body=LOOP), "TL101")


def test_a_mask_given_to_a_loop_over_plain_values_is_not_followed():
    text = HEADS.format(heads="nn.ModuleList([Head()])", mask="torch.ones(8, 8)",
                        body="for f in [print, repr]:\n            f(self.causal)\n        return x")
    assert only(text, "TL101").severity is Severity.HINT


def test_a_tensor_method_combining_it_with_the_input_is_a_warning():
    text = HEADS.format(heads="nn.ModuleList([Head()])", mask="torch.tril(torch.ones(8, 8)) == 0",
                        body="return x.masked_fill(self.causal, 0.0)")
    assert only(text, "TL101").severity is Severity.WARNING


SCHEDULE = HEADER + """\
class Diffusion(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(8, 8)
        self.logvar = torch.full((1000,), 0.0)

    def forward(self, x):
        t = {step}
        return self.losses(x, t)

    def losses(self, x, t):
        logvar_t = self.logvar[t].to(x.device)
        return self.net(x) / torch.exp(logvar_t)
"""


def test_indexing_with_the_step_tensor_a_caller_passes_is_a_warning():
    text = SCHEDULE.format(step="torch.randint(0, 1000, (x.shape[0],), device=x.device).long()")
    assert only(text, "TL101").severity is Severity.WARNING


@pytest.mark.parametrize("step", ["3", "int(x.shape[0])"])
def test_indexing_with_a_number_then_moving_stays_a_hint(step):
    assert only(SCHEDULE.format(step=step), "TL101").severity is Severity.HINT


CLS_TOKEN = HEADER + """\
class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.cls_token = torch.zeros(1, 1, 8)

    def forward(self, x):
        x = self.proj(x)
        {lines}
        return x
"""


@pytest.mark.parametrize("lines", [
    "tokens = self.cls_token.expand(x.shape[0], -1, -1)\n        x = torch.cat((tokens, x), dim=1)",
    "x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)",
    "x = join(self.cls_token, x)",
])
def test_a_token_concatenated_with_the_input_is_a_warning(lines):
    text = CLS_TOKEN.format(lines=lines) + "\n\ndef join(token, x):\n    return torch.cat((token.expand(x.shape[0], -1, -1), x), 1)\n"
    assert only(text, "TL101").severity is Severity.WARNING


def test_a_token_moved_before_the_concatenation_is_a_hint():
    text = CLS_TOKEN.format(lines="tokens = self.cls_token.to(x.device)\n        x = torch.cat((tokens, x), dim=1)")
    assert only(text, "TL101").severity is Severity.HINT


def test_a_value_followed_through_a_helper_that_construction_calls_is_construction_s():
    text = HEADER + """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.rand(4, 4)
        self.proj = nn.Linear(4, 4)
        self.proj.weight.data.copy_(self.rows())

    def rows(self):
        return self.table
"""
    assert findings(text, "TL101") == []


DROPPER = HEADER + """\
class Dropper(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.eval_mask = torch.tensor([1.0])

    def forward(self, x):
        return self.proj(x) * self.mask_for(x)

    def mask_for(self, x):
        if self.training:
            mask = torch.bernoulli(torch.full_like(x, 0.9))
        else:
            mask = self.eval_mask{move}
        return mask
"""


def test_a_tensor_one_branch_returns_from_a_helper_forward_uses_is_a_warning():
    assert only(DROPPER.format(move=""), "TL101").severity is Severity.WARNING
    assert only(DROPPER.format(move=".to(x.device)"), "TL101").severity is Severity.HINT


SCORER = HEADER + """\
class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.grid = torch.rand(10, 3)

    def forward(self, x):
        return Scorer.score(x, grid=self.grid)

    @staticmethod
    def score(x, grid):
        {line}
        return x @ grid.T
"""


def test_a_tensor_given_to_a_static_method_is_followed_into_it():
    assert only(SCORER.format(line="pass"), "TL101").severity is Severity.WARNING
    assert only(SCORER.format(line="grid = grid.to(x.device)"), "TL101").severity is Severity.HINT


def test_a_tensor_given_to_what_a_torch_function_returns_is_computed():
    text = CLS_TOKEN.format(lines="x = torch.vmap(torch.dot, (None, 0))(self.cls_token[0, 0], x)")
    assert only(text, "TL101").severity is Severity.WARNING


THRESHOLD = HEADER + """\
from typing import Optional, Union


class Filter(nn.Module):
    def __init__(self, threshold: {annotation} = None):
        super().__init__()
        self.threshold = None if threshold is None else torch.as_tensor(threshold)

    def forward(self, boxes, threshold=None):
        if threshold is None:
            threshold = self.threshold
        return boxes[boxes > threshold]
"""


@pytest.mark.parametrize("annotation", ["Optional[Union[torch.Tensor, float]]", "float", "Optional[int]"])
def test_a_threshold_that_may_be_made_from_a_number_stays_a_hint(annotation):
    assert only(THRESHOLD.format(annotation=annotation), "TL101").severity is Severity.HINT


def test_a_threshold_made_from_a_tensor_is_a_warning():
    assert only(THRESHOLD.format(annotation="Optional[torch.Tensor]"), "TL101").severity is Severity.WARNING


GROUPS = HEADER + """\
class Mask(nn.Module):
    def __init__(self, groups):
        super().__init__()
        self.groups = (groups > 0) + 0.

    def forward(self, x):
        return x @ self.groups


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.mask = Mask({given})
"""


def test_a_constructor_argument_every_construction_gives_as_a_tensor_is_one():
    assert only(GROUPS.format(given="torch.eye(4)"), "TL101").severity is Severity.WARNING
    quiet(GROUPS.format(given="4"), "TL101")
    quiet(GROUPS.format(given="torch.eye(4)") + "\n\nother = Mask(3)\n", "TL101")  # (one construction does not)


HELPER_CLASS = HEADER + """\
class Interactions(nn.Module):
    def __init__(self):
        super().__init__()
        self.adjacency = torch.ones(4, 4)

    def interact(self, x):
        return x @ self.adjacency


class Owner(nn.Module):
    def __init__(self):
        super().__init__()
        self.student = Interactions()

    def forward(self, x):
        return {body}
"""


def test_a_method_other_code_calls_on_a_module_without_forward_is_its_forward():
    finding = only(HELPER_CLASS.format(body="self.student.interact(x)"), "TL101")
    assert finding.severity is Severity.WARNING and "`interact()`, which code outside the class calls" in finding.message
    assert only(HELPER_CLASS.format(body="x"), "TL101").severity is Severity.HINT  # nothing calls it


ORDER = HEADER + """\
class Pick(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.order = torch.arange(n).flip(0)
        self.offset = 2

    def forward(self, x, shift):
        return {use}
"""


@pytest.mark.parametrize("use", ["x[:, self.order]", "x[self.order + self.offset]", "x[..., self.order + 1]"])
def test_a_tensor_that_only_indexes_others_is_a_hint(use):
    finding = only(ORDER.format(use=use), "TL101")
    assert finding.severity is Severity.HINT and "only indexes other tensors" in finding.message


@pytest.mark.parametrize("use", ["x[self.order + shift]", "x * self.order"])
def test_an_index_combined_with_what_forward_is_given_is_a_warning(use):
    assert only(ORDER.format(use=use), "TL101").severity is Severity.WARNING
