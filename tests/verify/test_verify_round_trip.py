"""TL907, the checkpoint round trip (issue 47): the trained module's own state_dict(), loaded
into a new instance built under another seed, must compute the same outputs in eval mode. A
random plain tensor, a statistic forward keeps in a plain attribute, a number training changes
and a buffer registered as None then filled are each caught, on their line; the same modules
with their state registered, and a module whose forward samples noise in eval mode, are not."""
from __future__ import annotations

import pytest

from torchlint.verify import verify_file
from torchlint.verify.report import COMPLETED

from verify_helpers import check, class_report, issues, line_of, torch_python, write_module

MODELS = '''
import torch
import torch.nn as nn


class RandomScale(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.scale = torch.rand(4)

    def forward(self, x):
        return self.proj(x) * self.scale


class RegisteredScale(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.register_buffer("scale", torch.rand(4))

    def forward(self, x):
        return self.proj(x) * self.scale


class RunningMean(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.mean = torch.zeros(4)

    def forward(self, x):
        if self.training:
            self.mean = 0.9 * self.mean + 0.1 * x.detach().mean(0)
        return self.proj(x - self.mean)


class Counted(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.steps = 0

    def forward(self, x):
        if self.training:
            self.steps += 1
        return self.proj(x) * (1.0 + self.steps)


class FilledLater(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.register_buffer("center", None)

    def forward(self, x):
        if self.center is None:
            self.center = x.detach().mean(0)
        return self.proj(x - self.center)


class NoisyInEval(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x) + torch.randn_like(x)
'''


@pytest.fixture(scope="module")
def round_trip(tmp_path_factory):
    path = write_module(tmp_path_factory.mktemp("round-trip"), "models.py", MODELS)
    report = verify_file(str(path), python=torch_python(), timeout=300, device="cpu", input_shapes="3,4")
    assert report.outcome == COMPLETED, (report.error, report.stderr_tail)
    return path, report


@pytest.mark.parametrize("name, needle, words", [
    ("RandomScale", "self.scale = torch.rand(4)", "scale is not in state_dict()"),
    ("RunningMean", "self.mean = torch.zeros(4)", "mean is not in state_dict()"),
    ("Counted", "self.steps = 0", "a Python number (2 after training, 0 new)"),
    ("FilledLater", "self.center = x.detach().mean(0)", "Unexpected key(s)"),  # (where it is filled)
])
def test_what_a_checkpoint_loses_is_reported_on_its_line(round_trip, name, needle, words):
    path, report = round_trip
    (found,) = issues(report, "TL907", name)
    assert found.severity == "error" and words in found.message, found.message
    assert found.line == line_of(path, needle), found


@pytest.mark.parametrize("name", ["RegisteredScale", "NoisyInEval"])
def test_a_module_whose_checkpoint_holds_it_passes(round_trip, name):
    _, report = round_trip
    assert issues(report, "TL907", name) == []
    entry = check(class_report(report, name), "TL907")
    assert entry.status == "passed", entry


CALL_COUNTED = '''
import torch.nn as nn

CALLS = []


class CallCounted(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        CALLS.append(1)
        return self.proj(x) + len(CALLS)
'''


def test_a_forward_that_differs_from_call_to_call_is_skipped_not_passed(tmp_path):
    path = write_module(tmp_path, "counted.py", CALL_COUNTED)
    report = verify_file(str(path), python=torch_python(), timeout=300, device="cpu", input_shapes="3,4")
    entry = check(class_report(report, "CallCounted"), "TL907")
    assert entry.status == "skipped" and "other outputs for the same inputs" in entry.summary, entry
    assert issues(report, "TL907") == []
