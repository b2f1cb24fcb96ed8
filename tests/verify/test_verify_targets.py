"""What the parent works out before the child runs: the import plan, constructor candidates,
[tool.torchlint.verify], editor kwargs, issue lines, and a result file full of garbage.
None of these start torch, except the end-to-end runs at the bottom."""
from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from torchlint.config import ConfigError, parse_table
from torchlint.lsp import verification
from torchlint.verify import VerifyError, verify_file
from torchlint.verify.findings import place_issues, report_to_findings
from torchlint.verify.report import COMPLETED, ERROR, ClassReport, Issue, VerifyReport, render_json, render_text
from torchlint.verify.runner import parse_init_kwargs, parse_input_exprs
from torchlint.verify.targets import find_constructors, import_plan, module_name

from verify_helpers import class_report, line_of, torch_python


def write(root: Path, files: dict) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


def expressions(found, name, made_up=False):
    """The ways found to build the class; ``made_up``: those of factories the child calls with
    arguments made up (Constructor.made_up), instead."""
    return [c.get("expression") or c.get("factory") for c in found[name] if bool(c.get("made_up")) is made_up]


# -- import plans ----------------------------------------------------------------------------------

def test_a_package_module_imports_by_its_dotted_name(tmp_path):
    write(tmp_path, {"proj/pkg/__init__.py": "", "proj/pkg/models/__init__.py": "", "proj/pkg/models/net.py": ""})
    plan = import_plan(str(tmp_path / "proj/pkg/models/net.py"), str(tmp_path / "proj"))
    assert plan.request() == {"root": str(tmp_path / "proj"), "module": "pkg.models.net"}
    assert str(tmp_path / "proj/pkg/models") not in plan.extra_paths  # no sibling imports for package modules


def test_src_layout_roots_at_src_and_keeps_the_project_on_the_path(tmp_path):
    write(tmp_path, {"proj/src/pkg/__init__.py": "", "proj/src/pkg/net.py": ""})
    plan = import_plan(str(tmp_path / "proj/src/pkg/net.py"), str(tmp_path / "proj"))
    assert plan.request() == {"root": str(tmp_path / "proj/src"), "module": "pkg.net"}
    assert str(tmp_path / "proj") in plan.extra_paths


def test_a_script_loads_by_path_with_its_folder_on_the_path(tmp_path):
    write(tmp_path, {"scripts/train.py": ""})
    plan = import_plan(str(tmp_path / "scripts/train.py"), str(tmp_path))
    assert plan.request() is None and plan.extra_paths[-1] == str(tmp_path / "scripts")


def test_configured_import_roots_win_and_allow_namespace_packages(tmp_path):
    write(tmp_path, {"lib/vision/backbones/vit.py": "", "lib/vision/__init__.py": ""})
    path = str(tmp_path / "lib/vision/backbones/vit.py")
    assert import_plan(path).request() is None  # backbones/ has no __init__.py
    plan = import_plan(path, import_roots=[str(tmp_path / "lib")], extra_paths=[str(tmp_path / "vendor")])
    assert plan.request() == {"root": str(tmp_path / "lib"), "module": "vision.backbones.vit"}
    assert str(tmp_path / "vendor") in plan.extra_paths


def test_module_names_need_identifiers(tmp_path):
    assert module_name(str(tmp_path / "a/b/__init__.py"), str(tmp_path)) == "a.b"
    assert module_name(str(tmp_path / "my-models/net.py"), str(tmp_path)) is None
    assert module_name(str(tmp_path / "net.py"), str(tmp_path / "elsewhere")) is None


# -- constructor candidates ------------------------------------------------------------------

