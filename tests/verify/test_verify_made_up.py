"""Verify with no flags on classes nothing in the project builds (issue #44): constructor
arguments made up from the signature (annotations and parameter names, through ``*args,
**kwargs`` to the base), a parent in another file of the project feeding a class, the per-class
table's ``inputs`` / ``input-shape``, and messages a user can act on (a ready-to-paste table
entry, the fitting failure said once and by the layer that rejected the shapes, parameter-free
modules verified without inputs, the user's class names, the line of the assignment that ran).
Each test fails on the code before this work. One child process per run.
"""
from __future__ import annotations

import re
import sys

import pytest

from torchlint.config import load_config
from torchlint.verify import verify_file
from torchlint.verify.report import COMPLETED, render_text

from verify_helpers import check, class_report, line_of, torch_python, write_module

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the project's own TOML reader on older Pythons
    tomllib = pytest.importorskip("tomli")

MODELS = '''
import torch
import torch.nn as nn


class Tiny(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return self.fc(x)


class Coupling(nn.Module):
    def __init__(self, dim, net_class=Tiny):
        super().__init__()
        self.net = net_class(dim)

    def forward(self, x):
        return self.net(x)


class Stage(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, num_layers: int, dropout: float):
        super().__init__()
        layers = [nn.Conv2d(in_channels, out_channels, 3, padding=1)]
        layers += [nn.Conv2d(out_channels, out_channels, 3, padding=1) for _ in range(num_layers - 1)]
        self.body = nn.Sequential(*layers)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.drop(self.body(x))


class ScaledStage(Stage):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.scale = torch.ones(1)

    def forward(self, x):
        return super().forward(x) * self.scale


class Moded(nn.Module):
    def __init__(self, mode: str, width: int, net_class=Tiny):
        super().__init__()
        self.net = net_class(width)
        self.mode = mode

    def forward(self, x):
        return self.net(x)


class Sevens(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        if dim % 7:
            raise ValueError("dim must be a multiple of 7")
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return self.fc(x)


class Swish(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(x)


class Picky(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(7, 8, 3)

    def forward(self, x):
        return self.conv(x).flatten(1)[:, :5].reshape(-1, 13)


class Transposed(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(7, 8, 3)

    def forward(self, x):
        return self.conv(x.transpose(1, 2))


class Branchy(nn.Module):
    def __init__(self, learn=False):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        if learn:
            self.scale = nn.Parameter(torch.ones(4))
        else:
            self.scale = torch.ones(4)

    def forward(self, x):
        return self.lin(x) * self.scale
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return write_module(tmp_path_factory.mktemp("made_up"), "flows.py", MODELS)


@pytest.fixture(scope="module")
def report(models):
    result = verify_file(str(models), python=torch_python(), device="cpu", timeout=300)
    assert result.outcome == COMPLETED, (result.error, result.stderr_tail)
    return result


def test_arguments_made_up_from_the_signature_build_and_verify_the_class(report):
    cls = class_report(report, "Coupling")
    assert cls.status == "verified" and cls.issues == [], cls
    assert cls.constructed_with == {"origin": "arguments made up from its signature", "text": "Coupling(dim=32)"}
    stage = class_report(report, "Stage")
    assert stage.status == "verified" and stage.issues == []
    assert stage.constructed_with["text"] == "Stage(in_channels=32, out_channels=32, num_layers=2, dropout=0.0)"


def test_arguments_are_followed_through_args_and_kwargs_to_the_base_and_bugs_still_found(report, models):
    cls = class_report(report, "ScaledStage")
    assert cls.constructed_with["text"].startswith("ScaledStage(in_channels=32, out_channels=32"), cls
    assert {i.code for i in cls.issues} >= {"TL901", "TL902"}
    assert {i.line for i in cls.issues if i.code in ("TL901", "TL902")} == {line_of(models, "self.scale = torch.ones(1)")}


def test_made_up_arguments_that_fail_leave_the_class_skipped_without_a_finding(report):
    cls = class_report(report, "Sevens")
    assert cls.status == "skipped" and cls.issues == []
    assert "arguments made up from its signature tried: Sevens(dim=32) failed: ValueError: dim must be a multiple " \
           "of 7" in cls.skip_reason
    assert not [i for i in report.issues if i.class_name == "Sevens"]


def test_a_skipped_class_gets_a_ready_to_paste_table_entry_with_its_own_parameters(report):
    cls = class_report(report, "Moded")
    assert cls.status == "skipped"
    table = tomllib.loads(cls.table_entry)
    assert table == {"tool": {"torchlint": {"verify": {"classes": {"Moded": {"kwargs": {
        "mode": "FILL IN", "width": 32}}}}}}}
    assert "nothing says what to give mode" in cls.skip_reason
    text = render_text(report)
    assert "    [tool.torchlint.verify.classes.Moded]\n    kwargs = { mode = \"FILL IN\", width = 32 }\n" in text


def test_signatures_name_the_user_s_classes_not_the_module_the_probe_loaded(report):
    reason = class_report(report, "Moded").skip_reason
    assert "net_class=Tiny)" in reason and "torchlint_verify" not in reason and "<class" not in reason


def test_a_parameter_free_module_is_verified_without_inputs(report):
    cls = class_report(report, "Swish")
    assert cls.status == "verified" and cls.partial_reason is None and cls.issues == []
    assert {check(cls, code).status for code in ("TL903", "TL904", "TL906", "TL907")} == {"passed"}


def test_the_fitting_failure_is_said_once_by_the_layer_that_rejected_the_shape(report, models):
    cls = class_report(report, "Picky")
    assert cls.status == "partly verified"
    reason = cls.partial_reason
    assert reason.startswith("gradients skipped: the guessed inputs did not fit: "), reason
    line = line_of(models, "return self.conv(x).flatten(1)")
    assert "Picky.forward (line %d) rejected (2, 7, 64, 64) float32 and (2, 7, 224, 224) float32 and " % line \
        in reason, reason
    for code in ("TL903", "TL904", "TL906", "TL907"):
        summary = check(cls, code).summary
        assert summary == "the guessed inputs did not fit (see why above)", summary
    transposed = class_report(report, "Transposed").partial_reason
    assert "conv (Conv2d) rejected (2, 7, 64, 64) float32 and (2, 7, 224, 224) float32" in transposed, transposed
    text = render_text(report)
    assert text.count("rejected (2, 7, 64, 64)") == 2  # once per class


def test_a_finding_goes_on_the_assignment_that_ran(report, models):
    found = [i for i in report.issues if i.class_name == "Branchy"]
    assert {i.code for i in found} >= {"TL901", "TL902"}
    assert {i.line for i in found if i.code in ("TL901", "TL902")} == {line_of(models, "self.scale = torch.ones(4)")}


# -- a parent in another file ------------------------------------------------------------------------

PARTS = '''
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, cin, cout, act: str):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.act = nn.ReLU() if act == "relu" else nn.Tanh()

    def forward(self, x):
        return self.act(self.conv(x))
