"""Weights that forward derives from registered parameters (issue #44): weight_norm, spectral_norm,
pruning, parametrize and a forward pre-hook of the user's set a plain tensor attribute on every
call; it is not state of its own, so it is no registration, move or step bug. Planted bugs next
to them are still reported. One child process for the whole file, on the device ``auto`` picks:
the expectations hold on the CPU (the float64 stand-in) and on CUDA (the real move) alike.
"""
from __future__ import annotations

import pytest

from torchlint.verify import verify_file
from torchlint.verify.report import COMPLETED

from verify_helpers import check, class_report, issues, line_of, torch_python, write_module

MODELS = '''
import torch
import torch.nn as nn
from torch.nn.utils import parametrizations, parametrize, prune, spectral_norm, weight_norm


class TrimRight(nn.Module):
    """Drops the padding a causal convolution adds on the right."""

    def __init__(self, size=1):
        super().__init__()
        self.size = size

    def forward(self, x):
        return x[..., :-self.size]


class DilatedBlock(nn.Module):
    """Two weight-normed causal convolutions and a residual, as a temporal convolutional network has."""

    def __init__(self, width=4, kernel=3, dilation=2):
        super().__init__()
        pad = (kernel - 1) * dilation
        self.first = weight_norm(nn.Conv1d(width, width, kernel, padding=pad, dilation=dilation))
        self.trim_first = TrimRight(pad)
        self.second = weight_norm(nn.Conv1d(width, width, kernel, padding=pad, dilation=dilation))
        self.trim_second = TrimRight(pad)

    def forward(self, x):
        y = torch.relu(self.trim_first(self.first(x)))
        y = torch.relu(self.trim_second(self.second(y)))
        return torch.relu(x + y)

    def torchlint_example_inputs(self):
        return torch.randn(2, 4, 12)


class DilatedStack(nn.Module):
    def __init__(self, width=4, depth=3):
        super().__init__()
        self.blocks = nn.Sequential(*[DilatedBlock(width, 3, 2 ** level) for level in range(depth)])
        self.readout = weight_norm(nn.Linear(width, 1), name="weight", dim=0)

    def forward(self, x):
        return self.readout(self.blocks(x).mean(dim=-1))

    def torchlint_example_inputs(self):
        return torch.randn(2, 4, 20)


class DilatedBlockWithRawGain(nn.Module):
    """The planted bug: a gain kept as a plain tensor beside weight-normed convolutions."""

    def __init__(self, width=4):
        super().__init__()
        self.conv = weight_norm(nn.Conv1d(width, width, 3, padding=1))
        self.gain = torch.ones(1, width, 1, requires_grad=True)

    def forward(self, x):
        return torch.relu(self.conv(x)) * self.gain

    def torchlint_example_inputs(self):
        return torch.randn(2, 4, 10)


class PatchCritic(nn.Module):
    """A GAN discriminator's head: spectral-normed convolutions, a spectral-normed linear score."""

    def __init__(self, colors=3, width=8):
        super().__init__()
        self.down = nn.Sequential(
            spectral_norm(nn.Conv2d(colors, width, 4, stride=2, padding=1)),
            nn.LeakyReLU(0.2),
            spectral_norm(nn.Conv2d(width, width * 2, 4, stride=2, padding=1)),
            nn.LeakyReLU(0.2),
        )
        self.score = spectral_norm(nn.Linear(width * 2, 1))

    def forward(self, image):
        return self.score(self.down(image).mean(dim=(2, 3)))

    def torchlint_example_inputs(self):
        return torch.randn(2, 3, 16, 16)


class UpperMirror(nn.Module):
    """A parametrization: the matrix made symmetric from its upper triangle."""

    def forward(self, matrix):
        return matrix.triu() + matrix.triu(1).transpose(-1, -2)


class ConstrainedMixer(nn.Module):
    def __init__(self, dim=6):
        super().__init__()
        self.symmetric = nn.Linear(dim, dim)
        parametrize.register_parametrization(self.symmetric, "weight", UpperMirror())
        self.rotation = parametrizations.orthogonal(nn.Linear(dim, dim))
        self.normed = parametrizations.weight_norm(nn.Linear(dim, dim))
        self.bounded = parametrizations.spectral_norm(nn.Linear(dim, dim))

    def forward(self, x):
        return self.bounded(self.normed(self.rotation(self.symmetric(x))))

    def torchlint_example_inputs(self):
        return torch.randn(3, 6)


class SparseProjection(nn.Module):
    def __init__(self, dim=6):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        prune.l1_unstructured(self.proj, "weight", amount=0.5)

    def forward(self, x):
        return self.proj(x)

    def torchlint_example_inputs(self):
        return torch.randn(3, 6)


def rebuild_kernel(module, inputs):
    module.kernel = torch.tanh(module.raw_kernel) * module.kernel_scale


class TiedKernel(nn.Module):
    """A forward pre-hook of the user's recomputes the kernel from two registered parameters."""

    def __init__(self, dim=5):
        super().__init__()
        self.raw_kernel = nn.Parameter(torch.randn(dim, dim))
        self.kernel_scale = nn.Parameter(torch.ones(()))
        self.kernel = torch.tanh(self.raw_kernel) * self.kernel_scale
        self.register_forward_pre_hook(rebuild_kernel)

    def forward(self, x):
        return x @ self.kernel

    def torchlint_example_inputs(self):
        return torch.randn(2, 5)


class NormedByHand(nn.Module):
    """weight_norm written out: forward itself recomputes the weight from two registered parameters."""

    def __init__(self, dim=5):
        super().__init__()
        self.direction = nn.Parameter(torch.randn(dim, dim))
        self.magnitude = nn.Parameter(torch.ones(dim, 1))
        self.weight = torch.zeros(dim, dim)  # a placeholder until the first forward

    def forward(self, x):
        self.weight = self.magnitude * self.direction / self.direction.norm(dim=1, keepdim=True)
        return x @ self.weight.t()

    def torchlint_example_inputs(self):
        return torch.randn(2, 5)


class RunningMemory(nn.Module):
    """The planted bug: a memory forward updates from its old value (detached, so autograd sees only
    the projection's parameters), kept as a plain tensor: not in state_dict, not moved."""

    def __init__(self, dim=5):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.memory = torch.zeros(dim)

    def forward(self, x):
        features = self.proj(x)
        self.memory = self.memory.detach() * 0.9 + features.mean(dim=0)
        return features + self.memory

    def torchlint_example_inputs(self):
        return torch.randn(2, 5)


def count_calls(module, inputs):
    module.calls += 1


class CountedWithRawBias(nn.Module):
    """The planted bug: a pre-hook that rebuilds nothing, and a bias kept as a plain tensor."""

    def __init__(self, dim=5):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.bias = torch.zeros(dim, requires_grad=True)
        self.calls = 0
        self.register_forward_pre_hook(count_calls)

    def forward(self, x):
        return self.fc(x) + self.bias

    def torchlint_example_inputs(self):
        return torch.randn(2, 5)
'''

