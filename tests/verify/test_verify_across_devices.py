"""TL907 across devices (issue 47): under ``--device cuda`` the trained module's state_dict(),
written by torch.save on the GPU and read back with ``map_location="cpu"``, is loaded into a new
instance built on the CPU, which must run and compute what the trained module computes on the
GPU. A device written into forward (``torch.ones(n, device="cuda")``) runs on the GPU and fails
on the CPU: a warning on its line.

On a machine without a GPU, ``probe_checks.check_across_devices`` is driven from the CPU to the
meta device (which every CPU build of torch has): a device written into forward (``"cpu"``) then
fails on the target the same way, and meta's outputs are compared by their shapes. The whole run
under ``verify --device cuda`` is covered by the tests at the end, on CUDA machines only.
"""
from __future__ import annotations

import json
import subprocess

import pytest

from torchlint.verify import verify_file
from torchlint.verify.runner import PROBE

from verify_helpers import PROBE_CHILD, check, class_report, cuda_available, issues, line_of, torch_python, write_module

MODELS = '''
import torch
import torch.nn as nn


class Portable(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.register_buffer("shift", torch.rand(4))

    def forward(self, x):
        return self.proj(x) + self.shift + torch.ones(4, device=x.device)


class WrittenDevice(nn.Module):
    DEVICE = "cpu"  # the device its author trained on, written in

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x) + torch.ones(4, device=self.DEVICE)


class NeedsTheSourceDevice(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        if x.device.type != "cpu":
            raise NotImplementedError("this kernel has only a CPU version")
        return self.proj(x)
'''

# Trains nothing: the check reads the module as it is; device and target come from argv.
CHILD = PROBE_CHILD + r'''
source, target = sys.argv[3:5]
out = {}
for name in ("Portable", "WrittenDevice", "NeedsTheSourceDevice"):
    cls = getattr(user_module, name)

    def run(doing, function, *args, **kwargs):
        return probe.run_user(name + ".forward" if doing == "forward" else doing, name, models_path, function,
                              *args, **kwargs)

    def state_of(model):
        return checks.State(model, baseline, cls, models_path)

    torch.manual_seed(0)
    trained = cls().to(source)
    x = torch.randn(2, 4)
    found, summary, skipped = checks.check_across_devices(
        trained, cls(), ((x.to(source),), {}), ((x.to(target),), {}), run, torch.device(source),
        torch.device(target), state_of)
    out[name] = {"issues": found, "summary": summary, "skipped": skipped}
print(json.dumps(out))
'''


def across(tmp_path, source, target):
    models = write_module(tmp_path, "models.py", MODELS)
    done = subprocess.run([torch_python(), "-c", CHILD, str(PROBE), str(models), source, target],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), models


def test_a_device_written_into_forward_is_reported_on_its_line(tmp_path):
    facts, models = across(tmp_path, "cpu", "meta")
    written = facts["WrittenDevice"]
    assert not written["skipped"] and written["summary"] == "saved on cpu, read back on meta: forward failed"
    (issue,) = written["issues"]
    assert issue["code"] == "TL907" and issue["severity"] == "warning", issue
    assert issue["line"] == line_of(models, "torch.ones(4, device=self.DEVICE)")
    assert "saved on cpu, read back on meta, the trained module's checkpoint does not run" in issue["message"]
    assert "a device is written into the module" in issue["message"]


def test_a_module_that_follows_its_inputs_device_passes(tmp_path):
    facts, _ = across(tmp_path, "cpu", "meta")
    portable = facts["Portable"]
    assert portable == {"issues": [], "summary": "saved on cpu, read back on meta: the same outputs",
                        "skipped": False}


def test_an_operation_the_other_device_lacks_is_information(tmp_path):
    facts, models = across(tmp_path, "cpu", "meta")
    (issue,) = facts["NeedsTheSourceDevice"]["issues"]
    assert issue["severity"] == "info", issue
    assert "a device is written into the module" not in issue["message"]
    assert issue["line"] == line_of(models, 'raise NotImplementedError("this kernel')


def test_on_one_device_the_outputs_are_compared_by_value(tmp_path):
    facts, _ = across(tmp_path, "cpu", "cpu")
    assert facts["Portable"]["summary"] == "saved on cpu, read back on cpu: the same outputs"
    assert facts["Portable"]["issues"] == [] and facts["WrittenDevice"]["issues"] == []


# -- the whole run, on a GPU -----------------------------------------------------------------------

CUDA_MODELS = '''
import torch
import torch.nn as nn


class Portable(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x) * torch.ones(4, device=x.device)


class CudaWritten(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x) * torch.ones(4, device="cuda")
'''


def test_under_cuda_a_written_device_fails_the_round_trip_to_the_cpu(tmp_path):
    if not cuda_available():
        pytest.skip("the round trip across devices needs a CUDA device")
    models = write_module(tmp_path, "models.py", CUDA_MODELS)
    report = verify_file(str(models), device="cuda", timeout=300, input_shapes=[(2, 4)])
    found = [i for i in issues(report, "TL907") if i.severity == "warning"]
    assert [i.line for i in found] == [line_of(models, 'torch.ones(4, device="cuda")')], issues(report, "TL907")
    assert "read back on cpu" in found[0].message
    portable = check(class_report(report, "Portable"), "TL907")
    assert portable.status == "passed" and "read back on cpu: the same outputs" in portable.summary, portable
