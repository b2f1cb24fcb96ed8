"""The scope index: which scope each name binding belongs to."""
from __future__ import annotations

import ast
import textwrap

from testkit.rules import findings
from torchlint.analysis.scopes import build_index

SOURCE = textwrap.dedent('''
    import torch

    scale = torch.ones(3)

    class Settings:
        scale = None
        for step in range(2):
            pass

        def method(self):
            return scale

    def build():
        mask = torch.ones(2)

        class Local:
            mask = "not a tensor"

        return mask
''')


def _scope(index, name):
    (scope,) = [s for s in index.scopes if s.name == name]
    return scope


def test_class_body_names_are_not_the_enclosing_scopes():
    index = build_index(ast.parse(SOURCE))
    module, build = index.module_scope, _scope(index, "build")
    assert [b.value.__class__.__name__ for b in module.locals["scale"]] == ["Call"]
    assert "step" not in module.locals
    assert [b.value.__class__.__name__ for b in build.locals["mask"]] == ["Call"]
    settings = _scope(index, "Settings")
    assert isinstance(settings.node, ast.ClassDef) and settings.parent is module
    assert set(settings.locals) == {"scale", "step"}
    assert set(_scope(index, "Local").locals) == {"mask"}


def test_methods_see_the_scope_around_their_class_not_its_body():
    index = build_index(ast.parse(SOURCE))
    assert _scope(index, "method").parent is index.module_scope


def test_a_class_attribute_does_not_hide_a_module_tensor():
    # `mean` is a tensor in the module; the class attribute of the same name is another name.
    source = '''
        import torch
        mean = torch.tensor([0.5])

        class Config:
            mean = (0.5,)

        mean.cuda()
    '''
    assert len(findings(source, "TL203")) == 1