CLEAN = ["TrimRight", "DilatedBlock", "DilatedStack", "PatchCritic", "UpperMirror", "ConstrainedMixer",
         "SparseProjection", "TiedKernel", "NormedByHand"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return write_module(tmp_path_factory.mktemp("derived"), "models.py", MODELS)


@pytest.fixture(scope="module")
def report(models):
    result = verify_file(str(models), python=torch_python(), timeout=300)
    assert result.outcome == COMPLETED, (result.error, result.stderr_tail)
    return result


def test_weights_derived_on_every_forward_are_no_finding(report):
    # One test for them all: parametrize's properties were never reported; the others were.
    found = {name: [(i.code, i.attribute) for i in class_report(report, name).issues] for name in CLEAN}
    assert found == {name: [] for name in CLEAN}
    for name in CLEAN:
        cls = class_report(report, name)
        assert cls.status == "verified", (name, cls.skip_reason, cls.partial_reason)
        assert {c.status for c in cls.checks} == {"passed"}, (name, cls.checks)


@pytest.mark.parametrize("name, count, how", [
    ("DilatedBlock", 2, "weight_norm"), ("DilatedStack", 7, "weight_norm"), ("PatchCritic", 3, "spectral_norm"),
    ("SparseProjection", 1, "pruning")])
def test_the_registration_summary_says_what_recomputes_them(report, name, count, how):
    summary = check(class_report(report, name), "TL901").summary
    assert "%d tensor%s recomputed from registered parameters by %s on every forward" % (
        count, "s" if count > 1 else "", how) in summary


@pytest.mark.parametrize("name, attribute", [("TiedKernel", "kernel"), ("NormedByHand", "weight")])
def test_a_weight_forward_or_its_pre_hook_rebuilds_is_seen_doing_it(report, name, attribute):
    cls = class_report(report, name)
    summary = check(cls, "TL901").summary
    assert "1 tensor recomputed from registered parameters on every forward (%s)" % attribute in summary
    assert "2 of 2 trainable parameters received a gradient" in check(cls, "TL903").summary


def test_a_plain_tensor_beside_weight_normed_convolutions_is_still_every_bug_it_is(report, models):
    found = issues(report, verified="DilatedBlockWithRawGain")
    assert sorted(i.code for i in found) == ["TL901", "TL902", "TL903", "TL904"]
    assert {i.attribute for i in found} == {"gain"}  # conv.weight, recomputed by weight_norm, is not among them
    (tl901,) = issues(report, "TL901", "DilatedBlockWithRawGain")
    assert tl901.severity == "error" and tl901.line == line_of(models, "self.gain = torch.ones")


def test_a_pre_hook_that_rebuilds_nothing_leaves_the_bug_reported(report, models):
    found = issues(report, verified="CountedWithRawBias")
    assert sorted(i.code for i in found) == ["TL901", "TL902", "TL903", "TL904"]
    (tl901,) = issues(report, "TL901", "CountedWithRawBias")
    assert tl901.attribute == "bias" and tl901.severity == "error"
    assert "forward did not run" not in tl901.message  # it ran, and the bias was the same tensor after it


def test_a_tensor_forward_updates_from_its_old_value_is_still_unregistered(report, models):
    (tl901,) = issues(report, "TL901", "RunningMemory")
    assert tl901.attribute == "memory" and tl901.severity == "warning"
    assert tl901.line == line_of(models, "self.memory = torch.zeros")
    assert [i.attribute for i in issues(report, "TL902", "RunningMemory")] == ["memory"]


HOOK_WITHOUT_INPUTS = '''
import torch
import torch.nn as nn


def rebuild(module, inputs):
    module.kernel = module.raw.exp()


class Unfed(nn.Module):
    """A pre-hook that rebuilds the kernel, and no inputs to see it do so."""

    def __init__(self):
        super().__init__()
        self.raw = nn.Parameter(torch.zeros(3, 3))
        self.kernel = self.raw.exp()
        self.register_forward_pre_hook(rebuild)

    def forward(self, batch):
        return batch["x"] @ self.kernel
'''


def test_when_forward_cannot_run_a_hooked_tensor_is_said_as_unconfirmed_information(tmp_path):
    path = write_module(tmp_path, "unfed.py", HOOK_WITHOUT_INPUTS)
    report = verify_file(str(path), python=torch_python(), timeout=300)
    assert report.outcome == COMPLETED, (report.error, report.stderr_tail)
    cls = class_report(report, "Unfed")
    assert cls.status == "partly verified"
    (tl901,) = issues(report, "TL901", "Unfed")
    assert tl901.severity == "info" and tl901.attribute == "kernel"
    assert "forward pre-hook of Unfed" in tl901.message and "forward did not run" in tl901.message
    assert all(i.severity == "info" for i in cls.issues), [(i.code, i.severity) for i in cls.issues]
