"""Names alone read what a helper of the file returns: a function defined once at the top level
(`make_weight(n)`) or a method of the class (`self._build_sparse(...)`) whose every `return` gives a
tensor makes a tensor, so TL101 sees the attribute it fills. Sparse tensors are tensors too
(`torch.sparse_coo_tensor`, the old `torch.sparse.FloatTensor`, `.to_sparse()`)."""
from __future__ import annotations

import pytest

from testkit.rules import findings

MODEL = """\
import torch
import torch.nn as nn


def make_weight(n):
    if n > 4:
        return torch.randn(n) * 0.1
    return torch.zeros(n)


class Graph(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.gain = make_weight(n)
        self.adjacency = self._build_sparse(torch.zeros(2, 1, dtype=torch.long), torch.ones(1), (n, n))
        self.coo = torch.sparse_coo_tensor(torch.zeros(2, 1, dtype=torch.long), torch.ones(1), (n, n))
        self.dense = torch.eye(n).to_sparse()

    def _build_sparse(self, indices, values, size):
        return torch.sparse.FloatTensor(indices, values, size)

    def forward(self, x):
        x = torch.sparse.mm(self.adjacency, x) + torch.sparse.mm(self.coo, x)
        return torch.sparse.mm(self.dense, x) * self.gain
"""


def reported(source):
    return sorted(f.message.split("`")[1] for f in findings(source, "TL101"))


def test_attributes_filled_by_helpers_and_sparse_constructors_are_tensors():
    assert reported(MODEL) == ["self.adjacency", "self.coo", "self.dense", "self.gain"]


@pytest.mark.parametrize("helper, why", [
    ("def make_weight(n):\n    if n > 4:\n        return torch.randn(n)\n    return None\n", "one return is None"),
    ("def make_weight(n):\n    return [torch.randn(n)]\n", "a list"),
    ("def make_weight(n):\n    yield torch.randn(n)\n", "a generator"),
    ("@cached\ndef make_weight(n):\n    return torch.randn(n)\n", "a decorator may change what it returns"),
    ("def make_weight(n):\n    return torch.randn(n)\n\n\ndef make_weight(n):\n    return n\n", "defined twice"),
])
def test_a_helper_that_may_return_something_else_is_not_read(helper, why):
    source = MODEL.replace(MODEL[MODEL.index("def make_weight"):MODEL.index("class Graph")], helper + "\n\n")
    assert "self.gain" not in reported(source), why


def test_a_parameter_made_by_a_method_stays_a_parameter():
    source = MODEL.replace("return torch.sparse.FloatTensor(indices, values, size)",
                           "return nn.Parameter(torch.randn(size))")
    assert "self.adjacency" not in reported(source)


def test_sparse_constructors_are_not_legacy_typed_constructors():
    assert findings(MODEL, "TL301") == []
