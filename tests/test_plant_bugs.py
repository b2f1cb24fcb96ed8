"""benchmarks/plant_bugs.py, the planting pass of `bench_verify.py --fresh-set`: each kind rewrites
the registration the user meant into the bug a user writes, keeps every line where it was, and
knows the line of each plant. No torch: the twins are only parsed."""
import ast
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("plant_bugs", ROOT / "benchmarks" / "plant_bugs.py")
plant_bugs = importlib.util.module_from_spec(spec)
sys.modules["plant_bugs"] = plant_bugs  # (its dataclass looks its module up)
spec.loader.exec_module(plant_bugs)

SOURCE = '''
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = nn.Parameter(
            torch.ones(dim))
        self.register_buffer("mask", torch.tril(torch.ones(dim, dim))
                             .view(1, dim, dim))
        self.layers = nn.ModuleList([nn.Linear(dim, dim) for _ in range(2)])
        self.heads = nn.ModuleDict({"a": nn.Linear(dim, dim)})
        self.identity = nn.Sequential()
        self.body = nn.Sequential(*[nn.Linear(dim, dim)])
        if dim > 4:
            self.extra = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        x = x * self.scale
        for layer in self.layers:
            x = layer(x)
        return self.body(x) + self.heads["a"](x)
'''


def twin(kind):
    text, plants = plant_bugs.plant(SOURCE, kind)
    ast.parse(text)
    assert text.count("\n") == SOURCE.count("\n")
    return text, plants


def line(text, needle):
    return next(n for n, row in enumerate(text.splitlines(), start=1) if needle in row)


@pytest.mark.parametrize("kind, new, old", [
    ("parameter-as-tensor", "self.scale = (torch.ones(dim)", "self.scale = nn.Parameter("),
    ("parameter-as-trainable-tensor", "self.scale = ((torch.ones(dim)).requires_grad_()", "self.scale = nn.Parameter("),
    ("buffer-as-attribute", "self.mask = (torch.tril(", 'self.register_buffer("mask"'),
    ("modulelist-as-list", "self.layers = list([nn.Linear(dim, dim)", "self.layers = nn.ModuleList("),
    ("moduledict-as-dict", 'self.heads = dict({"a"', "self.heads = nn.ModuleDict("),
    ("sequential-as-list", "self.body = list([nn.Linear(dim, dim)])", "self.body = nn.Sequential(*"),
])
def test_each_kind_rewrites_the_first_unconditional_registration_on_its_own_line(kind, new, old):
    text, plants = twin(kind)
    assert len(plants) == 1 and plants[0].class_name == "Block"
    assert new in text, text
    assert plants[0].line == line(SOURCE, old) == line(text, new)
    assert plants[0].codes() == plant_bugs.KINDS[kind]


def test_a_statement_that_shrinks_keeps_its_span_and_the_lines_after_it():
    text, plants = twin("parameter-as-tensor")
    assert (plants[0].line, plants[0].end_line) == (line(SOURCE, "self.scale ="), line(SOURCE, "torch.ones(dim))"))
    assert line(text, "self.layers = nn.ModuleList") == line(SOURCE, "self.layers = nn.ModuleList")
    assert "self.extra = nn.Parameter" in text  # (a conditional one is never planted)


def test_an_empty_sequential_is_left_alone():
    text, _ = twin("sequential-as-list")
    assert "self.identity = nn.Sequential()" in text


def test_the_forward_kinds_rewrap_or_detach_a_parameter_in_forward():
    text, plants = twin("parameter-rewrapped-in-forward")
    assert "self.scale = torch.nn.Parameter(self.scale.detach()); x = x * self.scale" in text
    assert plants[0].line == line(SOURCE, "x = x * self.scale")
    text, plants = twin("parameter-detached-in-forward")
    assert "x = x * self.scale.detach()" in text
    assert plants[0].line == line(SOURCE, "self.scale = nn.Parameter(")


def test_a_file_without_sites_has_no_twin():
    assert plant_bugs.plant("import torch\n\nx = 1\n", "buffer-as-attribute") == ("import torch\n\nx = 1\n", [])


def test_a_container_the_constructor_then_uses_as_a_module_is_not_planted():
    source = SOURCE.replace("        self.heads = nn.ModuleDict",
                            "        self.layers.apply(lambda m: None)\n        self.heads = nn.ModuleDict")
    text, plants = plant_bugs.plant(source, "modulelist-as-list")
    assert plants == [] and text == source  # a plain list has no .apply: the twin would not even build
    _, plants = plant_bugs.plant(source, "moduledict-as-dict")
    assert [p.attribute for p in plants] == ["heads"]
