"""A class whose base is a generic Module class given its parameters (`Learner[Policy]`, as
reinforcement-learning libraries write their algorithms) is a Module: checked like any other,
whether the generic class is in the same file or in another file of the project."""
from __future__ import annotations

import json
import textwrap

from testkit.support import check_in_a_process
from torchlint.engine import check_source

BASE = textwrap.dedent("""\
    from typing import Generic, TypeVar

    import torch.nn as nn

    P = TypeVar("P")


    class Learner(nn.Module, Generic[P]):
        def learn(self, batch):
            raise NotImplementedError
""")

SUBCLASS = """\


class Tuner(Learner[int]):
    def __init__(self):
        super().__init__()
        self.log_scale = torch.zeros(1, requires_grad=True)

    def learn(self, batch):
        return batch * self.log_scale.exp()
"""


def test_a_subscripted_base_of_the_same_file_is_a_module():
    text = "import torch\n" + BASE + SUBCLASS
    line = text.splitlines().index("        self.log_scale = torch.zeros(1, requires_grad=True)") + 1
    found = [(f.code, f.range.start.line) for f in check_source(text, "tuner.py").findings]
    assert ("TL101", line) in found


def test_a_subscripted_base_from_another_file_is_a_module(tmp_path):
    package = tmp_path / "learners"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text(BASE)
    tuner = "import torch\n\nfrom learners.base import Learner\n" + SUBCLASS
    (package / "tuner.py").write_text(tuner)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "learners"\nversion = "0"\n')
    done = check_in_a_process(["--format", "json", "--exit-zero", "learners"], tmp_path,
                              TORCHLINT_CACHE_DIR=str(tmp_path / "cache"))
    assert done.returncode == 0, done.stderr
    found = [(f["code"], f["location"]["row"]) for f in json.loads(done.stdout) if f["filename"].endswith("tuner.py")]
    assert ("TL101", tuner.splitlines().index("        self.log_scale = torch.zeros(1, requires_grad=True)") + 1) in found
    assert "not checked" not in done.stderr
