"""TL908, `torchlint verify --ddp` (issue 47): each class trains two steps under
DistributedDataParallel in a 2-process gloo group on the CPU. A parameter forward creates after
DDP wrapped the module, a plain tensor and a parameter in a plain list that require grad get
gradients DDP never averages (they differ between the processes), each reported on its line;
an unused layer gives the error TL106 predicts, naming its parameters; modules DDP handles (with
batch norm, dropout, frozen and lazy layers, parameters the module asks DDP to ignore) pass."""
from __future__ import annotations

import argparse
import functools
import subprocess

import pytest

from torchlint.verify import cli_command, verify_file
from torchlint.verify.report import COMPLETED

from verify_helpers import check, class_report, issues, line_of, torch_python, write_module


@functools.lru_cache(maxsize=None)
def distributed_available() -> bool:
    script = "import torch.distributed as d; print(d.is_available() and d.is_gloo_available())"
    result = subprocess.run([torch_python(), "-c", script], capture_output=True, text=True, timeout=300)
    return result.stdout.strip().endswith("True")


@pytest.fixture(autouse=True)
def _needs_gloo():
    if not distributed_available():  # the only reason to skip: this torch has no gloo to run DDP on
        pytest.skip("torch.distributed (gloo) is not available in this torch")


MODELS = '''
import torch
import torch.nn as nn


class Clean(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 8)
        self.bn = nn.BatchNorm1d(8)
        self.drop = nn.Dropout(0.5)
        self.b = nn.Linear(8, 3)
        self.frozen = nn.Linear(3, 3)
        self.frozen.requires_grad_(False)

    def forward(self, x):
        return self.frozen(self.b(self.drop(self.bn(self.a(x)))))


class Lazy(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.LazyLinear(3)

    def forward(self, x):
        return self.a(x)


class Ignored(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 3)
        self.local = nn.Linear(4, 3)
        self._ddp_params_and_buffers_to_ignore = ["local.weight", "local.bias"]

    def forward(self, x):
        return self.a(x) + self.local(x)


class WithUnused(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 3)
        self.aux_head = nn.Linear(4, 3)

    def forward(self, x):
        return self.a(x)


class BuiltInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 8)
        self.head = None

    def forward(self, x):
        h = self.a(x)
        if self.head is None:
            self.head = nn.Linear(h.shape[-1], 3)
        return self.head(h)


class PlainScale(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.gamma = torch.ones(4, requires_grad=True)

    def forward(self, x):
        return self.a(x) * self.gamma


class InList(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.scales = [nn.Parameter(torch.ones(4))]

    def forward(self, x):
        return self.a(x) * self.scales[0]
'''


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    path = write_module(tmp_path_factory.mktemp("ddp"), "models.py", MODELS)
    report = verify_file(str(path), python=torch_python(), timeout=300, device="cpu", input_shapes="3,4", ddp=True)
    assert report.outcome == COMPLETED, (report.error, report.stderr_tail)
    return path, report


def test_an_unused_layer_gives_the_error_tl106_predicts_with_its_parameters(ddp_run):
    path, report = ddp_run
    (found,) = issues(report, "TL908", "WithUnused")
    assert found.severity == "error" and found.line == line_of(path, "self.aux_head = nn.Linear"), found
    assert sorted(found.paths) == ["aux_head.bias", "aux_head.weight"], found
    assert "Expected to have finished reduction in the prior iteration" in found.message, found.message
    assert "find_unused_parameters=True" in found.message
    assert check(class_report(report, "WithUnused"), "TL908").status == "failed"


def test_a_parameter_forward_creates_after_wrapping_is_not_reduced(ddp_run):
    path, report = ddp_run
    (found,) = issues(report, "TL908", "BuiltInForward")
    assert found.severity == "error" and sorted(found.paths) == ["head.bias", "head.weight"], found
    assert "DDP never reduces their gradient" in found.message, found.message
    assert found.line == line_of(path, "self.head = nn.Linear(h.shape"), found  # where forward makes it


@pytest.mark.parametrize("name, needle, attribute", [
    ("PlainScale", "self.gamma = torch.ones", "gamma"),
    ("InList", "self.scales = [", "scales[0]"),
])
def test_a_trainable_tensor_outside_parameters_is_not_reduced(ddp_run, name, needle, attribute):
    path, report = ddp_run
    (found,) = issues(report, "TL908", name)
    assert found.severity == "error" and found.paths == [attribute], found
    assert "did not reduce" in found.message and found.line == line_of(path, needle), found


@pytest.mark.parametrize("name", ["Clean", "Lazy", "Ignored"])
def test_a_module_ddp_handles_passes(ddp_run, name):
    _, report = ddp_run
    assert issues(report, "TL908", name) == []
    entry = check(class_report(report, name), "TL908")
    assert entry.status == "passed" and "same on both processes" in entry.summary, entry


def test_without_the_flag_there_is_no_ddp_check(tmp_path):
    path = write_module(tmp_path, "models.py", MODELS)
    report = verify_file(str(path) , class_name="WithUnused", python=torch_python(), timeout=300, device="cpu",
                         input_shapes="3,4")
    assert report.outcome == COMPLETED, (report.error, report.stderr_tail)
    assert [c.code for c in class_report(report, "WithUnused").checks if c.code == "TL908"] == []
    assert issues(report, "TL908") == []


def test_the_cli_flag_shows_the_unreduced_gradient(tmp_path, capsys):
    path = write_module(tmp_path, "models.py", MODELS)
    parser = argparse.ArgumentParser(prog="torchlint verify")
    cli_command.add_arguments(parser)
    status = cli_command.run(parser.parse_args([str(path) + "::BuiltInForward", "--ddp", "--python", torch_python(),
                                                "--device", "cpu", "--input-shape", "3,4"]))
    out = capsys.readouterr().out
    assert status == cli_command.EXIT_FINDINGS
    assert "models.py:%d: TL908 head.bias, head.weight are not among the parameters" % line_of(
        path, "self.head = nn.Linear(h.shape") in out, out
    assert "TL908 DDP" in out


NO_DISTRIBUTED = '''
import torch
import torch.distributed
import torch.nn as nn

torch.distributed.is_available = lambda: False  # as in a torch built without it


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 3)

    def forward(self, x):
        return self.a(x)
'''


def test_without_torch_distributed_the_check_says_so(tmp_path):
    path = write_module(tmp_path, "net.py", NO_DISTRIBUTED)
    report = verify_file(str(path), python=torch_python(), timeout=300, device="cpu", input_shapes="3,4", ddp=True)
    assert report.outcome == COMPLETED, (report.error, report.stderr_tail)
    net = class_report(report, "Net")
    entry = check(net, "TL908")
    assert entry.status == "skipped" and "torch.distributed is not available" in entry.summary, entry
    assert net.status == "verified" and report.issues == []


HANGS_UNDER_DDP = '''
import time

import torch
import torch.distributed
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 3)

    def forward(self, x):
        if torch.distributed.is_initialized():
            time.sleep(3600)
        return self.a(x)
'''


def test_ranks_that_hang_are_killed_and_the_check_skipped_within_the_timeout(tmp_path):
    path = write_module(tmp_path, "net.py", HANGS_UNDER_DDP)
    report = verify_file(str(path), python=torch_python(), timeout=40, device="cpu", input_shapes="3,4", ddp=True)
    assert report.outcome == COMPLETED, (report.error, report.stderr_tail)  # not the run's own timeout
    entry = check(class_report(report, "Net"), "TL908")
    assert entry.status == "skipped" and "killed, still running" in entry.summary, entry
    assert issues(report, "TL908") == []
