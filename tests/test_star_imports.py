"""Names alone read a star import of a torch module as its explicit imports: `from torch.nn
import *` binds `Module`, `Linear`, `Sequential`, and `from torch import *` binds `randn`, from
the stubs torchlint ships. Another module's star import, or the file's own definition, wins
after it."""
from __future__ import annotations

import pytest

from testkit.rules import findings, quiet
from torchlint.analysis.imports import star_exports

NN_STAR = """\
from torch.nn import *
import torch


class Net(Module):
    def __init__(self):
        super().__init__()
        self.layer_list = [Linear(4, 4) for _ in range(3)]
        self.net = Sequential(*self.layer_list)
        self.w = torch.randn(4)

    def forward(self, x):
        return self.net(x) * self.w
"""


def test_a_class_on_a_star_imported_module_base_is_checked():
    assert [f.message.split("`")[1] for f in findings(NN_STAR, "TL101")] == ["self.w"]


def test_layers_registered_through_a_star_imported_sequential_are_not_a_plain_list():
    quiet(NN_STAR, "TL102")


def test_a_star_imported_factory_makes_a_tensor():
    source = """\
    from torch import *
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = randn(4)

        def forward(self, x):
            return x * self.w
    """
    assert len(findings(source, "TL101")) == 1


def test_a_later_star_import_of_another_module_may_rebind_every_name():
    source = NN_STAR.replace("import torch\n", "import torch\nfrom mylayers import *\n")
    assert findings(source, "TL101") == []


def test_the_files_own_class_wins_over_the_star_imported_one():
    source = """\
    from torch.nn import *


    class Module:
        pass


    class Net(Module):
        def __init__(self):
            import torch
            self.w = torch.randn(4)

        def forward(self, x):
            return x * self.w
    """
    quiet(source, "TL101")


def test_a_relative_import_after_the_star_rebinds_the_name():
    source = """\
    from torch.nn import *
    from .layers import Module
    import torch


    class Net(Module):
        def __init__(self):
            self.w = torch.randn(4)

        def forward(self, x):
            return x * self.w
    """
    quiet(source, "TL101")


@pytest.mark.parametrize("module", ["torch.nn", "torch.optim", "torch.nn.init", "torch.nn.functional"])
def test_the_stubs_exports_are_the_names_torch_binds(module):
    """What the stubs say a star import binds is what it binds under the pinned torch (names that
    torch adds at import time from its compiled modules aside)."""
    pytest.importorskip("torch")
    namespace: dict = {}
    exec(f"from {module} import *", namespace)
    real = set(namespace) - {"__builtins__"}
    read = star_exports(module)
    assert read <= real
    assert len(read) >= 0.8 * len(real)


def test_torch_star_exports_the_factories():
    pytest.importorskip("torch")
    namespace: dict = {}
    exec("from torch import *", namespace)
    for name in ("randn", "zeros", "ones", "arange", "cat", "stack", "tensor", "Tensor", "no_grad"):
        assert name in star_exports("torch") and name in namespace


def test_modules_outside_torch_export_nothing_by_name():
    assert star_exports("numpy") == frozenset()
    assert star_exports("torch.not_a_module") == frozenset()