'''

NET = '''
import torch.nn as nn

from .parts import Block

WIDTHS = {"in": 3, "mid": 8, "out": 4}


class Net(nn.Module):
    def __init__(self, widths=None):
        super().__init__()
        widths = widths or WIDTHS
        self.b1 = Block(widths["in"], widths["mid"], "relu")
        self.b2 = Block(widths["mid"], widths["out"], "tanh")

    def forward(self, x):
        return self.b2(self.b1(x))
'''


def test_a_parent_in_another_file_of_the_project_feeds_the_class(tmp_path):
    package = tmp_path / "proj" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    parts = write_module(package, "parts.py", PARTS)
    write_module(package, "net.py", NET)
    result = verify_file(str(parts), python=torch_python(), device="cpu", timeout=300,
                         workspace_root=str(tmp_path / "proj"))
    assert result.outcome == COMPLETED, (result.error, result.stderr_tail)
    cls = class_report(result, "Block")
    assert cls.status == "verified" and cls.built_by == "Net" and cls.issues == [], cls
    assert cls.constructed_with["text"] == "Net().b1"
    assert cls.inputs.endswith("(from Net.forward, its call of b1)"), cls.inputs


# -- inputs from the per-class table -------------------------------------------------------------------

ODD = '''
import torch
import torch.nn as nn


