"""The jedi layer asks only what can change a finding, and bounds what a worker keeps (issue 23)."""
import ast
import textwrap

import pytest

from torchlint.analysis.inference import JediInference
from torchlint.engine import check_source


def _write(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def _no_jedi(layer, monkeypatch):
    """Fail if the layer asks jedi about a base class (what files tell must be enough)."""
    def asked(*args, **kwargs):
        raise AssertionError("jedi was asked")
    monkeypatch.setattr(layer, "_base_is_module", asked)


def test_a_class_attribute_assigned_after_the_class_leaves_the_name_bound_to_it(tmp_path, monkeypatch):
    # transformers: `PreTrainedModel.push_to_hub = copy_func(PreTrainedModel.push_to_hub)` after the
    # class. The name still holds the class: the base is read from the file, jedi is not asked.
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/base.py": """
            import torch.nn as nn

            class Base(nn.Module):
                def push(self):
                    pass

            class Plain:
                pass

            Base.push = staticmethod(Base.push)
            Plain.x: int = 1
            if Base.push.__doc__ is not None:
                Base.push.__doc__ = "pushed"
            """,
        "pkg/model.py": """
            from .base import Base, Plain
            """,
    })
    layer = JediInference(str(tmp_path), share_states=True)
    _no_jedi(layer, monkeypatch)
    model = str(tmp_path / "pkg" / "model.py")
    imports = [n for n in ast.walk(ast.parse((tmp_path / "pkg" / "model.py").read_text()))
               if isinstance(n, ast.ImportFrom)]
    assert layer.base_from_files(model, imports, ast.Name(id="Base"), 1, set()) is True
    assert layer.base_from_files(model, imports, ast.Name(id="Plain"), 1, set()) is False


@pytest.mark.parametrize("rebinding", ["Base = make()", "Base, other = make()", "del Base", "(Base := make())",
                                       "Base: type = make()"])
def test_a_name_rebound_after_its_class_is_left_to_jedi(tmp_path, rebinding):
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/base.py": "import torch.nn as nn\n\nclass Base(nn.Module):\n    pass\n\n%s\n" % rebinding,
        "pkg/model.py": "from .base import Base\n",
    })
    layer = JediInference(str(tmp_path), share_states=True)
    model = str(tmp_path / "pkg" / "model.py")
    imports = [n for n in ast.walk(ast.parse("from .base import Base\n")) if isinstance(n, ast.ImportFrom)]
    assert layer.base_from_files(model, imports, ast.Name(id="Base"), 1, set()) is None  # files cannot tell