PACKAGE = {
    "proj/pkg/__init__.py": "",
    "proj/pkg/models/__init__.py": "from .resnet import ResNet\n",
    "proj/pkg/models/blocks.py": """
        import torch.nn as nn


        class Bottleneck(nn.Module):
            def __init__(self, dim):
                super().__init__()
    """,
    "proj/pkg/models/resnet.py": """
        import torch.nn as nn

        from .blocks import Bottleneck

        WIDTH = 16


        class ResNet(nn.Module):
            def __init__(self, block, layers, num_classes=1000, width=WIDTH):
                super().__init__()


        class Head(nn.Module):
            def __init__(self, dim, classes):
                super().__init__()


        def resnet26(pretrained=False, **kwargs):
            return ResNet(Bottleneck, [2, 2, 2, 2], **kwargs)


        def _resnet(block, layers, **kwargs):
            model = ResNet(block, layers, **kwargs)
            return model


        def head(dim, classes=10, scale=2):
            return Head(dim * scale, classes)


        def tiny_head(dim=8) -> "Head":
            return head(dim)


        def from_config(cfg):
            return Head(cfg.dim, cfg.classes)


        if __name__ == "__main__":
            n = 10
            model = ResNet(Bottleneck, [1, 1, 1, 1], num_classes=n)
    """,
    "proj/pkg/train.py": """
        from .models import ResNet
        from .models.blocks import Bottleneck
        from .models.resnet import Head


        def main(depth):
            model = ResNet(Bottleneck, [depth] * 4)
            head = Head(dim=32, classes=2)
    """,
    "proj/tests/test_models.py": """
        import pkg.models.resnet as R
        from pkg.models import ResNet
        from pkg.models.blocks import Bottleneck

        SMALL = [1, 1]


        def test_small():
            width = 8
            ResNet(Bottleneck, SMALL, num_classes=3, width=width)
            R.ResNet(Bottleneck, layers=[3])
            unknown_block = make_block()
            ResNet(unknown_block, [1])
    """,
}


@pytest.fixture()
def package(tmp_path):
    write(tmp_path, PACKAGE)
    path = str(tmp_path / "proj/pkg/models/resnet.py")
    return path, str(tmp_path / "proj")


def test_call_sites_and_factories_in_order(package):
    path, root = package
    found = find_constructors(path, ["ResNet", "Head"], workspace_root=root)
    assert expressions(found, "ResNet") == [
        "ResNet(Bottleneck, [1, 1, 1, 1], num_classes=10)",  # the __main__ block; `n` carried over
        "resnet26()",  # a factory that needs no argument; its **kwargs forwarded nothing
        "ResNet(Bottleneck, [1, 1], num_classes=3, width=8)",  # tests/: SMALL and width carried over
        "ResNet(Bottleneck, layers=[3])",  # through `import pkg.models.resnet as R`
    ]
    origins = [c["origin"] for c in found["ResNet"] if not c.get("made_up")]
    assert origins[0] == "pkg/models/resnet.py:%d, the `__main__` block" % line_of(Path(path), "num_classes=n)")
    assert origins[1].startswith("pkg/models/resnet.py:") and "factory resnet26()" in origins[1]
    assert origins[2].startswith("tests/test_models.py:")
    # `_resnet(block, layers)`, `head(dim)` and `main(depth)`: parameters without defaults are not
    # literals; `from_config(cfg)`: an object's attributes are not either; `unknown_block` comes from
    # a call of something the class's module does not have.
    assert expressions(found, "Head") == ["tiny_head()", "Head(dim=32, classes=2)"]
    # The file's factories that need arguments, to be called with them made up (at most two per class).
    assert expressions(found, "ResNet", made_up=True) == ["_resnet()"]
    assert expressions(found, "Head", made_up=True) == ["head()", "from_config()"]