class Eleven(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        if x.shape[-1] != 11:
            raise ValueError("wants 11 features")
        return self.fc(x[..., :4])


class Written(Eleven):
    pass
'''


def test_the_class_table_gives_inputs_and_input_shapes(tmp_path):
    path = write_module(tmp_path, "odd.py", ODD)
    (tmp_path / "pyproject.toml").write_text(
        "[tool.torchlint.verify.classes.Eleven]\ninput-shape = [3, 11]\n\n"
        "[tool.torchlint.verify.classes.Written]\ninputs = [\"torch.randn(5, 11)\"]\n", encoding="utf-8")
    config = load_config(tmp_path / "pyproject.toml")
    result = verify_file(str(path), python=torch_python(), device="cpu", timeout=300,
                         verify_config=config.verify)
    assert result.outcome == COMPLETED, (result.error, result.stderr_tail)
    eleven, written = class_report(result, "Eleven"), class_report(result, "Written")
    assert eleven.status == "verified", eleven
    assert eleven.inputs == "(3, 11) float32 (from input-shape in [tool.torchlint.verify.classes.Eleven])"
    assert written.status == "verified", written
    assert written.inputs == "(5, 11) float32 (from inputs in [tool.torchlint.verify.classes.Written])"
    assert result.issues == []


@pytest.mark.parametrize("entry, error", [
    ('input-shape = "two by sixteen"', "input-shape: expected sizes like [2, 16]"),
    ('inputs = ["torch.randn(2)"]\ninput-shape = [2]', "give either inputs = [...] or input-shape = [...]"),
    ("inputs = [3]", "inputs: expected a list of Python expressions"),
])
def test_the_class_table_s_inputs_are_checked_when_read(tmp_path, entry, error):
    from torchlint.config import ConfigError

    (tmp_path / "pyproject.toml").write_text("[tool.torchlint.verify.classes.Net]\n%s\n" % entry, encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(error)):
        load_config(tmp_path / "pyproject.toml").verify


def test_the_class_table_s_shapes_read_as_the_cli_s():
    from torchlint.settings import class_input_shapes

    assert class_input_shapes([2, 16], "x") == ("2,16",)
    assert class_input_shapes([[2, 16], [2, 8]], "x") == ("2,16", "2,8")
    assert class_input_shapes(["2,16", "2,8:long"], "x") == ("2,16", "2,8:long")


# -- a parent built in another way, a factory that would download weights --------------------------

WAYS = '''
from collections import OrderedDict

import torch.nn as nn


class Block(nn.Module):
    def __init__(self, spec):
        super().__init__()
        self.fc = nn.Linear(spec["width"], spec["width"])

    def forward(self, x):
        return self.fc(x)


class Net(nn.Module):
    def __init__(self, with_block=False):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.block = Block({"width": self.fc.out_features}) if with_block else nn.Identity()

    def forward(self, x):
        return self.block(self.fc(x))


def small():
    return Net()


def big():
    return Net(with_block=True)


class Trained(nn.Module):
    def __init__(self, spec):
        super().__init__()
        self.fc = nn.Linear(spec["width"], 2)

    def forward(self, x):
        return self.fc(x)


class Head(nn.Module):
    def __init__(self, spec):
        super().__init__()
        self.fc = nn.Linear(spec["width"], 2)

    def forward(self, features):
        return self.fc(features["low"]) + self.fc(features["high"])


class Body(nn.Module):
    def __init__(self):
        super().__init__()
        self.low = nn.Linear(4, 4)
        self.high = nn.Linear(4, 4)
        self.head = Head({"width": self.low.out_features})

    def forward(self, x):
        features = OrderedDict()
        features["low"] = self.low(x)
        features["high"] = self.high(features["low"])
        return self.head(features)


def trained(weights="DEFAULT", pretrained_backbone=True):
    if weights is not None or pretrained_backbone:
        raise OSError("no network here: cannot download the weights")
    return Trained({"width": 3})
'''


def test_a_parent_built_another_way_feeds_and_factories_do_not_download(tmp_path):
    path = write_module(tmp_path, "ways.py", WAYS)
    result = verify_file(str(path), python=torch_python(), device="cpu", timeout=300)
    assert result.outcome == COMPLETED, (result.error, result.stderr_tail)
    block = class_report(result, "Block")
    assert block.status == "verified" and block.built_by == "Net" and block.issues == [], block
    assert block.constructed_with["text"] == "big().block"
    trained = class_report(result, "Trained")
    assert trained.status == "verified", trained
    assert trained.constructed_with["text"] == "trained(weights=None, pretrained_backbone=False)"
    # An OrderedDict of features from the parent's graph: copied like a dict (it was not, and the
    # child's second backward went through the parent's freed graph: a TL905 on clean code).
    head = class_report(result, "Head")
    assert head.status == "verified" and head.built_by == "Body", head
    assert head.inputs.startswith("{low: (2, 4) float32, high: (2, 4) float32} (from Body.forward"), head.inputs
    assert result.issues == []
