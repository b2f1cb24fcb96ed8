"""TL105, TL106, TL204: exact messages and fix outputs, the look-alikes that stay quiet, and
fixed code run with torch (the "meta" device stands in for a GPU: mixing it with CPU tensors
fails like CUDA does, on any machine)."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from torchlint.analysis.findings import Severity
from torchlint.fixing import fix_text
from torchlint.rules import RULES_BY_CODE
from rule_helpers import by_title, findings, fixed, only, preferred, quiet, run


# == TL204 tensor-created-without-device =====================================================

GPT = """\
import torch
import torch.nn as nn


class Embeddings(nn.Module):
    def __init__(self, vocab=11, dim=4, block=8):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(block, dim))
        self.proj = nn.Linear(dim, dim)

    def forward(self, idx):
        t = idx.shape[1]
        h = self.proj(self.tok(idx))
        mask = torch.ones(t, t).tril()
        return (h + self.pos[:t]) * mask.sum(-1, keepdim=True)
"""


def test_tl204_finds_the_mask_and_names_what_it_meets():
    finding = only(GPT, "TL204")
    assert finding.severity is Severity.WARNING
    assert (finding.range.start.line, finding.range.start.column) == (15, 15)
    assert "`torch.ones(t, t)`" in finding.message
    assert "Expected all tensors to be on the same device" in finding.message
    assert "on line 16" in finding.message
    (related,) = finding.related
    assert related.range.start.line == 16


def test_tl204_device_fix_is_safe_preferred_and_uses_the_input():
    finding = only(GPT, "TL204")
    fix = preferred(finding)
    assert fix.is_safe and fix.title.startswith("Create it on the same device")
    assert fixed(GPT, fix).splitlines()[14] == "        mask = torch.ones(t, t, device=idx.device).tril()"


def test_tl204_new_method_fix_is_unsafe_without_dtype_and_safe_with_it():
    fix = by_title(only(GPT, "TL204"), "Use `idx.new_ones")
    assert not fix.is_safe and "dtype" in fix.title
    assert fixed(GPT, fix).splitlines()[14] == "        mask = idx.new_ones(t, t).tril()"
    typed = GPT.replace("torch.ones(t, t)", "torch.ones(t, t, dtype=torch.float32)")
    fix = by_title(only(typed, "TL204"), "Use `idx.new_ones")
    assert fix.is_safe
    assert fixed(typed, fix).splitlines()[14] == "        mask = idx.new_ones(t, t, dtype=torch.float32).tril()"


def _forward_on_meta(source):
    model = run(source)["Embeddings"]().to("meta")
    idx = torch.zeros(2, 5, dtype=torch.long, device="meta")
    return model(idx)


def test_tl204_bug_is_real_and_the_fix_runs_on_another_device():
    with pytest.raises(RuntimeError, match="device"):
        _forward_on_meta(GPT)
    out = _forward_on_meta(fixed(GPT, preferred(only(GPT, "TL204"))))
    assert out.device.type == "meta" and tuple(out.shape) == (2, 5, 4)


def test_tl204_fix_falls_back_to_the_weight_when_no_input_is_known():
    source = """\
    import torch
    import torch.nn as nn

    class Noisy(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.zeros(3, 3))

        def forward(self, n):
            return self.weight + torch.randn(3, 3) * n
    """
    finding = only(source, "TL204")
    assert "the parameter `self.weight`" in finding.message
    assert "device=self.weight.device" in fixed(source, preferred(finding))


@pytest.mark.parametrize("line", [
    "mask = torch.ones(t, t, device=idx.device).tril()",
    "mask = torch.ones(t, t).tril().to(idx.device)",
    "mask = torch.ones_like(h[0, :, :1].expand(t, t)).tril()",
    "mask = h.new_ones(t, t).tril()",
    "mask = torch.tensor(2.0)",
])
def test_tl204_quiet_when_the_device_is_handled(line):
    quiet(GPT.replace("mask = torch.ones(t, t).tril()", line), "TL204")


def test_tl204_quiet_outside_forward_and_under_a_device_test():
    quiet(GPT.replace("def forward(self, idx):", "def encode(self, idx):"), "TL204")
    guarded = GPT.replace("        mask = torch.ones(t, t).tril()\n",
                          "        if idx.device.type == \"cpu\":\n            mask = torch.ones(t, t).tril()\n"
                          "        else:\n            mask = torch.ones(t, t, device=idx.device).tril()\n")
    quiet(guarded, "TL204")


def test_tl204_follows_methods_forward_calls():
    source = GPT.replace("        mask = torch.ones(t, t).tril()\n", "        mask = self._mask(t)\n") + """\

    def _mask(self, t):
        causal = torch.ones(t, t).tril()
        return causal * self.pos[0, 0]
"""
    finding = only(source, "TL204")
    assert "the parameter `self.pos`" in finding.message
    assert "device=self.pos.device" in fixed(source, preferred(finding))


def test_tl204_follows_a_helper_result_into_forward_and_names_a_device_the_helper_knows():
    source = """\
    import torch
    import torch.nn as nn

    class Attention(nn.Module):
        def __init__(self, dim=4):
            super().__init__()
            self.qkv = nn.Linear(dim, 3 * dim)

        def _causal_mask(self, t):
            return torch.ones(t, t).tril() == 0

        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            att = (q @ k.transpose(-2, -1)).masked_fill(self._causal_mask(x.shape[1]), float("-inf"))
            return att.softmax(-1) @ v
    """
    finding = only(source, "TL204")
    assert finding.range.start.line == 10 and "on line 14" in finding.message
    text = fixed(source, preferred(finding))
    assert text.splitlines()[9] == "        return torch.ones(t, t, device=self.qkv.weight.device).tril() == 0"
    model = run(text)["Attention"]().to("meta")
    assert model(torch.zeros(2, 3, 4, device="meta")).device.type == "meta"


SCAN = """\
import torch
import torch.nn as nn

