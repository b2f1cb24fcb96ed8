"""A CPU run may allocate only its share of the machine's memory (``verify.memoryShare``, default
half): an input guessed so large that forward would take most of the machine fails that guess as
out of memory, and the other classes of the file are verified by the same child. The allocation
here is ``torch.empty`` of three quarters of the machine, never touched: without the bound it
succeeds without using the memory, so these tests cost nothing on a machine the bound is off.
"""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from torchlint.verify import VerifyError, verify_file
from torchlint.verify.probe_support import machine_memory
from torchlint.verify.report import COMPLETED

from verify_helpers import class_report, torch_python, write_module

MODELS = '''
import torch
import torch.nn as nn

SCRATCH = %d  # bytes: three quarters of this machine's memory


class Hungry(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        scratch = torch.empty(SCRATCH, dtype=torch.uint8)
        return self.fc(x) + scratch[:1].float() * 0


class Modest(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    total = machine_memory()
    if total is None or sys.platform != "linux":
        pytest.skip("the machine's memory cannot be read here (the bound is Linux's RLIMIT_DATA)")
    return write_module(tmp_path_factory.mktemp("memory"), "hungry.py", MODELS % (total * 3 // 4))


def test_a_forward_that_would_take_most_of_the_machine_fails_as_out_of_memory(models):
    report = verify_file(str(models), python=torch_python(), device="cpu", timeout=300)
    assert report.outcome == COMPLETED, (report.error, report.stderr_tail)
    hungry = class_report(report, "Hungry")
    assert hungry.status == "partly verified" and hungry.issues == [], hungry
    assert re.search(r"Hungry.forward \(line \d+\) rejected .*RuntimeError: out of memory: tried to allocate [\d.]+ GiB "
                     r"more, past what this run may take \(--memory-share", hungry.partial_reason), hungry.partial_reason
    modest = class_report(report, "Modest")
    assert modest.status == "verified" and modest.issues == [], modest
    assert "allocations bounded to" in report.device_note and "(0.5 of this machine's memory)" in report.device_note


def test_a_share_of_one_leaves_the_run_unbounded(models):
    report = verify_file(str(models), class_name="Hungry", python=torch_python(), device="cpu", timeout=300,
                         memory_share=1.0)
    assert report.outcome == COMPLETED, (report.error, report.stderr_tail)
    assert class_report(report, "Hungry").status == "verified", class_report(report, "Hungry")
    assert "bounded" not in report.device_note


@pytest.mark.parametrize("share", [0, 1.5, float("nan"), True])
def test_a_share_outside_zero_to_one_is_a_usage_error(models, share):
    with pytest.raises(VerifyError, match="the memory share: expected a share more than 0 and at most 1"):
        verify_file(str(models), python=torch_python(), device="cpu", memory_share=share)


def test_the_flag_is_checked_as_the_setting_is(models):
    result = subprocess.run([sys.executable, "-m", "torchlint", "verify", str(models), "--memory-share", "0"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "expected a share more than 0 and at most 1" in result.stderr, result
