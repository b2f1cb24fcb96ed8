"""Classes no rule checked are said, never skipped in silence: a class whose base could not be read
(its package is not installed in the analysed environment, or jedi finds no definition of it,
as for a name a star import of a missing package would give) may or may not be an nn.Module.
The command line counts them on stderr and lists them with -v, the same whether jedi answered or
the disk cache did; the editor shows one information per file; an edit keeps them current.
"""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from testkit.support import check_in_a_process
from torchlint.engine import check_source
from torchlint.incremental import IncrementalChecker

sys.path.insert(0, str(Path(__file__).parent / "lsp"))
from lsp_helpers import open_document, replace_text, serving, wait_for  # noqa: E402


# Module comes from a package that is not installed; Block from a star import of another one;
# Sub subclasses an unchecked class of the file (it is said with that class's base); Plain and
# Real are settled (no Module; a Module, checked).
MODEL = textwrap.dedent("""\
    import torch
    import torch.nn as nn
    from notinstalled.torch_core import Module
    from alsonotinstalled import *


    class Net(Module):
        def __init__(self):
            super().__init__()
            self.w = torch.randn(3)


    class Other(Block):
        pass


    class Sub(Net):
        pass


    class Plain(object):
        pass


    class Real(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.randn(3)

        def forward(self, x):
            return x * self.w
""")
ADDED = "\n\nclass Later(Module):\n    pass\n"



def unchecked_of(result):
    return [(c.name, c.position.line, c.base) for c in result.unchecked]


def test_the_engine_names_the_classes_it_could_not_check(tmp_path, layers):
    (tmp_path / "model.py").write_text(MODEL)
    layer = layers(tmp_path)
    result = check_source(MODEL, str(tmp_path / "model.py"), inference=layer)
    assert unchecked_of(result) == [("Net", 7, "Module"), ("Other", 13, "Block"), ("Sub", 17, "Module")]
    reasons = {c.name: c.reason for c in result.unchecked}
    assert reasons["Net"] == reasons["Sub"] == "`notinstalled` is not installed in the analysed environment"
    assert reasons["Other"] == "no definition of it was found"
    assert [f.code for f in result.findings] == ["TL101"]  # Real's, the one class checked with a tensor
    assert check_source(MODEL, str(tmp_path / "model.py")).unchecked == []  # names alone decide nothing here


def test_an_edit_keeps_them_current(tmp_path, layers):
    (tmp_path / "model.py").write_text(MODEL)
    layer = layers(tmp_path)
    checker = IncrementalChecker(str(tmp_path / "model.py"))
    assert len(checker.check(MODEL, inference=layer).unchecked) == 3
    edited = "\n\n" + MODEL + ADDED  # every class moves two lines down; one more at the end
    result = checker.check(edited, inference=layer)
    full = check_source(edited, str(tmp_path / "model.py"), inference=layer)
    assert unchecked_of(result) == unchecked_of(full)
    assert unchecked_of(result)[0] == ("Net", 9, "Module") and unchecked_of(result)[-1][0] == "Later"


def test_the_command_line_counts_them_and_lists_them_with_v(tmp_path):
    (tmp_path / "model.py").write_text(MODEL)
    cache = str(tmp_path / "cache")
    for run in ("cold", "warm"):  # the second from the disk cache: the same said
        done = check_in_a_process(["model.py"], tmp_path, TORCHLINT_CACHE_DIR=cache)
        (said,) = [line for line in done.stderr.splitlines() if "not checked" in line]
        assert said.startswith("torchlint: note: 3 classes not checked, whether they are nn.Modules could not be read:")
        assert "base `Module`: `notinstalled` is not installed in the analysed environment (2)" in said
        assert "base `Block`: no definition of it was found (1)" in said and "(-v lists the classes)" in said
    verbose = check_in_a_process(["-v", "model.py"], tmp_path, TORCHLINT_CACHE_DIR=cache)
    listed = [line for line in verbose.stderr.splitlines() if ": class " in line]
    assert listed == [
        "torchlint: note: model.py:7:1: class Net not checked: base `Module`: "
        "`notinstalled` is not installed in the analysed environment",
        "torchlint: note: model.py:13:1: class Other not checked: base `Block`: no definition of it was found",
        "torchlint: note: model.py:17:1: class Sub not checked: base `Module`: "
        "`notinstalled` is not installed in the analysed environment"]
    for quiet in (["-q"], ["--no-infer"]):
        assert "not checked" not in check_in_a_process([*quiet, "model.py"], tmp_path, TORCHLINT_CACHE_DIR=cache).stderr


