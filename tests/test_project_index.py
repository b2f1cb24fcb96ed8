"""The project index: classes whose bases are in other files of the project, and layers that
other files' code calls. TL106 reads the bases' methods from their files (unused across the
project; used from another file is not unused), TL101 grades "no forward at all" with them, and
names alone (no inference layer) keep to the file."""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Dict, List

import pytest

from torchlint.analysis.findings import Finding, Severity
from torchlint.engine import check_source
from torchlint.inference.layer import JediInference
from torchlint.inference.project_index import ProjectIndex


def write_package(root: Path, files: Dict[str, str]) -> None:
    package = root / "zoo"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in files.items():
        (package / name).write_text(textwrap.dedent(text))


def check(root: Path, name: str, code: str, infer: bool = True) -> List[Finding]:
    path = root / "zoo" / name
    result = check_source(path.read_text(), str(path), inference=JediInference(str(root)) if infer else None)
    assert result.parse_error is None and not result.internal_errors, result
    return [f for f in result.findings if f.code == code]


BASE = """\
import torch.nn as nn


class Trunk(nn.Module):
    def embed(self, x):
        return self.body(x)
"""

NET = """\
import torch.nn as nn

from .trunk import Trunk


class Net(Trunk):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.spare = nn.Linear(4, 4)

    def forward(self, x):
        return self.embed(x)
"""


def test_a_layer_forward_never_uses_is_reported_when_the_base_of_another_file_is_read(tmp_path):
    # forward calls `self.embed`, defined in trunk.py: the reach was dynamic (a method outside the
    # file) and TL106 said nothing. trunk.py's embed uses only `self.body`.
    write_package(tmp_path, {"trunk.py": BASE, "net.py": NET})
    (finding,) = check(tmp_path, "net.py", "TL106")
    assert finding.severity is Severity.INFO and finding.range.start.line == 10
    assert "`self.spare` (nn.Linear)" in finding.message


def test_through_a_star_import_and_a_base_of_a_base(tmp_path):
    write_package(tmp_path, {
        "core.py": BASE,
        "trunk.py": "from .core import Trunk\n\n\nclass Wide(Trunk):\n"
                    "    def widen(self, x):\n        return self.embed(x)\n",
        "layers.py": "from .trunk import *\n",
        "net.py": NET.replace("from .trunk import Trunk", "from .layers import Wide").replace("(Trunk)", "(Wide)")
        .replace("self.embed(x)", "self.widen(x)"),
    })
    assert [f.range.start.line for f in check(tmp_path, "net.py", "TL106")] == [10]


@pytest.mark.parametrize("base", [
    BASE.replace("return self.body(x)", "return self.body(x) + self.spare(x)"),  # the base uses it
    BASE + "\n    def auxiliary(self, x):\n        return self.spare(x)\n",  # another method of the base does
    BASE.replace("return self.body(x)", "return self.body(checkpoint(self._spare, x))")  # handed on
    + "\n    def _spare(self, x):\n        return self.spare(x)\n",
    BASE.replace("return self.body(x)", "return getattr(self, self.which)(x)"),
    BASE.replace("return self.body(x)", "return sum(m(x) for m in self.children())"),
    BASE + "\n    def __call__(self, x):\n        return self.body(x)\n",
    BASE + "\n    def hook(self):\n        self.register_forward_hook(print)\n",
    BASE.replace("(nn.Module)", "(nn.Sequential)"),  # a base the project does not define
    BASE.replace("import torch.nn as nn", "import torch.nn as nn\nfrom .missing import Mixin")
    .replace("(nn.Module)", "(nn.Module, Mixin)"),  # a base that cannot be read
])
def test_quiet_when_the_bases_methods_use_it_or_cannot_be_read(tmp_path, base):
    write_package(tmp_path, {"trunk.py": base, "net.py": NET})
    assert check(tmp_path, "net.py", "TL106") == []


def test_names_alone_keep_to_the_file(tmp_path):
    write_package(tmp_path, {"trunk.py": BASE, "net.py": NET})
    assert check(tmp_path, "net.py", "TL106", infer=False) == []  # Net is not known as a Module


