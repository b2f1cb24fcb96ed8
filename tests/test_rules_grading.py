"""Findings graded by the evidence for harm: warnings where code breaks, hints where it works
as written, quiet (shown only with show-all) where nothing suggests harm."""
from __future__ import annotations

import textwrap

import pytest

from testkit.rules import check
from torchlint.engine import CheckOptions
from torchlint.analysis.findings import Severity
from torchlint.config import ConfigError, load_config

SHOW_ALL = CheckOptions(show_all=True)


def graded(text, code, **kwargs):
    """{line: severity} of one rule's findings."""
    result = check(textwrap.dedent(text), **kwargs)
    return {f.range.start.line: f.severity for f in result.findings if f.code == code}


# -- TL101 -------------------------------------------------------------------------------------

TL101_SHAPES = """\
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.proj = nn.Linear(n, n)
        self.mask = torch.tril(torch.ones(n, n))
        self.freqs = torch.arange(n).float()
        self.usage = torch.zeros(n, dtype=torch.long)
        self.lo = torch.tensor([-1.0])
        self.span = float(self.lo.abs().max())
        self.w = torch.randn(n, requires_grad=True)

    def forward(self, x):
        freqs = self.freqs.to(x.device)
        return self.proj(x).masked_fill(self.mask == 0, 0.0) * freqs + self.w
"""


def test_tl101_warns_when_forward_computes_with_it_and_errs_when_it_requires_grad():
    found = graded(TL101_SHAPES, "TL101")
    assert found[9] is Severity.WARNING  # mask: compared in forward, left behind by .to()
    assert found[14] is Severity.ERROR  # requires grad: never trained


def test_tl101_moved_at_each_use_is_a_hint_that_prefers_a_buffer():
    result = check(TL101_SHAPES)
    (finding,) = [f for f in result.findings if f.code == "TL101" and f.range.start.line == 10]
    assert finding.severity is Severity.HINT
    assert "copies it on every call" in finding.message
    (preferred,) = [f for f in finding.fixes if f.preferred]
    assert "non-persistent buffer" in preferred.title


def test_tl101_moved_after_a_torch_function_that_keeps_its_values_is_a_hint():
    # monai's GeneralizedWassersteinDiceLoss: `torch.clone(torch.as_tensor(self.m)).to(flat_proba.device)`
    text = """\
    import torch
    import torch.nn as nn


    class Dice(nn.Module):
        def __init__(self, dist):
            super().__init__()
            self.m = torch.as_tensor(dist, dtype=torch.float32)
            self.n = torch.as_tensor(dist, dtype=torch.float32)
            self.k = torch.as_tensor(dist, dtype=torch.float32)

        def forward(self, p):
            m = torch.clone(torch.as_tensor(self.m)).to(p.device)
            return p @ m + p @ torch.as_tensor(self.n, device=p.device) + p @ torch.clone(self.k)
    """
    assert graded(text, "TL101") == {8: Severity.HINT, 9: Severity.HINT, 10: Severity.WARNING}


def test_tl101_never_read_or_read_only_in_init_is_quiet_unless_everything_is_shown():
    assert set(graded(TL101_SHAPES, "TL101")) == {9, 10, 14}
    shown = graded(TL101_SHAPES, "TL101", options=SHOW_ALL)
    assert shown[11] is Severity.HINT and shown[12] is Severity.HINT  # usage never read, lo only in __init__
    assert shown[9] is Severity.WARNING  # show-all changes no other grade


def test_tl101_without_forward_in_the_file_is_a_hint():
    text = """\
    import torch
    from base import Renderer


    class Box(Renderer):
        def __init__(self):
            super().__init__()
            self.bbox = torch.zeros(2, 3)

        def intersect(self, origin):
            return origin - self.bbox
    """
    # Renderer is unknown here: not a Module as far as names tell, so nothing at all.
    assert graded(text, "TL101") == {}
    module = text.replace("from base import Renderer", "import torch.nn as nn").replace("(Renderer)", "(nn.Module)")
    assert graded(module, "TL101") == {8: Severity.HINT}


def test_tl101_in_a_class_with_no_forward_anywhere_is_a_hint():
    # monai's diffusion Scheduler: a Module holding a noise schedule, with no forward at all
    text = """\
    import torch
    import torch.nn as nn
    from elsewhere import Mixin


    class Schedule(nn.Module):
        def __init__(self, n=1000):
            super().__init__()
            self.timesteps = torch.arange(n - 1, -1, -1)

        def add_noise(self, x, noise):
            return x + noise


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.mask = torch.tril(torch.ones(4, 4))


    class Other(Schedule, Mixin):
        def __init__(self, n=1000):
            super().__init__()
            self.timesteps = torch.arange(n - 1, -1, -1)
    """
    # Block (no method but __init__) and Other (its Mixin may define forward and use the tensor):
    # nothing tells either way.
    assert graded(text, "TL101") == {9: Severity.HINT, 18: Severity.WARNING, 24: Severity.WARNING}


