"""TL204 tensor-created-without-device: exact messages and fix outputs, the look-alikes that stay
quiet, and fixed code run with torch (the "meta" device stands in for a GPU: mixing it with CPU
tensors fails like CUDA does, on any machine)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from torchlint.analysis.findings import Severity
from torchlint.fixing import fix_text
from testkit.rules import by_title, findings, fixed, only, preferred, quiet, run


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