DECODER = """\
import torch.nn as nn


class Decoder(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.conv_s0 = nn.Conv2d(dim, dim, 3)
        self.conv_s1 = nn.Conv2d(dim, dim, 3)

    def forward(self, x):
        return self.conv_s1(x)
"""

MODEL = """\
import torch.nn as nn

from .decoder import Decoder


class Segmenter(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.decoder = Decoder(dim)

    def forward(self, x):
        return self.decoder(self.decoder.conv_s0(x))
"""


def test_a_layer_another_file_calls_is_not_unused(tmp_path):
    write_package(tmp_path, {"decoder.py": DECODER, "model.py": MODEL})
    assert check(tmp_path, "decoder.py", "TL106") == []
    # Names alone read no other file: what they said before.
    assert [f.range.start.line for f in check(tmp_path, "decoder.py", "TL106", infer=False)] == [7]


def test_a_layer_no_file_calls_is_still_unused(tmp_path):
    write_package(tmp_path, {"decoder.py": DECODER,
                             "model.py": MODEL.replace("self.decoder(self.decoder.conv_s0(x))", "self.decoder(x)")})
    assert [f.range.start.line for f in check(tmp_path, "decoder.py", "TL106")] == [7]


BACKBONE = """\
import torch.nn as nn


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.stem(x)
"""


def test_a_class_another_file_subclasses_is_not_graded_alone(tmp_path):
    # The subclass's forward uses `self.head`: as for a subclass in the same file, quiet.
    write_package(tmp_path, {"backbone.py": BACKBONE, "classifier.py": """\
        from .backbone import Backbone


        class Classifier(Backbone):
            def forward(self, x):
                return self.head(super().forward(x))
        """})
    assert check(tmp_path, "backbone.py", "TL106") == []


SCHEDULE = """\
import torch.nn as nn


class Schedule(nn.Module):
    def describe(self):
        return type(self).__name__
"""

LINEAR = """\
import torch

from .schedule import Schedule


class LinearSchedule(Schedule):
    def __init__(self, steps):
        super().__init__()
        self.betas = torch.linspace(1e-4, 0.02, steps)
"""


def test_tl101_grades_a_class_whose_base_in_another_file_has_no_forward_as_in_one_file(tmp_path):
    write_package(tmp_path, {"schedule.py": SCHEDULE, "linear.py": LINEAR, "both.py": SCHEDULE + "\n\n" + LINEAR
                             .replace("from .schedule import Schedule\n", "")})
    (across,) = check(tmp_path, "linear.py", "TL101")
    (within,) = check(tmp_path, "both.py", "TL101")
    assert across.severity is within.severity is Severity.HINT


def test_tl101_stays_a_warning_when_the_base_of_another_file_has_a_forward(tmp_path):
    write_package(tmp_path, {"schedule.py": SCHEDULE + "\n    def forward(self, t):\n        return t\n",
                             "linear.py": LINEAR})
    (finding,) = check(tmp_path, "linear.py", "TL101")
    assert finding.severity is Severity.WARNING


def test_the_index_reads_a_saved_file_again_and_leaves_out_the_asking_file(tmp_path):
    (tmp_path / "a.py").write_text("from b import B\n\n\ndef run(model: B):\n    return model.head(1)\n")
    (tmp_path / "b.py").write_text("class B:\n    def f(self):\n        return self.tail(self.head)\n")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "c.py").write_text("from b import B\nB().tail()\n")
    a, b = str(tmp_path / "a.py"), str(tmp_path / "b.py")
    index = ProjectIndex(str(tmp_path))
    assert index.used_elsewhere(b, "head", "B")
    assert not index.used_elsewhere(a, "head", "A")  # its own use
    assert not index.used_elsewhere(b, "tail", "B")  # `self.tail`, and a folder left out
    assert not index.used_elsewhere(str(tmp_path / "e.py"), "head", "Other")  # a.py names neither Other nor e
    (tmp_path / "a.py").write_text("from b import B\n\n\ndef run(model: B):\n    return model.tail(1)\n")
    assert not index.used_elsewhere(b, "tail", "B")  # not told yet
    index.changed(a)
    assert index.used_elsewhere(b, "tail", "B")
    assert not index.used_elsewhere(b, "head", "B")
    assert not index.subclassed_elsewhere(b, "B")
    (tmp_path / "d.py").write_text("from b import B\n\n\nclass D(\n    B,\n):\n    pass\n")
    index.changed(str(tmp_path / "d.py"))
    assert index.subclassed_elsewhere(b, "B")
    assert not index.subclassed_elsewhere(a, "B")  # d.py's B is b's (a.py's own would be another class)


