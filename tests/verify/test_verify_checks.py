"""TL901-TL904 on real modules, run once in one child process (CPU torch)."""
from __future__ import annotations

import pytest

from torchlint.analysis.findings import Severity
from torchlint.verify import report_to_findings, verify_file
from torchlint.verify.report import COMPLETED

from verify_helpers import check, class_report, issues, line_of, torch_python, write_module

MODELS = '''
import torch
import torch.nn as nn


class RawGamma(nn.Module):
    """The first seed article's gamma_1 with requires_grad, minus CUDA."""

    def __init__(self, dim=5):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.gamma_1 = torch.tensor([1.0]).requires_grad_(True)

    def forward(self, x):
        return self.fc(x) * self.gamma_1


class ParameterGamma(nn.Module):
    """The seed's correct version."""

    def __init__(self, dim=5):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.gamma_1 = nn.Parameter(torch.tensor([1.0]))

    def forward(self, x):
        return self.fc(x) * self.gamma_1


class ListOfLayers(nn.Module):
    def __init__(self, dim=8, depth=3):
        super().__init__()
        self.layers = [nn.Linear(dim, dim) for _ in range(depth)]
        self.head = nn.Linear(dim, 1)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.head(x)


class MovedParameter(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(4)).to(torch.float64)
        self.proj = nn.Linear(4, 4).double()

    def forward(self, x):
        return self.proj(x.double()) * self.scale


class IncorrectLinear(nn.Module):
    """The third seed article: weights stored as plain tensors."""

    def __init__(self, in_features=10, out_features=2):
        super().__init__()
        self.weight = torch.randn(out_features, in_features)
        self.bias = torch.randn(out_features)

    def forward(self, x):
        return torch.matmul(x, self.weight.T) + self.bias

    def torchlint_example_inputs(self):
        return torch.randn(1, 10)


class MaskNotBuffer(nn.Module):
    def __init__(self, size=6):
        super().__init__()
        self.fc = nn.Linear(size, size)
        self.register_buffer("causal", torch.tril(torch.ones(size, size)))
        self.mask = torch.tril(torch.ones(size, size))

    def forward(self, x):
        return self.fc(x) @ (self.mask * self.causal)


class Clean(nn.Module):
    def __init__(self, dim=6):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(dim, dim) for _ in range(2)])
        self.register_buffer("scale", torch.ones(dim))
        self.first = [self.blocks[0]]  # an alias of a registered module: nothing is lost
        self.temperature = 0.5
        self.shape = [2, dim]

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x * self.scale * self.temperature


class UnusedHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.aux_head = nn.Linear(4, 2)

    def forward(self, x):
        return self.body(x)


class Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = RawGamma(5)
        self.out = nn.Linear(5, 1)

    def forward(self, x):
        return self.out(self.inner(x))


class NoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(3, 3))

    def forward(self, x):
        return x @ self.weight


class GuessedWrong(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        return self.fc(x.view(-1, 7))


class NeedsArguments(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = [nn.Linear(dim, dim) for _ in range(heads)]

    def forward(self, x):
        return sum(head(x) for head in self.heads)


class NotAModule:
    def __init__(self):
        self.table = torch.zeros(3)
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return write_module(tmp_path_factory.mktemp("verify"), "models.py", MODELS)


@pytest.fixture(scope="module")
def report(models):
    result = verify_file(str(models), python=torch_python(), timeout=300)
    assert result.outcome == COMPLETED, (result.error, result.stderr_tail)
    return result


@pytest.fixture(scope="module")
def findings(report, models):
    return report_to_findings(report, models.read_text(), str(models))


def codes(report, name):
    return sorted({i.code for i in issues(report, verified=name)})


def test_runs_on_the_cpu_and_says_so(report):
    assert report.device == "cpu" and report.device_name is None
    assert "float64" in report.device_note
    assert report.torch_version


def test_every_module_class_of_the_file_is_verified_in_order(report):
    assert [c.name for c in report.classes] == [
        "RawGamma", "ParameterGamma", "ListOfLayers", "MovedParameter", "IncorrectLinear", "MaskNotBuffer",
        "Clean", "UnusedHead", "Nested", "NoInputs", "GuessedWrong", "NeedsArguments"]


def test_gamma_as_raw_tensor_gets_a_gradient_the_optimizer_never_sees(report, models, findings):
    assert codes(report, "RawGamma") == ["TL901", "TL902", "TL903", "TL904"]
    (tl903,) = issues(report, "TL903", "RawGamma")
    assert tl903.attribute == "gamma_1" and tl903.severity == "error"
    assert "received a gradient" in tl903.message and "not in parameters()" in tl903.message
    (tl904,) = issues(report, "TL904", "RawGamma")
    assert "did not change" in tl904.message
    line = line_of(models, "self.gamma_1 = torch.tensor")
    placed = {(f.code, f.range.start.line) for f in findings if "gamma_1" in f.message and "inner" not in f.message}
    assert placed >= {("TL901", line), ("TL902", line), ("TL903", line), ("TL904", line)}


def test_registered_parameter_is_clean(report):
    cls = class_report(report, "ParameterGamma")
    assert cls.issues == [] and cls.status == "verified"
    assert [c.status for c in cls.checks] == ["passed"] * 4


def test_plain_list_of_layers(report, models, findings):
    assert codes(report, "ListOfLayers") == ["TL901", "TL902", "TL903", "TL904"]
    (tl901,) = issues(report, "TL901", "ListOfLayers")
    assert tl901.attribute == "layers" and "3 modules" in tl901.message
    (tl904,) = issues(report, "TL904", "ListOfLayers")
    assert "layers[0].weight" in tl904.message  # the optimizer step left the hidden weights alone
    assert "layers[2].bias" in " ".join(tl904.paths)
    line = line_of(models, "self.layers = [")
    assert {f.range.start.line for f in findings if "layers" in f.message} == {line}


def test_parameter_moved_after_wrapping_is_not_registered(report, models):
    assert codes(report, "MovedParameter") == ["TL901", "TL903", "TL904"]
    (tl901,) = issues(report, "TL901", "MovedParameter")
    assert tl901.attribute == "scale" and "a tensor (float64" in tl901.message


def test_seed_incorrect_linear_holds_plain_tensors(report):
    cls = class_report(report, "IncorrectLinear")
    assert cls.inputs.endswith("(from IncorrectLinear.torchlint_example_inputs)")
    assert sorted(i.attribute for i in issues(report, "TL901", "IncorrectLinear")) == ["bias", "weight"]
    assert all(i.severity == "warning" for i in issues(report, "TL901", "IncorrectLinear"))
    assert sorted(i.attribute for i in issues(report, "TL902", "IncorrectLinear")) == ["bias", "weight"]
    assert check(cls, "TL903").status == "passed"  # nothing trainable: nothing to miss


def test_mask_that_is_not_a_buffer_is_left_behind_by_the_move(report):
    (tl902,) = issues(report, "TL902", "MaskNotBuffer")
    assert tl902.attribute == "mask" and "still float32" in tl902.message
    assert [i.attribute for i in issues(report, "TL901", "MaskNotBuffer")] == ["mask"]


def test_clean_module_has_no_findings(report):
    cls = class_report(report, "Clean")
    assert cls.issues == [] and [c.status for c in cls.checks] == ["passed"] * 4
    assert "guessed from blocks.0 = Linear(in_features=6)" in cls.inputs


def test_submodule_never_called_is_information_not_a_broken_parameter(report, models, findings):
    (tl903,) = issues(report, "TL903", "UnusedHead")
    assert tl903.severity == "info" and tl903.paths == ["aux_head"]
    assert "never used in forward" in tl903.message and "find_unused_parameters=True" in tl903.message
    assert issues(report, "TL904", "UnusedHead") == []
    line = line_of(models, "self.aux_head =")
    assert [(f.code, f.severity) for f in findings if f.range.start.line == line] == [("TL903", Severity.INFO)]
    assert check(class_report(report, "UnusedHead"), "TL903").status == "passed"


def test_bug_in_a_submodule_lands_on_the_submodule_class(report, models):
    nested = issues(report, verified="Nested")
    assert {i.code for i in nested} == {"TL901", "TL902", "TL903", "TL904"}
    line = line_of(models, "self.gamma_1 = torch.tensor")
    for issue in nested:
        assert (issue.class_name, issue.owner_class, issue.attribute) == ("Nested", "RawGamma", "inner.gamma_1")
        assert issue.paths == ["inner.gamma_1"] and issue.line == line


def test_checks_needing_inputs_are_skipped_with_a_reason(report):
    cls = class_report(report, "NoInputs")
    assert check(cls, "TL901").status == "passed"
    assert check(cls, "TL902").status == "passed"
    for code in ("TL903", "TL904"):
        assert check(cls, code).status == "skipped"
        assert "--input-shape" in check(cls, code).summary


def test_guessed_inputs_that_do_not_fit_skip_instead_of_blaming_the_module(report):
    cls = class_report(report, "GuessedWrong")
    assert cls.issues == []
    assert check(cls, "TL903").status == "skipped" and "did not fit" in check(cls, "TL903").summary


def test_class_needing_arguments_is_skipped(report):
    cls = class_report(report, "NeedsArguments")
    assert cls.status == "skipped"
    assert "dim" in cls.skip_reason and "--init-kwargs" in cls.skip_reason


def test_init_kwargs_and_input_shapes(models):
    result = verify_file(str(models), class_name="NeedsArguments", init_kwargs='{"dim": 8, "heads": 2}',
                         input_shapes="2,8", python=torch_python())
    assert [c.name for c in result.classes] == ["NeedsArguments"]
    cls = result.classes[0]
    assert cls.inputs == "(2, 8) float32 (from --input-shape)"
    assert {i.code for i in cls.issues} == {"TL901", "TL902", "TL903", "TL904"}
    assert all(i.attribute.startswith("heads") for i in cls.issues)
    assert {i.line for i in cls.issues} == {line_of(models, "self.heads = [")}
    assert cls.constructed_with == {"origin": "--init-kwargs", "text": "NeedsArguments(dim=8, heads=2)"}


def test_findings_come_from_torchlint_verify(findings):
    assert findings and all(f.source == "torchlint-verify" for f in findings)
    assert findings == sorted(findings, key=lambda f: (f.range.start, f.code))