# -- TL103 -------------------------------------------------------------------------------------

def test_tl103_a_moved_parameter_only_returned_is_a_hint():
    # A placeholder loss handed back to a trainer (a Parameter only so that backward() runs) is no
    # lost weight; a helper whose moved Parameter a Module stores still is one.
    text = """\
    import torch
    import torch.nn as nn


    class Counter(nn.Module):
        def __init__(self, size, device):
            super().__init__()
            self.device = device
            self.gain = nn.Parameter(torch.ones(size)).to(device)
            self.bias = self.make_bias(size)

        def make_bias(self, size):
            return nn.Parameter(torch.zeros(size)).to(self.device)

        def placeholder_loss(self, batch):
            return nn.Parameter(torch.zeros(1)).to(self.device)


    def shared_scale(device):
        return nn.Parameter(torch.ones(1)).to(device)


    def attach(module, device):
        scale = shared_scale(device)
        module.scale = scale
    """
    assert graded(text, "TL103") == {9: Severity.ERROR, 13: Severity.ERROR, 16: Severity.HINT, 20: Severity.ERROR}


# -- TL201 -------------------------------------------------------------------------------------

def test_tl201_warns_on_aliasing_and_on_a_caller_tensor():
    text = """\
    import torch.nn as nn


    def tie(ln, ln_post):
        ln.weight.data = ln_post.weight.data


    def set_weight(layer, weight):
        layer.weight.data = weight


    def embedding_head(emb):
        lin = nn.Linear(4, 8, bias=False)
        lin.weight.data = emb.weight.data
        return lin
    """
    assert graded(text, "TL201") == {5: Severity.WARNING, 9: Severity.WARNING, 14: Severity.WARNING}
    messages = [f.message for f in check(textwrap.dedent(text)).findings]
    assert "shares the storage of `ln_post.weight`" in messages[0]
    assert "the caller's tensor `weight`" in messages[1]


def test_tl201_warns_under_an_optimizer():
    text = """\
    import torch
    import torch.nn as nn

    model = nn.Linear(4, 4)
    optimizer = torch.optim.Adam(model.parameters())
    model.weight.data = torch.randn(8, 4)
    """
    found = check(textwrap.dedent(text)).findings
    assert [(f.range.start.line, f.severity) for f in found if f.code == "TL201"] == [(6, Severity.WARNING)]
    assert "optimizer" in found[0].message


def test_tl201_under_an_optimizer_hints_on_new_values_of_the_same_layout():
    # torch_geometric's GraphMaskExplainer clamps its Lagrange multiplier this way: the optimizer's
    # state for it still fits (same shape, dtype and device), so nothing there breaks.
    text = """\
    import torch

    lam = torch.tensor(1.0, requires_grad=True)
    optimizer = torch.optim.RMSprop([lam], lr=0.01)
    lam.data = torch.full_like(lam.data, -2)
    lam.data = lam.data.clamp(-2, 30)
    lam.data = torch.clamp(lam, max=30)
    lam.data = torch.full_like(lam.data, -2, dtype=torch.float64)
    lam.data = torch.zeros_like(other)
    """
    assert graded(text, "TL201") == {5: Severity.HINT, 6: Severity.HINT, 7: Severity.HINT, 8: Severity.WARNING,
                                     9: Severity.WARNING}


def test_tl201_hints_on_rebinds_that_work_and_is_quiet_on_self_conversions():
    text = """\
    import torch
    import torch.nn as nn


    class RepBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 3)
            self.extra = nn.Conv2d(3, 3, 3)

        def reparameterize(self):
            kernel = self.conv.weight + self.extra.weight
            self.conv.weight.data = kernel
            self.conv.bias.data = self.extra.bias
            del self.extra


    def merge(base, delta):
        with torch.no_grad():
            base.weight.data = base.weight.data + delta
        base.weight.data = base.weight.data.half()
        base.weight.data = base.weight.data.T
    """
    assert graded(text, "TL201") == {13: Severity.HINT, 14: Severity.HINT, 20: Severity.HINT}
    assert set(graded(text, "TL201", options=SHOW_ALL)) == {13, 14, 20, 21, 22}


