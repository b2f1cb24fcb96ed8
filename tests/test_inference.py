"""The jedi layer: cross-file Module bases, helpers, variables, receiver types."""
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.expectations import expected_findings
from torchlint.engine import check_source
from torchlint.inference.layer import JediInference

PROJECT = Path(__file__).parent / "fixtures" / "jedi_project"


@pytest.fixture(scope="module")
def inference():
    return JediInference(str(PROJECT))


def check(path, inference):
    text = path.read_text()
    result = check_source(text, str(path), inference=inference)
    assert result.parse_error is None and not result.internal_errors
    return {(f.range.start.line, f.code) for f in result.findings}, result


def test_jedi_layer_finds_what_names_cannot(inference):
    path = PROJECT / "models.py"
    found, _ = check(path, inference)
    assert found == expected_findings(path.read_text())


def test_syntactic_layer_alone_is_a_strict_subset(inference):
    path = PROJECT / "models.py"
    names_only, _ = check(path, None)
    with_jedi, _ = check(path, inference)
    assert names_only < with_jedi
    # Without jedi, none of these classes is known to be a Module (their bases live elsewhere).
    assert not any(code in ("TL101", "TL102") for _, code in names_only)


def test_project_class_called_module_is_not_analysed(inference):
    found, _ = check(PROJECT / "nets" / "blocks" / "base.py", inference)
    assert found == set()


def test_module_receivers_stay_quiet(inference, tmp_path):
    source = (
        "import torch\nfrom torch import nn\nfrom nets.mid import Mid\n\n"
        "def train(model: Mid, device):\n"
        "    net = Mid()\n    net.cuda()\n    model.to(device)\n    enc = nn.Linear(2, 2)\n    enc.to(device)\n"
        "    x = torch.zeros(2)\n    x.to(device)  # expect: TL203\n"
    )
    path = PROJECT / "_generated_receivers.py"
    path.write_text(source)
    try:
        found, _ = check(path, inference)
    finally:
        path.unlink()
    assert found == expected_findings(source)


def test_parameter_found_through_attribute_chain(inference):
    _, result = check(PROJECT / "models.py", inference)
    tl104 = [f for f in result.findings if f.code == "TL104"]
    assert len(tl104) == 1 and "head.fc.weight" in tl104[0].message


CHAINED = """\
import torch
from torch import nn


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        scores = torch.tensor([1.0, 2.0])
        self.best = scores.argmin().item()
        self.order = scores.argsort().tolist()
        self.first = scores.argmax()  # expect: TL101

    def forward(self, x):
        return x[:, self.best] * self.first + self.order[0]
"""


def test_a_call_on_a_call_gets_its_own_answer(tmp_path):
    # `scores.argmin()` and `scores.argmin().item()` begin at the same place: the answer jedi gave
    # the inner call (a tensor) was kept for the outer one (a number), and `self.best` was reported.
    path = tmp_path / "head.py"
    path.write_text(CHAINED)
    found, _ = check(path, JediInference(str(tmp_path)))
    assert found == expected_findings(CHAINED)


def test_interpreter_without_torch_falls_back(tmp_path, monkeypatch):
    # Neither torch nor torchlint's stubs of it (tests/test_torch_stubs.py: with the stubs, the
    # findings are those made with torch).
    from torchlint.inference import layer as inference
    monkeypatch.setattr(inference, "TORCH_STUBS", str(tmp_path / "no-stubs"))
    venv = tmp_path / "notorch"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    layer = JediInference(str(PROJECT), str(python))
    assert not layer.torch_available
    assert "no torch" in layer.describe()
    found, _ = check(PROJECT / "models.py", layer)
    # Project bases still resolve (that needs no torch), so what names can tell inside those
    # classes is found; helpers' return values and torch's own _ConvNd base are not.
    assert found == {(23, "TL101"), (24, "TL101"), (25, "TL101"), (36, "TL203"), (56, "TL104")}


def test_broken_python_path_falls_back_to_own_interpreter(tmp_path):
    layer = JediInference(str(PROJECT), str(tmp_path / "no-such-python"))
    assert layer.python == sys.executable
    found, _ = check(PROJECT / "models.py", layer)
    assert (15, "TL101") in found


def test_what_the_layer_reads_from_the_checks_node_table_is_what_a_walk_finds(tmp_path):
    """The bindings and imports the layer looks names up in come from the check's NodeTable (no
    second walk of the tree): the same, in the same order, as walking the tree finds."""
    import ast
    import importlib.util

    from torchlint.inference.project_files import name_bindings, statement_walk
    from torchlint.analysis.scopes import NodeTable
    torch_nn = Path(importlib.util.find_spec("torch").submodule_search_locations[0]) / "nn"
    paths = sorted(PROJECT.rglob("*.py")) + sorted((torch_nn / "modules").glob("*.py"))[:20] + [
        Path(__file__).parent / "fixtures" / "rules" / name for name in ("tl101_aliases.py", "tl101_assignment_shapes.py")]
    compound = tmp_path / "compound.py"  # every statement that holds statements, nested
    compound.write_text(
        "try:\n    import a\nexcept ImportError as e:\n    import b\nelse:\n    import c\nfinally:\n"
        "    import d\nfor x in y:\n    import e\nelse:\n    import f\nwhile x:\n    import g\nelse:\n"
        "    import h\nmatch x:\n    case 1:\n        import i\n    case _:\n        class J:\n"
        "            def k(self):\n                with x:\n                    import l\n"
        "            f = lambda: (yield)\nasync def m():\n    async with x:\n        import n\n"
        "    async for x in y:\n        import o\n    else:\n        import p\n"
        "if x:\n    import q\nelif y:\n    import r\nelse:\n    import s\n")
    paths.append(compound)
    statement_levels = (ast.stmt, ast.excepthandler, ast.match_case)  # what ast.walk finds statements as
    assert len(paths) > 20
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        table = NodeTable(tree)
        statements = list(statement_walk(tree))
        assert statements == [tree] + [n for n in ast.walk(tree) if isinstance(n, statement_levels)]
        walked = [n for n in statements if isinstance(n, (ast.Import, ast.ImportFrom))]
        assert table.in_walk_order(table.positions_of(ast.Import) + table.positions_of(ast.ImportFrom)) == walked
        by_walk, by_table = name_bindings(tree), name_bindings(tree, table)
        assert by_walk and {k: sorted(v) for k, v in by_walk.items()} == {k: sorted(v) for k, v in by_table.items()}
