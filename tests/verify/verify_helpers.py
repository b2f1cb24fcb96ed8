"""Helpers for the runtime-verification tests: they run real (CPU) torch in child processes.

Each child costs a torch import (1-2 s), so the tests batch many classes into one file
and one run wherever the outcome of one class cannot disturb the others.
"""
from __future__ import annotations

import functools
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"


def torch_python() -> str:
    """The interpreter with torch: the checkout's virtualenv, else the one running the tests."""
    return str(VENV_PYTHON) if VENV_PYTHON.exists() else sys.executable


def write_module(folder: Path, name: str, source: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    return path


def line_of(path: Path, needle: str) -> int:
    """The 1-based line of the first line containing ``needle``."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError("%r not in %s" % (needle, path))


def issues(report, code=None, verified=None):
    """The issues of the run, or of the run of one class (``verified``), optionally of one code."""
    found = class_report(report, verified).issues if verified else report.issues
    return [i for i in found if code is None or i.code == code]


def class_report(report, name):
    found = [c for c in report.classes if c.name == name]
    assert found, "no report for %s in %s" % (name, [c.name for c in report.classes])
    return found[0]


def check(cls, code):
    found = [c for c in cls.checks if c.code == code]
    assert len(found) == 1, cls.checks
    return found[0]


@functools.lru_cache(maxsize=None)
def cuda_available() -> bool:
    """Whether the tests' torch sees a CUDA device: tests that depend on the device say which."""
    result = subprocess.run([torch_python(), "-c", "import torch; print(torch.cuda.is_available())"],
                            capture_output=True, text=True, timeout=300)
    return result.stdout.strip().endswith("True")


# The start of a child script that drives the probe's functions directly (argv: the probe's path,
# the user's file, then the script's own): the probe and its siblings loaded as verify loads
# them, the user's file imported, the attributes every nn.Module has.
PROBE_CHILD = r'''
import importlib.util, json, sys

probe_path, models_path = sys.argv[1:3]
spec = importlib.util.spec_from_file_location("torchlint_probe", probe_path)
probe = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = probe
spec.loader.exec_module(probe)
import torch

checks = probe._load_sibling("probe_checks")
user_module = probe.load_by_path(models_path)
baseline = set(vars(torch.nn.Module()))
'''
