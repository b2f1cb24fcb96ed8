"""torch's API without torch: where the analysed environment has no torch (a pre-commit
environment, pipx, a CI lint job), the jedi layer reads the stubs shipped with torchlint
(server/torchlint/stubs/torch-stubs, made from the pinned torch by tools/make_torch_stubs.py),
and the findings are the same as with torch installed.
"""
from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest

from torchlint.inference import layer as inference

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import make_torch_stubs  # noqa: E402

TIMEOUT = 600  # seconds: a run over the fixtures on a slow, busy machine
CHECKED = ["tests/fixtures/rules", "tests/fixtures/jedi_project", "tests/fixtures/real_bugs",
           "tests/fixtures/notebooks", "examples"]


@pytest.fixture(scope="module")
def no_torch_python(tmp_path_factory) -> Path:
    """The interpreter of a virtual environment without torch (read by the layer, never run)."""
    folder = tmp_path_factory.mktemp("env") / "venv"
    venv.create(folder, with_pip=False)
    python = folder / "bin" / "python"
    assert python.exists()
    return python


def check(paths, *flags) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchlint", "check", "--no-cache", "--show-all", "--show-hints",
                           "--exit-zero", *flags, *paths], cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT)


def test_the_shipped_stubs_are_made_from_the_pinned_torch(capsys):
    # Fails when torch's pin or the generator changed without `tools/make_torch_stubs.py` run again.
    assert make_torch_stubs.main(["--check"]) == 0, capsys.readouterr().out
    assert (Path(inference.TORCH_STUBS) / "VERSION").read_text().strip() == make_torch_stubs.PINNED_TORCH


def test_findings_are_the_same_with_or_without_torch_installed(no_torch_python):
    with_torch = check(CHECKED)
    without = check(CHECKED, "-v", "--python", str(no_torch_python))
    assert with_torch.returncode == without.returncode == 0, without.stderr
    assert "TL101" in with_torch.stdout and "TL203" in with_torch.stdout  # jedi-only findings among them
    assert without.stdout == with_torch.stdout
    assert "torch's API from torchlint's stubs of torch %s" % make_torch_stubs.PINNED_TORCH in without.stderr


def test_without_the_stubs_the_layer_sees_less(no_torch_python, monkeypatch, tmp_path, layers):
    # What the stubs are for: with neither torch nor the stubs, a helper's tensor goes unseen.
    project = ROOT / "tests" / "fixtures" / "jedi_project"
    text = (project / "models.py").read_text()
    from torchlint.engine import check_source

    def jedi_findings(layer):
        return {(f.range.start.line, f.code) for f in check_source(text, str(project / "models.py"),
                                                                     inference=layer).findings}

    with_stubs = layers(project, interpreter=str(no_torch_python))
    assert with_stubs.torch_available and "stubs" in with_stubs.torch_source
    monkeypatch.setattr(inference, "TORCH_STUBS", str(tmp_path / "absent"))
    bare = layers(project, interpreter=str(no_torch_python))
    assert not bare.torch_available and "tensor inference is off" in bare.describe()
    assert jedi_findings(bare) < jedi_findings(with_stubs)


# A helper whose tensor comes back through an overload typed with torch.types' private aliases
# (`Tensor.type(dtype: str | _dtype) -> Tensor`, `type(dtype: None = None) -> str`).
CAST_IN_A_HELPER = '''\
import torch
from torch import nn


def sincos(n, dim, dtype=torch.float32):
    omega = torch.arange(dim) / dim
    angles = torch.arange(n)[:, None] * omega[None, :]
    return torch.cat((angles.sin(), angles.cos()), dim=1).type(dtype)


class Encoder(nn.Module):
    def __init__(self, n, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.positions = sincos(n, dim)

    def forward(self, x):
        return self.proj(x) + self.positions.to(x.device)
'''


def test_private_names_torch_imports_from_its_py_modules_resolve_in_the_stubs(no_torch_python, tmp_path, layers):
    # jedi imports no name with a leading underscore from a .pyi; torch's own stubs import them from
    # its .py modules (`from torch.types import _dtype`), so the generator rewrites those imports.
    # Without that, `.type(dtype)` matched neither overload: "str or Tensor", and TL101 went quiet.
    from torch.types import _dtype  # noqa: F401  (still private in torch, still imported by its stubs)
    from torchlint.engine import CheckOptions, check_source

    path = tmp_path / "encoder.py"
    path.write_text(CAST_IN_A_HELPER)

    def findings(layer):
        result = check_source(CAST_IN_A_HELPER, str(path), CheckOptions(show_all=True), inference=layer)
        return [(f.range.start.line, f.code, f.severity) for f in result.findings]

    with_torch = layers(tmp_path)
    without = layers(tmp_path, interpreter=str(no_torch_python))
    assert not with_torch.reads_stubs and without.reads_stubs
    assert [code for _, code, _ in findings(with_torch)] == ["TL101"]
    assert findings(without) == findings(with_torch)
    stub = (Path(inference.TORCH_STUBS) / "_C" / "_nn.pyi").read_text()
    assert "from torch import dtype as _dtype" in stub and "from torch.types import _" not in stub


def test_the_shipped_stubs_are_never_the_projects_files(no_torch_python, layers):
    layer = layers(ROOT, interpreter=str(no_torch_python))  # the root holds server/torchlint/stubs
    assert layer.reads_stubs
    assert not layer.is_project_file(str(Path(inference.TORCH_STUBS) / "_tensor.pyi"))