def test_what_imports_bind_plain_values_and_files_not_naming_the_class_are_no_uses(tmp_path):
    (tmp_path / "a.py").write_text(textwrap.dedent("""\
        import torch
        import torch.nn.functional as F
        from torch import nn

        from b import Block


        def regularise(x, config, model: Block):
            x = F.dropout(x, config.dropout) + nn.functional.dropout(x) + torch.norm(x)
            return model.head.weight, model.blocks[0]
        """))
    index = ProjectIndex(str(tmp_path))
    other = str(tmp_path / "b.py")
    names = ("dropout", "norm", "functional", "head", "blocks")
    assert [index.used_elsewhere(other, name, "Block") for name in names] == [False, False, False, True, True]
    (tmp_path / "c.py").write_text("class Holder:\n    def run(self, x):\n        return self.inner.proj(x)\n")
    index.changed(str(tmp_path / "c.py"))
    assert not index.used_elsewhere(other, "proj", "Block")  # c.py names neither Block nor b: it holds none
    (tmp_path / "c.py").write_text("from b import Block\n" + (tmp_path / "c.py").read_text())
    index.changed(str(tmp_path / "c.py"))
    assert index.used_elsewhere(other, "proj", "Block")  # through `self.inner`, whatever it holds


def test_a_class_of_the_same_name_in_another_module_subclassed_there_is_not_this_one(tmp_path):
    # other.py subclasses its own module's Backbone (`from .model import Backbone`), not backbone.py's.
    write_package(tmp_path, {"backbone.py": BACKBONE, "model.py": BACKBONE, "other.py": """\
        from .model import Backbone


        class Classifier(Backbone):
            def forward(self, x):
                return self.head(super().forward(x))
        """})
    assert [f.message.split("`")[1] for f in check(tmp_path, "backbone.py", "TL106")] == ["self.head"]


POSITIONS = """\
import torch
import torch.nn as nn


class Positions(nn.Module):
    def __init__(self, n, dim):
        super().__init__()
        self.table = nn.Embedding(n, dim)

    def forward(self, x):
        return self.table(x)


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.factor = 2.0

    def forward(self, x):
        return x * self.factor


class Gain(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * self.gain
"""

PROMPT_DECODER = """\
import torch.nn as nn

from .positions import Gain, Positions, Scale


class Decoder(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.head = nn.Linear(dim, dim)
        self.prompt_positions = Positions(24, dim)
        self.prompt_gain = Gain(dim)
        self.scale = Scale()

    def forward(self, x):
        return self.head(x)
"""


def test_an_unused_layer_of_a_class_from_another_file_is_reported_when_that_class_holds_parameters(tmp_path):
    write_package(tmp_path, {"positions.py": POSITIONS, "decoder.py": PROMPT_DECODER})
    found = check(tmp_path, "decoder.py", "TL106")
    assert [f.message.split("`")[1] for f in found] == ["self.prompt_positions", "self.prompt_gain"]
    assert "(Positions)" in found[0].message
    # The parameter-free one, and names alone (they cannot read positions.py), say nothing.
    assert check(tmp_path, "decoder.py", "TL106", infer=False) == []


def test_a_layer_given_a_size_another_attribute_keeps_is_not_a_registration_of_it(tmp_path):
    # `self.dim = dim` beside `nn.Embedding(n, dim)`: the embedding is unused all the same.
    write_package(tmp_path, {"decoder.py": PROMPT_DECODER.replace("from .positions import Gain, Positions, Scale\n", "")
                             .replace("        self.prompt_positions = Positions(24, dim)\n",
                                      "        self.prompt_positions = nn.Embedding(24, dim)\n")})
    found = check(tmp_path, "decoder.py", "TL106", infer=False)
    assert [f.message.split("`")[1] for f in found] == ["self.prompt_positions"]