class Scan(nn.Module):
    def __init__(self, dim=4, state=3):
        super().__init__()
        self.decay = nn.Parameter(torch.full((dim, state), -1.0))

    def forward(self, u):
        h = torch.zeros((u.shape[0], u.shape[2], self.decay.shape[1]))
        outs = []
        for i in range(u.shape[1]):
            h = torch.exp(self.decay) * h + u[:, i, :, None]
            outs.append(h.sum(-1))
        return torch.stack(outs, 1)
"""


def test_tl204_follows_a_local_rebound_in_a_loop_and_the_fix_runs_on_another_device():
    finding = only(SCAN, "TL204")
    assert finding.range.start.line == 10 and "the parameter `self.decay` on line 13" in finding.message
    model = run(SCAN)["Scan"]().to("meta")
    with pytest.raises(RuntimeError, match="device"):
        model(torch.zeros(2, 5, 4, device="meta"))
    text = fixed(SCAN, preferred(finding))
    assert "h = torch.zeros((u.shape[0], u.shape[2], self.decay.shape[1]), device=self.decay.device)" in text
    out = run(text)["Scan"]().to("meta")(torch.zeros(2, 5, 4, device="meta"))
    assert out.device.type == "meta" and tuple(out.shape) == (2, 5, 4)


GUIDED = """\
import torch
import torch.nn as nn

class GuidedAttentionLoss(nn.Module):
    def forward(self, attention, ilen: int, olen: int):
        gx, gy = torch.meshgrid(torch.arange(olen), torch.arange(ilen), indexing="ij")
        mask = 1.0 - torch.exp(-(gy / ilen - gx / olen) ** 2 / 0.32)
        return (attention * mask).mean()
"""


def test_tl204_follows_meshgrid_tuples_and_names_the_tensor_input_not_the_int_ones():
    found = findings(GUIDED, "TL204")
    assert [(f.range.start.line, f.range.start.column) for f in found] == [(6, 32), (6, 52)]
    assert all("the input `attention` on line 8" in f.message for f in found)
    with pytest.raises(RuntimeError, match="device"):
        run(GUIDED)["GuidedAttentionLoss"]()(torch.zeros(3, 4, device="meta"), 4, 3)
    text = GUIDED
    for finding in sorted(found, key=lambda f: -f.range.start.column):  # right to left: offsets stay valid
        text = fixed(text, preferred(finding))
    assert text.count("device=attention.device") == 2
    loss = run(text)["GuidedAttentionLoss"]()
    assert loss(torch.zeros(3, 4, device="meta"), 4, 3).device.type == "meta"


FOURIER = """\
import torch
import torch.nn as nn

class Fourier(nn.Module):
    def forward(self, v, width: int = 8):
        j = torch.arange(width)
        return torch.sin(j * torch.unsqueeze(v, -1))
"""


def test_tl204_first_input_of_forward_is_the_batch():
    finding = only(FOURIER, "TL204")
    assert "the input `v`" in finding.message
    assert "device=v.device" in fixed(FOURIER, preferred(finding))


@pytest.mark.parametrize("signature", [
    "lengths, width: int = 8",  # a name that says what else it is
    "v: int, width: int = 8",  # an annotation that is not a tensor
    "v=4, width: int = 8",  # a default that is a setting
    "n, width: int = 8",
])
def test_tl204_first_input_is_not_the_batch_when_its_name_or_annotation_says_otherwise(signature):
    name = signature.split(",")[0].split(":")[0].split("=")[0]
    source = FOURIER.replace("(self, v, width: int = 8)", "(self, %s)" % signature)
    source = source.replace("(v, -1)", "(%s, -1)" % name)
    quiet(source, "TL204")


REAL_TL204 = Path(__file__).resolve().parent / "fixtures" / "real_bugs" / "tl204_factories_in_forward.py"
REAL_TL204_CALLS = {
    "SelectiveScan": lambda model: model(torch.zeros(2, 5, 4, device="meta")),
    "GuidedAttentionLoss": lambda model: model(torch.zeros(3, 4, device="meta"), 4, 3),
    "PositionalEncoding": lambda model: model(torch.zeros(2, 3, device="meta")),
    "Blocks": lambda model: model(torch.zeros(2, 3, device="meta")),
}


@pytest.mark.parametrize("name", sorted(REAL_TL204_CALLS))
def test_tl204_reported_bugs_fail_on_another_device_and_their_safe_fixes_run_there(name):
    text = REAL_TL204.read_text(encoding="utf-8")
    call = REAL_TL204_CALLS[name]
    with pytest.raises(RuntimeError, match="device"):
        call(run(text)[name]().to("meta"))
    outcome = fix_text(text, str(REAL_TL204), unsafe=False)
    assert not outcome.errors and not [f for f in outcome.result.findings if f.code == "TL204"]
    assert call(run(outcome.text)[name]().to("meta")).device.type == "meta"


# == TL105 non-leaf-parameter ================================================================

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


# == TL106 submodule-unused-in-forward =======================================================

UNUSED = """\
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self, dim=4, classes=3):
        super().__init__()
        self.encoder = nn.Linear(dim, dim)
        self.aux_head = nn.Linear(dim, classes)
        self.head = nn.Linear(dim, classes)
        self.drop = nn.Dropout(0.1)

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


def test_every_new_rule_has_a_readme_row():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    for code in ("TL105", "TL106", "TL204"):
        rule = RULES_BY_CODE[code]
        assert "| %s | %s |" % (code, rule.name) in readme
        assert textwrap.dedent(rule.doc()).startswith("# %s %s" % (code, rule.name))