# -- TL301 -------------------------------------------------------------------------------------

def test_tl301_is_a_hint_unless_the_legacy_call_changes_behaviour():
    text = """\
    import numpy as np
    import torch
    import torch.nn as nn


    class Head(nn.Module):
        def __init__(self, n: int):
            super().__init__()
            self.w = nn.Parameter(torch.Tensor(n))
            nn.init.zeros_(self.w)


    def to_tensor(embeddings: np.ndarray, device):
        return torch.Tensor(embeddings, device=device)


    def as_float(timesteps: torch.Tensor):
        return torch.Tensor(timesteps)


    def steps(t: torch.Tensor):
        return torch.FloatTensor(t.long())


    def pad(b, n, gap):  # speechbrain's dual-path padding: a new CPU float tensor, returned as it is
        return torch.Tensor(torch.zeros(b, n, gap)), torch.Tensor(torch.zeros(b, n, gap, dtype=torch.long))
    """
    found = graded(text, "TL301")
    assert found == {9: Severity.HINT, 14: Severity.WARNING, 18: Severity.WARNING, 22: Severity.WARNING,
                     26: Severity.WARNING}
    assert [f.severity for f in check(textwrap.dedent(text)).findings if f.range.start.line == 26] == [
        Severity.HINT, Severity.WARNING]
    messages = {f.range.start.line: f.message for f in check(textwrap.dedent(text)).findings}
    assert "raises for a `device=` on the GPU" in messages[14]
    assert "floating point" in messages[18] and "floating point" in messages[22]
    assert all(f.deprecated for f in check(textwrap.dedent(text)).findings if f.code == "TL301")


def test_tl301_a_float_tensor_made_just_before_is_no_warning():
    # Tensors the function itself made as CPU floats (a factory with no dtype or device, and
    # arithmetic, indexing and shape changes of them) go through FloatTensor / Tensor unchanged.
    text = """\
    import torch
    import torch.nn as nn


    class Basis(nn.Module):
        def __init__(self, count, low, high):
            super().__init__()
            centres = torch.linspace(low, high, count)
            spread = torch.abs(centres[1] - centres[0]) * torch.ones_like(centres)
            self.spread = nn.Parameter(torch.FloatTensor(spread))
            gain = torch.randn(size=(count, 1)) * 0.01
            self.gain = nn.Parameter(torch.FloatTensor(gain))
            shift = torch.rand(count) * 0.1
            shift = torch.reshape(shift, (count,))
            self.shift = nn.Parameter(torch.Tensor(shift))
            steps = torch.arange(count)
            self.steps = nn.Parameter(torch.FloatTensor(steps))
            halves = torch.randn(count, dtype=torch.float16) * 2
            self.halves = nn.Parameter(torch.FloatTensor(halves))
            picked = torch.randn(count, device="cuda")
            self.picked = nn.Parameter(torch.FloatTensor(picked))
    """
    assert graded(text, "TL301") == {
        10: Severity.HINT, 12: Severity.HINT, 15: Severity.HINT,
        17: Severity.WARNING, 19: Severity.WARNING, 21: Severity.WARNING}


def test_tl301_an_int_size_from_the_caller_is_no_warning():
    text = """\
    import torch
    import torch.nn as nn


    class LayerNorm(nn.Module):
        def __init__(self, hidden_size: tuple, num_classes):
            super().__init__()
            self.weight = nn.Parameter(torch.Tensor(hidden_size))
            self.bias = nn.Parameter(torch.Tensor(num_classes))
    """
    assert graded(text, "TL301") == {8: Severity.HINT, 9: Severity.HINT}


# -- the setting -------------------------------------------------------------------------------

def test_show_all_is_read_from_pyproject(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.torchlint]\nshow-all = true\n")
    config = load_config(path)
    assert config.options_for(tmp_path / "a.py").show_all is True
    assert config.with_overrides(show_all=False).options_for(tmp_path / "a.py").show_all is False
    path.write_text("[tool.torchlint]\nshow-all = \"yes\"\n")
    with pytest.raises(ConfigError, match="show-all"):
        load_config(path)


def test_show_all_flag_of_the_command_line(tmp_path):
    from torchlint.cli import main

    source = tmp_path / "m.py"
    source.write_text(textwrap.dedent(TL101_SHAPES))
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["check", "--no-infer", "--format", "json", "--select", "TL101", str(source)])
    default = out.getvalue().count('"TL101"')
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["check", "--no-infer", "--format", "json", "--select", "TL101", "--show-all", str(source)])
    assert (default, out.getvalue().count('"TL101"')) == (3, 5)