def test_a_factory_elsewhere_in_the_package_is_sent_as_module_function(tmp_path):
    write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/net.py": """
            import torch.nn as nn


            class Net(nn.Module):
                def __init__(self, width):
                    super().__init__()
        """,
        "pkg/zoo.py": """
            from pkg.net import Net


            def small():
                return Net(width=cfg_width())
        """,
    })
    found = find_constructors(str(tmp_path / "pkg/net.py"), ["Net"], workspace_root=str(tmp_path))
    assert found["Net"] == [{"origin": "pkg/zoo.py:4, factory small()", "factory": "pkg.zoo:small"}]


def test_the_configuration_comes_first(package, tmp_path):
    path, root = package
    pyproject = tmp_path / "proj" / "pyproject.toml"
    config = parse_table({"verify": {"classes": {
        "ResNet": {"kwargs": {"block": "ignored", "layers": [2], "num_classes": 3}},
        "Head": {"factory": "pkg.zoo:small_head"}}}}, pyproject)
    found = find_constructors(path, ["ResNet", "Head"], workspace_root=root, recipes=config.verify)
    assert found["ResNet"][0] == {"origin": "[tool.torchlint.verify.classes.ResNet] in pyproject.toml",
                                  "expression": "ResNet(block='ignored', layers=[2], num_classes=3)",
                                  "before_defaults": True}
    assert found["Head"][0]["factory"] == "pkg.zoo:small_head" and found["Head"][0]["before_defaults"]
    assert len(found["ResNet"]) > 1  # the project's own candidates follow


def test_verify_table_errors_name_the_key(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    cases = [
        ({"import-root": ["src"]}, "unknown key 'import-root' (did you mean 'import-roots'?)"),
        ({"import-roots": "src"}, "verify.import-roots: expected a list of strings"),
        ({"classes": {"Net": {"kwarg": {}}}}, "verify.classes.Net: unknown key 'kwarg' (did you mean 'kwargs'?)"),
        ({"classes": {"Net": {"kwargs": {}, "factory": "a:b"}}}, "verify.classes.Net: give either"),
        ({"classes": {"Net": {}}}, "not neither"),
        ({"classes": {"Net": {"factory": "pkg.zoo"}}}, "verify.classes.Net.factory: expected"),
        ({"classes": {"Net": {"kwargs": [1]}}}, "verify.classes.Net.kwargs: expected a table"),
        ({"classes": {"Net": 3}}, "verify.classes.Net: expected a table"),
        ({"classes": {"not a name": {"kwargs": {}}}}, "is not a class name"),
        ("yes", "verify: expected a table"),
    ]
    for table, message in cases:
        with pytest.raises(ConfigError) as caught:
            parse_table({"verify": table}, pyproject)
        assert message in str(caught.value)
        assert "[tool.torchlint]" in str(caught.value)
    config = parse_table({"verify": {"import-roots": ["src"], "extra-paths": ["vendor"]}}, pyproject)
    assert config.verify.import_roots == (str(tmp_path / "src"),)
    assert config.verify.extra_paths == (str(tmp_path / "vendor"),)


def test_missing_configured_folder_is_a_verify_error(tmp_path):
    write(tmp_path, {"net.py": "x = 1\n"})
    config = parse_table({"verify": {"import-roots": ["nowhere"]}}, tmp_path / "pyproject.toml")
    with pytest.raises(VerifyError, match="nowhere is not a folder"):
        verify_file(str(tmp_path / "net.py"), python=sys.executable, verify_config=config.verify)


# -- what the user types -------------------------------------------------------------------------

def test_init_kwargs_as_json_or_python_literals():
    assert parse_init_kwargs('{"dim": 16}') == {"dim": 16}
    assert parse_init_kwargs("dim=64, depth=2, sizes=(1, 2), name='x', mix={'a': -1.5}, flag=None") == {
        "dim": 64, "depth": 2, "sizes": (1, 2), "name": "x", "mix": {"a": -1.5}, "flag": None}
    assert parse_init_kwargs("") == {}
    for bad, message in [("dim=os.system('x')", "not a Python literal"), ("64", "keyword arguments"),
                         ("dim=", "keyword arguments"), ("**cfg", "keyword arguments"), ("s={1}", "cannot be sent"),
                         ("[1]", "JSON object")]:
        with pytest.raises(VerifyError, match=message):
            parse_init_kwargs(bad)


def test_input_expressions_are_checked_for_syntax_only():
    assert parse_input_exprs(["torch.randint(0, 100, (2, 16))", " x "]) == ["torch.randint(0, 100, (2, 16))", "x"]
    assert parse_input_exprs(None) is None
    with pytest.raises(VerifyError, match="not a Python expression"):
        parse_input_exprs(["torch.randn(2,"])


def test_command_arguments_take_init_kwargs():
    parsed = verification.parse_arguments(({"uri": "file:///m.py", "className": "Net", "initKwargs": "dim=8"},))
    assert parsed["init_kwargs"] == {"dim": 8}
    parsed = verification.parse_arguments(({"uri": "file:///m.py", "initKwargs": {"dim": [1, 2]}},))
    assert parsed["init_kwargs"] == {"dim": [1, 2]}
    for bad in ("dim=open('x')", 3, {"not a name": 1}):
        with pytest.raises(ValueError, match="initKwargs"):
            verification.parse_arguments(({"uri": "file:///m.py", "initKwargs": bad},))


def test_lens_device_names_cuda_only_when_it_will_be_used(monkeypatch, tmp_path):
    monkeypatch.setattr(verification, "NVIDIA_DRIVER_FILES", (str(tmp_path / "no-driver"),))
    assert verification.lens_device("auto") is None
    assert verification.lens_device("cpu") is None
    assert verification.lens_device("cuda:1") == "cuda:1"
    (tmp_path / "nvidiactl").write_text("")
    monkeypatch.setattr(verification, "NVIDIA_DRIVER_FILES", (str(tmp_path / "nvidiactl"),))
    assert verification.lens_device("auto") == "cuda"
    assert verification.lens_device("cpu") is None


# -- lines ------------------------------------------------------------------------------------------

def test_every_issue_gets_a_line(tmp_path):
    write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/blocks.py": """
            import torch
            import torch.nn as nn


            class Base(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.scale = torch.ones(3)


            class Block(Base):
                pass
        """,
        "pkg/model.py": """
            import torch.nn as nn

            from .blocks import Block


            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.blocks = nn.ModuleList([Block()])
                    self.head = nn.Linear(3, 3)
        """,
    })
    model, blocks = tmp_path / "pkg/model.py", tmp_path / "pkg/blocks.py"
    site_packages = "/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py"
    report = VerifyReport(path=str(model), python="python")
    report.classes = [ClassReport.from_dict({"name": "Model", "status": "verified", "issues": [
        # held by Block (another file); assigned in its base class
        {"code": "TL901", "class": "Model", "attribute": "blocks.0.scale", "owner_class": "Block",
         "owner_attribute": "scale", "owner_file": str(blocks), "line": None},
        # held by torch's Linear: the verified class's `self.head = ...`
        {"code": "TL904", "class": "Model", "attribute": "head.weight", "owner_class": "Linear",
         "owner_file": site_packages, "line": None},
        # nothing to go on: the class line
        {"code": "TL903", "class": "Model", "attribute": None, "line": None},
        # a failure keeps its traceback line
        {"code": "TL905", "class": "Model", "line": 4},
    ]})]
    report.file_issues = [Issue.from_dict({"code": "TL905", "message": "import", "line": None})]
    place_issues(report)
    placed = {(issue.code, issue.message): (issue.file, issue.line) for issue in report.issues}
    placed = {code: where for (code, message), where in placed.items() if message != "import"}
    assert [(i.file, i.line) for i in report.file_issues] == [(str(model), 1)]  # nothing known: line 1
    assert placed["TL901"] == (str(blocks), line_of(blocks, "self.scale ="))
    assert placed["TL904"] == (str(model), line_of(model, "self.head ="))
    assert placed["TL903"] == (str(model), line_of(model, "class Model"))
    assert placed["TL905"] == (str(model), 4)
    assert all(isinstance(issue.line, int) for issue in report.issues)
    assert all(isinstance(i["line"], int) for cls in json.loads(render_json(report))["classes"] for i in cls["issues"])
    text = render_text(report, "pkg/model.py")
    assert "blocks.py:%d: TL901" % line_of(blocks, "self.scale =") in text
    # In the editor, an issue of another file sits on the verified class, naming where it belongs.
    findings = {f.code: f for f in report_to_findings(report, model.read_text(), str(model))}
    assert findings["TL901"].range.start.line == line_of(model, "class Model")
    assert "(in blocks.py:%d)" % line_of(blocks, "self.scale =") in findings["TL901"].message
    assert findings["TL904"].range.start.line == line_of(model, "self.head =")


# -- a result file the parent cannot trust -------------------------------------------------------------

FAKE_PROBE = '''
import json, sys
request = json.load(open(sys.argv[2]))
sys.stderr.write("Traceback (most recent call last):\\n  ...\\nValueError: the probe broke\\n")
with open(request["result_path"], "w") as handle:
    handle.write(%r)
sys.exit(%d)
'''


@pytest.mark.parametrize("result, status, outcome", [
    ("[1, 2]", 0, ERROR),
    ("{not json", 0, ERROR),
    ('{"finished": true, "classes": "many", "file_issues": {"a": 1}, "device": ["cpu"]}', 0, COMPLETED),
    ('{"finished": true, "classes": [3, {"name": {"x": 1}, "checks": [1], "issues": [{"line": "x", "code": 5,'
     ' "paths": "p", "severity": null}]}], "error": null}', 0, COMPLETED),
    ('{"finished": false, "phase": "forward", "current_class": "Net"}', 70, ERROR),
    ('{"finished": true, "error": "just a string"}', 0, ERROR),
])
def test_garbage_in_the_result_file_is_a_clear_report(tmp_path, result, status, outcome):
    # A stand-in interpreter: `python probe.py request.json` runs our script instead of the probe.
    fake = tmp_path / "fake_python"
    script = tmp_path / "fake_probe.py"
    script.write_text(FAKE_PROBE % (result, status))
    fake.write_text('#!/bin/sh\nexec "%s" "%s" "$@"\n' % (sys.executable, script))
    fake.chmod(0o755)
    model = tmp_path / "model.py"
    model.write_text("class Net:\n    pass\n")
    report = verify_file(str(model), python=str(fake), timeout=120)
    assert report.outcome == outcome, (report.outcome, report.error)
    if outcome == ERROR:
        assert report.error
    if status == 70:
        assert "internal error while running Net forward and backward: ValueError: the probe broke" in report.error
    for issue in report.issues:
        assert isinstance(issue.line, int) and isinstance(issue.code, str)
    json.loads(render_json(report))
    render_text(report)


# -- end to end: a package verifies without flags ---------------------------------------------------

E2E = {
    "proj/src/shop/__init__.py": "from . import registry\nregistry.READY = True\n",
    "proj/src/shop/registry.py": "READY = False\n",
    "proj/src/shop/models/__init__.py": "",
    "proj/src/shop/models/layers.py": """
        import torch.nn as nn


        class Mlp(nn.Module):
            def __init__(self, dim, hidden):
                super().__init__()
                self.fc1 = nn.Linear(dim, hidden)
                self.fc2 = nn.Linear(hidden, dim)

            def forward(self, x):
                return self.fc2(self.fc1(x).relu())
    """,
    "proj/src/shop/models/net.py": """
        import torch
        import torch.nn as nn

        from .. import registry
        from .layers import Mlp

        assert registry.READY, "the package's __init__ ran first"


        class Net(nn.Module):
            def __init__(self, dim, depth):
                super().__init__()
                self.blocks = nn.ModuleList([Mlp(dim, dim * 2) for _ in range(depth)])
                self.gain = torch.ones(dim, requires_grad=True)  # the bug: never registered

            def forward(self, x):
                for block in self.blocks:
                    x = x + block(x)
                return x * self.gain


        def small_mlp():
            return Mlp(4, 8)
    """,
    "proj/tests/test_net.py": """
        from shop.models.net import Net


        def test_net():
            Net(dim=4, depth=2)
    """,
}


def test_a_package_module_with_call_sites_verifies_without_flags(tmp_path):
    write(tmp_path, E2E)
    path = tmp_path / "proj/src/shop/models/net.py"
    report = verify_file(str(path), python=torch_python(), device="cpu", timeout=300,
                         workspace_root=str(tmp_path / "proj"))
    assert report.outcome == COMPLETED, (report.error, report.stderr_tail)
    assert not [i for i in report.issues if i.code == "TL905"], [i.message for i in report.issues]
    net = class_report(report, "Net")
    assert net.status == "verified"
    assert net.constructed_with["text"] == "Net(dim=4, depth=2)"
    assert net.constructed_with["origin"].startswith("tests/test_net.py:")
    assert [c.name for c in report.classes] == ["Net"]  # Mlp is imported, not defined in net.py
    gain = [i for i in net.issues if i.code == "TL901"]
    assert gain and gain[0].line == line_of(path, "self.gain =")
    assert all(isinstance(i.line, int) for i in report.issues)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX's")
def test_the_call_site_scan_skips_a_fifo_named_like_a_module(tmp_path):
    """A FIFO named `*.py` in the project (an archive can hold one) is never read: opening it
    would wait for a writer for ever (the scan of the verify lens and of constructor arguments)."""
    import re
    import threading
    from torchlint.verify.targets import scan_sites
    os.mkfifo(tmp_path / "stuck.py")
    (tmp_path / "uses.py").write_text("from model import Net\n\nnet = Net(3)\n")
    seen = []

    class Finder:
        def scan(self, site, where):
            seen.append(where)

    sites = [(str(tmp_path / "stuck.py"), "stuck"), (str(tmp_path / "uses.py"), "uses")]
    scan = threading.Thread(target=scan_sites, args=(sites, re.compile(r"\bNet\b"), str(tmp_path), [Finder()], None),
                            daemon=True)
    scan.start()
    scan.join(timeout=120)  # a bound, not a timing: the scan ends at once, or never without the fix
    if scan.is_alive():  # let the blocked open return, so that nothing is left waiting
        with open(tmp_path / "stuck.py", "wb"):
            pass
        scan.join(timeout=10)
        pytest.fail("the scan waited on the FIFO")
    assert seen == ["uses.py"]
