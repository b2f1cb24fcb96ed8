"""TL203 discarded-move: exact fix outputs, the look-alikes that stay quiet, and fixed code run
with torch."""
from __future__ import annotations

import pytest

from torchlint.analysis.findings import Severity
from testkit.rules import findings, fixed, only, preferred, quiet, run


def test_tl203_assigns_the_result_and_keeps_the_rest():
    text = """\
    import torch
    device = torch.device("cuda")

    def step(images: torch.Tensor):
        images.to(device, non_blocking=True)  # move the batch
        return images
    """
    finding = only(text, "TL203")
    assert finding.severity is Severity.WARNING
    assert (finding.range.start.line, finding.range.start.column) == (5, 4)
    fix = preferred(finding)
    assert fix.is_safe
    assert fixed(text, fix).splitlines()[4] == "    images = images.to(device, non_blocking=True)  # move the batch"


def test_tl203_registered_buffer_in_forward():
    text = """\
    import torch
    import torch.nn as nn

    class PE(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("pe", torch.zeros(10, 4))

        def forward(self, x):
            self.pe.to(x.device)
            return x + self.pe
    """
    finding = only(text, "TL203")
    assert "`self.pe`" in finding.message
    assert fixed(text, preferred(finding)).splitlines()[9] == "        self.pe = self.pe.to(x.device)"


def test_tl203_dtype_conversions_and_type_with_argument():
    text = """\
    import torch
    x = torch.zeros(3)
    x.half()
    x.type(torch.float64)
    x.type()
    """
    lines = [f.range.start.line for f in findings(text, "TL203")]
    assert lines == [3, 4]


def test_tl203_global_tensor_in_a_function_is_found_without_a_fix():
    text = """\
    import torch
    mean = torch.tensor([0.5])

    def prepare():
        mean.cuda()
    """
    finding = only(text, "TL203")
    assert finding.fixes == ()  # `mean = mean.cuda()` here would raise UnboundLocalError


@pytest.mark.parametrize("statement", [
    "model.to(device)",
    "model.cuda()",
    "self_encoder.to(device)",
    "batch.to(device)",  # unknown: a batch from a loader
    "x.T.cuda()",  # not something `x.T = ...` could re-bind
    "x[0].cuda()",
    "w.cuda()",  # a Parameter: the obvious fix would be TL104
    "x.type()",
    "torch.randn(3).cuda()",
])
def test_tl203_stays_quiet(statement):
    quiet(_tl203_template % statement, "TL203")


def test_tl203_quiet_template_does_find_a_tensor_move():
    assert len(findings(_tl203_template % "x.cuda()", "TL203")) == 1


_tl203_template = """\
    import torch
    import torch.nn as nn
    device = torch.device("cuda")
    model = nn.Linear(3, 3)
    self_encoder = nn.Sequential(nn.Linear(3, 3))
    w = nn.Parameter(torch.zeros(3))
    x = torch.zeros(3)

    def f(batch):
        %s
    """


def test_tl203_module_attribute_moves_stay_quiet():
    text = """\
    import torch.nn as nn

    class AE(nn.Module):
        def __init__(self, dev):
            super().__init__()
            self.encoder = nn.Linear(3, 3)
            self.encoder.to(dev)
            self.encoder.half()
    """
    quiet(text, "TL203")


def test_tl203_fixed_code_really_converts():
    text = """\
    import torch
    x = torch.zeros(3)
    x.double()
    """
    assert run(text)["x"].dtype.is_floating_point and str(run(text)["x"].dtype) == "torch.float32"
    result = fixed(text, preferred(only(text, "TL203")))
    assert str(run(result)["x"].dtype) == "torch.float64"


def test_tl203_quiet_on_what_only_a_name_calls_a_loader_or_a_batch():
    """A fastai-style loader moves in place and returns None (`dl = dl.to(...)` would break it),
    and what an unknown loader yields may be anything: the names say nothing."""
    text = """\
    import torch

    class InPlaceLoader:
        def to(self, device):
            self.device = device

    def fit(make, loader, batch_loader, loaders_by_split, device):
        dl = InPlaceLoader()
        dl.to("cuda")
        loader.to(device)
        batch_loader.to(device)
        for xb, yb in batch_loader:
            xb.to(device)
        for step, (x, y) in enumerate(loader):
            y.cuda()
        for split, dl_train in loaders_by_split.items():
            dl_train.to(device)
        first, second = next(iter(loader))
        first.to(device)
        t = torch.zeros(3)
        t.to(device)
    """
    found = findings(text, "TL203")
    assert [(f.range.start.line, f.range.start.column) for f in found] == [(21, 4)]  # the tensor only


def test_tl203_finds_what_torchs_data_loader_yields():
    text = """\
    from torch.utils.data import DataLoader

    def fit(dataset, given: DataLoader, device):
        loader = DataLoader(dataset, batch_size=4)
        for xb, yb in loader:
            xb.to(device)
        for i, (x, y) in enumerate(given):
            y.cuda()
            i.cuda()
        for i, batch in enumerate(loader):
            batch.cuda()
            images, labels = batch
            labels.cuda()
        first, second = next(iter(given))
        first.to(device)
    """
    found = findings(text, "TL203")
    assert [f.range.start.line for f in found] == [6, 8, 13, 15]
    assert all(preferred(f).is_safe for f in found)
