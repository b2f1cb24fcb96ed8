"""A check frees what it built by reference counting alone (issue 23): a worker runs with the
cyclic collector off, and a collection walks everything jedi keeps (seconds each), so a cycle
holding a file's tree keeps that tree, and the memory grows until a costly collection."""
import gc
import textwrap

import pytest

from torchlint.inference.layer import JediInference
from torchlint.engine import check_source

MODEL = '''
import torch
import torch.nn as nn

from .configuration import Config


class GarbageProbeNet(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.proj = nn.Linear(config.hidden, config.hidden)
        self.scale = torch.ones(config.hidden)

    def forward(self, x):
        return self.helper(x) * self.scale

    def helper(self, x):
        return self.proj(x) + torch.zeros(x.shape)
'''

CONFIG = '''
class Config:
    hidden: int = 16
'''


@pytest.fixture
def collector_off():
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    yield
    gc.set_debug(0)
    gc.garbage.clear()
    if was_enabled:
        gc.enable()


def _left_in_cycles():
    """torchlint's objects only the cyclic collector would free (each may hold the file's tree,
    as the FileContext does)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    gc.collect()
    return sorted({type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("torchlint.")})


@pytest.mark.parametrize("with_inference", [False, True], ids=["names", "inference"])
def test_a_check_leaves_no_cycle_holding_the_files_tree(tmp_path, collector_off, with_inference):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "configuration.py").write_text(textwrap.dedent(CONFIG))
    model = package / "model.py"
    model.write_text(textwrap.dedent(MODEL))
    layer = JediInference(str(tmp_path), share_states=True) if with_inference else None
    result = check_source(model.read_text(), str(model), inference=layer)
    assert {f.code for f in result.findings} >= {"TL101", "TL204"}  # the rules that built tables ran
    assert _left_in_cycles() == []