async def test_the_editor_shows_one_information_per_file(tmp_path):
    from lsprotocol import types
    (tmp_path / "model.py").write_text(MODEL)
    uri = (tmp_path / "model.py").as_uri()
    async with serving(tmp_path) as client:
        open_document(client, uri, MODEL)

        def informations():
            published = [p for p in client.publishes if p.uri == uri]
            return [d for d in published[-1].diagnostics if "not checked" in d.message] if published else []
        await wait_for(lambda: informations(), timeout=120, what="the jedi wave's information")
        (shown,) = informations()
        assert shown.severity == types.DiagnosticSeverity.Information and shown.code is None
        assert shown.range.start.line == 6 and "3 classes of this file not checked (Net, Other, Sub)" in shown.message
        replace_text(client, uri, MODEL, MODEL + ADDED, version=2)
        await wait_for(lambda: any("4 classes" in d.message for d in informations()), timeout=120,
                       what="the information after an edit")


def test_a_package_importing_itself_from_below_its_folder_is_told_where_to_check_from(tmp_path, layers):
    """transformers' models import `transformers.modeling_utils` absolutely: checked from inside the
    package, its own name is not on the path. The note says so, not "install it"."""
    package = tmp_path / "mypkg"
    (package / "sub").mkdir(parents=True)
    for folder in (package, package / "sub"):
        (folder / "__init__.py").write_text("")
    (package / "base.py").write_text("import torch.nn as nn\n\n\nclass Base(nn.Module):\n    pass\n")
    text = "import torch\nfrom mypkg.base import Base\n\n\nclass Net(Base):\n    pass\n"
    (package / "sub" / "model.py").write_text(text)
    inside = check_source(text, str(package / "sub" / "model.py"), inference=layers(package / "sub"))
    (unchecked,) = inside.unchecked
    assert unchecked.reason == ("`mypkg`, the package this file is in, is not on the analysed path: check from the "
                                "folder that holds it (%s), or install it" % tmp_path)
    above = check_source(text, str(package / "sub" / "model.py"), inference=layers(tmp_path))
    assert above.unchecked == []  # from the folder above, mypkg.base is read: Net is a Module


def test_answers_kept_under_another_project_root_are_not_reused(tmp_path):
    # Checked by its own folder, a package's absolute imports of itself name nothing (its root is
    # the package); once a pyproject.toml above makes the parent the root, they do: answers kept
    # from the first run must not stand for the second.
    package = tmp_path / "shapes"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text("import torch.nn as nn\n\n\nclass Base(nn.Module):\n    pass\n")
    (package / "model.py").write_text(textwrap.dedent("""\
        import torch

        from shapes.base import Base


        class Model(Base):
            def __init__(self):
                super().__init__()
                self.scale = torch.ones(2)

            def forward(self, x):
                return x * self.scale
    """))
    cache = str(tmp_path / "cache")
    marker = '[project]\nname = "shapes"\nversion = "0"\n'
    (package / "pyproject.toml").write_text(marker)  # (the package's own folder is the root)
    first = check_in_a_process(["--exit-zero", "shapes"], tmp_path, TORCHLINT_CACHE_DIR=cache)
    assert "class not checked" in first.stderr and "TL101" not in first.stdout
    (package / "pyproject.toml").unlink()
    (tmp_path / "pyproject.toml").write_text(marker)
    second = check_in_a_process(["--exit-zero", "shapes"], tmp_path, TORCHLINT_CACHE_DIR=cache)
    assert "not checked" not in second.stderr
    assert "shapes/model.py:9:9: TL101" in second.stdout
    # With no marker at all, the root is the folder holding the package, not the package itself.
    (tmp_path / "pyproject.toml").unlink()
    for run_from, target in ((tmp_path, "shapes"), (package, ".")):
        third = check_in_a_process(["--exit-zero", target], run_from, TORCHLINT_CACHE_DIR=cache)
        assert "not checked" not in third.stderr and "model.py:9:9: TL101" in third.stdout, third
